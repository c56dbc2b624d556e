"""Optuna-backed policies: real Optuna pruners on a real in-memory study, fed by progress-indexed curves."""

from __future__ import annotations

from collections.abc import Sequence

import optuna
import pytest
from optuna.trial import TrialState as OptunaState

from katib_progress.core.types import Decision
from katib_progress.suggestion.pruning import PruningConfig, PruningEngine
from katib_progress.suggestion.pruning.policies import OptunaPrunerPolicy
from tests.suggestion.test_pruning_curves import loss_curve, points, stalling_curve


def _engine(**settings: str) -> PruningEngine:
    return PruningEngine(PruningConfig.from_settings("eval_loss", "minimize", settings))


def _run(
    engine: PruningEngine, trial: str, curve: Sequence[tuple[float, float]], **kw: object
) -> Decision | None:
    for point in points(trial, curve, **kw):  # type: ignore[arg-type]
        decision = engine.decide(point)
        if decision.prune:
            return decision
    engine.finish(trial, "complete")
    return None


def _optuna(engine: PruningEngine) -> OptunaPrunerPolicy:
    policy = engine.policy
    while not isinstance(policy, OptunaPrunerPolicy):
        policy = getattr(policy, "inner", None) or policy.policies[-1]  # type: ignore[attr-defined]
    return policy


def test_percentile_prunes_a_bad_trial_after_warmup_with_a_readable_reason() -> None:
    engine = _engine(policy="percentile", percentile="25", startup_trials="4", warmup_progress="20")
    completed = sum(_run(engine, f"good{i}", loss_curve(0.3 + 0.02 * i, seed=i)) is None for i in range(5))
    assert completed >= 4  # the first four are not judged (startup_trials), the fifth may be
    decision = _run(engine, "bad", loss_curve(0.9, seed=9))
    assert decision is not None and decision.policy == "percentile"
    assert decision.evidence["progress"] == 20.0  # the first step after warm-up
    assert decision.evidence["peers"] == float(completed)
    assert (
        "worse than the 25th percentile" in decision.reason
        and f"of {completed} trials at 20%" in decision.reason
    )
    assert decision.evidence["value"] > decision.evidence["threshold"]


def test_percentile_waits_for_startup_trials() -> None:
    engine = _engine(policy="percentile", startup_trials="3")
    for i in range(2):
        _run(engine, f"good{i}", loss_curve(0.3, seed=i))
    assert _run(engine, "bad", loss_curve(0.9)) is None  # only 2 completed trials so far


def test_pruned_trials_are_told_to_optuna_as_pruned_with_their_intermediate_values() -> None:
    engine = _engine(policy="median", startup_trials="2", min_trials="1")
    for i in range(2):
        _run(engine, f"good{i}", loss_curve(0.3, seed=i))
    assert _run(engine, "bad", loss_curve(1.5)) is not None
    # The study mirrors the engine's history: it learns about ended trials at the next decision.
    engine.decide(next(iter(points("next", loss_curve(0.3, seed=9)))))
    study = _optuna(engine).study
    states = [t.state for t in study.get_trials(deepcopy=False)]
    assert states == [OptunaState.COMPLETE, OptunaState.COMPLETE, OptunaState.PRUNED, OptunaState.RUNNING]
    pruned = study.get_trials(deepcopy=False)[2]
    assert pruned.intermediate_values  # its curve on the progress grid
    assert pruned.value == pruned.intermediate_values[max(pruned.intermediate_values)]
    # Reports every 2% filled every 1% grid step from the first report (2%) to where it was pruned.
    last = engine.curve("bad")[-1][0]
    assert set(pruned.intermediate_values) == set(range(2, round(last) + 1))


def test_median_matches_optuna_driven_directly() -> None:
    """Same values into a hand-driven Optuna study with MedianPruner give the same verdicts step by step."""
    engine = _engine(policy="median", startup_trials="2", warmup_progress="10", min_trials="1", grid_step="2")
    ref = optuna.create_study(pruner=optuna.pruners.MedianPruner(2, 5, 1, n_min_trials=1))
    curves = {f"t{i}": loss_curve(0.3 + 0.1 * i, seed=i) for i in range(2)}
    curves["c"] = loss_curve(0.5, seed=7, noise=0.05)
    for name, curve in curves.items():
        ref_trial = ref.ask()
        for point in points(name, curve):
            ours = engine.decide(point).prune
            assert point.progress is not None
            ref_trial.report(point.metrics["eval_loss"], round(point.progress / 2))
            expected = ref_trial.should_prune()
            assert ours == expected, (name, point.progress)
            if ours:
                ref.tell(ref_trial, state=OptunaState.PRUNED)
                break
        else:
            engine.finish(name, "complete")
            ref.tell(ref_trial, curve[-1][1])


