"""Run every policy over several seeds and modes on one bank, and summarise.

The same seed gives every policy the same draw of trials and the same order (``pruning`` mode) or
the same sampler seed (``sampler`` mode). Policy names: see ``_policies``.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field
from typing import Any

from katib_progress.bench._bank import Bank
from katib_progress.bench._deciders import Objective
from katib_progress.bench._engine import ServiceUnderTest
from katib_progress.bench._policies import PolicySpec, check_policy, make_decider, parse_policy
from katib_progress.bench._sampler import SuggestionSource
from katib_progress.bench._sim import ReplayResult, TrialSource, replay
from katib_progress.bench._sources import RandomOrder
from katib_progress.bench._stall import StallSummary, StallTally, lone_replay, profile
from katib_progress.core.errors import ConfigError

MODES = ("pruning", "sampler", "stall")
#: Mean normalized regret a policy must stay within to count as "keeping the best trial".
REGRET_TARGET = 0.01

OnReplay = Callable[[str, str, int], None]


@dataclass(frozen=True, slots=True)
class BenchSettings:
    policies: tuple[str, ...]
    seeds: int = 30
    workers: int = 4
    modes: tuple[str, ...] = ("pruning",)
    trials: int | None = 40  # trials drawn per replay in pruning mode (None: every bank trial)
    sampler_budget: int = 100  # trials per replay in sampler mode
    algorithm: str = "tpe"
    base_seed: int = 0
    regret_target: float = REGRET_TARGET
    specs: tuple[PolicySpec, ...] = field(init=False)

    def __post_init__(self) -> None:
        if self.seeds < 1:
            raise ConfigError("seeds", f"must be >= 1, got {self.seeds}")
        if self.workers < 1:
            raise ConfigError("workers", f"must be >= 1, got {self.workers}")
        if self.sampler_budget < 1:
            raise ConfigError("budget", f"must be >= 1, got {self.sampler_budget}")
        if self.trials is not None and self.trials < 1:
            raise ConfigError("trials", f"must be >= 1, got {self.trials}")
        if not (math.isfinite(self.regret_target) and self.regret_target >= 0):
            raise ConfigError("regret_target", f"must be >= 0, got {self.regret_target}")
        for mode in self.modes:
            if mode not in MODES:
                raise ConfigError("mode", f"unknown mode {mode!r}; allowed: {', '.join(MODES)}")
        if not self.policies:
            raise ConfigError("policy", "at least one policy is needed")
        names = list(self.policies)
        if len(set(names)) != len(names):
            raise ConfigError("policy", f"a policy is given twice: {', '.join(names)}")
        object.__setattr__(self, "specs", tuple(parse_policy(p) for p in self.policies))

    @property
    def needs_service(self) -> bool:
        return "sampler" in self.modes or any(s.uses_service for s in self.specs)


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
    stock: bool = False

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
            "stock": self.stock,
            "compute_fraction": self.spread("compute_fraction").as_dict(),
            "regret": self.spread("regret").as_dict(),
            "hit_rate": self.spread("hit").mean,
            "trials_pruned": self.spread("pruned").as_dict(),
            "trials": self.spread("trials").as_dict(),
            "per_seed": [
                {
                    "seed": r.seed,
                    "compute_fraction": r.compute_fraction,
                    "regret": r.regret if math.isfinite(r.regret) else None,
                    "hit": r.hit,
                    "best_found": r.best_found,
                    "replay_best": r.replay_best,
                    "trials_pruned": r.pruned,
                    "trials": r.trials,
                }
                for r in self.runs
            ],
        }


@dataclass(frozen=True, slots=True)
class BankResult:
    """Every policy's replays on one bank, and the comparison with the stock policies."""

    bank: Bank
    summaries: tuple[PolicySummary, ...]
    stall: tuple[StallSummary, ...]
    regret_target: float

    def reference(self, mode: str) -> PolicySummary | None:
        """The cheapest stock policy (mean compute) whose mean regret is within the target."""
        ok = [
            s
            for s in self.summaries
            if s.mode == mode and s.stock and s.spread("regret").mean <= self.regret_target
        ]
        return min(ok, key=lambda s: s.spread("compute_fraction").mean, default=None)

    def ratio(self, summary: PolicySummary) -> float | None:
        """``summary``'s mean compute divided by the reference's (None without a reference)."""
        ref = self.reference(summary.mode)
        if ref is None:
            return None
        return summary.spread("compute_fraction").mean / ref.spread("compute_fraction").mean

    def as_dict(self) -> dict[str, Any]:
        bank = self.bank
        results = []
        for s in self.summaries:
            ratio = self.ratio(s)
            results.append({**s.as_dict(), "compute_ratio_to_reference": ratio})
        modes = dict.fromkeys(s.mode for s in self.summaries)
        references = {}
        for mode in modes:
            ref = self.reference(mode)
            references[mode] = (
                None
                if ref is None
                else {"policy": ref.policy, "compute_fraction": ref.spread("compute_fraction").mean}
            )
        return {
            "bank": bank.name,
            "trials": len(bank.trials),
            "objective": {"metric": bank.metric, "direction": bank.direction, "strategy": bank.strategy},
            "best_final": bank.best_final,
            "median_final": bank.median,
            "regret_scale": bank.scale,
            "regret_target": self.regret_target,
            "reference": references,
            "results": results,
            "stall": [s.as_dict() for s in self.stall],
        }


