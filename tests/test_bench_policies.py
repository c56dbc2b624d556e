"""Bench policy names (``engine:POLICY|k=v``), the stock reference and ratios, the lone-trial stall mode."""

from __future__ import annotations

from typing import Any

import pytest

from katib_progress.bench import (
    STOCK_POLICIES,
    BenchSettings,
    Objective,
    make_decider,
    parse_bank,
    parse_policy,
    profile,
    replay,
    run_bench,
)
from katib_progress.bench._policies import check_policy
from katib_progress.core.errors import ConfigError


def _points(values: list[Any]) -> list[dict[str, Any]]:
    n = len(values)
    return [
        {"progress": 100 * (i + 1) / n, "elapsed_s": 10.0 * (i + 1), "metrics": {"acc": v}}
        for i, v in enumerate(values)
    ]


def _bank(trials: list[list[Any]], *, direction: str = "maximize", strategy: str = "max") -> Any:
    return parse_bank(
        {
            "name": "b",
            "objective": {"metric": "acc", "direction": direction, "strategy": strategy},
            "parameters": [{"name": "x", "type": "double", "min": 0, "max": 1}],
            "trials": [{"params": {"x": 0.1}, "points": _points(v)} for v in trials],
        }
    )


def test_policy_settings_syntax() -> None:
    spec = parse_policy("engine:percentile|warmup_progress=10|percentile=25")
    assert (spec.kind, spec.policy, dict(spec.settings)) == (
        "engine",
        "percentile",
        {"warmup_progress": "10", "percentile": "25"},
    )
    assert parse_policy("grpc:default").uses_service
    assert parse_policy("optuna-sh").stock
    stock = {"none", "katib-medianstop", "optuna-median", "optuna-sh", "optuna-hyperband"}
    assert set(STOCK_POLICIES) == stock
    for bad, words in [
        ("engine:", "unknown policy"),
        ("optuna-medain", "unknown policy"),
        ("engine:percentile|warmup_progress", "name=value"),
        ("engine:percentile|a=1|a=2", "twice"),
        ("engine:percentile|policy=median", "twice"),
    ]:
        with pytest.raises(ConfigError, match=words):
            parse_policy(bad)
    # Settings are validated by the engine's own configuration, naming the setting.
    with pytest.raises(ConfigError, match="warmup_progress"):
        check_policy(parse_policy("engine:percentile|warmup_progress=150"), Objective("acc", "maximize"))
    with pytest.raises(ConfigError, match="no_such_setting"):
        check_policy(parse_policy("engine:percentile|no_such_setting=1"), Objective("acc", "maximize"))


class _InOrder:
    def __init__(self, bank: Any) -> None:
        self._queue = list(bank.trials)

    def next_trials(self, count: int, now_s: float) -> list[tuple[str, Any]]:
        out = [(f"t{t.index}", t) for t in self._queue[:count]]
        del self._queue[:count]
        return out

    def running(self, name: str, points: int) -> None:
        return None

    def ended(self, outcome: Any) -> None:
        return None


def test_engine_settings_reach_the_engine() -> None:
    # Two good trials, then a bad one (points every 10 %): with no warm-up the percentile rule prunes it
    # at its first point; with a 30 % warm-up at its third (Optuna prunes from step n_warmup_steps on).
    bank = _bank([[0.5, 0.8, 0.9, 0.9, 0.9, 0.9, 0.9, 0.9, 0.9, 0.9]] * 2 + [[0.1] * 10])
    seen = {}
    for warmup in ("0", "30"):
        spec = f"engine:percentile|warmup_progress={warmup}|startup_trials=1|min_trials=1"
        decider = make_decider(spec, Objective("acc", "maximize"), seed=0, address="", experiment="x")
        result = replay(bank, decider, _InOrder(bank), workers=1)
        [bad] = [o for o in result.outcomes if o.bank_index == 2]
        seen[warmup] = (bad.state, bad.points_seen)
    assert seen == {"0": ("pruned", 1), "30": ("pruned", 3)}


