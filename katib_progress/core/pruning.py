"""The pruning contract between the collector and the pruning service.

The collector turns TrainJob progress into points, asks a pruner for a verdict and enforces it; the
suggestion service owns the policies that decide. Neither package imports the other: both code
against the types below, and the application layer (``katib-progress collector run``) plugs the
suggestion service's implementation (``katib_progress.suggestion.pruning.backend``) into the
collector.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Protocol

from katib_progress.core.types import Decision, ProgressPoint


@dataclass(frozen=True, slots=True)
class PruningSpec:
    """What an Experiment asks of its pruner, as written (not yet validated).

    ``settings`` are the ``spec.earlyStopping.algorithmSettings`` strings (``policy`` included).
    """

    objective_metric: str
    direction: str = "minimize"
    settings: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))


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