def _source(
    bank: Bank, mode: str, seed: int, settings: BenchSettings, *, address: str, experiment: str
) -> TrialSource:
    if mode == "pruning":
        return RandomOrder(bank, seed, settings.trials)
    return SuggestionSource(
        bank,
        address,
        experiment=experiment,
        budget=settings.sampler_budget,
        seed=seed,
        algorithm=settings.algorithm,
        workers=settings.workers,
    )


def _replays(
    bank: Bank,
    spec: PolicySpec,
    mode: str,
    settings: BenchSettings,
    *,
    address: str,
    on_replay: OnReplay | None,
) -> PolicySummary:
    objective = Objective(bank.metric, bank.direction, bank.strategy)
    runs = []
    for k in range(settings.seeds):
        seed = settings.base_seed + k
        experiment = f"bench-{bank.name}-{mode}-{spec.name.replace(':', '-')}-s{seed}"
        decider = make_decider(spec, objective, seed=seed, address=address, experiment=experiment)
        source = _source(bank, mode, seed, settings, address=address, experiment=experiment)
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
            on_replay(mode, spec.name, seed)
    return PolicySummary(mode, spec.name, tuple(runs), stock=spec.stock)


def _stall(bank: Bank, spec: PolicySpec, address: str, on_replay: OnReplay | None) -> StallSummary:
    objective = Objective(bank.metric, bank.direction, bank.strategy)
    tally = StallTally(spec.name)
    for trial in bank.trials:
        prof = profile(bank, trial)
        if prof is None:
            continue
        experiment = f"bench-{bank.name}-stall-{spec.name.replace(':', '-')}-t{trial.index}"
        decider = make_decider(spec, objective, seed=0, address=address, experiment=experiment)
        try:
            stopped = lone_replay(trial, decider, f"trial-b{trial.index}", experiment)
        finally:
            decider.close()
        tally.add(trial, prof, stopped)
    if on_replay is not None:
        on_replay("stall", spec.name, 0)
    return tally.summary()


def run_bench(bank: Bank, settings: BenchSettings, *, on_replay: OnReplay | None = None) -> BankResult:
    """Replay ``bank`` for every (mode, policy, seed); stall mode replays every trial alone once."""
    objective = Objective(bank.metric, bank.direction, bank.strategy)
    for spec in settings.specs:
        check_policy(spec, objective)
    summaries: list[PolicySummary] = []
    stall: list[StallSummary] = []
    with ExitStack() as stack:
        address = stack.enter_context(ServiceUnderTest()).address if settings.needs_service else ""
        for mode in settings.modes:
            for spec in settings.specs:
                if mode == "stall":
                    stall.append(_stall(bank, spec, address, on_replay))
                else:
                    summaries.append(
                        _replays(bank, spec, mode, settings, address=address, on_replay=on_replay)
                    )
    return BankResult(bank, tuple(summaries), tuple(stall), settings.regret_target)


def replays_per_bank(settings: BenchSettings) -> int:
    """How many ``on_replay`` calls one bank makes (for progress bars)."""
    per_mode = {"pruning": settings.seeds, "sampler": settings.seeds, "stall": 1}
    return sum(per_mode[m] for m in settings.modes) * len(settings.specs)
