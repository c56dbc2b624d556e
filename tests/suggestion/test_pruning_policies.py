"""The Katib-free policies (divergence, stall, extrapolation, cost guard, budget) on realistic curves."""

from __future__ import annotations

import math
from collections.abc import Sequence
from datetime import timedelta

import numpy as np
import pytest

from katib_progress.core.types import Decision, ProgressPoint
from katib_progress.suggestion.pruning import PruningConfig, PruningEngine
from katib_progress.suggestion.pruning.policies import (
    AnyOf,
    BudgetPolicy,
    CostGuard,
    DivergencePolicy,
    ExtrapolationPolicy,
    NopPolicy,
    Policy,
    StallPolicy,
)
from katib_progress.suggestion.pruning.policies.extrapolation import forecast
from tests.suggestion.test_pruning_curves import (
    T0,
    diverging_curve,
    loss_curve,
    points,
    slow_starter_curve,
    stalling_curve,
)


def _engine(policy: Policy, direction: str = "minimize") -> PruningEngine:
    return PruningEngine(
        PruningConfig.from_settings("eval_loss", direction, {"policy": "nop"}), policy=policy
    )


def _run(
    engine: PruningEngine, trial: str, curve: Sequence[tuple[float, float]], **kw: object
) -> Decision | None:
    """Feed a curve; return the first PRUNE decision (None when the trial ran to the end)."""
    for point in points(trial, curve, **kw):  # type: ignore[arg-type]
        decision = engine.decide(point)
        if decision.prune:
            return decision
    engine.finish(trial, "complete")
    return None


# -- divergence ------------------------------------------------------------------------------------
def test_divergence_prunes_at_the_first_nan() -> None:
    engine = _engine(DivergencePolicy())
    nan_point = ProgressPoint("exp", "t", 0, T0, 5.0, metrics={"eval_loss": math.nan})
    decision = engine.decide(nan_point)
    assert decision.prune and "nan" in decision.reason and "eval_loss" in decision.reason


def test_divergence_watches_training_loss_too() -> None:
    engine = _engine(DivergencePolicy(watch=("loss",)))
    ok = ProgressPoint("exp", "t", 0, T0, 5.0, metrics={"eval_loss": 2.0, "loss": 2.1})
    assert not engine.decide(ok).prune
    bad = ProgressPoint("exp", "t", 1, T0, 6.0, metrics={"eval_loss": 2.0, "loss": math.inf})
    decision = engine.decide(bad)
    assert decision.prune and decision.evidence["metric"] == "loss"


def test_divergence_catches_an_exploding_objective_before_nan() -> None:
    engine = _engine(DivergencePolicy(factor=3.0))
    decision = _run(engine, "t", diverging_curve(at=30.0))
    assert decision is not None and "exploded" in decision.reason
    assert decision.evidence["value"] > 3 * decision.evidence["start"] - 1e-9


def test_divergence_leaves_noisy_but_healthy_curves_alone() -> None:
    engine = _engine(DivergencePolicy())
    for seed in range(5):
        assert _run(engine, f"t{seed}", loss_curve(0.3, noise=0.05, seed=seed)) is None


def test_divergence_mirrors_for_maximize() -> None:
    engine = _engine(DivergencePolicy(factor=2.0, watch=()), "maximize")
    assert not engine.decide(ProgressPoint("e", "t", 0, T0, 10.0, metrics={"eval_loss": 0.5})).prune
    assert engine.decide(ProgressPoint("e", "t", 1, T0, 20.0, metrics={"eval_loss": -0.6})).prune


@pytest.mark.parametrize("kwargs", [{"factor": 1.0}, {"factor": math.nan}, {"floor": 0.0}])
def test_divergence_validation_names_the_value(kwargs: dict[str, float]) -> None:
    with pytest.raises(ValueError, match=str(next(iter(kwargs.values())))):
        DivergencePolicy(**kwargs)


# -- stall -------------------------------------------------------------------------------------------
def test_stall_prunes_a_flat_trial_even_when_alone() -> None:
    engine = _engine(StallPolicy(window=20, min_progress=30))
    decision = _run(engine, "flat", stalling_curve(at=10.0))
    assert decision is not None and "stalled" in decision.reason
    assert decision.evidence["improvement"] < decision.evidence["needed"]
    assert engine.curve("flat")[-1][0] < 60  # stopped well before the end


def _until(curve: Sequence[tuple[float, float]], last: float = 90.0) -> list[tuple[float, float]]:
    """Up to ``last`` percent: beyond it the default cost guard vetoes comparative prunes anyway."""
    return [(p, v) for p, v in curve if p <= last]