def test_peers_reporting_at_different_progress_values_are_compared_on_the_grid() -> None:
    engine = _engine(policy="median", startup_trials="2", min_trials="2", warmup_progress="30")
    sparse = tuple(float(p) for p in range(10, 101, 10))
    for i in range(2):
        _run(engine, f"coarse{i}", loss_curve(0.3, seed=i, progress=sparse))
    odd = tuple(float(p) for p in range(3, 100, 7))
    decision = _run(engine, "fine", loss_curve(1.0, progress=odd))
    assert decision is not None and decision.evidence["peers"] == 2.0
    assert 30 <= decision.evidence["progress"] <= 38


def test_successive_halving_and_hyperband_prune_laggards() -> None:
    for policy in ("successive_halving", "hyperband"):
        engine = _engine(policy=policy, min_resource="10", reduction_factor="2", max_prune_progress="100")
        results = {}
        for i in range(8):
            # Each good trial beats every earlier one; the bad ones are far worse.
            floor = 0.3 - 0.02 * i if i % 2 == 0 else 1.2
            results[i] = _run(engine, f"t{i}", loss_curve(floor, seed=i))
        pruned = {i for i, d in results.items() if d is not None}
        # SHA ranks everyone at each rung; Hyperband splits trials over brackets first.
        if policy == "successive_halving":
            assert {3, 5, 7} <= pruned, (policy, pruned)
        assert len(pruned) >= 2, (policy, pruned)
        assert not pruned & {0, 2, 4, 6}, (policy, pruned)


def test_threshold_and_patient_wrapper() -> None:
    engine = _engine(policy="threshold", threshold_upper="1.0", warmup_progress="0")
    decision = _run(engine, "high", stalling_curve(at=0, level=1.3))
    assert decision is not None and decision.evidence["progress"] == 2.0
    # Optuna's PatientPruner only lets the wrapped pruner act once the curve got worse than it was
    # ``patience`` steps ago: a slowly rising curve is pruned only after 10% of progress. The
    # pruner sees what Katib records: with strategy latest the rising values, with strategy min
    # (the default when minimizing) the running minimum, which never gets worse.
    rising = [(float(p), 1.3 + 0.001 * p) for p in range(2, 101, 2)]
    settings = {"policy": "threshold", "threshold_upper": "1.0", "warmup_progress": "0", "patience": "10"}
    patient = _engine(**settings, metric_strategy="latest")
    decision = _run(patient, "high", rising)
    assert decision is not None and decision.evidence["progress"] > 10.0
    assert _run(_engine(**settings), "high", rising) is None


def test_wilcoxon_prunes_a_trial_consistently_worse_than_the_best() -> None:
    engine = _engine(policy="wilcoxon", wilcoxon_p_threshold="0.1", wilcoxon_startup_steps="5")
    assert _run(engine, "best", loss_curve(0.3)) is None
    decision = _run(engine, "worse", loss_curve(0.8, seed=3))
    assert decision is not None and decision.policy == "wilcoxon"


def test_maximize_direction() -> None:
    engine = PruningEngine(
        PruningConfig.from_settings("acc", "maximize", {"policy": "percentile", "startup_trials": "3"})
    )
    for i in range(3):
        good = [(p, 1 - v / 3) for p, v in loss_curve(0.3, seed=i)]
        assert _run(engine, f"g{i}", good, metric="acc") is None
    bad = [(p, 1 - v / 3) for p, v in loss_curve(1.5)]
    decision = _run(engine, "bad", bad, metric="acc")
    assert decision is not None and decision.evidence["value"] < decision.evidence["threshold"]


def test_optuna_policy_validation() -> None:
    with pytest.raises(ValueError, match="BasePruner"):
        OptunaPrunerPolicy(object(), name="x", direction=_engine().direction, grid_step=1.0)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="grid_step"):
        OptunaPrunerPolicy(optuna.pruners.NopPruner(), name="x", direction=_engine().direction, grid_step=0)


@pytest.mark.parametrize("policy", ["successive_halving", "hyperband"])
def test_bootstrap_count_never_prunes_every_trial(policy: str) -> None:
    # Optuna prunes the first bootstrap_count trials to reach each rung: run one at a time, every
    # trial would be pruned. The guard lets trials run until one has completed.
    engine = _engine(policy=policy, bootstrap_count="3", min_resource="10")
    results = [_run(engine, f"t{i}", loss_curve(0.3 + 0.05 * i, seed=i)) for i in range(4)]
    assert results[0] is None  # the first trial completed
    states = [engine.trial_state(f"t{i}") for i in range(4)]
    assert any(s is not None and s.value == "complete" for s in states)
