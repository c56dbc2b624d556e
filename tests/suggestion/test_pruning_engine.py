"""PruningEngine: idempotent decisions, sticky prunes, trial ends, and the default policy on a sweep."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest

from katib_progress.core.types import ProgressPoint
from katib_progress.suggestion.pruning import PruningConfig, PruningEngine, TrialState
from tests.suggestion.test_pruning_curves import (
    T0,
    diverging_curve,
    loss_curve,
    points,
    slow_starter_curve,
    stalling_curve,
)


def _config(**settings: str) -> PruningConfig:
    return PruningConfig.from_settings("eval_loss", "minimize", settings)


def test_repeated_points_get_the_same_decision_and_are_counted_once() -> None:
    engine = PruningEngine(_config(policy="median", startup_trials="5"))  # judges nobody yet
    for point in points("good", loss_curve(0.3)):
        engine.decide(point)
    engine.finish("good", "complete")
    decisions = []
    for point in list(points("bad", loss_curve(1.0)))[:15]:
        decisions.append(engine.decide(point))
        assert engine.decide(point) == decisions[-1]  # redelivery
    assert engine.points == 50 + 15
    assert engine.repeats == 15
    assert len(engine.curve("bad")) == 15  # no double counting in the curve either
    # An older seq arriving late gets the latest answer and changes nothing.
    stale = list(points("bad", loss_curve(1.0)))[3]
    assert engine.decide(replace(stale, seq=3)) == decisions[3]


def test_a_pruned_trial_stays_pruned_and_is_told_once() -> None:
    engine = PruningEngine(_config(policy="divergence"))
    nan = ProgressPoint("e", "t", 0, T0, 10.0, metrics={"eval_loss": math.nan})
    pruned = engine.decide(nan)
    assert pruned.prune
    later = ProgressPoint("e", "t", 1, T0, 20.0, metrics={"eval_loss": 0.1})
    assert engine.decide(later) == pruned
    assert engine.trial_state("t") is TrialState.PRUNED
    engine.finish("t", "complete")  # already ended: no effect
    assert engine.trial_state("t") is TrialState.PRUNED


def test_stale_out_of_order_points_do_not_change_state() -> None:
    engine = PruningEngine(_config(policy="nop"))
    engine.decide(ProgressPoint("e", "t", 5, T0, 50.0, metrics={"eval_loss": 1.0}))
    engine.decide(ProgressPoint("e", "t", 2, T0, 20.0, metrics={"eval_loss": 3.0}))
    assert engine.curve("t") == [(50.0, 1.0)]
    assert engine.points == 1


def test_progress_falls_back_to_elapsed_and_eta() -> None:
    engine = PruningEngine(_config(policy="nop"))
    engine.decide(ProgressPoint("e", "t", 0, T0, None, 30.0, 90.0, {"eval_loss": 2.0}))
    assert engine.curve("t") == [(25.0, 2.0)]
    engine.decide(ProgressPoint("e", "t", 1, T0, None, None, None, {"eval_loss": 1.0}))
    assert engine.curve("t") == [(25.0, 2.0)]  # cannot be placed on the curve


def test_finish_accepts_katib_like_state_names_and_rejects_others() -> None:
    engine = PruningEngine(_config())
    engine.finish("a", "succeeded")
    engine.finish("b", "EarlyStopped")
    assert engine.trial_state("a") is TrialState.COMPLETE
    assert engine.trial_state("b") is TrialState.PRUNED
    with pytest.raises(ValueError, match="'exploded'"):
        engine.finish("c", "exploded")


def test_default_policy_on_a_realistic_sweep() -> None:
    """Good trials finish, divergence dies at once, stalled and bad trials stop early (once four
    completed trials show that early ranks predict final ones: the default's rank gate), a slow
    starter past the cost guard finishes."""
    engine = PruningEngine(_config(startup_trials="3"))
    outcomes: dict[str, float | None] = {}
    sweep = [
        ("good0", loss_curve(0.30, seed=0)),
        ("good1", loss_curve(0.28, seed=1)),
        ("good2", loss_curve(0.32, seed=2)),
        ("good4", loss_curve(0.35, seed=7)),
        ("diverge", diverging_curve(at=24.0, seed=3)),
        ("stall", stalling_curve(at=16.0, level=1.4, seed=4)),
        ("bad", loss_curve(1.1, seed=5)),
        ("good3", loss_curve(0.25, seed=6)),
    ]
    for name, curve in sweep:
        outcomes[name] = None
        for point in points(name, curve):
            decision = engine.decide(point)
            if decision.prune:
                outcomes[name] = point.progress
                break
        else:
            engine.finish(name, "complete")
    assert outcomes["good0"] is None and outcomes["good1"] is None and outcomes["good2"] is None
    assert outcomes["good4"] is None
    assert outcomes["good3"] is None
    assert outcomes["diverge"] is not None and outcomes["diverge"] <= 30
    assert outcomes["stall"] is not None and outcomes["stall"] <= 40
    assert outcomes["bad"] is not None and outcomes["bad"] <= 30
    slow = [(p, v) for p, v in slow_starter_curve() if p >= 92]
    for point in points("slow", slow):
        assert not engine.decide(point).prune


def test_engine_does_not_mutate_the_callers_point() -> None:
    engine = PruningEngine(_config())
    metrics = {"eval_loss": 1.0}
    point = ProgressPoint("e", "t", 0, T0, 10.0, metrics=metrics)
    engine.decide(point)
    assert metrics == {"eval_loss": 1.0} and point.metrics == {"eval_loss": 1.0}
