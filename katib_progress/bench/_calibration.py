"""Calibration of the ``predictive`` policy's probabilities (``bench pruning --calibration``).

Each bank is replayed with the same draws and orders as the pruning mode (``trials`` per seed,
``workers`` in parallel) but **nothing is pruned**: the engine keeps the curves and, at every point
where the ``predictive`` policy would judge a trial, its calibrated probability that the trial's final
reaches the current top-k target is recorded as an event. Once the replay is over every trial has run to
its end, so each event's outcome is known: did the trial's recorded final (by the bank's metric
strategy) reach that target? Events where the answer is already certain (under ``min``/``max`` the
trial's best so far is within the target) are left out: they would fill the top bin with trivial hits.

The reliability table bins the events by predicted probability and gives, per bin, the mean predicted
probability and the observed frequency; the expected calibration error (ECE) is the events-weighted
mean of their absolute difference. The ensemble's own probability before calibration is reported
beside it (``raw``), so the table shows what the calibration from completed trials does.

Nothing of the model is tuned on any bank (its families, grids, prior and checkpoints are fixed in
``suggestion.pruning._lcmodel`` and ``policies/predictive.py``), so every bank is held out from the
model; the settings given (``--policy``) only change the event (top-k, gates).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from katib_progress.bench._bank import Bank
from katib_progress.bench._deciders import Objective, TrialEnd
from katib_progress.bench._engine import pruning_config
from katib_progress.bench._sim import replay
from katib_progress.bench._sources import RandomOrder
from katib_progress.core.types import Decision, ProgressPoint
from katib_progress.suggestion.pruning._build import REGISTRY
from katib_progress.suggestion.pruning._calibrate import METHODS
from katib_progress.suggestion.pruning.engine import PruningEngine
from katib_progress.suggestion.pruning.policies.base import NopPolicy
from katib_progress.suggestion.pruning.policies.predictive import PredictivePolicy

#: Bin edges of the reliability table: finer where pruning decides (low probabilities).
EDGES = (0.0, 0.01, 0.05, 0.1, 0.2, 0.3, 0.5, 0.7, 0.9, 1.0)


@dataclass(frozen=True, slots=True)
class Event:
    trial: str
    progress: float
    probability: float  # by the configured method (predict_calibration)
    raw: float
    target: float  # oriented so that lower is better
    by_method: tuple[float, ...]  # one per METHODS


@dataclass(frozen=True, slots=True)
class Bin:
    lo: float
    hi: float
    count: int
    predicted: float  # mean predicted probability
    observed: float  # share of events whose outcome was a hit


@dataclass(frozen=True, slots=True)
class Reliability:
    bins: tuple[Bin, ...]
    ece: float
    events: int


def reliability(pairs: Sequence[tuple[float, bool]], edges: Sequence[float] = EDGES) -> Reliability:
    """The reliability table and ECE of (predicted probability, outcome) pairs."""
    bins = []
    ece = 0.0
    total = len(pairs)
    for i, (lo, hi) in enumerate(itertools.pairwise(edges)):
        last = i == len(edges) - 2
        inside = [(p, o) for p, o in pairs if lo <= p < hi or (last and p == hi)]
        if not inside:
            bins.append(Bin(lo, hi, 0, math.nan, math.nan))
            continue
        predicted = sum(p for p, _ in inside) / len(inside)
        observed = sum(o for _, o in inside) / len(inside)
        ece += len(inside) / total * abs(predicted - observed)
        bins.append(Bin(lo, hi, len(inside), predicted, observed))
    return Reliability(tuple(bins), ece if total else math.nan, total)


class _Observer:
    """A decider that never prunes and records the predictive policy's forecasts."""

    name = "calibration"

    def __init__(self, objective: Objective, settings: Mapping[str, str]):
        config = pruning_config(objective, "predictive", settings)
        self.engine = PruningEngine(config, policy=NopPolicy())
        build = REGISTRY["predictive"].build
        assert build is not None
        policy = build(config)
        assert isinstance(policy, PredictivePolicy)
        self.policy = policy
        self.events: list[Event] = []

    def start(self, trial: str) -> None:
        return None

    def decide(self, point: ProgressPoint) -> Decision:
        decision = self.engine.decide(point)
        state = self.engine.state
        trial = state.trials.get(point.trial)
        if trial is None or not trial.values:
            return decision
        target = self.policy.target(trial, state)
        if target is None:
            return decision
        fc = self.policy.forecast(trial, target[0], state)
        if fc is not None and not fc.forced:
            cal = self.policy.calibrator
            by_method = tuple(
                cal.probability(fc.checkpoint, fc.raw_probability, target[0], m) for m in METHODS
            )
            self.events.append(
                Event(
                    point.trial,
                    trial.last_progress or 0.0,
                    fc.probability,
                    fc.raw_probability,
                    target[0],
                    by_method,
                )
            )
        return decision

    def finish(self, trial: str, state: TrialEnd, observation: float | None) -> None:
        self.engine.finish(trial, "complete" if state == "succeeded" else state)

    def close(self) -> None:
        return None


