"""The adaptive warm-up policy: the warm-up it learns from completed trials and the decisions it gives."""

from __future__ import annotations

import math
from collections.abc import Sequence
from datetime import timedelta

import pytest

from katib_progress.core.errors import ConfigError
from katib_progress.core.types import Decision, ProgressPoint
from katib_progress.suggestion.pruning import PruningConfig, PruningEngine
from katib_progress.suggestion.pruning._history import Direction
from katib_progress.suggestion.pruning.policies.adaptive import (
    AdaptiveWarmupPolicy,
    spearman,
    spearman_lower_bound,
)
from tests.suggestion.test_pruning_curves import T0

STEPS = tuple(range(5, 101, 5))


def _policy(direction: str = "minimize", strategy: str = "min", **kw: float) -> AdaptiveWarmupPolicy:
    settings: dict[str, float] = {"confidence": 0.0, "fallback_progress": 50.0} | kw
    return AdaptiveWarmupPolicy(
        direction=Direction(direction),
        strategy=strategy,  # type: ignore[arg-type]
        grid_step=1.0,
        **settings,  # type: ignore[arg-type]
    )


def _engine(policy: AdaptiveWarmupPolicy, direction: str = "minimize") -> PruningEngine:
    settings = {"policy": "nop", "metric_strategy": policy.strategy}
    config = PruningConfig.from_settings("eval_loss", direction, settings)
    return PruningEngine(config, policy=policy)


class Feeder:
    """Feeds whole or partial curves into an engine, one progress point per call, in a shared clock."""

    def __init__(self, engine: PruningEngine) -> None:
        self.engine = engine
        self.seq: dict[str, int] = {}
        self.clock = 0

    def point(self, trial: str, progress: float, value: float) -> Decision:
        seq = self.seq.get(trial, 0)
        self.seq[trial] = seq + 1
        self.clock += 1
        return self.engine.decide(
            ProgressPoint(
                "exp",
                trial,
                seq,
                T0 + timedelta(seconds=self.clock),
                progress,
                metrics={"eval_loss": value},
            )
        )

    def run(self, trial: str, curve: Sequence[tuple[float, float]], *, end: bool = True) -> list[Decision]:
        out = [self.point(trial, p, v) for p, v in curve]
        if end:
            self.engine.finish(trial, "complete")
        return out


def _parallel(final: float, start: float = 2.0) -> list[tuple[float, float]]:
    """A loss falling from ``start`` to ``final``: its rank among such curves never changes."""
    return [(p, final + (start - final) * (1 - p / 100) ** 2) for p in STEPS]


def _crossing(final: float, i: int) -> list[tuple[float, float]]:
    """Values ranked by ``i`` until 90 %, then ``final``, below all of them: ranks cross at 95 %."""
    return [(p, 1.0 + 0.1 * i - p / 1000) if p < 95 else (p, final) for p in STEPS]


def test_spearman_and_its_lower_bound() -> None:
    assert spearman([1, 2, 3, 4], [10, 20, 30, 40]) == pytest.approx(1.0)
    assert spearman([1, 2, 3, 4], [4, 3, 2, 1]) == pytest.approx(-1.0)
    assert spearman([1, 1, 2, 3], [1, 2, 3, 4]) == pytest.approx(0.9486833, abs=1e-6)  # average ranks
    assert math.isnan(spearman([1, 1, 1], [1, 2, 3]))
    # Perfect agreement of 4 trials is weak evidence; of 20 trials strong.
    assert spearman_lower_bound(1.0, 4, 1.0) < 0.8 < spearman_lower_bound(1.0, 20, 1.0)
    assert spearman_lower_bound(0.9, 10, 0.0) == 0.9
    assert math.isnan(spearman_lower_bound(0.9, 3, 1.0))


def test_predictive_completed_trials_move_the_warmup_early_and_a_laggard_is_pruned_there() -> None:
    policy = _policy()
    feed = Feeder(_engine(policy))
    for i in reversed(range(5)):  # worst first: each new trial leads, none is pruned
        feed.run(f"done{i}", _parallel(0.2 + 0.1 * i))
    warm, why, n = policy.warmup(feed.engine.state)
    assert (warm, n) == (5.0, 5), why
    # A laggard: worse than every peer from the start; pruned at its first point past the warm-up.
    decisions = feed.run("lag", _parallel(0.9, start=3.0)[:4], end=False)
    assert [d.prune for d in decisions] == [True, True, True, True][: len(decisions)]
    assert decisions[0].prune and "warm-up 5%" in decisions[0].reason


