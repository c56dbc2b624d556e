"""Event-driven replay of a bank: ``workers`` trials run at once, points arrive in simulated time.

A trial created at simulated time ``t0`` emits its bank point ``i`` at ``t0 + elapsed_s[i]``; all
trials' points are fed to the decider in global time order, so peers' curves are known in the order
a live experiment would know them. A pruned trial stops consuming compute at its prune point and
frees its worker; the next trial starts at that moment.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Protocol

from katib_progress.bench._bank import Bank, BankTrial
from katib_progress.bench._deciders import Decider, TrialEnd
from katib_progress.core.types import ProgressPoint

_EPOCH = datetime(2026, 1, 1, tzinfo=UTC)


@dataclass(frozen=True, slots=True)
class TrialOutcome:
    """How one replayed trial ended."""

    name: str
    bank_index: int
    state: TrialEnd
    points_seen: int
    stopped_at_progress: float
    used: float  # accelerator-seconds consumed
    full_cost: float  # accelerator-seconds the whole run would have consumed
    observation: float | None  # objective as Katib records it from the points reached
    reason: str = ""
    started_s: float = 0.0
    ended_s: float = 0.0


@dataclass(frozen=True, slots=True)
class ReplayResult:
    """One replay. ``best_found`` is the best final among the trials that ran to their end (a pruned
    trial's partial value never counts), ``replay_best`` the best final among all the replay's trials
    (what running every one of them to its end finds), and ``regret`` the shortfall of the first from
    the second divided by the bank's ``median final - best final`` (never negative)."""

    policy: str
    mode: str
    seed: int
    outcomes: tuple[TrialOutcome, ...]
    best_found: float | None
    replay_best: float | None
    regret: float
    makespan_s: float

    @property
    def hit(self) -> bool:
        """The replay's best trial ran to its end (regret 0)."""
        return self.regret == 0.0

    @property
    def compute_used(self) -> float:
        return sum(o.used for o in self.outcomes)

    @property
    def compute_full(self) -> float:
        return sum(o.full_cost for o in self.outcomes)

    @property
    def compute_fraction(self) -> float:
        full = self.compute_full
        return self.compute_used / full if full > 0 else 1.0

    @property
    def trials(self) -> int:
        return len(self.outcomes)

    @property
    def pruned(self) -> int:
        return sum(o.state == "pruned" for o in self.outcomes)


class TrialSource(Protocol):
    """Hands out the next trials to run; learns how earlier ones ended (the sampler needs it)."""

    def next_trials(self, count: int, now_s: float) -> Sequence[tuple[str, BankTrial]]:
        """Up to ``count`` new (trial name, bank trial) pairs; fewer (or none) when the budget is spent."""

    def running(self, name: str, points: int) -> None:
        """``name`` has reported ``points`` points so far."""

    def ended(self, outcome: TrialOutcome) -> None:
        """``outcome.name`` ended."""


@dataclass(slots=True)
class _Live:
    name: str
    trial: BankTrial
    start_s: float
    next_index: int = 0


def _point(experiment: str, live: _Live, index: int) -> ProgressPoint:
    bp = live.trial.points[index]
    return ProgressPoint(
        experiment=experiment,
        trial=live.name,
        seq=index,
        timestamp=_EPOCH + timedelta(seconds=live.start_s + bp.elapsed_s),
        progress=min(max(bp.progress, 0.0), 100.0),
        elapsed_s=bp.elapsed_s,
        eta_s=bp.eta_s,
        metrics=bp.metrics,
    )


class _Replay:
    """The event loop of one replay: a heap of (time, order, trial) events, the live trials, and
    what ended so far."""

    def __init__(self, bank: Bank, decider: Decider, source: TrialSource, workers: int, experiment: str):
        self.bank = bank
        self.decider = decider
        self.source = source
        self.workers = workers
        self.experiment = experiment
        self.events: list[tuple[float, int, str]] = []
        self.live: dict[str, _Live] = {}
        self.outcomes: list[TrialOutcome] = []
        self.counter = 0
        self.now = 0.0

    def schedule(self, state: _Live) -> None:
        t = state.start_s + state.trial.points[state.next_index].elapsed_s
        heapq.heappush(self.events, (t, self.counter, state.name))
        self.counter += 1

    def end(self, state: _Live, kind: TrialEnd, reached: int, reason: str, at_s: float) -> None:
        trial = state.trial
        observation = self.bank.objective(trial.points[:reached])
        used = (trial.points[reached - 1].elapsed_s if reached else 0.0) * trial.gpus
        outcome = TrialOutcome(
            name=state.name,
            bank_index=trial.index,
            state=kind,
            points_seen=reached,
            stopped_at_progress=trial.points[reached - 1].progress if reached else 0.0,
            used=used,
            full_cost=trial.cost,
            observation=observation,
            reason=reason,
            started_s=state.start_s,
            ended_s=at_s,
        )
        self.outcomes.append(outcome)
        self.decider.finish(state.name, kind, observation)
        self.source.ended(outcome)
        del self.live[state.name]

    def fill(self, at_s: float) -> None:
        free = self.workers - len(self.live)
        if free <= 0:
            return
        for name, trial in self.source.next_trials(free, at_s):
            state = _Live(name, trial, at_s)
            self.live[name] = state
            self.decider.start(name)
            if not trial.points:
                self.end(state, "failed", 0, "no points recorded", at_s)
                continue
            self.schedule(state)

    def step(self) -> None:
        """Deliver the next point in simulated time and act on the decision."""
        self.now, _, name = heapq.heappop(self.events)
        state = self.live[name]
        index = state.next_index
        decision = self.decider.decide(_point(self.experiment, state, index))
        self.source.running(name, index + 1)
        last = index == len(state.trial.points) - 1
        if decision.prune and not last:
            self.end(state, "pruned", index + 1, decision.reason, self.now)
        elif last:
            kind: TrialEnd = "failed" if state.trial.status == "failed" else "succeeded"
            if kind == "succeeded" and self.bank.objective(state.trial.points) is None:
                kind = "failed"  # Katib: objective missing -> MetricsUnavailable, counted as failed
            self.end(state, kind, index + 1, decision.reason if decision.prune else "", self.now)
        else:
            state.next_index += 1
            self.schedule(state)
            return
        self.fill(self.now)

    def run(self) -> None:
        self.fill(0.0)
        while self.events:
            self.step()


def _found_and_best(bank: Bank, outcomes: Sequence[TrialOutcome]) -> tuple[float | None, float | None]:
    """(best final among trials that ran to their end, best final among all the replay's trials)."""
    found = bank.best_of(o.observation for o in outcomes if o.state == "succeeded")
    best = bank.best_of(bank.final(bank.trials[o.bank_index]) for o in outcomes)
    return found, best


def replay(
    bank: Bank,
    decider: Decider,
    source: TrialSource,
    *,
    workers: int = 4,
    experiment: str = "bench",
    mode: str = "pruning",
    seed: int = 0,
) -> ReplayResult:
    """Replay trials from ``source`` through ``decider``; return what happened."""
    if workers < 1:
        raise ValueError(f"workers must be >= 1, got {workers}")
    loop = _Replay(bank, decider, source, workers, experiment)
    loop.run()
    found, best = _found_and_best(bank, loop.outcomes)
    return ReplayResult(
        policy=decider.name,
        mode=mode,
        seed=seed,
        outcomes=tuple(loop.outcomes),
        best_found=found,
        replay_best=best,
        regret=bank.shortfall(found, best),
        makespan_s=loop.now,
    )