@dataclass(frozen=True, slots=True)
class BankCalibration:
    bank: str
    pairs: tuple[tuple[float, float, bool], ...]  # (configured method, raw, outcome) per event
    #: every calibration method's (probability, outcome) for the same events
    method_pairs: dict[str, tuple[tuple[float, bool], ...]]

    @property
    def calibrated(self) -> Reliability:
        return reliability([(c, o) for c, _, o in self.pairs])

    @property
    def raw(self) -> Reliability:
        return reliability([(r, o) for _, r, o in self.pairs])

    def method(self, name: str) -> Reliability:
        return reliability(self.method_pairs[name])


def calibrate_bank(
    bank: Bank,
    *,
    seeds: Sequence[int],
    trials: int | None,
    workers: int,
    settings: Mapping[str, str] | None = None,
) -> BankCalibration:
    """Replay ``bank`` without pruning for every seed and score the predictive policy's forecasts."""
    objective = Objective(bank.metric, bank.direction, bank.strategy)
    sign = 1.0 if bank.direction == "minimize" else -1.0
    pairs: list[tuple[float, float, bool]] = []
    by_method: dict[str, list[tuple[float, bool]]] = {m: [] for m in METHODS}
    for seed in seeds:
        observer = _Observer(objective, settings or {})
        experiment = f"calibration-{bank.name}-s{seed}"
        result = replay(
            bank,
            observer,
            RandomOrder(bank, seed, trials),
            workers=workers,
            experiment=experiment,
            mode="calibration",
            seed=seed,
        )
        finals = {o.name: o.observation for o in result.outcomes}
        for e in observer.events:
            final = finals.get(e.trial)
            if final is None:
                continue
            hit = sign * final <= e.target
            pairs.append((e.probability, e.raw, hit))
            for m, p in zip(METHODS, e.by_method, strict=True):
                by_method[m].append((p, hit))
    return BankCalibration(bank.name, tuple(pairs), {m: tuple(v) for m, v in by_method.items()})


def pooled(results: Sequence[BankCalibration]) -> BankCalibration:
    return BankCalibration(
        "all banks",
        tuple(p for r in results for p in r.pairs),
        {m: tuple(p for r in results for p in r.method_pairs[m]) for m in METHODS},
    )


def calibration_markdown(results: Sequence[BankCalibration], settings: Mapping[str, str]) -> str:
    """Per bank: events, ECE calibrated and raw, and the share of events below 0.05 with the hit rate
    there; then the pooled reliability table."""
    shown = ", ".join(f"{k}={v}" for k, v in settings.items()) or "the predict_* defaults"
    lines = [
        f"calibration of the predictive policy's P(final reaches the top-k target) ({shown}); "
        "no pruning, every trial run to its end; ECE by the configured calibration, then by each method "
        "(raw = none: the ensemble before calibration)",
        "",
        "| bank | events | ECE | events p < 0.05 | observed there | ECE event | ECE pit | ECE raw |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in [*results, pooled(results)]:
        low = [o for c, _, o in r.pairs if c < 0.05]
        eces = " | ".join(f"{r.method(m).ece:.4f}" for m in METHODS)
        cal = r.calibrated
        lines.append(f"| {r.bank} | {cal.events} | {cal.ece:.4f} | {len(low)} | {_share(low)} | {eces} |")
    both = pooled(results)
    lines += [
        "",
        "reliability, all banks pooled (predicted -> observed frequency):",
        "",
        "| bin | events | predicted | observed | raw events | raw predicted | raw observed |",
        "|---|---|---|---|---|---|---|",
    ]
    for b, w in zip(both.calibrated.bins, both.raw.bins, strict=True):
        lines.append(
            f"| [{b.lo:g}, {b.hi:g}) | {b.count} | {_num(b.predicted)} | {_num(b.observed)} | {w.count} | "
            f"{_num(w.predicted)} | {_num(w.observed)} |"
        )
    return "\n".join(lines)


def _share(outcomes: Sequence[bool]) -> str:
    return f"{sum(outcomes) / len(outcomes):.3f}" if outcomes else "-"


def _num(v: float) -> str:
    return "-" if math.isnan(v) else f"{v:.3f}"