def test_crossing_curves_learn_a_late_warmup_and_spare_the_same_laggard_until_then() -> None:
    policy = _policy(fallback_progress=99.0)  # no completed trial is pruned while they are fed
    feed = Feeder(_engine(policy))
    for i in reversed(range(5)):
        feed.run(f"done{i}", _crossing(0.2 + 0.1 * i, 4 - i))
    warm, why, _ = policy.warmup(feed.engine.state)
    assert warm == 95.0, why
    lag = _parallel(0.9, start=3.0)
    early = feed.run("lag", lag[:18], end=False)  # up to 90 %
    assert not any(d.prune for d in early)
    assert all("before the warm-up 95%" in d.reason for d in early)
    assert feed.run("lag", lag[18:19], end=False)[0].prune  # 95 %


def test_too_few_completed_trials_fall_back_and_the_warmup_is_relearned_when_a_trial_ends() -> None:
    policy = _policy(min_finished=4)
    feed = Feeder(_engine(policy))
    for i in reversed(range(1, 4)):
        feed.run(f"done{i}", _parallel(0.2 + 0.1 * i))
    assert policy.warmup(feed.engine.state)[:1] == (50.0,)
    assert "3 of 4 completed" in policy.warmup(feed.engine.state)[1]
    feed.run("done0", _parallel(0.2))
    assert policy.warmup(feed.engine.state)[0] == 5.0


def test_a_pruned_trial_counts_as_a_peer_but_not_for_the_correlation() -> None:
    policy = _policy()
    feed = Feeder(_engine(policy))
    for i in reversed(range(4)):
        feed.run(f"done{i}", _parallel(0.2 + 0.1 * i))
    feed.engine.finish("gone", "pruned")
    assert policy.warmup(feed.engine.state)[2] == 4


@pytest.mark.parametrize(("peers_latest", "pruned"), [(1.0, False), (0.3, True)])
def test_the_leader_is_never_pruned(peers_latest: float, pruned: bool) -> None:
    # Strategy latest: the peers were far better at 10 % but have since overfitted to
    # ``peers_latest``. A trial worse than them at 10 % is pruned unless its latest value leads.
    feed = Feeder(_engine(_policy(strategy="latest", fallback_progress=10.0)))
    for i in range(3):
        feed.run(f"peer{i}", [(10.0, 0.25), (50.0, peers_latest + 0.01 * i)], end=False)
    last = feed.run("mine", [(5.0, 0.6), (10.0, 0.5)], end=False)[-1]
    assert last.prune is pruned
    if not pruned:
        assert "leads" in last.reason


def test_strategy_latest_judges_the_latest_value_and_maximize_flips_the_bar() -> None:
    # Overfitting curves: the best-so-far is good but the latest got worse; with strategy latest the
    # rule compares latest values, so the overfitter is pruned; with strategy min it would be kept.
    def overfit() -> list[tuple[float, float]]:
        return [(5.0, 0.40), (10.0, 0.30), (15.0, 0.50), (20.0, 0.60)]  # best 0.30 at 10 %

    for strategy, pruned in (("latest", True), ("min", False)):
        policy = _policy(strategy=strategy, min_finished=4, fallback_progress=10.0)
        feed = Feeder(_engine(policy))
        for i in range(4):
            feed.run(f"run{i}", [(p, 0.45 - 0.0001 * i) for p in STEPS[:4]], end=False)
        assert feed.run("over", overfit(), end=False)[-1].prune is pruned, strategy
    # maximize: a trial with lower accuracy than the median is the one pruned.
    policy = _policy(direction="maximize", strategy="max", min_finished=4, fallback_progress=10.0)
    feed = Feeder(_engine(policy, "maximize"))
    for i in range(4):
        feed.run(f"run{i}", [(10.0, 0.8 + 0.01 * i), (15.0, 0.85 + 0.01 * i)], end=False)
    assert feed.run("low", [(10.0, 0.3), (15.0, 0.4)], end=False)[-1].prune
    assert not feed.run("high", [(10.0, 0.95), (15.0, 0.97)], end=False)[-1].prune


def test_settings_are_validated_by_name() -> None:
    ok = PruningConfig.from_settings(
        "loss", "minimize", {"policy": "divergence,adaptive", "adaptive_rho": "0.7"}
    )
    assert ok.adaptive_rho == 0.7
    for key, value in (
        ("adaptive_rho", "0"),
        ("adaptive_min_finished", "2"),
        ("adaptive_percentile", "100"),
        ("adaptive_step", "0"),
        ("adaptive_fallback_progress", "100"),
        ("adaptive_confidence", "-1"),
    ):
        with pytest.raises(ConfigError, match=key):
            PruningConfig.from_settings("loss", "minimize", {"policy": "adaptive", key: value})
