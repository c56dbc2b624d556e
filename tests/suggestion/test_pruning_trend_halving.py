"""The trend-halving policy: rungs ranked by value and by trend-adjusted value."""

from __future__ import annotations

import pytest

from katib_progress.core.errors import ConfigError
from katib_progress.suggestion.pruning import PruningConfig, PruningEngine
from katib_progress.suggestion.pruning._build import build_policy
from katib_progress.suggestion.pruning._history import Direction
from katib_progress.suggestion.pruning.policies.trend_halving import TrendHalvingPolicy
from tests.suggestion.test_pruning_adaptive import Feeder

STEPS = tuple(range(2, 101, 2))


def _policy(direction: str = "minimize", strategy: str = "min", **kw: object) -> TrendHalvingPolicy:
    settings: dict[str, object] = {"rungs": (10.0, 20.0), "keep": (50.0, 50.0)} | kw
    return TrendHalvingPolicy(
        direction=Direction(direction),
        strategy=strategy,  # type: ignore[arg-type]
        grid_step=1.0,
        **settings,  # type: ignore[arg-type]
    )


def _engine(policy: TrendHalvingPolicy, direction: str = "minimize") -> PruningEngine:
    settings = {"policy": "nop", "metric_strategy": policy.strategy}
    config = PruningConfig.from_settings("eval_loss", direction, settings)
    return PruningEngine(config, policy=policy)


def _flat(level: float, upto: float = 100.0) -> list[tuple[float, float]]:
    """A loss already converged at ``level``: no trend at all."""
    return [(p, level) for p in STEPS if p <= upto]


def _falling(start: float, per_percent: float, upto: float = 100.0) -> list[tuple[float, float]]:
    """A loss falling in a straight line by ``per_percent`` per percent of progress."""
    return [(p, start - per_percent * p) for p in STEPS if p <= upto]


def _peers(feed: Feeder, levels: tuple[float, ...] = (0.50, 0.52, 0.54, 0.56)) -> None:
    """Converged peers that ran past the 20 % rung (still running, so none leads a newcomer out)."""
    for i, level in enumerate(levels):
        feed.run(f"peer{i}", _flat(level, upto=30), end=False)


def test_a_flat_laggard_is_pruned_at_the_first_rung_with_a_reason() -> None:
    feed = Feeder(_engine(_policy()))
    _peers(feed)
    decisions = feed.run("lag", _flat(0.9, upto=10), end=False)
    assert [d.prune for d in decisions] == [False] * 4 + [True]  # 2..8 %: no rung; 10 %: the rung
    assert "at the 10% rung" in decisions[-1].reason and "4 of 4 trials" in decisions[-1].reason
    assert decisions[-1].evidence["rung"] == 10.0


def test_a_slow_starter_that_still_improves_fast_is_spared_by_its_trend() -> None:
    # At 10 % its value (0.8) is worse than every peer's, but it falls by 0.02 per percent: its
    # trend-adjusted value 0.8 - 0.02 * 3 * 10 = 0.2 beats them all.
    policy = _policy()
    feed = Feeder(_engine(policy))
    _peers(feed)
    decisions = feed.run("slow", _falling(1.0, 0.02, upto=12), end=False)
    assert not any(d.prune for d in decisions)
    value, trend, _ = policy.scores(feed.engine.state.trials["slow"], 10) or (0.0, 0.0, 0.0)
    assert value == pytest.approx(0.8) and trend == pytest.approx(0.2)
    # Without the trend view (horizon 0) the same curve is pruned at the rung.
    feed0 = Feeder(_engine(_policy(horizon=0.0)))
    _peers(feed0)
    assert feed0.run("slow", _falling(1.0, 0.02, upto=12), end=False)[-1].prune


