"""The learning-curve ensemble, its calibration from completed trials and the ``predictive`` policy."""

from __future__ import annotations

import math
from datetime import timedelta

import numpy as np
import pytest

from katib_progress.core.errors import ConfigError
from katib_progress.core.types import ProgressPoint
from katib_progress.suggestion.pruning import PruningConfig, PruningEngine
from katib_progress.suggestion.pruning._build import build_policy
from katib_progress.suggestion.pruning._calibrate import Calibrator, checkpoint, isotonic_at
from katib_progress.suggestion.pruning._history import Direction
from katib_progress.suggestion.pruning._lcmodel import FAMILIES, fit_curve
from katib_progress.suggestion.pruning.policies.predictive import PredictivePolicy
from tests.suggestion.test_pruning_adaptive import T0, Feeder

STEPS = tuple(float(p) for p in range(5, 101, 5))


def _power(final: float, gain: float, rate: float = 0.6) -> list[tuple[float, float]]:
    """A loss ``final + gain (x^-rate - 1)``: ends exactly at ``final``."""
    return [(p, final + gain * ((p / 100) ** -rate - 1.0)) for p in STEPS]


# -- the ensemble ------------------------------------------------------------------------------------
def test_the_ensemble_extrapolates_a_power_law_and_its_interval_narrows_with_more_points() -> None:
    rng = np.random.default_rng(3)
    x = np.asarray(STEPS)
    y = 0.3 + 0.2 * ((x / 100) ** -0.6 - 1.0) + rng.normal(0.0, 0.003, len(x))
    widths = []
    for n in (5, 8, 14):
        fit = fit_curve(x[:n], y[:n])
        assert fit is not None
        lo, mid, hi = fit.quantiles((0.05, 0.5, 0.95))
        assert lo < 0.3 + 0.05 and hi > 0.3 - 0.05  # the truth (0.3) is not far outside
        assert abs(mid - 0.3) < 0.1
        widths.append(hi - lo)
        assert math.isclose(float(fit.weights.sum()), 1.0)
        assert set(fit.family_weights) <= set(FAMILIES)
    assert widths[2] < widths[0]
    # the CDF is a CDF: increasing from ~0 to ~1
    fit = fit_curve(x[:8], y[:8])
    assert fit is not None
    grid = np.linspace(-1.0, 2.0, 50)
    cdf = fit.cdf(grid)
    assert np.all(np.diff(cdf) >= -1e-12) and cdf[0] < 0.01 and cdf[-1] > 0.99
    q = fit.quantiles((0.25,))[0]
    assert fit.cdf1(q) == pytest.approx(0.25, abs=1e-6)


def test_the_ensemble_needs_four_points_and_some_progress_spread() -> None:
    assert fit_curve(np.array([10.0, 20.0, 30.0]), np.array([1.0, 0.9, 0.8])) is None
    assert fit_curve(np.array([10.0] * 5), np.array([1.0, 0.9, 0.8, 0.7, 0.6])) is None
    flat = fit_curve(np.array([10.0, 20.0, 30.0, 40.0]), np.array([0.5] * 4))
    assert flat is not None and flat.mean == pytest.approx(0.5)


def test_an_improving_fit_never_predicts_a_worse_end_than_its_trend() -> None:
    # b >= 0: a curve that got worse is fitted as level (the families only improve), so the median
    # final is not extrapolated upwards
    x = np.asarray(STEPS[:8])
    fit = fit_curve(x, 0.5 + 0.01 * x)
    assert fit is not None and fit.quantiles((0.5,))[0] <= float((0.5 + 0.01 * x).max()) + 1e-9


# -- calibration -------------------------------------------------------------------------------------
def test_isotonic_reads_the_block_a_probability_falls_in() -> None:
    r = np.array([0.01, 0.02, 0.03, 0.5, 0.6, 0.9])
    hits = np.array([False, True, False, False, True, True])
    # blocks: {0.01: 0/1}, {0.02, 0.03, 0.5: 1/3} (1, 0, 0 violate the order), {0.6, 0.9: 2/2}
    assert isotonic_at(r, hits, 0.005) == (0.0, 1)
    freq, n = isotonic_at(r, hits, 0.015)
    assert n == 3 and freq == pytest.approx(1 / 3)
    assert isotonic_at(r, hits, 0.55) == (1.0, 2)
    assert isotonic_at(r, hits, 0.95) == (1.0, 2)


