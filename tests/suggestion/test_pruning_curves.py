"""Synthetic but realistic learning curves for the pruning tests, and tests of curve resampling."""

from __future__ import annotations

import math
import random
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime, timedelta

from katib_progress.core.types import ProgressPoint
from katib_progress.suggestion.pruning._history import TrialHistory

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def loss_curve(
    floor: float,
    *,
    amp: float = 2.0,
    alpha: float = 0.6,
    noise: float = 0.01,
    seed: int = 0,
    progress: Sequence[float] = tuple(range(2, 101, 2)),
) -> list[tuple[float, float]]:
    """A decreasing power-law loss ``floor + amp * (p/100 + 0.05)^-alpha / 10`` with Gaussian noise."""
    rng = random.Random(seed)
    return [(p, floor + amp * (p / 100 + 0.05) ** -alpha / 10 + rng.gauss(0, noise)) for p in progress]


def diverging_curve(at: float = 30.0, seed: int = 0) -> list[tuple[float, float]]:
    """Learns normally, then the loss blows up past ``at`` percent and turns NaN."""
    out: list[tuple[float, float]] = []
    for p, v in loss_curve(0.4, seed=seed):
        if p < at:
            out.append((p, v))
        elif p < at + 6:
            out.append((p, v * 10 ** ((p - at) / 2)))
        else:
            out.append((p, math.nan))
    return out


def stalling_curve(
    at: float = 20.0, level: float = 1.2, noise: float = 0.01, seed: int = 0
) -> list[tuple[float, float]]:
    """Improves until ``at`` percent, then stays flat (plus noise) at ``level``."""
    rng = random.Random(seed)
    out = []
    for p in range(2, 101, 2):
        base = level + (at - p) * 0.05 if p < at else level
        out.append((float(p), base + rng.gauss(0, noise)))
    return out


def slow_starter_curve(seed: int = 0) -> list[tuple[float, float]]:
    """Poor for the first half (warm-up), then drops below everyone: ends at about 0.25."""
    rng = random.Random(seed)
    return [
        (float(p), 0.25 + 1.5 / (1 + math.exp((p - 55) / 6)) + rng.gauss(0, 0.005)) for p in range(2, 101, 2)
    ]


def points(
    trial: str,
    curve: Sequence[tuple[float, float]],
    *,
    experiment: str = "exp",
    metric: str = "eval_loss",
    seconds_per_percent: float = 10.0,
    start: datetime = T0,
) -> Iterator[ProgressPoint]:
    for seq, (p, v) in enumerate(curve):
        elapsed = p * seconds_per_percent
        yield ProgressPoint(
            experiment=experiment,
            trial=trial,
            seq=seq,
            timestamp=start + timedelta(seconds=elapsed),
            progress=p,
            elapsed_s=elapsed,
            eta_s=(100 - p) * seconds_per_percent,
            metrics={metric: v, "loss": v},
        )


def test_grid_interpolates_between_sparse_reports() -> None:
    trial = TrialHistory("t", grid_step=1.0)
    assert trial.add(10.0, 1.0) == [(10, 1.0)]
    filled = trial.add(20.0, 0.5)
    assert [s for s, _ in filled] == list(range(11, 21))
    assert math.isclose(trial.grid[15], 0.75)
    assert math.isclose(trial.value_at(12.5) or 0, 0.875)


def test_repeated_and_backwards_progress_do_not_rewrite_the_grid() -> None:
    trial = TrialHistory("t", grid_step=1.0)
    trial.add(10.0, 1.0)
    trial.add(20.0, 0.5)
    before = dict(trial.grid)
    assert trial.add(20.0, 0.4) == []  # same progress: raw value replaced, grid kept
    assert trial.values[-1] == 0.4
    assert trial.add(15.0, 9.0) == []  # a restarted job re-reporting old progress is ignored
    assert trial.grid == before
    assert trial.curve() == [(10.0, 1.0), (20.0, 0.4)]


def test_peers_on_different_progress_grids_share_steps() -> None:
    coarse, fine = TrialHistory("a", 5.0), TrialHistory("b", 5.0)
    for p in (10.0, 40.0):
        coarse.add(p, 1.0 - p / 100)
    for p in range(7, 41, 3):
        fine.add(float(p), 1.0 - p / 100)
    shared = set(coarse.grid) & set(fine.grid)
    assert {2, 4, 6, 8} <= shared
    for step in shared:
        assert math.isclose(coarse.grid[step], fine.grid[step], abs_tol=1e-9)


def test_remaining_fraction_prefers_eta() -> None:
    trial = TrialHistory("t", 1.0, last_progress=50.0)
    assert trial.remaining_fraction() == 0.5
    trial.elapsed_s, trial.eta_s = 100.0, 300.0
    assert trial.remaining_fraction() == 0.75
