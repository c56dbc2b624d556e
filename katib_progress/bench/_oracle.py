"""A lower bound on the compute any pruning rule needs on a bank: an oracle that knows every final.

For the same draws as the bench's pruning mode (``RandomOrder(bank, seed, trials)``), the oracle runs
the drawn best trial (best final among the drawn trials that did not fail) to its end and stops every
other trial at its first report at or past ``at`` percent of progress (``at`` = 0: its first report).
Its regret is 0 by construction; its compute (accelerator-seconds used / running every drawn trial to
its end) is what any rule that needs ``at`` percent of a run to judge it must spend at least.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable

from katib_progress.bench._bank import Bank, BankTrial
from katib_progress.bench._sources import RandomOrder


def _drawn_best(bank: Bank, trials: list[BankTrial]) -> int | None:
    best: tuple[float, int] | None = None
    for i, t in enumerate(trials):
        final = bank.final(t)
        if final is None or t.status == "failed":
            continue
        if best is None or bank.better(final, best[0]):
            best = (final, i)
    return None if best is None else best[1]


def oracle_compute(bank: Bank, seed: int, trials: int | None, at: float) -> float:
    """The oracle's compute fraction on the draw of ``seed``."""
    n = trials if trials is not None else len(bank.trials)
    drawn = [t for _, t in RandomOrder(bank, seed, trials).next_trials(n, 0.0)]
    best = _drawn_best(bank, drawn)
    used = full = 0.0
    for i, t in enumerate(drawn):
        full += t.cost
        if not t.points:
            continue
        if i == best:
            used += t.cost
            continue
        k = next((j for j, p in enumerate(t.points) if p.progress >= at), len(t.points) - 1)
        used += t.points[k].elapsed_s * t.gpus
    return used / full if full > 0 else 1.0


def oracle_bound(bank: Bank, seeds: Iterable[int], trials: int | None, at: float) -> float:
    """Mean oracle compute over ``seeds``."""
    return statistics.fmean(oracle_compute(bank, s, trials, at) for s in seeds)


def first_report_share(bank: Bank) -> float:
    """Median share of a run's compute spent by its first report (no rule that waits for one report
    can save it)."""
    return statistics.median(
        t.points[0].elapsed_s * t.gpus / t.cost for t in bank.trials if t.points and t.cost > 0
    )
