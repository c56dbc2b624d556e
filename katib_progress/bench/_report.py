"""The bench's output: one rich table per bank (and its lone-trial stall table), or one JSON document."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from rich.table import Table

from katib_progress.bench._run import BankResult, BenchSettings
from katib_progress.bench._stall import GOAL_FALSE, GOAL_IN_TIME


def _fmt(value: float, digits: int = 3) -> str:
    if not math.isfinite(value):
        return "-" if math.isnan(value) else "inf"
    return f"{value:.{digits}g}"


def _draws(settings: BenchSettings) -> str:
    trials = "every" if settings.trials is None else str(settings.trials)
    return f"{settings.seeds} seeds x {trials}-trial draws, {settings.workers} in parallel"


def replay_table(result: BankResult, settings: BenchSettings) -> Table:
    bank = result.bank
    table = Table(
        title=(
            f"bank {bank.name}: {len(bank.trials)} trials, {bank.metric} ({bank.direction}, "
            f"strategy {bank.strategy}), best final {bank.best_final:.6g}, median {bank.median:.6g}; "
            f"{_draws(settings)}"
        ),
        caption=(
            "mean ± std over seeds; compute = accelerator-seconds used / running every drawn trial to its "
            "end; regret = (best final among trials that ran to the end - best final among the drawn "
            "trials) / (bank median - bank best), max in brackets; hit = the drawn best ran to its end; "
            f"x ref = compute / the cheapest stock policy with mean regret <= {settings.regret_target:g}"
        ),
    )
    for name in ("mode", "policy", "compute used", "regret [max]", "hit rate", "pruned / trials", "x ref"):
        table.add_column(name, justify="left" if name in ("mode", "policy") else "right")
    previous = None
    for s in result.summaries:
        if previous is not None and s.mode != previous:
            table.add_section()
        previous = s.mode
        c, r, h, p, n = (s.spread(a) for a in ("compute_fraction", "regret", "hit", "pruned", "trials"))
        ref = result.reference(s.mode)
        ratio = result.ratio(s)
        marker = " (ref)" if ref is s else ""
        table.add_row(
            s.mode,
            s.policy + marker,
            f"{c.mean:.3f} ± {c.std:.3f}",
            f"{_fmt(r.mean, 2)} ± {_fmt(r.std, 2)} [{_fmt(r.max, 2)}]",
            f"{h.mean:.2f}",
            f"{p.mean:.1f} / {n.mean:.0f}",
            "-" if ratio is None else f"{ratio:.2f}",
        )
    return table


def stall_table(result: BankResult) -> Table:
    bank = result.bank
    table = Table(
        title=f"bank {bank.name}: every trial alone (no peers), lone-trial stall goal",
        caption=(
            "stalled = 98 % of the trial's total improvement done with >= 30 % of its run left; in time = "
            "stopped within 5 % of the run after that; false = stopped while > 5 % of its total "
            f"improvement was still ahead; goal: in time >= {GOAL_IN_TIME:.0%} of stalled, "
            f"false <= {GOAL_FALSE:.0%} of all"
        ),
    )
    for name in (
        "policy",
        "trials",
        "stalled",
        "in time",
        "stopped (stalled)",
        "false stops",
        "compute",
        "goal",
    ):
        table.add_column(name, justify="left" if name == "policy" else "right")
    for s in result.stall:
        table.add_row(
            s.policy,
            str(s.judged),
            str(s.stalled),
            f"{s.stalled_in_time} ({s.in_time_rate:.0%})",
            str(s.stalled_stopped),
            f"{s.false_stops} ({s.false_rate:.1%})",
            f"{s.compute_fraction:.3f}",
            "met" if s.goal_met else "not met",
        )
    return table


def json_document(results: Sequence[BankResult], settings: BenchSettings) -> dict[str, Any]:
    return {
        "settings": {
            "policies": list(settings.policies),
            "seeds": settings.seeds,
            "base_seed": settings.base_seed,
            "workers": settings.workers,
            "trials": settings.trials,
            "modes": list(settings.modes),
            "sampler_budget": settings.sampler_budget,
            "algorithm": settings.algorithm,
            "regret_target": settings.regret_target,
        },
        "banks": [r.as_dict() for r in results],
    }