def test_checkpoints() -> None:
    assert checkpoint(9.9) is None and checkpoint(10) == 10 and checkpoint(37) == 30 and checkpoint(99) == 90


def test_event_calibration_raises_the_probability_where_completed_trials_beat_their_forecasts() -> None:
    # Completed trials that plateau, then drop late: at 30 % the ensemble gives them little chance of
    # the low target; they all reached it. A running trial with the same forecast gets a high one.
    cal = Calibrator(kind="latest", min_points=4, window=50, prior=2.0, method="event")
    x = list(STEPS)
    for i in range(8):
        y = np.array([1.0 + 0.01 * i if p < 60 else 0.2 for p in x])
        cal.add(f"t{i}", x, y)
    assert cal.count(30) == 8
    fit = fit_curve(np.asarray(x[:6]), np.array([1.0] * 6))
    assert fit is not None
    raw = fit.cdf1(0.3)
    assert raw < 0.01
    assert cal.probability(30, raw, 0.3) > 0.5
    assert cal.probability(30, raw, 0.3, "none") == raw
    assert cal.probability(30, raw, 0.3, "pit") > 0.5
    # the calibrator forgets trials beyond its window
    for i in range(60):
        cal.add(f"u{i}", x, np.asarray([0.5] * len(x)))
    assert cal.count(30) == 50


# -- the policy --------------------------------------------------------------------------------------
def _engine(direction: str = "minimize", strategy: str = "min", **settings: str) -> PruningEngine:
    config = PruningConfig.from_settings(
        "eval_loss",
        direction,
        {"policy": "predictive", "metric_strategy": strategy, "max_prune_progress": "100"} | settings,
    )
    return PruningEngine(config)


def _study(feed: Feeder, sign: float = 1.0) -> None:
    """Ten completed power-law trials ending at 0.30-0.57 (sign -1: the same as accuracies to
    maximise). Ten: with the Jeffreys half-trial, a block of n completed trials none of which reached
    the target still says (0.5 + ...) / (n + 3), below 0.05 only from n = 8."""
    for i in range(10):
        final = 0.30 + 0.03 * i
        feed.run(f"done{i}", [(p, sign * v) for p, v in _power(final, 0.1 + 0.02 * i)])


@pytest.mark.parametrize("direction", ["minimize", "maximize"])
def test_a_hopeless_trial_is_pruned_and_a_contender_runs_on(direction: str) -> None:
    sign = 1.0 if direction == "minimize" else -1.0
    strategy = "min" if direction == "minimize" else "max"
    feed = Feeder(_engine(direction, strategy))
    _study(feed, sign)
    bad = feed.run("bad", [(p, sign * v) for p, v in _power(0.9, 0.2)][:10], end=False)
    assert any(d.prune for d in bad)
    pruned = next(d for d in bad if d.prune)
    assert pruned.policy == "predictive" and "P(reaching the top-1 value" in pruned.reason
    assert pruned.evidence["probability"] < 0.05
    assert pruned.evidence["q05"] <= pruned.evidence["median"] <= pruned.evidence["q95"]
    good = feed.run("good", [(p, sign * v) for p, v in _power(0.28, 0.12)][:10], end=False)
    assert not any(d.prune for d in good)


def test_no_judgement_before_enough_completed_trials_or_reports() -> None:
    feed = Feeder(_engine(predict_min_finished="4"))
    for i, final in enumerate((0.30, 0.35, 0.40)):
        feed.run(f"done{i}", _power(final, 0.1))
    assert not any(d.prune for d in feed.run("bad", _power(0.9, 0.2)[:10], end=False))
    feed2 = Feeder(_engine(predict_min_progress="40"))
    _study(feed2)
    decisions = feed2.run("bad", _power(0.9, 0.2)[:10], end=False)
    first = next(i for i, d in enumerate(decisions) if d.prune)
    assert STEPS[first] >= 40


def test_the_leader_is_never_pruned_under_latest() -> None:
    # latest: the completed trials overfit and end above the running one's current value
    feed = Feeder(_engine(strategy="latest"))
    for i in range(5):
        feed.run(f"done{i}", [(p, 0.5 + 0.002 * p + 0.01 * i) for p in STEPS])
    decisions = feed.run("lead", [(p, 0.45 + 0.003 * p) for p in STEPS[:12]], end=False)
    assert not any(d.prune for d in decisions)


