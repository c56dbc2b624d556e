"""``--mode stall``: every bank trial replayed alone (no peers), scored against the lone-trial goal.

Definitions (on the value Katib would record if the trial stopped at a point: the objective's metric
strategy over the points reached, oriented so that larger is better):

- total improvement ``I`` = recorded value at the end - recorded value at the first finite report;
- the plateau starts at the first point from which the recorded value stays within 2 % of ``I`` of the
  final one (98 % of the total improvement done, for good); a trial that never improves (``I <= 0``)
  plateaus at its first report;
- a trial is *stalled* when its plateau starts with at least 30 % of its run (progress) left;
- a stop is *in time* when it comes at most 5 % of progress after the plateau start and is not false;
- a stop is *false* when the trial would still have improved by more than 5 % of ``I``.

Goal: at least 90 % of stalled trials stopped in time, at most 1 % of all trials stopped falsely. Only
trials that completed with a finite objective are judged (a crashed run has no end to compare with).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from katib_progress.bench._bank import Bank, BankTrial
from katib_progress.bench._deciders import Decider
from katib_progress.core.strategy import apply_strategy
from katib_progress.core.types import ProgressPoint

PLATEAU_SHARE = 0.98
MIN_LEFT = 30.0  # percent of the run left at the plateau start for a trial to count as stalled
IN_TIME = 5.0  # percent of the run after the plateau start
FALSE_SHARE = 0.05  # improvement still ahead (share of I) that makes a stop false
GOAL_IN_TIME = 0.90
GOAL_FALSE = 0.01

_EPOCH = datetime(2026, 1, 1, tzinfo=UTC)


@dataclass(frozen=True, slots=True)
class StallProfile:
    """What the lone-trial goal needs to know about one bank trial."""

    recorded: tuple[float | None, ...]  # oriented recorded value at each point (None before any)
    progress: tuple[float, ...]
    improvement: float  # I
    plateau_index: int

    @property
    def plateau_progress(self) -> float:
        return self.progress[self.plateau_index]

    @property
    def stalled(self) -> bool:
        return 100.0 - self.plateau_progress >= MIN_LEFT

    def false_stop(self, index: int) -> bool:
        """Stopping after point ``index`` loses more than 5 % of the total improvement."""
        at = self.recorded[index]
        final = self.recorded[-1]
        assert final is not None
        if self.improvement <= 0:
            return False
        if at is None:
            return True
        return final - at > FALSE_SHARE * self.improvement


def _at_least(value: float | None, bar: float) -> bool:
    return value is not None and value >= bar


def profile(bank: Bank, trial: BankTrial) -> StallProfile | None:
    """The trial's stall profile, or None when it is not judged (failed, or no finite objective)."""
    if bank.final(trial) is None:
        return None
    sign = 1.0 if bank.direction == "maximize" else -1.0
    values = [p.metrics.get(bank.metric, math.nan) for p in trial.points]
    recorded: list[float | None] = []
    for k in range(len(values)):
        v = apply_strategy(values[: k + 1], bank.strategy)
        recorded.append(None if v is None else sign * v)
    first = next(i for i, v in enumerate(recorded) if v is not None)
    start, final = recorded[first], recorded[-1]
    assert start is not None and final is not None
    improvement = final - start
    plateau = first
    if improvement > 0:
        bar = start + PLATEAU_SHARE * improvement
        plateau = len(recorded) - 1
        while plateau > first and _at_least(recorded[plateau - 1], bar):
            plateau -= 1
    return StallProfile(tuple(recorded), tuple(p.progress for p in trial.points), improvement, plateau)


def lone_replay(trial: BankTrial, decider: Decider, name: str, experiment: str) -> int | None:
    """Feed the trial's points alone to ``decider``; the index of the point it was stopped at (None:
    it ran to its end)."""
    decider.start(name)
    stopped: int | None = None
    last = len(trial.points) - 1
    for i, bp in enumerate(trial.points):
        point = ProgressPoint(
            experiment=experiment,
            trial=name,
            seq=i,
            timestamp=_EPOCH + timedelta(seconds=bp.elapsed_s),
            progress=min(max(bp.progress, 0.0), 100.0),
            elapsed_s=bp.elapsed_s,
            eta_s=bp.eta_s,
            metrics=bp.metrics,
        )
        if decider.decide(point).prune and i < last:
            stopped = i
            break
    decider.finish(name, "pruned" if stopped is not None else "succeeded", None)
    return stopped


@dataclass(frozen=True, slots=True)
class StallSummary:
    """One policy's lone-trial figures on one bank."""

    policy: str
    judged: int
    stalled: int
    stalled_in_time: int
    stalled_stopped: int
    false_stops: int
    stopped: int
    compute_fraction: float

    @property
    def in_time_rate(self) -> float:
        return self.stalled_in_time / self.stalled if self.stalled else 1.0

    @property
    def false_rate(self) -> float:
        return self.false_stops / self.judged if self.judged else 0.0

    @property
    def goal_met(self) -> bool:
        return self.in_time_rate >= GOAL_IN_TIME and self.false_rate <= GOAL_FALSE

    def as_dict(self) -> dict[str, Any]:
        return {
            "policy": self.policy,
            "judged": self.judged,
            "stalled": self.stalled,
            "stalled_stopped_in_time": self.stalled_in_time,
            "stalled_stopped": self.stalled_stopped,
            "in_time_rate": self.in_time_rate,
            "false_stops": self.false_stops,
            "false_rate": self.false_rate,
            "stopped": self.stopped,
            "compute_fraction": self.compute_fraction,
            "goal_met": self.goal_met,
        }


class StallTally:
    """Accumulates lone-trial replays of one policy on one bank."""

    def __init__(self, policy: str) -> None:
        self.policy = policy
        self.counts = dict.fromkeys(
            ("judged", "stalled", "in_time", "stalled_stopped", "false", "stopped"), 0
        )
        self.used = 0.0
        self.full = 0.0

    def add(self, trial: BankTrial, prof: StallProfile, stopped: int | None) -> None:
        c = self.counts
        c["judged"] += 1
        self.full += trial.cost
        self.used += (trial.points[stopped].elapsed_s * trial.gpus) if stopped is not None else trial.cost
        false = stopped is not None and prof.false_stop(stopped)
        c["stopped"] += stopped is not None
        c["false"] += false
        if prof.stalled:
            c["stalled"] += 1
            if stopped is not None:
                c["stalled_stopped"] += 1
                in_time = trial.points[stopped].progress <= prof.plateau_progress + IN_TIME
                c["in_time"] += in_time and not false

    def summary(self) -> StallSummary:
        c = self.counts
        return StallSummary(
            policy=self.policy,
            judged=c["judged"],
            stalled=c["stalled"],
            stalled_in_time=c["in_time"],
            stalled_stopped=c["stalled_stopped"],
            false_stops=c["false"],
            stopped=c["stopped"],
            compute_fraction=self.used / self.full if self.full > 0 else 1.0,
        )