def test_each_rung_is_judged_once_at_the_first_report_past_it() -> None:
    # Ahead of every peer at 10 %, then it gets worse (strategy latest: the value itself counts).
    feed_latest = Feeder(_engine(_policy(strategy="latest")))
    _peers(feed_latest)
    curve = [(p, 0.1 if p <= 10 else 0.9) for p in STEPS if p <= 30]
    decisions = feed_latest.run("late", curve, end=False)
    first = next(p for (p, _), d in zip(curve, decisions, strict=True) if d.prune)
    assert first == 20  # not at 12..18 %, where no rung lies
    assert "at the 20% rung" in decisions[9].reason


@pytest.mark.parametrize("rejudge", [False, True])
def test_rejudge_stops_a_trial_that_passed_its_rung_among_weak_first_peers(rejudge: bool) -> None:
    # 'early' passes the 10 % rung as the best of the three weak trials there; four better trials reach
    # the rung after it. Judged again at its next report (12 %), it is behind more than half of the
    # seven; judged once (the default), it runs on.
    feed = Feeder(_engine(_policy(rejudge=rejudge)))
    _peers(feed, levels=(1.0, 1.1, 1.2))
    assert not feed.run("early", _flat(0.9, upto=10), end=False)[-1].prune
    for i, level in enumerate((0.50, 0.52, 0.54, 0.56)):
        feed.run(f"strong{i}", _flat(level, upto=30), end=False)
    decision = feed.point("early", 12, 0.9)
    assert decision.prune is rejudge
    if rejudge:
        assert "at the 10% rung (judged again)" in decision.reason and "4 and 4 of 7" in decision.reason
    # It only ever looks at its highest rung passed: once past 20 % with no better peer there, the
    # 10 % rung is not judged again.
    feed2 = Feeder(_engine(_policy(rejudge=rejudge)))
    _peers(feed2, levels=(1.0, 1.1, 1.2))
    feed2.run("early", _flat(0.9, upto=20), end=False)
    for i, level in enumerate((0.50, 0.52, 0.54, 0.56)):
        feed2.run(f"strong{i}", _flat(level, upto=12), end=False)
    assert not feed2.point("early", 22, 0.9).prune


def _gated(**kw: object) -> TrendHalvingPolicy:
    # The 5 % rung is gated: it judges once 4 trials reached 20 % and the best of them there passes it.
    settings: dict[str, object] = {
        "rungs": (5.0, 20.0),
        "keep": (50.0, 50.0),
        "gate_below": 10.0,
        "gate_ref": 20.0,
        "gate_min": 4,
        "gate_top": 1,
    }
    return _policy(**(settings | kw))


def test_a_gated_rung_waits_until_enough_trials_reached_the_reference() -> None:
    # No peer has reached 20 % yet: the gated 5 % rung does not judge; ungated, it prunes.
    for gate_below, pruned in ((10.0, False), (0.0, True)):
        feed = Feeder(_engine(_gated(gate_below=gate_below)))
        for i, level in enumerate((0.50, 0.52, 0.54, 0.56)):
            feed.run(f"peer{i}", _flat(level, upto=12), end=False)
        assert feed.run("lag", _flat(0.9, upto=6), end=False)[-1].prune is pruned


def test_a_gated_rung_opens_when_the_best_at_the_reference_would_have_passed_it() -> None:
    policy = _gated()
    feed = Feeder(_engine(policy))
    _peers(feed)  # four converged peers up to 30 %: the best at 20 % (0.50) was best at 5 % too
    decision = feed.run("lag", _flat(0.9, upto=6), end=False)[-1]
    assert decision.prune and "at the 5% rung" in decision.reason


def test_a_gated_rung_stays_shut_when_the_best_at_the_reference_started_slowly() -> None:
    # 'slow' is behind every peer at 5 % (2.0, flat) and the best of all at 20 % (0.1): the 5 % rung
    # would have pruned the experiment's best trial, so it does not judge the laggard.
    feed = Feeder(_engine(_gated()))
    feed.run("slow", [(p, 2.0 if p <= 6 else 0.1) for p in STEPS if p <= 30], end=False)
    _peers(feed)
    assert not feed.run("lag", _flat(0.9, upto=6), end=False)[-1].prune


