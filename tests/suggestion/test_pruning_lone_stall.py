"""The lone-stall policy: a trial with no peers is stopped once its fitted curve has little left."""

from __future__ import annotations

import math
from concurrent import futures
from datetime import timedelta

import grpc
import numpy as np
import pytest

from katib_progress.core.errors import ConfigError
from katib_progress.core.types import ProgressPoint
from katib_progress.suggestion.pruning import PruningConfig, PruningEngine
from katib_progress.suggestion.pruning._build import build_policy
from katib_progress.suggestion.pruning.policies.lone_stall import LoneStallPolicy, remaining_upper_bound
from katib_progress.suggestion.pruning.proto import pruning_pb2 as pb
from katib_progress.suggestion.pruning.proto import pruning_pb2_grpc as pb_grpc
from katib_progress.suggestion.pruning.service import PruningHub
from tests.suggestion.test_pruning_adaptive import T0, Feeder

STEPS = tuple(range(4, 101, 4))


def _saturating(rate: float, start: float = 1.0, floor: float = 0.2) -> list[tuple[float, float]]:
    """A loss approaching ``floor`` exponentially: 98 % of its improvement is done at
    ``ln(50) / rate`` percent."""
    return [(p, floor + (start - floor) * math.exp(-rate * p)) for p in STEPS]


def _linear(start: float = 1.0, per_percent: float = 0.007) -> list[tuple[float, float]]:
    """A loss still falling in a straight line to the end of the run."""
    return [(p, start - per_percent * p) for p in STEPS]


def _engine(settings: dict[str, str] | None = None, policy: str = "lone_stall") -> PruningEngine:
    return PruningEngine(
        PruningConfig.from_settings("eval_loss", "minimize", {"policy": policy, **(settings or {})})
    )


def _stop(decisions: list[object]) -> int | None:
    return next((i for i, d in enumerate(decisions) if d.prune), None)  # type: ignore[attr-defined]


def test_a_lone_trial_on_a_plateau_is_stopped_soon_after_the_plateau_starts() -> None:
    curve = _saturating(0.5)  # 98 % done at 8 %
    decisions = Feeder(_engine()).run("alone", curve, end=False)
    stop = _stop(decisions)
    # Judged from the fifth report on (lone_stall_min_points), and stopped there.
    assert stop == 4 and curve[stop][0] == 20
    assert "alone in the experiment" in decisions[stop].reason
    assert decisions[stop].policy == "lone_stall"
    assert decisions[stop].evidence["remaining_share"] <= 0.02


def test_a_lone_trial_that_still_improves_is_not_stopped() -> None:
    decisions = Feeder(_engine()).run("alone", _linear(), end=False)
    assert not any(d.prune for d in decisions)


def test_a_late_improvement_after_a_flat_stretch_keeps_the_trial() -> None:
    # Falls, stays flat for a while, then falls again: the flat stretch is too short to be judged a
    # plateau by the fits with their residual margin.
    curve = [(p, 1.0 - 0.02 * min(p, 20) - 0.01 * max(0.0, p - 36)) for p in STEPS]
    decisions = Feeder(_engine()).run("alone", curve, end=False)
    assert _stop(decisions) is None


def test_a_flat_trial_that_never_improved_is_not_judged() -> None:
    decisions = Feeder(_engine()).run("alone", [(p, 0.7) for p in STEPS], end=False)
    assert not any(d.prune for d in decisions)


def test_a_trial_with_a_peer_is_never_stopped_by_lone_stall() -> None:
    feed = Feeder(_engine())
    feed.run("peer", [(4.0, 0.9)], end=False)
    decisions = feed.run("with-peer", _saturating(0.5), end=False)
    assert not any(d.prune for d in decisions)


def test_a_peer_that_ended_still_counts_as_a_peer() -> None:
    feed = Feeder(_engine())
    feed.run("first", [(4.0, 0.9)])
    assert not any(d.prune for d in feed.run("second", _saturating(0.5), end=False))


def test_maximizing_objectives_are_oriented() -> None:
    engine = PruningEngine(PruningConfig.from_settings("eval_loss", "maximize", {"policy": "lone_stall"}))
    curve = [(p, 2.0 - v) for p, v in _saturating(0.5)]  # rising to 1.8
    assert _stop(Feeder(engine).run("alone", curve, end=False)) is not None


