"""Policy names of the bench and the deciders they make.

- ``none``: never prune (compute fraction 1.0 by construction).
- ``katib-medianstop``: stock Katib medianstop as upstream applies it (see ``KatibMedianStop``).
- ``optuna-median``, ``optuna-sh``, ``optuna-hyperband``: Optuna's ``MedianPruner()``,
  ``SuccessiveHalvingPruner()`` and ``HyperbandPruner()`` with default settings, driven by the bench's
  own adapter (step = integer progress percent).
- ``engine:POLICY|k=v|k=v``: the project's ``PruningEngine`` in process with setting ``policy=POLICY``
  and any further settings (``spec.earlyStopping.algorithmSettings`` names), e.g.
  ``engine:percentile|warmup_progress=10``.
- ``grpc:POLICY|k=v|...``: the same engine behind the suggestion service's pruning RPC.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

import optuna

from katib_progress.bench._deciders import Decider, KatibMedianStop, NoPruning, Objective
from katib_progress.bench._engine import EngineDecider, GrpcDecider, pruning_config
from katib_progress.bench._optuna import OptunaPrunerDecider
from katib_progress.core.errors import ConfigError

#: The stock policies a default is compared with: no pruning, Katib's and Optuna's stock pruners.
STOCK_POLICIES = ("none", "katib-medianstop", "optuna-median", "optuna-sh", "optuna-hyperband")


@dataclass(frozen=True, slots=True)
class PolicySpec:
    """A parsed ``--policy`` value."""

    name: str  # as given (the label in tables and JSON)
    kind: str  # "stock", "engine" or "grpc"
    policy: str = ""  # the engine's ``policy`` setting
    settings: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))

    @property
    def stock(self) -> bool:
        return self.kind == "stock"

    @property
    def uses_service(self) -> bool:
        return self.kind == "grpc"


def parse_policy(name: str) -> PolicySpec:
    """Parse ``none``/``katib-medianstop``/... or ``engine:POLICY|k=v|k=v`` / ``grpc:POLICY|...``;
    ConfigError("policy", ...) names what is wrong."""
    if name in STOCK_POLICIES:
        return PolicySpec(name, "stock")
    kind, _, rest = name.partition(":")
    policy, *pairs = rest.split("|")
    if kind not in ("engine", "grpc") or not policy.strip():
        allowed = ", ".join((*STOCK_POLICIES, "engine:POLICY|k=v|...", "grpc:POLICY|k=v|..."))
        raise ConfigError("policy", f"unknown policy {name!r}; allowed: {allowed}")
    settings: dict[str, str] = {}
    for pair in pairs:
        key, eq, value = pair.partition("=")
        if not eq or not key.strip():
            raise ConfigError("policy", f"{name}: setting {pair!r} is not of the form name=value")
        if key.strip() in settings or key.strip() == "policy":
            raise ConfigError("policy", f"{name}: setting {key.strip()!r} is given twice")
        settings[key.strip()] = value.strip()
    return PolicySpec(name, kind, policy.strip(), MappingProxyType(settings))


def check_policy(spec: PolicySpec, objective: Objective) -> None:
    """Validate an engine policy's settings against the engine's own configuration (ConfigError
    naming the setting)."""
    if not spec.stock:
        pruning_config(objective, spec.policy, spec.settings)


def default_policies() -> list[str]:
    """The stock policies plus the project's default policy behind the real service."""
    return [*STOCK_POLICIES, "grpc:default"]


def make_decider(
    spec: PolicySpec | str, objective: Objective, *, seed: int, address: str, experiment: str
) -> Decider:
    if isinstance(spec, str):
        spec = parse_policy(spec)
    name = spec.name
    if name == "none":
        return NoPruning()
    if name == "katib-medianstop":
        return KatibMedianStop(objective)
    if name == "optuna-median":
        return OptunaPrunerDecider(name, optuna.pruners.MedianPruner(), objective, seed=seed)
    if name == "optuna-sh":
        return OptunaPrunerDecider(name, optuna.pruners.SuccessiveHalvingPruner(), objective, seed=seed)
    if name == "optuna-hyperband":
        return OptunaPrunerDecider(name, optuna.pruners.HyperbandPruner(), objective, seed=seed)
    if spec.kind == "engine":
        return EngineDecider(name, objective, spec.policy, spec.settings)
    return GrpcDecider(name, objective, spec.policy, address, experiment=experiment, settings=spec.settings)