def test_too_few_peers_at_the_rung_are_no_judgement() -> None:
    feed = Feeder(_engine(_policy(min_peers=3)))
    _peers(feed, levels=(0.5, 0.52))
    assert not any(d.prune for d in feed.run("lag", _flat(0.9, upto=22), end=False))


def test_the_leader_is_spared() -> None:
    # The better peers were pruned (none of them can be the result) and the only completed trial is
    # worse: the laggard holds the best value that can still be found.
    feed = Feeder(_engine(_policy()))
    feed.run("done", _flat(1.5))  # first, alone: never judged
    _peers(feed)
    for i in range(4):
        feed.engine.finish(f"peer{i}", "pruned")
    decisions = feed.run("lag", _flat(0.9, upto=10), end=False)
    assert not decisions[-1].prune and "leading; spared" in decisions[-1].reason


def test_maximize_mirrors_the_ranking() -> None:
    feed = Feeder(_engine(_policy("maximize", "max"), "maximize"))
    _peers(feed, levels=(0.90, 0.91, 0.92, 0.93))
    assert feed.run("low", _flat(0.3, upto=10), end=False)[-1].prune
    assert not feed.run("high", _flat(0.95, upto=10), end=False)[-1].prune


def test_a_worsening_slope_adds_nothing() -> None:
    policy = _policy(strategy="latest")
    feed = Feeder(_engine(policy))
    feed.run("up", [(p, 0.5 + 0.01 * p) for p in STEPS if p <= 10], end=False)
    assert policy.scores(feed.engine.state.trials["up"], 10)[:2] == (pytest.approx(0.6), pytest.approx(0.6))


@pytest.mark.parametrize(
    ("settings", "field"),
    [
        ({"trend_rungs": "20,10", "trend_keep": "50,50"}, "trend_rungs"),
        ({"trend_rungs": "10,20", "trend_keep": "50"}, "trend_keep"),
        ({"trend_rungs": "10,abc"}, "trend_rungs"),
        ({"trend_keep": "50,33,25,100"}, "trend_keep"),
        ({"trend_horizon": "-1"}, "trend_horizon"),
        ({"trend_window": "0"}, "trend_window"),
        ({"trend_gate_below": "10", "trend_gate_ref": "10"}, "trend_gate_ref"),
        ({"trend_gate_top": "7", "trend_gate_min": "6"}, "trend_gate_top"),
        ({"trend_gate_min": "0"}, "trend_gate_min"),
    ],
)
def test_invalid_settings_name_the_setting(settings: dict[str, str], field: str) -> None:
    with pytest.raises(ConfigError) as err:
        PruningConfig.from_settings("eval_loss", "minimize", {"policy": "trend_halving", **settings})
    assert field in str(err.value)


def test_settings_reach_the_policy() -> None:
    config = PruningConfig.from_settings(
        "eval_loss",
        "minimize",
        {
            "policy": "trend_halving",
            "trend_rungs": "5,15",
            "trend_keep": "40,20",
            "trend_horizon": "1.5",
            "trend_rejudge": "true",
        },
    )
    tree = build_policy(config)
    policy = tree.inner  # type: ignore[attr-defined]
    assert isinstance(policy, TrendHalvingPolicy)
    assert (policy.rungs, policy.keep, policy.horizon) == ((5.0, 15.0), (40.0, 20.0), 1.5)
    assert policy.rejudge is True
    with pytest.raises(ValueError, match="one keep percent per rung"):
        _policy(rungs=(10.0,), keep=(50.0, 50.0))


# -- issue 24: rank gate, noise margin, recent values under latest ----------------------------------


def _crossing(early: float, final: float) -> list[tuple[float, float]]:
    """A curve at ``early`` until 30 %, then a straight line to ``final`` at 100 %."""
    return [(p, early if p <= 30 else early + (final - early) * (p - 30) / 70) for p in STEPS]


