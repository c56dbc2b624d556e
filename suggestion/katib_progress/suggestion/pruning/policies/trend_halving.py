"""Trend halving: asynchronous successive halving whose rungs rank trials by value and by trend.

At each rung (a progress percent, ``rungs``) a trial is ranked among every other non-failed trial that
reached that rung (running, completed or pruned, as asynchronous successive halving ranks a rung;
Li et al., "A System for Massively Parallel Hyperparameter Tuning", 2020) in two views:

- its **value** at the rung, as the objective's metric strategy records it (best so far for
  ``min``/``max``, the value itself for ``latest``);
- its **trend-adjusted value**: that value moved by the least-squares slope of the recorded values over
  the last ``window`` x rung percent of progress (at least ``min_window`` percent) times
  ``horizon`` x rung percent (never more than the progress left after the rung: a curve is not carried
  past the end of its run), only ever in the improving direction (a worsening slope adds nothing).
  A slow starter that is still improving fast ranks well here while its value alone ranks poorly.

The trial is pruned when, in **both** views, more than ``keep`` percent of its peers at that rung are
better (and at least ``min_peers`` peers reached the rung), unless it leads the experiment (best
recorded objective among running and completed trials). Each rung is judged at the first report at or
past it; a rung before the trial's first report is skipped. With ``rejudge`` (default) the trial's
highest rung passed so far is judged again at each later report, against every peer that has
reached that rung by then, as asynchronous successive halving promotes: a trial that passed a rung
because it was among the first to reach it (few or weak peers) is stopped once enough better peers
have arrived there, instead of running to the end unjudged.

Rungs below ``gate_below`` percent are **gated**: such a rung judges only once the experiment has shown
it would have been safe, i.e. at least ``gate_min`` non-failed trials reached ``gate_ref`` percent and
each of the ``gate_top`` best of them there (by value) would pass the rung against its peers there
now. Where early ranks predict later ones (chance-level or diverged runs stay behind) the early rung
opens after the first few trials pass ``gate_ref``; where the best runs start slowly or cross later, it
stays closed and the ungated rungs judge as before.

With ``rho`` > 0 every rung is also **rank-gated** (the ``adaptive`` policy's idea applied to rungs): a
rung judges only once at least ``rho_min_finished`` trials have completed, the one-sided lower bound
(``rho_confidence`` standard errors) of the Spearman correlation between their values at the rung and
their finals reaches ``rho``, and the best completed trial would pass the rung against its peers there
now. Until the experiment's own finished trials show that ranks at a rung predict final ranks, the
rung prunes nothing; where early leaders lose late (overfitting under ``latest``, slow starters) the
early rungs stay closed.

With ``adapt_top`` > 0 a rung's keep percent is **data-driven** (:meth:`TrendHalvingPolicy.adapted_keep`):
once ``adapt_top`` trials have completed, it is the largest share of peers at the rung that were better
or tied (in both views, no noise margin) than any of the ``adapt_top`` best completed trials (by final)
there, plus ``adapt_margin`` points, within [``adapt_min``, the rung's ``keep``]. Where ranks at a rung
predict the finals the rung keeps few; where the best finishers sat low there it keeps the configured
share. (Tried for issue 24's compute goal; off by default: docs/benchmarks.md, "Item 5".)

State: none outside the engine's history. Scores at a rung are cached per trial once the trial has
passed the rung (grid steps are never rewritten), so a rebuilt engine decides the same.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from katib_progress.core.types import Decision, Verdict
from katib_progress.suggestion.pruning._history import (
    Direction,
    ExperimentState,
    RecordedGrid,
    Strategy,
    TrialHistory,
    TrialState,
)
from katib_progress.suggestion.pruning.policies.adaptive import spearman, spearman_lower_bound
from katib_progress.suggestion.pruning.policies.base import Policy, PolicyContext

#: (value, trend-adjusted value, residual sd of the window's line fit), oriented so lower is better.
Score = tuple[float, float, float]


class TrendHalvingPolicy(Policy):
    """Successive-halving rungs ranked by value and by trend-adjusted value (module doc)."""

    name = "trend_halving"

    def __init__(
        self,
        *,
        direction: Direction,
        strategy: Strategy,
        grid_step: float,
        rungs: Sequence[float] = (10.0, 20.0, 40.0, 80.0),
        keep: Sequence[float] = (50.0, 33.0, 25.0, 25.0),
        horizon: float = 3.0,
        window: float = 0.25,
        min_window: float = 4.0,
        min_peers: int = 3,
        rejudge: bool = True,
        gate_below: float = 0.0,
        gate_ref: float = 40.0,
        gate_min: int = 6,
        gate_top: int = 2,
        rho: float = 0.0,
        rho_min_finished: int = 4,
        rho_confidence: float = 1.0,
        noise: float = 0.0,
        smooth: bool = False,
        adapt_top: int = 0,
        adapt_margin: float = 10.0,
        adapt_min: float = 10.0,
    ) -> None:
        if not rungs:
            raise ValueError("trend_halving needs at least one rung")
        if len(keep) != len(rungs):
            raise ValueError(
                f"trend_halving needs one keep percent per rung, got {len(keep)} for {len(rungs)} rungs"
            )
        if any(not (0 < r < 100) for r in rungs) or list(rungs) != sorted(set(rungs)):
            raise ValueError(
                f"trend_halving rungs must increase strictly within (0, 100) percent, got {list(rungs)}"
            )
        if any(not (0 < k < 100) for k in keep):
            raise ValueError(f"trend_halving keep percents must be within (0, 100), got {list(keep)}")
        if not (math.isfinite(horizon) and horizon >= 0):
            raise ValueError(f"trend_halving horizon must be >= 0, got {horizon}")
        if not (math.isfinite(window) and 0 < window <= 1):
            raise ValueError(f"trend_halving window must be within (0, 1], got {window}")
        if not (math.isfinite(min_window) and min_window > 0):
            raise ValueError(f"trend_halving min_window must be > 0 percent, got {min_window}")
        if min_peers < 1:
            raise ValueError(f"trend_halving min_peers must be >= 1, got {min_peers}")
        if not (0 <= gate_below < 100) or (gate_below > 0 and not (gate_below < gate_ref <= 100)):
            raise ValueError(
                f"trend_halving gate_below must be within [0, 100) and below gate_ref <= 100, "
                f"got {gate_below} and {gate_ref}"
            )
        if not (1 <= gate_top <= gate_min):
            raise ValueError(f"trend_halving needs 1 <= gate_top <= gate_min, got {gate_top} and {gate_min}")
        if not grid_step > 0:
            raise ValueError(f"grid_step must be > 0, got {grid_step}")
        if not (0 <= rho <= 1):
            raise ValueError(f"trend_halving rho must be within [0, 1], got {rho}")
        if rho_min_finished < 3:
            raise ValueError(f"trend_halving rho_min_finished must be >= 3, got {rho_min_finished}")
        if not (math.isfinite(rho_confidence) and rho_confidence >= 0):
            raise ValueError(f"trend_halving rho_confidence must be >= 0, got {rho_confidence}")
        if not (math.isfinite(noise) and noise >= 0):
            raise ValueError(f"trend_halving noise must be >= 0, got {noise}")
        if adapt_top < 0:
            raise ValueError(f"trend_halving adapt_top must be >= 0, got {adapt_top}")
        if not (math.isfinite(adapt_margin) and 0 <= adapt_margin < 100):
            raise ValueError(f"trend_halving adapt_margin must be within [0, 100) points, got {adapt_margin}")
        if not (math.isfinite(adapt_min) and 0 < adapt_min < 100):
            raise ValueError(f"trend_halving adapt_min must be within (0, 100) percent, got {adapt_min}")
        self.noise = noise
        self.smooth = smooth
        self.adapt_top = adapt_top
        self.adapt_margin = adapt_margin
        self.adapt_min = adapt_min
        self._adapted: dict[tuple[int, int, int], float] = {}
        self.rho = rho
        self.rho_min_finished = rho_min_finished
        self.rho_confidence = rho_confidence
        self._rho_open: dict[tuple[int, int], tuple[bool, str]] = {}
        self.direction = direction
        self.strategy = strategy
        self.grid_step = grid_step
        self.rungs = tuple(float(r) for r in rungs)
        self.keep = tuple(float(k) for k in keep)
        self.horizon = horizon
        self.window = window
        self.min_window = min_window
        self.min_peers = min_peers
        self.rejudge = rejudge
        self.gate_below = gate_below
        self.gate_ref = gate_ref
        self.gate_min = gate_min
        self.gate_top = gate_top
        self._sign = 1.0 if direction is Direction.MINIMIZE else -1.0
        self._recorded: dict[str, RecordedGrid] = {}
        self._scores: dict[tuple[str, int], Score | None] = {}

    # -- derived caches -------------------------------------------------------------------------
    def _rec(self, trial: TrialHistory) -> RecordedGrid:
        rec = self._recorded.setdefault(trial.name, RecordedGrid())
        rec.extend(trial.grid, self.strategy)
        return rec

    def scores(self, trial: TrialHistory, step: int) -> Score | None:
        """(value, trend-adjusted value) at grid ``step``, oriented so lower is better; None when the
        trial has not reached ``step`` or has no value there."""
        key = (trial.name, step)
        if key in self._scores:
            return self._scores[key]
        last = trial.last_step
        if last is None or last < step:
            return None  # not cached: the trial may still reach the step
        rec = self._rec(trial)
        out: Score | None = None
        raw = rec.at(step)
        if raw is not None:
            value = self._sign * raw
            span = max(self.min_window, self.window * step * self.grid_step)
            lo = step - math.ceil(span / self.grid_step - 1e-9)
            recorded = {s: self._sign * v for s in range(lo, step + 1) if (v := rec.at(s)) is not None}
            xs = list(recorded)
            trend, sd = value, 0.0
            if len(xs) >= 2:
                x = np.asarray(xs, dtype=float) * self.grid_step
                y = np.asarray([recorded[s] for s in xs])
                xc = x - x.mean()
                slope = float(xc @ (y - y.mean())) / float(xc @ xc)
                at = step * self.grid_step
                fitted = y.mean() + slope * (at - x.mean())
                if len(xs) >= 3:
                    sd = float(np.std(y - (y.mean() + slope * xc)))
                    sd = sd if math.isfinite(sd) else 0.0
                if self.smooth and self.strategy == "latest":
                    value = float(fitted)  # recent values, not the single last one
                ahead = min(self.horizon * at, max(0.0, 100.0 - at))  # never past the end of the run
                trend = value + min(slope, 0.0) * ahead if self.horizon > 0 else value
            out = (value, trend, sd)
        self._scores[key] = out
        return out

    def _peers(self, name: str, step: int, experiment: ExperimentState) -> list[Score]:
        out = []
        for t in experiment.trials.values():
            if t.name == name or t.state is TrialState.FAILED:
                continue
            s = self.scores(t, step)
            if s is not None and math.isfinite(s[0]) and math.isfinite(s[1]):
                out.append(s)
        return out

    def _behind(self, mine: Score, peers: list[Score], keep: float) -> tuple[int, int] | None:
        """(peers better by value, by trend) when more than ``keep`` percent are better in both views;
        with ``noise`` > 0 a peer counts as better only by more than ``noise`` x the trial's own
        residual sd (the scatter of its recent values around their line)."""
        margin = self.noise * mine[2]
        better_value = sum(1 for p in peers if p[0] < mine[0] - margin)
        better_trend = sum(1 for p in peers if p[1] < mine[1] - margin)
        allowed = keep / 100.0 * len(peers)
        return (better_value, better_trend) if better_value > allowed and better_trend > allowed else None

    def gate_open(self, step: int, keep: float, experiment: ExperimentState) -> bool:
        """A gated rung at grid ``step`` judges: at least ``gate_min`` trials reached ``gate_ref`` and the
        ``gate_top`` best of them there would each pass the rung against its peers there now."""
        ref = math.ceil(self.gate_ref / self.grid_step - 1e-9)
        reached = []
        for t in experiment.trials.values():
            if t.state is TrialState.FAILED:
                continue
            s = self.scores(t, ref)
            if s is not None and math.isfinite(s[0]):
                reached.append((s[0], t.name, t))
        if len(reached) < self.gate_min:
            return False
        reached.sort(key=lambda r: (r[0], r[1]))
        for _, name, t in reached[: self.gate_top]:
            mine = self.scores(t, step)
            if mine is None:
                continue  # its first report lies past the rung: the rung never judged it
            peers = self._peers(name, step, experiment)
            if len(peers) >= self.min_peers and self._behind(mine, peers, keep) is not None:
                return False
        return True

    def _completed(self, experiment: ExperimentState) -> list[tuple[float, TrialHistory]]:
        """The completed trials with a finite final by the metric strategy: (final, oriented so that
        lower is better; the trial), in the experiment's order."""
        out = []
        for t in experiment.trials.values():
            final = t.recorded(self.strategy) if t.state is TrialState.COMPLETE else None
            if final is not None and math.isfinite(final):
                out.append((self._sign * final, t))
        return out

    def rank_gate(self, step: int, keep: float, experiment: ExperimentState) -> tuple[bool, str]:
        """(the rung at grid ``step`` may judge, why): completed trials' values there predict their
        finals (Spearman lower bound >= ``rho``) and the best completed trial would pass it now.
        Recomputed whenever a trial ends (cached per count of ended trials)."""
        key = (len(experiment.ended), step)
        hit = self._rho_open.get(key)
        if hit is not None:
            return hit
        xs, ys, best = [], [], None
        for final, t in self._completed(experiment):
            s = self.scores(t, step)
            if s is None or not math.isfinite(s[0]):
                continue
            xs.append(s[0])
            ys.append(final)
            if best is None or final < best[0]:
                best = (final, t, s)
        out: tuple[bool, str]
        if len(xs) < self.rho_min_finished or best is None:
            out = (False, f"{len(xs)} of {self.rho_min_finished} completed trials needed to open the rung")
        else:
            r = spearman(xs, ys)
            low = spearman_lower_bound(r, len(xs), self.rho_confidence)
            if not low >= self.rho:  # NaN fails too
                out = (
                    False,
                    f"Spearman {r:.2f} (lower bound {low:.2f}) < {self.rho:g} over {len(xs)} trials",
                )
            else:
                peers = self._peers(best[1].name, step, experiment)
                spared = len(peers) < self.min_peers or self._behind(best[2], peers, keep) is None
                out = (spared, "" if spared else "the best completed trial would not pass the rung")
        self._rho_open[key] = out
        return out

    def adapted_keep(self, step: int, keep: float, experiment: ExperimentState, at_rung: int) -> float:
        """The keep percent of the rung at grid ``step``: ``keep`` itself unless ``adapt_top`` > 0 and at
        least ``adapt_top`` trials have completed; then the largest share of its peers there that is
        better or tied (in both views; no noise margin) than any of the ``adapt_top`` best completed
        trials (by final), plus ``adapt_margin`` points, within [``adapt_min``, ``keep``]. Cached per
        count of ended trials and of trials at the rung (``at_rung``)."""
        if self.adapt_top <= 0:
            return keep
        key = (len(experiment.ended), step, at_rung)
        hit = self._adapted.get(key)
        if hit is not None:
            return min(hit, keep)
        done = sorted(self._completed(experiment), key=lambda d: (d[0], d[1].name))
        out = keep
        if len(done) >= self.adapt_top:
            worst = None
            for _, t in done[: self.adapt_top]:
                mine = self.scores(t, step)
                if mine is None or not (math.isfinite(mine[0]) and math.isfinite(mine[1])):
                    continue
                peers = self._peers(t.name, step, experiment)
                if len(peers) < self.min_peers:
                    continue
                # ties count as ahead: on a coarse scale (accuracy of a small validation set) a
                # newcomer tied with the best completed trial there may still be behind it at the end
                ahead_value = sum(1 for p in peers if p[0] <= mine[0])
                ahead_trend = sum(1 for p in peers if p[1] <= mine[1])
                share = 100.0 * min(ahead_value, ahead_trend) / len(peers)
                worst = share if worst is None else max(worst, share)
            if worst is not None:
                out = max(self.adapt_min, worst + self.adapt_margin)
        self._adapted[key] = out
        return min(out, keep)

    # -- decision -------------------------------------------------------------------------------
    def decide(self, ctx: PolicyContext) -> Decision:
        trial = ctx.trial
        if not trial.progress or trial.last_step is None:
            return Decision(Verdict.CONTINUE, f"no {ctx.objective} value yet", self.name)
        before = trial.progress[-2] if len(trial.progress) >= 2 else -math.inf
        now = trial.progress[-1]
        highest = max((i for i, r in enumerate(self.rungs) if r <= now + 1e-9), default=-1)
        for i, (rung, rung_keep) in enumerate(zip(self.rungs, self.keep, strict=True)):
            crossed = before < rung <= now + 1e-9
            again = self.rejudge and i == highest and not crossed
            if not (crossed or again):
                continue
            step = math.ceil(rung / self.grid_step - 1e-9)
            mine = self.scores(trial, step)
            if mine is None:
                continue  # the rung lies before the trial's first report
            peers = self._peers(trial.name, step, ctx.experiment)
            if len(peers) < self.min_peers:
                continue
            keep = self.adapted_keep(step, rung_keep, ctx.experiment, len(peers) + 1)
            behind = self._behind(mine, peers, keep)
            if behind is None:
                continue
            if rung < self.gate_below and not self.gate_open(step, keep, ctx.experiment):
                continue
            if self.rho > 0 and not self.rank_gate(step, keep, ctx.experiment)[0]:
                continue
            better_value, better_trend = behind
            if ctx.experiment.leads(trial):
                return Decision(
                    Verdict.CONTINUE, f"behind at the {rung:g}% rung but leading; spared", self.name
                )
            value = self._sign * mine[0]
            trend = self._sign * mine[1]
            judged = " (judged again)" if again else ""
            return Decision(
                Verdict.PRUNE,
                f"{ctx.objective} {value:.4g} at the {rung:g}% rung{judged} (trend-adjusted {trend:.4g}): "
                f"{better_value} and {better_trend} of {len(peers)} trials at {rung:g}% are better, "
                f"more than the {keep:g}% kept",
                self.name,
                {
                    "value": value,
                    "trend": trend,
                    "rung": rung,
                    "keep": keep,
                    "peers": float(len(peers)),
                    "better_value": float(better_value),
                    "better_trend": float(better_trend),
                },
            )
        return Decision(Verdict.CONTINUE, "", self.name)