def test_stall_keeps_improving_trials_even_when_noisy() -> None:
    engine = _engine(StallPolicy(window=20, min_progress=30))
    for seed in range(5):
        assert _run(engine, f"good{seed}", _until(loss_curve(0.3, noise=0.01, seed=seed))) is None
    # A noisy curve that keeps improving steadily: the improvement beats its own noise.
    rng = np.random.default_rng(1)
    noisy = [(float(p), 3.0 - 0.02 * p + float(rng.normal(0, 0.05))) for p in range(2, 101, 2)]
    assert _run(engine, "noisy", noisy) is None


def test_stall_noise_threshold_scales_with_the_trials_noise() -> None:
    """Same slow drift: a smooth curve shows it is improving, a very noisy one cannot."""
    drift = [(float(p), 2.0 - 0.002 * p) for p in range(2, 101, 2)]
    rng = np.random.default_rng(3)
    noisy = [(p, v + float(rng.normal(0, 0.2))) for p, v in drift]
    policy = StallPolicy(window=20, min_progress=30, min_rel_improvement=0.0)
    assert _run(_engine(policy), "smooth", drift) is None
    assert _run(_engine(StallPolicy(window=20, min_progress=30, min_rel_improvement=0.0)), "noisy", noisy)


def test_stall_spares_the_leader_when_it_has_peers() -> None:
    engine = _engine(StallPolicy(window=20, min_progress=30))
    assert _run(engine, "worse", _until(loss_curve(2.0))) is None  # keeps improving
    assert _run(engine, "leader", stalling_curve(at=10.0, level=0.5)) is None
    assert _run(engine, "loser", stalling_curve(at=10.0, level=2.5)) is not None


def test_stall_never_prunes_the_leader_by_the_metric_strategy() -> None:
    # Strategy latest (an overfitting objective): the peer's best-ever 0.3 does not count, its latest
    # 1.0 does, so the stalled trial at 0.5 leads and is spared; with strategy min the peer leads.
    peer = [(float(p), 0.3 if p < 20 else 1.0) for p in range(2, 30, 2)]  # below min_progress: not judged
    for strategy, spared in (("latest", True), ("min", False)):
        config = PruningConfig.from_settings(
            "eval_loss", "minimize", {"policy": "nop", "metric_strategy": strategy}
        )
        engine = PruningEngine(config, policy=StallPolicy(window=20, min_progress=30))
        for point in points("peer", peer):
            engine.decide(point)
        decision = _run(engine, "plateau", stalling_curve(at=10.0, level=0.5))
        assert (decision is None) is spared, strategy


def test_stall_says_when_its_window_holds_too_few_reports() -> None:
    engine = _engine(StallPolicy(window=10, min_progress=30, min_points=5))
    sparse = [(float(p), 1.0) for p in range(10, 101, 10)]  # one report per 10 %
    decisions = [engine.decide(point) for point in points("sparse", sparse)]
    assert not any(d.prune for d in decisions)
    assert "stall_min_points is 5" in decisions[-1].reason


@pytest.mark.parametrize(
    ("kwargs", "text"),
    [({"window": 0}, "window"), ({"min_points": 2}, "min_points"), ({"noise": -1}, "noise")],
)
def test_stall_validation(kwargs: dict[str, float], text: str) -> None:
    with pytest.raises(ValueError, match=text):
        StallPolicy(**kwargs)  # type: ignore[arg-type]


# -- extrapolation -----------------------------------------------------------------------------------
def test_forecast_recovers_a_power_law_with_honest_uncertainty() -> None:
    rng = np.random.default_rng(0)
    x = np.arange(5.0, 51.0, 2.5)
    truth = 0.4 + 1.2 * (x / 100) ** -0.7
    fc = forecast(x, truth + rng.normal(0, 0.01, size=len(x)))
    assert fc is not None
    final = 0.4 + 1.2
    assert abs(fc.mean - final) < 4 * fc.sd
    assert fc.sd < 0.5


def test_extrapolation_prunes_a_hopeless_trial_and_keeps_a_contender() -> None:
    engine = _engine(ExtrapolationPolicy(min_progress=30))
    assert _run(engine, "best", loss_curve(0.3, seed=1)) is None
    bad = _run(engine, "bad", loss_curve(1.0, seed=2))
    assert bad is not None and bad.policy == "extrapolation"
    assert bad.evidence["best_trial"] == "best" and bad.evidence["p_beat"] < bad.evidence["threshold"]
    assert "predicted to end" in bad.reason
    assert _run(engine, "close", loss_curve(0.31, seed=3)) is None


def test_extrapolation_does_not_prune_without_peers() -> None:
    engine = _engine(ExtrapolationPolicy(min_progress=30))
    assert _run(engine, "alone", loss_curve(5.0)) is None