def test_rank_gate_keeps_a_rung_closed_until_finished_trials_show_early_ranks_predict() -> None:
    def laggard_pruned(finished: list[tuple[float, float]]) -> bool:
        feed = Feeder(_engine(_policy(rho=0.5)))
        for i, (early, final) in enumerate(finished):
            feed.run(f"done{i}", _crossing(early, final))
        _peers(feed)
        return any(d.prune for d in feed.run("lag", _flat(0.9, upto=10), end=False))

    # fewer than rho_min_finished (4) completed trials: closed
    assert not laggard_pruned([(0.5, 0.3), (0.6, 0.4), (0.7, 0.5)])
    # early order reversed at the end (early leaders lose late): closed
    assert not laggard_pruned([(0.5, 0.6), (0.55, 0.5), (0.6, 0.4), (0.65, 0.3), (0.7, 0.2), (0.75, 0.1)])
    # early order kept: open, the laggard is pruned as without the gate
    assert laggard_pruned([(0.5, 0.1), (0.55, 0.2), (0.6, 0.3), (0.65, 0.4), (0.7, 0.5), (0.75, 0.6)])


def test_rank_gate_reports_why() -> None:
    policy = _policy(rho=0.9)
    feed = Feeder(_engine(policy))
    for i, (early, final) in enumerate([(0.5, 0.6), (0.55, 0.5), (0.6, 0.4), (0.65, 0.3)]):
        feed.run(f"done{i}", _crossing(early, final))
    is_open, why = policy.rank_gate(10, 50.0, feed.engine.state)
    assert not is_open and why.startswith("Spearman -") and "< 0.9 over 4 trials" in why


