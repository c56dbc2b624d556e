"""Replay harness: synthetic banks with hand-computed outcomes, stock medianstop semantics, sampler mode."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import pytest

from katib_progress.bench import (
    Bank,
    BankTrial,
    BenchSettings,
    KatibMedianStop,
    NearestConfig,
    NoPruning,
    Objective,
    TrialEnd,
    TrialOutcome,
    make_decider,
    parse_bank,
    replay,
    run_bench,
)
from katib_progress.core.errors import ConfigError
from katib_progress.core.types import Decision, ProgressPoint, Verdict


def _curve(values: Sequence[Any], *, step_s: float = 10.0, metric: str = "val_loss") -> list[dict[str, Any]]:
    n = len(values)
    return [
        {
            "progress": round(100 * (i + 1) / n),
            "elapsed_s": step_s * (i + 1),
            "eta_s": step_s * (n - i - 1),
            "metrics": {metric: v, "loss": v},
        }
        for i, v in enumerate(values)
    ]


def synthetic_bank() -> dict[str, Any]:
    """Four trials, 5 points each, 10 s apart (full cost 50 s each, 200 s in all)."""
    return {
        "name": "synthetic",
        "objective": {"metric": "val_loss", "direction": "minimize", "strategy": "min"},
        "parameters": [
            {"name": "lr", "type": "double", "min": 1e-4, "max": 1.0, "log": True},
            {"name": "opt", "type": "categorical", "list": ["sgd", "adam"]},
        ],
        "trials": [
            {"params": {"lr": 0.01, "opt": "adam"}, "points": _curve([1.0, 0.6, 0.3, 0.2, 0.1])},
            {"params": {"lr": 0.001, "opt": "sgd"}, "points": _curve([1.0, 0.9, 0.8, 0.7, 0.5])},
            {
                "params": {"lr": 0.9, "opt": "sgd"},
                "status": "failed",
                "points": _curve([1.0, 5.0, 50.0, 500.0, "nan"]),
            },
            {"params": {"lr": 0.003, "opt": "adam"}, "points": _curve([1.0, 0.7, 0.5, 0.4, 0.3])},
        ],
    }


class InOrder:
    """Trial source handing out bank trials in index order (deterministic for hand computation)."""

    def __init__(self, bank: Bank, order: Sequence[int] | None = None) -> None:
        self._queue = [bank.trials[i] for i in (order if order is not None else range(len(bank.trials)))]
        self.ended_outcomes: list[TrialOutcome] = []

    def next_trials(self, count: int, now_s: float) -> Sequence[tuple[str, BankTrial]]:
        out = []
        while count and self._queue:
            trial = self._queue.pop(0)
            out.append((f"t{trial.index}", trial))
            count -= 1
        return out

    def running(self, name: str, points: int) -> None:
        return None

    def ended(self, outcome: TrialOutcome) -> None:
        self.ended_outcomes.append(outcome)


class PruneWhen:
    """Test decider: prunes a trial when ``rule(trial, value)`` holds; records what it was told."""

    name = "prune-when"

    def __init__(self, rule: Any) -> None:
        self._rule = rule
        self.finished: dict[str, TrialEnd] = {}
        self.seen: list[tuple[str, int]] = []

    def start(self, trial: str) -> None:
        return None

    def decide(self, point: ProgressPoint) -> Decision:
        self.seen.append((point.trial, point.seq))
        value = point.metrics.get("val_loss", math.nan)
        if self._rule(point.trial, value):
            return Decision(Verdict.PRUNE, "rule", self.name)
        return Decision(Verdict.CONTINUE, "", self.name)

    def finish(self, trial: str, state: TrialEnd, observation: float | None) -> None:
        self.finished[trial] = state

    def close(self) -> None:
        return None


def test_no_pruning_uses_all_compute_and_finds_the_true_best() -> None:
    bank = parse_bank(synthetic_bank())
    # Finals of the completed trials: 0.1, 0.5, 0.3 (t2 failed): best 0.1, median 0.3.
    assert (bank.best_final, bank.median, bank.scale) == (0.1, 0.3, pytest.approx(0.2))
    result = replay(bank, NoPruning(), InOrder(bank), workers=2)
    assert result.compute_fraction == 1.0
    assert result.compute_full == 200.0
    assert result.best_found == result.replay_best == 0.1
    assert result.regret == 0.0
    assert result.hit
    assert result.pruned == 0
    states = {o.name: o.state for o in result.outcomes}
    assert states == {"t0": "succeeded", "t1": "succeeded", "t2": "failed", "t3": "succeeded"}


def test_pruning_the_diverging_trial_saves_exactly_its_remaining_compute() -> None:
    bank = parse_bank(synthetic_bank())
    decider = PruneWhen(lambda trial, v: not math.isfinite(v) or v > 3.0)
    result = replay(bank, decider, InOrder(bank), workers=2)
    # t2 is pruned at its 2nd point (5.0 > 3): it used 20 s of its 50 s.
    assert result.pruned == 1
    pruned = next(o for o in result.outcomes if o.state == "pruned")
    assert (pruned.name, pruned.used, pruned.points_seen, pruned.stopped_at_progress) == ("t2", 20.0, 2, 40)
    assert result.compute_fraction == pytest.approx(170.0 / 200.0)
    assert result.regret == 0.0
    assert decider.finished["t2"] == "pruned"
    # The pruned trial consumed nothing after its prune point.
    assert ("t2", 2) not in decider.seen


def test_regret_is_measured_against_the_replays_own_best_by_hand() -> None:
    bank = parse_bank(synthetic_bank())
    # Pruning the best trial at its first point: best found is t3's 0.3; the replay held t0's 0.1;
    # normalized by bank median - bank best = 0.3 - 0.1: regret (0.3 - 0.1) / 0.2 = 1.
    result = replay(bank, PruneWhen(lambda trial, v: trial == "t0"), InOrder(bank), workers=1)
    assert result.best_found == pytest.approx(0.3)
    assert result.replay_best == pytest.approx(0.1)
    assert result.regret == pytest.approx(1.0)
    assert not result.hit
    assert result.compute_fraction == pytest.approx((200.0 - 40.0) / 200.0)
    # A replay without t0: its own best is t3's 0.3; pruning t1 (0.5) costs nothing.
    result = replay(bank, PruneWhen(lambda trial, v: trial == "t1"), InOrder(bank, [1, 3]), workers=1)
    assert (result.best_found, result.replay_best, result.regret, result.hit) == (0.3, 0.3, 0.0, True)


def test_a_pruned_trials_partial_value_never_counts_as_found() -> None:
    doc = synthetic_bank()
    # t3 reaches 0.05 at its 4th point, better than any final, then ends at 0.3 (strategy latest).
    doc["objective"]["strategy"] = "latest"
    doc["trials"][3]["points"] = _curve([1.0, 0.7, 0.5, 0.05, 0.3])
    bank = parse_bank(doc)
    result = replay(bank, PruneWhen(lambda trial, v: trial == "t3" and v < 0.1), InOrder(bank, [1, 3]))
    assert {o.name: o.state for o in result.outcomes} == {"t1": "succeeded", "t3": "pruned"}
    # Katib records 0.05 for the stopped t3 (its latest value), but only t1's 0.5 counts as found.
    assert [o.observation for o in result.outcomes if o.name == "t3"] == [0.05]
    assert result.best_found == 0.5
    assert result.replay_best == 0.3
    assert result.regret == pytest.approx((0.5 - 0.3) / bank.scale)


def test_nothing_found_is_infinite_regret_and_nothing_to_find_is_none() -> None:
    bank = parse_bank(synthetic_bank())
    result = replay(bank, PruneWhen(lambda trial, v: True), InOrder(bank, [0, 1]), workers=2)
    assert result.best_found is None and result.regret == math.inf and not result.hit
    result = replay(bank, NoPruning(), InOrder(bank, [2]), workers=1)  # only the failed trial
    assert result.replay_best is None and result.regret == 0.0


def test_points_arrive_in_global_simulated_time_order() -> None:
    doc = synthetic_bank()
    doc["trials"][1]["points"] = _curve([1.0, 0.9, 0.8, 0.7, 0.5], step_s=3.0)
    bank = parse_bank(doc)
    decider = PruneWhen(lambda trial, v: False)
    replay(bank, decider, InOrder(bank, [0, 1]), workers=2)
    # t1 reports every 3 s, t0 every 10 s: t1 finishes (15 s) before t0's 2nd point (20 s).
    assert decider.seen[:7] == [("t1", 0), ("t1", 1), ("t1", 2), ("t0", 0), ("t1", 3), ("t1", 4), ("t0", 1)]


def _medianstop_bank(first_values: Sequence[float], candidate: Sequence[float]) -> Bank:
    trials = [{"params": {"x": 0.5}, "points": _curve([v] * 5)} for v in first_values]
    trials.append({"params": {"x": 0.5}, "points": _curve(candidate)})
    return parse_bank(
        {
            "name": "ms",
            "objective": {"metric": "val_loss", "direction": "minimize"},
            "parameters": [{"name": "x", "type": "double", "min": 0, "max": 1}],
            "trials": trials,
        }
    )


def test_katib_medianstop_uses_the_mean_of_succeeded_trials_at_report_start_step() -> None:
    # Per-trial means of the first 4 reports: 1, 2, 100 -> threshold = mean 34.33 (median would be 2).
    bank = _medianstop_bank([1.0, 2.0, 100.0], [40.0, 40.0, 40.0, 30.0, 30.0])
    result = replay(bank, KatibMedianStop(Objective("val_loss", "minimize")), InOrder(bank), workers=1)
    last = result.outcomes[-1]
    assert last.state == "succeeded"  # best so far 30 at report 4 is not worse than the MEAN 34.33

    bank = _medianstop_bank([1.0, 2.0, 100.0], [40.0, 40.0, 40.0, 35.0, 35.0])
    result = replay(bank, KatibMedianStop(Objective("val_loss", "minimize")), InOrder(bank), workers=1)
    last = result.outcomes[-1]
    assert (last.state, last.points_seen) == ("pruned", 4)  # checked at exactly the 4th report


def test_katib_medianstop_compares_the_best_so_far_as_the_sidecar_does() -> None:
    # updateStopRules keeps optimalObjValue: 30 at report 2 is the best so far at report 4 (value 40).
    bank = _medianstop_bank([1.0, 2.0, 100.0], [40.0, 30.0, 40.0, 40.0, 40.0])
    result = replay(bank, KatibMedianStop(Objective("val_loss", "minimize")), InOrder(bank), workers=1)
    assert result.outcomes[-1].state == "succeeded"


def test_katib_medianstop_checks_once_and_needs_min_trials_at_creation() -> None:
    # Worse than the threshold only after report 4: the stock sidecar never checks again.
    bank = _medianstop_bank([1.0, 1.0, 1.0], [0.5, 0.5, 0.5, 0.5, 9.0])
    result = replay(bank, KatibMedianStop(Objective("val_loss", "minimize")), InOrder(bank), workers=1)
    assert result.outcomes[-1].state == "succeeded"
    # With 4 workers every trial is created before any succeeded: no rule, nothing pruned.
    bank = _medianstop_bank([1.0, 1.0, 1.0], [9.0, 9.0, 9.0, 9.0, 9.0])
    result = replay(bank, KatibMedianStop(Objective("val_loss", "minimize")), InOrder(bank), workers=4)
    assert result.pruned == 0
    result = replay(bank, KatibMedianStop(Objective("val_loss", "minimize")), InOrder(bank), workers=1)
    assert result.pruned == 1


def test_katib_medianstop_non_finite_reports_count_and_nan_poisons_the_mean() -> None:
    # A NaN report is a report (the 4th here), and NaN never replaces a finite best so far.
    bank = _medianstop_bank([1.0, 1.0, 1.0], [9.0, 9.0, 9.0, "nan", 9.0])
    result = replay(bank, KatibMedianStop(Objective("val_loss", "minimize")), InOrder(bank), workers=1)
    assert (result.outcomes[-1].state, result.outcomes[-1].points_seen) == ("pruned", 4)
    # A succeeded trial with NaN among its first 4 rows makes the mean (the rule value) NaN: no prune.
    doc = {
        "name": "ms",
        "objective": {"metric": "val_loss", "direction": "minimize"},
        "parameters": [{"name": "x", "type": "double", "min": 0, "max": 1}],
        "trials": [
            {"params": {"x": 0.5}, "points": _curve([1.0, "nan", 1.0, 1.0, 1.0])},
            {"params": {"x": 0.5}, "points": _curve([1.0] * 5)},
            {"params": {"x": 0.5}, "points": _curve([1.0] * 5)},
            {"params": {"x": 0.5}, "points": _curve([9.0] * 5)},
        ],
    }
    bank = parse_bank(doc)
    result = replay(bank, KatibMedianStop(Objective("val_loss", "minimize")), InOrder(bank), workers=1)
    assert result.pruned == 0


@pytest.mark.parametrize("policy", ["optuna-median", "optuna-sh", "optuna-hyperband"])
def test_real_optuna_pruners_replay(policy: str) -> None:
    doc = synthetic_bank()
    # Six more good trials so Optuna's median pruner (5 startup trials) has peers to compare to.
    doc["trials"] = doc["trials"][:2] + [doc["trials"][0]] * 6 + doc["trials"][2:]
    bank = parse_bank(doc)
    decider = make_decider(policy, Objective("val_loss", "minimize"), seed=0, address="", experiment="x")
    result = replay(bank, decider, InOrder(bank), workers=1)
    assert result.trials == len(bank.trials)
    assert 0.0 < result.compute_fraction <= 1.0
    if policy == "optuna-median":
        # Sequential, after 5+ completed trials: the diverging trial is worse than the median at once.
        diverging = next(o for o in result.outcomes if o.bank_index == 8)
        assert diverging.state == "pruned"
        assert result.compute_fraction < 1.0


def test_nearest_config_uses_log_space_and_exact_categoricals() -> None:
    bank = parse_bank(synthetic_bank())
    near = NearestConfig(bank)
    # 0.004 is closer to 0.003 in log space (and linear); categorical 'sgd' excludes the adam trials.
    assert near.nearest({"lr": "0.004", "opt": "adam"}).index == 3
    assert near.nearest({"lr": "0.004", "opt": "sgd"}).index == 1
    assert near.nearest({"lr": "0.3", "opt": "adam"}).index == 0
    # Among sgd trials, 0.3 is log-nearer 0.9 (x3) than 0.001 (x300), though linearly nearer 0.001.
    assert near.nearest({"lr": "0.3", "opt": "sgd"}).index == 2
    # A categorical value no bank trial has: every trial mismatches equally, numeric distance decides.
    assert near.nearest({"lr": "0.004", "opt": "rmsprop"}).index == 3


def test_invalid_banks_are_rejected_naming_the_field() -> None:
    doc = synthetic_bank()
    del doc["objective"]
    with pytest.raises(ConfigError, match="objective"):
        parse_bank(doc)
    doc = synthetic_bank()
    doc["trials"][0]["points"][1]["metrics"]["val_loss"] = "lots"
    with pytest.raises(ConfigError, match="trials/0/points/1/metrics/val_loss"):
        parse_bank(doc)
    doc = synthetic_bank()
    doc["trials"][0]["points"][0]["progress"] = 150
    with pytest.raises(ConfigError, match="trials/0/points/0/progress"):
        parse_bank(doc)


def test_the_callers_document_is_not_modified() -> None:
    doc = synthetic_bank()
    snapshot = repr(doc)
    parse_bank(doc)
    assert repr(doc) == snapshot


def test_sampler_mode_goes_through_the_real_suggestion_service() -> None:
    bank = parse_bank(synthetic_bank())
    settings = BenchSettings(policies=("none",), seeds=1, workers=2, modes=("sampler",), sampler_budget=6)
    [summary] = run_bench(bank, settings).summaries
    [run] = summary.runs
    assert run.trials == 6
    assert run.compute_fraction == 1.0
    assert {o.bank_index for o in run.outcomes} <= {0, 1, 2, 3}
    # Without pruning every trial runs to its end: the replay finds its own best.
    finals = [bank.final(bank.trials[o.bank_index]) for o in run.outcomes]
    assert run.best_found == run.replay_best == min(v for v in finals if v is not None)
    assert run.regret == 0.0