def test_settings_reach_the_policy_and_change_the_decision() -> None:
    curve = _saturating(0.5)
    default_stop = _stop(Feeder(_engine()).run("a", curve, end=False))
    later = _stop(Feeder(_engine({"lone_stall_min_progress": "60"})).run("a", curve, end=False))
    assert default_stop is not None and later is not None
    assert curve[later][0] >= 60 > curve[default_stop][0]
    strict = _stop(Feeder(_engine({"lone_stall_max_remaining": "0.0001"})).run("a", curve, end=False))
    assert strict is None or strict > default_stop


def test_the_bound_is_wider_for_a_noisy_curve() -> None:
    x = np.asarray(STEPS[:10], dtype=float)
    smooth = 1.0 - np.exp(-0.15 * x)
    rng = np.random.default_rng(0)
    noisy = np.maximum.accumulate(smooth + rng.normal(0, 0.05, len(x)))
    s, n = remaining_upper_bound(x, smooth, 1.0), remaining_upper_bound(x, noisy, 1.0)
    assert s is not None and n is not None and n[0] > s[0]


@pytest.mark.parametrize(
    ("settings", "field", "fragment"),
    [
        ({"lone_stall_max_remaining": "0"}, "lone_stall_max_remaining", "greater than 0"),
        ({"lone_stall_max_remaining": "1"}, "lone_stall_max_remaining", "less than 1"),
        ({"lone_stall_noise": "-1"}, "lone_stall_noise", "-1"),
        ({"lone_stall_noise": "nan"}, "lone_stall_noise", "nan"),
        ({"lone_stall_min_progress": "100"}, "lone_stall_min_progress", "100"),
        ({"lone_stall_min_points": "3"}, "lone_stall_min_points", "greater than or equal to 4"),
    ],
)
def test_invalid_settings_name_the_setting(settings: dict[str, str], field: str, fragment: str) -> None:
    with pytest.raises(ConfigError) as err:
        PruningConfig.from_settings("eval_loss", "minimize", {"policy": "lone_stall", **settings})
    assert err.value.field == field
    assert fragment in str(err.value)


def test_the_policy_refuses_bad_values_directly() -> None:
    for kwargs in ({"max_remaining": 0.0}, {"noise": -0.1}, {"min_progress": 100.0}, {"min_points": 3}):
        with pytest.raises(ValueError, match="lone_stall"):
            LoneStallPolicy(**kwargs)  # type: ignore[arg-type]


def test_invalid_setting_over_grpc_is_invalid_argument_naming_the_field() -> None:
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    PruningHub().register(server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        stub = pb_grpc.PruningStub(grpc.insecure_channel(f"127.0.0.1:{port}"))
        config = pb.ExperimentConfig(
            objective_metric_name="eval_loss",
            direction=pb.MINIMIZE,
            settings={"lone_stall_max_remaining": "1.5"},
        )
        req = pb.ProgressPointRequest(experiment="e", trial="t", progress=5.0, config=config)
        with pytest.raises(grpc.RpcError) as err:
            stub.Decide(req, timeout=5)
        assert err.value.code() is grpc.StatusCode.INVALID_ARGUMENT
        assert "lone_stall_max_remaining" in err.value.details() and "1.5" in err.value.details()
    finally:
        server.stop(0).wait()


def _points(curve: list[tuple[float, float]]) -> list[ProgressPoint]:
    return [
        ProgressPoint("exp", "alone", i, T0 + timedelta(seconds=i), p, metrics={"eval_loss": v})
        for i, (p, v) in enumerate(curve)
    ]


def test_a_restarted_engine_gives_the_same_decisions() -> None:
    points = _points(_saturating(0.5))
    live = _engine({"lone_stall_min_progress": "30"})
    whole = [live.decide(pt) for pt in points]
    stop = _stop(whole)
    assert stop == 7
    # Restart two reports before the stop: rebuild from the stored points, then feed the rest.
    cut = stop - 2
    restarted = _engine({"lone_stall_min_progress": "30"})
    assert restarted.rebuild(reversed(points[:cut])) == cut
    later = [restarted.decide(pt) for pt in points[cut:]]
    assert [(d.prune, d.reason) for d in later] == [(d.prune, d.reason) for d in whole[cut:]]
    assert later[2].prune


def test_build_policy_puts_lone_stall_inside_the_cost_guard() -> None:
    policy = build_policy(PruningConfig.from_settings("eval_loss", "minimize", {"policy": "lone_stall"}))
    assert policy.describe() == "cost_guard(lone_stall)"