def test_reference_is_the_cheapest_stock_policy_within_the_regret_target() -> None:
    good, fair = [0.5, 0.8, 0.9, 0.95, 0.97], [0.5, 0.6, 0.7, 0.8, 0.85]
    bank = _bank([good, fair, [0.1] * 5, [0.2, 0.3, 0.3, 0.3, 0.3]])
    settings = BenchSettings(policies=("none", "engine:nop"), seeds=2, workers=2, trials=None)
    result = run_bench(bank, settings)
    none, nop = result.summaries
    assert none.stock and not nop.stock
    assert result.reference("pruning") is none
    assert result.ratio(nop) == 1.0
    doc = result.as_dict()
    assert doc["reference"]["pruning"] == {"policy": "none", "compute_fraction": 1.0}
    assert [r["compute_ratio_to_reference"] for r in doc["results"]] == [1.0, 1.0]
    assert doc["results"][0]["hit_rate"] == 1.0


def test_stall_profile_by_hand() -> None:
    # Maximize, strategy max: recorded 0.1, 0.5, 0.9, 0.99, 1.0 -> I = 0.9, 98 % bar 0.982 reached at
    # the 4th point (80 %), 20 % left: not stalled.
    bank = _bank([[0.1, 0.5, 0.9, 0.99, 1.0], [0.1, 0.9, 1.0, 0.95, 1.0] + [1.0] * 5, [0.3] * 10])
    prof = profile(bank, bank.trials[0])
    assert prof is not None
    assert prof.improvement == pytest.approx(0.9)
    assert (prof.plateau_progress, prof.stalled) == (80.0, False)
    assert prof.false_stop(2)  # 0.9 recorded, 0.1 still ahead > 5 % of 0.9
    assert not prof.false_stop(3)  # 0.01 ahead
    # Plateau at 20 % (1.0 reached at the 3rd point: 30 %? no, recorded max is 1.0 from point 3 on).
    prof = profile(bank, bank.trials[1])
    assert prof is not None
    assert prof.plateau_progress == 30.0 and prof.stalled
    # A flat trial never improves: plateau at its first report, any stop is right.
    prof = profile(bank, bank.trials[2])
    assert prof is not None
    assert prof.improvement == 0.0 and prof.plateau_progress == 10.0 and prof.stalled
    assert not prof.false_stop(0)


def test_stall_profile_follows_latest_on_an_overfitting_curve() -> None:
    # Minimize with strategy latest: 1.0, 0.5, 0.4, 0.6, 0.8 -> recorded (negated) final -0.8, first
    # -1.0: I = 0.2; the 98 % bar -0.804 holds from the 2nd point on (0.5, 0.4, 0.6 are all <= 0.804).
    bank = _bank([[1.0, 0.5, 0.4, 0.6, 0.8]], direction="minimize", strategy="latest")
    prof = profile(bank, bank.trials[0])
    assert prof is not None
    assert prof.improvement == pytest.approx(0.2)
    assert prof.plateau_progress == 40.0


def test_stall_mode_counts_stops_of_a_lone_trial() -> None:
    flat = [0.3] * 20
    rising = [0.1 + 0.04 * i for i in range(20)]
    bank = _bank([flat, rising])
    policies = ("none", "engine:stall|stall_alone_only=false")
    settings = BenchSettings(policies=policies, seeds=1, modes=("stall",))
    stall = run_bench(bank, settings).stall
    by = {s.policy: s for s in stall}
    assert by["none"].stopped == 0 and by["none"].stalled == 1 and not by["none"].goal_met
    engine = by["engine:stall|stall_alone_only=false"]
    assert engine.judged == 2 and engine.stalled == 1
    assert engine.stalled_stopped == 1 and engine.false_stops == 0
    assert engine.compute_fraction < 1.0
