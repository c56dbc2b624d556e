"""Run every policy over several seeds in both replay modes, and summarise.

Policy names:
- ``none``: never prune (compute fraction 1.0 by construction).
- ``katib-medianstop``: stock Katib medianstop as it behaves (see ``KatibMedianStop``).
- ``optuna-median``, ``optuna-hyperband``: Optuna's MedianPruner() / HyperbandPruner() with default
  settings, driven by the bench's own adapter.
- ``engine:POLICY``: the project's ``PruningEngine`` in process with setting ``policy=POLICY``.
- ``grpc:POLICY``: the same engine behind the suggestion service's pruning RPC.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Sequence
from contextlib import ExitStack
from dataclasses import dataclass
from typing import Any

import optuna

from katib_progress.bench._bank import Bank
from katib_progress.bench._deciders import Decider, KatibMedianStop, NoPruning, Objective
from katib_progress.bench._engine import EngineDecider, GrpcDecider, ServiceUnderTest
from katib_progress.bench._optuna import OptunaPrunerDecider
from katib_progress.bench._sampler import SuggestionSource
from katib_progress.bench._sim import ReplayResult, TrialSource, replay
from katib_progress.bench._sources import RandomOrder
from katib_progress.core.errors import ConfigError

BUILTIN_POLICIES = ("none", "katib-medianstop", "optuna-median", "optuna-hyperband")
MODES = ("pruning", "sampler")


def default_policies() -> list[str]:
    """The baselines, plus the project's default policy through the real service."""
    return [*BUILTIN_POLICIES, "grpc:default"]


def check_policy(name: str) -> None:
    if name in BUILTIN_POLICIES:
        return
    kind, _, policy = name.partition(":")
    if kind not in ("engine", "grpc") or not policy:
        allowed = ", ".join((*BUILTIN_POLICIES, "engine:POLICY", "grpc:POLICY"))
        raise ConfigError("policy", f"unknown policy {name!r}; allowed: {allowed}")


def make_decider(name: str, objective: Objective, *, seed: int, address: str, experiment: str) -> Decider:
    check_policy(name)
    if name == "none":
        return NoPruning()
    if name == "katib-medianstop":
        return KatibMedianStop(objective)
    if name == "optuna-median":
        return OptunaPrunerDecider(name, optuna.pruners.MedianPruner(), objective, seed=seed)
    if name == "optuna-hyperband":
        return OptunaPrunerDecider(name, optuna.pruners.HyperbandPruner(), objective, seed=seed)
    kind, _, policy = name.partition(":")
    if kind == "engine":
        return EngineDecider(name, objective, policy)
    return GrpcDecider(name, objective, policy, address, experiment=experiment)


@dataclass(frozen=True, slots=True)
class BenchSettings:
    policies: tuple[str, ...]
    seeds: int = 3
    workers: int = 4
    modes: tuple[str, ...] = MODES
    sampler_budget: int = 100  # trials per replay in sampler mode
    pruning_limit: int | None = None  # trials per replay in pruning mode (None: every bank trial)
    algorithm: str = "tpe"
    base_seed: int = 0

    def __post_init__(self) -> None:
        if self.seeds < 1:
            raise ConfigError("seeds", f"must be >= 1, got {self.seeds}")
        if self.workers < 1:
            raise ConfigError("workers", f"must be >= 1, got {self.workers}")
        if self.sampler_budget < 1:
            raise ConfigError("budget", f"must be >= 1, got {self.sampler_budget}")
        for mode in self.modes:
            if mode not in MODES:
                raise ConfigError("mode", f"unknown mode {mode!r}; allowed: {', '.join(MODES)}")
        if not self.policies:
            raise ConfigError("policy", "at least one policy is needed")
        for policy in self.policies:
            check_policy(policy)


@dataclass(frozen=True, slots=True)
class Spread:
    mean: float
    std: float
    min: float
    max: float

    @classmethod
    def of(cls, values: Sequence[float]) -> Spread:
        finite = [v for v in values if math.isfinite(v)]
        if len(finite) != len(values):
            return cls(math.inf, math.nan, min(values), max(values))
        std = statistics.pstdev(finite) if len(finite) > 1 else 0.0
        return cls(statistics.fmean(finite), std, min(finite), max(finite))

    def as_dict(self) -> dict[str, float | None]:
        """JSON-safe: non-finite values (e.g. infinite regret when nothing was found) become null."""
        raw = {"mean": self.mean, "std": self.std, "min": self.min, "max": self.max}
        return {k: (v if math.isfinite(v) else None) for k, v in raw.items()}


@dataclass(frozen=True, slots=True)
class PolicySummary:
    mode: str
    policy: str
    runs: tuple[ReplayResult, ...]

    def spread(self, attr: str) -> Spread:
        values: list[float] = []
        for run in self.runs:
            value = getattr(run, attr)
            values.append(math.inf if value is None else float(value))
        return Spread.of(values)

    def as_dict(self) -> dict[str, Any]:
        return {
            "mode": self.mode,
            "policy": self.policy,
            "compute_fraction": self.spread("compute_fraction").as_dict(),
            "regret": self.spread("regret").as_dict(),
            "best_found": self.spread("best_found").as_dict(),
            "trials_pruned": self.spread("pruned").as_dict(),
            "trials": self.spread("trials").as_dict(),
            "per_seed": [
                {
                    "seed": r.seed,
                    "compute_fraction": r.compute_fraction,
                    "regret": r.regret if math.isfinite(r.regret) else None,
                    "best_found": r.best_found,
                    "trials_pruned": r.pruned,
                    "trials": r.trials,
                }
                for r in self.runs
            ],
        }


def run_bench(
    bank: Bank,
    settings: BenchSettings,
    *,
    on_replay: Callable[[str, str, int], None] | None = None,
) -> list[PolicySummary]:
    """Replay ``bank`` for every (mode, policy, seed); the same seed gives every policy the same
    trial order (pruning mode) and the same sampler seed (sampler mode)."""
    objective = Objective(bank.metric, bank.direction)
    needs_service = "sampler" in settings.modes or any(p.startswith("grpc:") for p in settings.policies)
    summaries = []
    with ExitStack() as stack:
        address = stack.enter_context(ServiceUnderTest()).address if needs_service else ""
        for mode in settings.modes:
            for policy in settings.policies:
                runs = []
                for k in range(settings.seeds):
                    seed = settings.base_seed + k
                    experiment = f"bench-{mode}-{policy.replace(':', '-')}-s{seed}"
                    decider = make_decider(
                        policy, objective, seed=seed, address=address, experiment=experiment
                    )
                    source: TrialSource
                    if mode == "pruning":
                        source = RandomOrder(bank, seed, settings.pruning_limit)
                    else:
                        source = SuggestionSource(
                            bank,
                            address,
                            experiment=experiment,
                            budget=settings.sampler_budget,
                            seed=seed,
                            algorithm=settings.algorithm,
                            workers=settings.workers,
                        )
                    try:
                        runs.append(
                            replay(
                                bank,
                                decider,
                                source,
                                workers=settings.workers,
                                experiment=experiment,
                                mode=mode,
                                seed=seed,
                            )
                        )
                    finally:
                        decider.close()
                        if isinstance(source, SuggestionSource):
                            source.close()
                    if on_replay is not None:
                        on_replay(mode, policy, seed)
                summaries.append(PolicySummary(mode, policy, tuple(runs)))
    return summaries