def test_extrapolation_is_more_eager_when_more_compute_remains() -> None:
    policy = ExtrapolationPolicy(p_threshold=0.1)
    engine = _engine(policy)
    _run(engine, "best", loss_curve(0.3))
    cheap = _run(engine, "x", loss_curve(0.6), seconds_per_percent=10.0)
    assert cheap is not None
    assert cheap.evidence["threshold"] < 0.1 * 1.5 and cheap.evidence["threshold"] > 0.1 * 0.5


# -- cost guard and budget -------------------------------------------------------------------------
class _AlwaysPrune(Policy):
    name = "always"

    def decide(self, ctx: object) -> Decision:
        from katib_progress.core.types import Verdict

        return Decision(Verdict.PRUNE, "always", self.name)


def test_cost_guard_lets_nearly_finished_trials_finish() -> None:
    engine = _engine(CostGuard(_AlwaysPrune(), max_prune_progress=90.0))
    late = ProgressPoint("e", "t", 0, T0, 92.0, metrics={"eval_loss": 1.0})
    decision = engine.decide(late)
    assert not decision.prune and decision.evidence["vetoed"] == "always" and "92%" in decision.reason
    early = ProgressPoint("e", "u", 0, T0, 40.0, metrics={"eval_loss": 1.0})
    assert engine.decide(early).prune


def test_cost_guard_skips_prunes_that_save_too_little() -> None:
    engine = _engine(CostGuard(_AlwaysPrune(), min_remaining_s=600))
    point = ProgressPoint("e", "t", 0, T0, 40.0, 400.0, 300.0, {"eval_loss": 1.0})
    assert not engine.decide(point).prune


def test_default_policy_never_prunes_a_slow_starter_after_90_percent_but_does_prune_divergence() -> None:
    config = PruningConfig.from_settings("eval_loss", "minimize", {"startup_trials": "2", "min_trials": "1"})
    engine = PruningEngine(config)
    for i in range(3):
        _run(engine, f"good{i}", loss_curve(0.5 + 0.05 * i, seed=i))
    late = [(p, v) for p, v in slow_starter_curve() if p > 90]
    decision = _run(engine, "late-join", late)
    assert decision is None
    nan_late = ProgressPoint("exp", "late-nan", 0, T0, 95.0, metrics={"eval_loss": math.nan})
    assert engine.decide(nan_late).prune


def test_budget_deadline_and_gpu_hours() -> None:
    deadline = T0 + timedelta(hours=1)
    engine = _engine(BudgetPolicy(deadline=deadline))
    assert not engine.decide(ProgressPoint("e", "a", 0, T0, 10.0, 60.0, 600.0, {"eval_loss": 1.0})).prune
    slow = engine.decide(ProgressPoint("e", "b", 0, T0, 10.0, 60.0, 7200.0, {"eval_loss": 2.0}))
    assert slow.prune and "deadline" in slow.reason
    late = engine.decide(ProgressPoint("e", "a", 1, deadline, 50.0, 3600.0, 60.0, {"eval_loss": 0.9}))
    assert late.prune and "has passed" in late.reason

    spent = _engine(BudgetPolicy(gpu_hours=1.0, gpus_per_trial=2.0))
    assert not spent.decide(ProgressPoint("e", "a", 0, T0, 10.0, 1000.0, 100.0, {"eval_loss": 1.0})).prune
    decision = spent.decide(ProgressPoint("e", "b", 0, T0, 10.0, 900.0, 100.0, {"eval_loss": 2.0}))
    assert decision.prune and "spent" in decision.reason
    assert decision.evidence["gpu_hours_used"] == pytest.approx((1000 + 900) * 2 / 3600)


def test_budget_projected_overrun_stops_the_costliest_non_leader() -> None:
    engine = _engine(BudgetPolicy(gpu_hours=2.0))
    assert not engine.decide(ProgressPoint("e", "lead", 0, T0, 10.0, 360.0, 3600.0, {"eval_loss": 0.5})).prune
    decision = engine.decide(ProgressPoint("e", "pricey", 0, T0, 10.0, 360.0, 5400.0, {"eval_loss": 1.5}))
    assert decision.prune and "largest remaining cost" in decision.reason


def test_any_of_and_nop() -> None:
    engine = _engine(AnyOf([NopPolicy(), DivergencePolicy()]))
    assert engine.decide(ProgressPoint("e", "t", 0, T0, 1.0, metrics={"eval_loss": math.nan})).prune
    with pytest.raises(ValueError, match="empty"):
        AnyOf([])
    with pytest.raises(ValueError, match="timezone"):
        BudgetPolicy(deadline=T0.replace(tzinfo=None))