def test_noise_margin_spares_a_trial_within_its_own_scatter() -> None:
    # under latest: 0.75 at 10 % after swings between 0.45 and 0.75 (residual sd about 0.11)
    noisy = [(p, 0.6 + (0.15 if (p // 2) % 2 else -0.15)) for p in STEPS if p <= 10]
    for noise, pruned in ((0.0, True), (2.0, False)):
        feed = Feeder(_engine(_policy(strategy="latest", noise=noise, horizon=0.0)))
        _peers(feed)
        assert any(d.prune for d in feed.run("noisy", noisy, end=False)) is pruned


def test_smooth_takes_the_recent_line_under_latest_only() -> None:
    # last value 0.45 after a run of ~0.7s: the fitted line at 10 % is higher than the last value
    curve = [(2.0, 0.7), (4.0, 0.72), (6.0, 0.7), (8.0, 0.71), (10.0, 0.45)]
    for strategy, smooth, expect_last in (
        ("latest", False, True),
        ("latest", True, False),
        ("min", True, True),
    ):
        policy = _policy(strategy=strategy, smooth=smooth)
        feed = Feeder(_engine(policy))
        feed.run("t", curve, end=False)
        value = (policy.scores(feed.engine.state.trials["t"], 10) or (0.0,))[0]
        assert (value == pytest.approx(0.45)) is expect_last


def test_new_trend_settings_validate() -> None:
    for bad in ({"trend_rho": "1.5"}, {"trend_noise": "-1"}, {"trend_rho_min_finished": "2"}):
        with pytest.raises(ConfigError):
            PruningConfig.from_settings("eval_loss", "minimize", bad)
    with pytest.raises(ValueError, match="rho"):
        _policy(rho=2.0)


# -- issue 24, item 5: data-driven keep (trend_adapt_*) ----------------------------------------------


def _adapt_feed(done: list[list[tuple[float, float]]], **kw: object) -> tuple[TrendHalvingPolicy, Feeder]:
    policy = _policy(adapt_top=2, adapt_margin=10.0, adapt_min=10.0, **kw)
    feed = Feeder(_engine(policy))
    for i, curve in enumerate(done):
        feed.run(f"done{i}", curve)
    return policy, feed


def test_adapted_keep_follows_where_the_best_completed_trials_ranked() -> None:
    # five completed trials whose early order is their final order: the best two sat at shares 0 %
    # and 20 % of their peers at 10 %, so the rung keeps 20 + 10 = 30 % instead of 50 %
    _, feed = _adapt_feed([_flat(v) for v in (0.3, 0.4, 0.5, 0.6, 0.7)])
    decisions = feed.run("mid", _flat(0.45, upto=10), end=False)  # 2 of 5 peers better: 40 %
    assert decisions[-1].prune and "more than the 30% kept" in decisions[-1].reason
    # without the data-driven keep the same trial passes the 50 % rung
    feed = Feeder(_engine(_policy()))
    for i, v in enumerate((0.3, 0.4, 0.5, 0.6, 0.7)):
        feed.run(f"done{i}", _flat(v))
    assert not any(d.prune for d in feed.run("mid", _flat(0.45, upto=10), end=False))


def test_adapted_keep_stays_at_the_rung_keep_when_the_best_started_behind() -> None:
    # early ranks reversed at the end (under latest): the two best finals sat at 100 % and 75 % of
    # their peers at 10 %
    crossing = [_crossing(e, f) for e, f in ((0.3, 0.7), (0.4, 0.6), (0.5, 0.5), (0.6, 0.4), (0.7, 0.3))]
    policy, feed = _adapt_feed(crossing, strategy="latest")
    assert policy.adapted_keep(10, 50.0, feed.engine.state, 6) == 50.0
    assert not any(d.prune for d in feed.run("mid", _flat(0.45, upto=10), end=False))


def test_adapted_keep_waits_for_enough_completed_trials_and_has_a_floor() -> None:
    policy, feed = _adapt_feed([_flat(0.3)])  # one completed trial, two needed
    assert policy.adapted_keep(10, 50.0, feed.engine.state, 2) == 50.0
    # perfect early order: the best two sat at 0 % and 25 %; with no margin the floor (30 %) holds
    policy = _policy(adapt_top=2, adapt_margin=0.0, adapt_min=30.0)
    feed = Feeder(_engine(policy))
    for i, v in enumerate((0.3, 0.4, 0.5, 0.6, 0.7)):
        feed.run(f"done{i}", _flat(v))
    assert policy.adapted_keep(10, 50.0, feed.engine.state, 5) == 30.0


def test_adapted_keep_counts_ties_as_ahead() -> None:
    # the best two completed trials sat tied with a third at 10 %: 2 of their 4 peers there were
    # better or tied (50 %), so the rung keeps its 50 %, not the floor
    policy, feed = _adapt_feed([_flat(v) for v in (0.3, 0.3, 0.3, 0.6, 0.7)])
    assert policy.adapted_keep(10, 50.0, feed.engine.state, 5) == 50.0
    # the same trials untied: 0 % and 25 % ahead, the rung keeps 25 + 10 = 35 %
    policy, feed = _adapt_feed([_flat(v) for v in (0.3, 0.31, 0.32, 0.6, 0.7)])
    assert policy.adapted_keep(10, 50.0, feed.engine.state, 5) == 35.0


def test_adapt_settings_validate_and_reach_the_policy() -> None:
    for bad in ({"trend_adapt_top": "-1"}, {"trend_adapt_margin": "100"}, {"trend_adapt_min": "0"}):
        with pytest.raises(ConfigError) as err:
            PruningConfig.from_settings("eval_loss", "minimize", {"policy": "trend_halving", **bad})
        assert next(iter(bad)) in str(err.value)
    settings = {"trend_adapt_top": "3", "trend_adapt_margin": "5", "trend_adapt_min": "20"}
    config = PruningConfig.from_settings("eval_loss", "minimize", {"policy": "trend_halving", **settings})
    policy = build_policy(config).inner  # type: ignore[attr-defined]
    assert (policy.adapt_top, policy.adapt_margin, policy.adapt_min) == (3, 5.0, 20.0)
    with pytest.raises(ValueError, match="adapt_min"):
        _policy(adapt_min=0.0)
