"""The pruning contract between the collector and the pruning service.

The collector turns TrainJob progress into points, asks a pruner for a verdict and enforces it; the
suggestion service owns the policies that decide. Neither package imports the other: both code
against the types below, and the application layer (``katib-progress collector run``) plugs the
suggestion service's implementation (``katib_progress.suggestion.pruning.backend``) into the
collector.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Protocol

from katib_progress.core.names import ALGORITHM_PREFIX, MEDIANSTOP
from katib_progress.core.types import Decision, ProgressPoint


@dataclass(frozen=True, slots=True)
class PruningSpec:
    """What an Experiment asks of its pruner, as written (not yet validated).

    ``settings`` are the ``spec.earlyStopping.algorithmSettings`` strings (``policy`` included).
    ``metric_strategy`` is the objective's entry in ``spec.objective.metricStrategies`` (``min``,
    ``max`` or ``latest``; empty when the Experiment names none, so Katib's default for the direction
    applies). A ``metric_strategy`` setting overrides it.
    """

    objective_metric: str
    direction: str = "minimize"
    settings: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    metric_strategy: str = ""


def objective_strategy(objective: Mapping[str, object]) -> str:
    """The objective metric's strategy in a Katib ``spec.objective`` object (as the API server serves
    it: ``metricStrategies`` is a list of ``{name, value}``); empty when it names none."""
    name = objective.get("objectiveMetricName")
    for entry in objective.get("metricStrategies") or ():  # type: ignore[attr-defined]
        if isinstance(entry, Mapping) and entry.get("name") == name and entry.get("value"):
            return str(entry["value"])
    return ""


class Pruner(Protocol):
    """An in-process pruner for one experiment: one verdict per progress point."""

    def decide(self, point: ProgressPoint) -> Decision: ...


class RemotePruner(Protocol):
    """A connection to a pruning service that holds many experiments.

    Methods raise ``TemporaryError`` (unreachable, deadline) or ``PermanentError`` (request rejected,
    the message names the field).
    """

    def decide(self, point: ProgressPoint, spec: PruningSpec | None = None) -> Decision: ...

    def report_final(self, experiment: str, trial: str, state: str) -> None: ...

    def close(self) -> None: ...


class PruningBackend(Protocol):
    """The pruning implementation the application plugs into the collector."""

    def validate(self, spec: PruningSpec) -> None:
        """Raise ``ConfigError`` naming the offending setting when ``spec`` is invalid."""
        ...

    def engine(self, spec: PruningSpec) -> Pruner:
        """A fresh in-process pruner for ``spec``; raises ``ConfigError``."""
        ...

    def connect(self, address: str, timeout: float) -> RemotePruner:
        """A client of the pruning service at ``host:port`` with a per-call deadline."""
        ...


#: Katib's search algorithm served as random sampling + the ``hyperband`` pruning policy.
HYPERBAND_ALGORITHMS = ("hyperband", "kp-hyperband")


def hyperband_eta(settings: Mapping[str, str]) -> int:
    """Katib's ``eta`` (pkg/suggestion/v1beta1/hyperband/service.py ``ValidateAlgorithmSettings``:
    ``int(float(eta))``, 3 when unset or <= 0). Raises ValueError if it is not a number."""
    eta = int(float(settings.get("eta", "3")))
    return 3 if eta <= 0 else eta


def hyperband_min_resource(eta: int, r_l: float) -> float:
    """The smallest budget of Katib's brackets as a percent of the full budget ``r_l``:
    ``s_max = int(log(r_l) / log(eta))`` and ``r = r_l * eta**-s_max`` (hyperband/service.py
    ``ValidateAlgorithmSettings`` and ``HyperBandParam.convert``)."""
    s_max = max(0, int(math.log(r_l) / math.log(eta)))
    return 100.0 * float(eta) ** -s_max


def hyperband_pruning_settings(
    algorithm: str, algorithm_settings: Mapping[str, str], early_stopping: Mapping[str, str]
) -> dict[str, str]:
    """``early_stopping`` settings, completed for Katib's ``hyperband`` algorithm.

    For ``hyperband``/``kp-hyperband`` without an explicit ``policy``, the policy is ``hyperband``
    with ``reduction_factor`` = Katib's ``eta`` and ``min_resource`` = Katib's smallest bracket budget
    in percent (settings given explicitly win). Any other algorithm: ``early_stopping`` unchanged.
    Unparsable Katib settings are left for the suggestion service's validation to report.
    """
    out = dict(early_stopping)
    if algorithm not in HYPERBAND_ALGORITHMS or "policy" in out:
        return out
    out["policy"] = "hyperband"
    try:
        eta = hyperband_eta(algorithm_settings)
        r_l = float(algorithm_settings.get("r_l", ""))
    except ValueError:
        return out
    if eta < 2 or not (math.isfinite(r_l) and r_l > 0):
        return out
    out.setdefault("reduction_factor", str(eta))
    out.setdefault("min_resource", repr(round(hyperband_min_resource(eta, r_l), 6)))
    return out


#: Katib's early-stopping names served as the ``medianstop`` policy (our katib-config name first).
MEDIANSTOP_ALGORITHMS = (ALGORITHM_PREFIX + MEDIANSTOP, MEDIANSTOP)


def early_stopping_settings(early_stopping: str, settings: Mapping[str, str]) -> dict[str, str]:
    """Our pruning settings for an Experiment's ``spec.earlyStopping``: for Katib's ``medianstop``
    (or ``kp-medianstop``) its settings (``min_trials_required``, ``start_step``, already validated by
    Katib's rules) with ``policy=medianstop``; for ``katib-progress`` the settings unchanged."""
    out = dict(settings)
    if early_stopping in MEDIANSTOP_ALGORITHMS:
        out["policy"] = MEDIANSTOP
    return out