def test_the_target_is_the_kth_best_of_running_and_completed_trials() -> None:
    engine = _engine(predict_top="2")
    feed = Feeder(engine)
    _study(feed)
    feed.run("pruned", _power(0.1, 0.1)[:3], end=False)  # 0.31 at 15 %: it would rank second
    engine.finish("pruned", "pruned")  # a pruned trial's value is never the result
    feed.run("running", _power(0.2, 0.1)[:8], end=False)  # 0.273 at 40 %
    inner = getattr(engine.policy, "inner", engine.policy)
    assert isinstance(inner, PredictivePolicy)
    # seen from done0 (0.30): running 0.273, then done1 0.33
    ranked = inner._ranked(engine.state.trials["done0"], engine.state)
    assert [name for _, name in ranked] == ["running", "done1"]
    assert ranked[0][0] == pytest.approx(0.2 + 0.1 * (0.4**-0.6 - 1.0))
    target = inner.target(engine.state.trials["done0"], engine.state)
    assert target is not None and target == (pytest.approx(0.33), "done1")


def test_a_restarted_engine_decides_the_same() -> None:
    # The policy keeps nothing but caches derived from the engine's history: an engine rebuilt from
    # the stored points (as after a restart) gives the same decisions and reasons.
    feed = Feeder(_engine())
    _study(feed)
    live = feed.run("bad", _power(0.9, 0.2)[:10], end=False)
    assert any(d.prune for d in live)
    stored = []
    ends = {}
    for name, trial in feed.engine.state.trials.items():
        stored.extend((name, p, v) for p, v in trial.curve())
        if trial.state.finished:
            ends[name] = trial.state.value
    fresh = _engine()
    points = [
        ProgressPoint("exp", name, seq, T0 + timedelta(seconds=i), p, metrics={"eval_loss": v})
        for i, (name, p, v) in enumerate(stored)
        for seq in [sum(1 for n, _, _ in stored[:i] if n == name)]
    ]
    # the live decisions came in this order: every completed trial, then "bad"
    fresh.rebuild(points, {k: v for k, v in ends.items() if k != "bad"})
    prune = next(i for i, d in enumerate(live) if d.prune)
    again = fresh.decide(
        ProgressPoint(
            "exp", "bad", prune + 1, T0 + timedelta(days=1), STEPS[prune], metrics={"eval_loss": 0.0}
        )
    )
    assert again.prune and again.reason == live[prune].reason


def test_settings_are_validated_and_wired() -> None:
    config = PruningConfig.from_settings(
        "loss",
        "maximize",
        {
            "policy": "divergence,predictive",
            "predict_top": "3",
            "predict_p": "0.1",
            "predict_calibration": "pit",
        },
    )
    policy = build_policy(config)
    found = [p for p in _walk(policy) if isinstance(p, PredictivePolicy)]
    assert len(found) == 1
    assert (found[0].top, found[0].p_threshold, found[0].calibrator.method) == (3, 0.1, "pit")
    assert found[0].direction is Direction.MAXIMIZE
    for bad in ({"predict_p": "1.5"}, {"predict_top": "0"}, {"predict_calibration": "magic"}):
        with pytest.raises(ConfigError):
            PruningConfig.from_settings("loss", "minimize", {"policy": "predictive"} | bad)
    with pytest.raises(ConfigError, match="predict_calib_window"):
        PruningConfig.from_settings(
            "loss", "minimize", {"predict_calib_window": "3", "predict_min_finished": "4"}
        )
    with pytest.raises(ValueError, match="min_points"):
        PredictivePolicy(direction=Direction.MINIMIZE, strategy="min", min_points=3)


def _walk(policy: object) -> list[object]:
    out = [policy]
    for child in getattr(policy, "policies", ()):
        out.extend(_walk(child))
    inner = getattr(policy, "inner", None)
    if inner is not None:
        out.extend(_walk(inner))
    return out


def test_a_value_re_reported_at_the_same_progress_is_refitted() -> None:
    engine = _engine()
    feed = Feeder(engine)
    feed.run("t", _power(0.5, 0.2)[:6], end=False)
    inner = getattr(engine.policy, "inner", engine.policy)
    assert isinstance(inner, PredictivePolicy)
    before = inner._fit(engine.state.trials["t"])
    feed.point("t", STEPS[5], 5.0)  # same progress, a new (much worse) value replaces the last one
    after = inner._fit(engine.state.trials["t"])
    assert before is not None and after is not None and after.mean > before.mean
