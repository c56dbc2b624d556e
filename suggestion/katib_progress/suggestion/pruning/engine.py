"""The pruning engine: one experiment's curves, the composed policy and idempotent decisions.

Plain Python (no gRPC): the gRPC service, the local sweep and the benchmarks all call this. Not
thread-safe; callers serialise access (``PruningHub`` holds one lock per experiment).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from katib_progress.core.types import Decision, ProgressPoint, Verdict
from katib_progress.suggestion.pruning._build import build_policy
from katib_progress.suggestion.pruning._history import (
    Direction,
    ExperimentState,
    TrialHistory,
    TrialState,
    parse_state,
)
from katib_progress.suggestion.pruning.config import PruningConfig
from katib_progress.suggestion.pruning.policies.base import Policy, PolicyContext

_log = logging.getLogger(__name__)


@dataclass(slots=True)
class _Ledger:
    """Decisions already given to one trial, so repeated points get the same answer."""

    by_seq: dict[int, Decision] = field(default_factory=dict)
    last_seq: int = -1
    last: Decision | None = None
    final: Decision | None = None  # sticky once the trial was pruned or ended


class PruningEngine:
    """Decide CONTINUE/PRUNE for progress points of one experiment's trials."""

    def __init__(self, config: PruningConfig, *, policy: Policy | None = None) -> None:
        self.config = config
        self.policy = policy if policy is not None else build_policy(config)
        self.direction = Direction(config.direction)
        self.state = ExperimentState(self.direction, config.strategy)
        self._ledgers: dict[str, _Ledger] = {}
        self.points = 0
        self.repeats = 0
        self._rebuilding = False

    def _trial(self, name: str) -> TrialHistory:
        trial = self.state.trials.get(name)
        if trial is None:
            completed = tuple(
                t for t in self.state.ended if self.state.trials[t].state is TrialState.COMPLETE
            )
            trial = TrialHistory(name, self.config.grid_step, completed_before=completed)
            self.state.trials[name] = trial
        return trial

    def decide(self, point: ProgressPoint) -> Decision:
        """Decide for one point. The same (trial, seq) always gets the same decision and is counted
        once; an older seq than the latest gets the latest decision; a pruned trial stays pruned."""
        ledger = self._ledgers.setdefault(point.trial, _Ledger())
        cached = ledger.by_seq.get(point.seq)
        if cached is not None:
            self.repeats += 1
            return cached
        if ledger.final is not None:
            ledger.by_seq[point.seq] = ledger.final
            return ledger.final
        if ledger.last is not None and point.seq < ledger.last_seq:
            self.repeats += 1
            return ledger.last
        self.points += 1
        trial = self._trial(point.trial)
        self._update(trial, point)
        ctx = PolicyContext(
            point=point,
            trial=trial,
            experiment=self.state,
            objective=self.config.objective_metric,
            direction=self.direction,
            now=point.timestamp,
        )
        decision = self.policy.decide(ctx)
        ledger.by_seq[point.seq] = decision
        ledger.last_seq, ledger.last = point.seq, decision
        if decision.prune:
            ledger.final = decision
            _log.log(
                logging.DEBUG if self._rebuilding else logging.INFO,
                "pruning %s: %s",
                point.trial,
                decision.reason,
            )
            self._end(trial, TrialState.PRUNED)
        return decision

    def _update(self, trial: TrialHistory, point: ProgressPoint) -> None:
        if point.elapsed_s is not None:
            trial.elapsed_s = point.elapsed_s
        if point.eta_s is not None:
            trial.eta_s = point.eta_s
        progress = point.progress
        if progress is None and point.elapsed_s is not None and point.eta_s is not None:
            total = point.elapsed_s + point.eta_s
            progress = 100.0 * point.elapsed_s / total if total > 0 else None
        if progress is not None:
            trial.last_progress = (
                progress if trial.last_progress is None else max(trial.last_progress, progress)
            )
        value = point.metrics.get(self.config.objective_metric)
        if value is not None and math.isfinite(value):
            trial.reports.append(value)  # a row of the observation log (none for NaN or infinities)
        if value is not None and math.isfinite(value) and progress is not None:
            trial.add(progress, value)

    def finish(self, trial: str, state: TrialState | str) -> None:
        """Record that a trial ended (``complete``, ``pruned`` or ``failed``); idempotent.

        Later points of an ended trial are answered with the ending decision."""
        parsed = parse_state(state)
        ledger = self._ledgers.setdefault(trial, _Ledger())
        history = self._trial(trial)
        if history.state.finished:
            return
        if ledger.final is None:
            verdict = Verdict.PRUNE if parsed is TrialState.PRUNED else Verdict.CONTINUE
            ledger.final = Decision(verdict, f"trial already ended ({parsed.value})", "engine")
        self._end(history, parsed)

    def _end(self, trial: TrialHistory, state: TrialState) -> None:
        trial.state = state
        self.state.ended.append(trial.name)

    def rebuild(
        self, points: Iterable[ProgressPoint], ends: Mapping[str, TrialState | str] | None = None
    ) -> int:
        """Restore the experiment's state from stored observations (a restarted service, a resumed
        sweep): replay ``points`` (every stored progress point of every trial, any order) in time
        order through the policies, and end each trial named in ``ends`` (its final state:
        ``complete``, ``pruned``, ``failed`` or Katib's names) right after its last stored point.

        Decisions are recomputed exactly as the live engine made them, so later points get the same
        decisions as from an engine that never stopped; a trial stored as pruned stays pruned even
        if the replay would not prune it. Returns how many points were replayed. Call it on a fresh
        engine, before any live point."""
        if self.points or self._ledgers:
            raise RuntimeError("rebuild() needs a fresh engine (it already decided points)")
        ordered = sorted(enumerate(points), key=lambda item: (item[1].timestamp, item[0]))
        last_index: dict[str, int] = {}
        for i, (_, point) in enumerate(ordered):
            last_index[point.trial] = i
        ends = dict(ends or {})
        self._rebuilding = True
        try:
            for trial in [t for t in ends if t not in last_index]:
                self.finish(trial, ends[trial])
            for i, (_, point) in enumerate(ordered):
                self.decide(point)
                if last_index[point.trial] == i and point.trial in ends:
                    self.finish(point.trial, ends[point.trial])
        finally:
            self._rebuilding = False
        return len(ordered)

    def forget(self, trial: str) -> None:
        """Drop the idempotence ledger of an ended trial (its curve stays for peers)."""
        ledger = self._ledgers.get(trial)
        if ledger is not None and ledger.final is not None:
            ledger.by_seq.clear()

    def curve(self, trial: str) -> list[tuple[float, float]]:
        """(progress %, objective) points the trial reported, in progress order."""
        history = self.state.trials.get(trial)
        return [] if history is None else history.curve()

    def trial_state(self, trial: str) -> TrialState | None:
        history = self.state.trials.get(trial)
        return None if history is None else history.state

    def trials(self) -> list[str]:
        return list(self.state.trials)
