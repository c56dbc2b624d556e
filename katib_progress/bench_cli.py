"""``katib-progress bench pruning``: compare pruning policies by replaying a learning-curve bank."""

from __future__ import annotations

import argparse
import json
import logging
import math
import sys
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from katib_progress.core.errors import ConfigError, KatibProgressError

if TYPE_CHECKING:
    from katib_progress.bench import BenchSettings, PolicySummary
    from katib_progress.bench._bank import Bank

_log = logging.getLogger(__name__)


def register(subparsers: Any) -> None:
    bench = subparsers.add_parser("bench", help="benchmarks")
    sub = bench.add_subparsers(dest="bench_command", metavar="BENCH")
    p = sub.add_parser(
        "pruning",
        help="replay a learning-curve bank under several pruning policies",
        description=__doc__,
    )
    p.add_argument("--bank", required=True, help="curve bank file (.json or .json.gz, curve-bank schema)")
    p.add_argument("--seeds", type=int, default=3, help="replays per policy and mode (default 3)")
    p.add_argument(
        "--policy",
        action="append",
        dest="policies",
        metavar="NAME",
        help="none, katib-medianstop, optuna-median, optuna-hyperband, engine:POLICY, grpc:POLICY "
        "(repeatable; default: the baselines plus grpc:default)",
    )
    p.add_argument(
        "--mode", action="append", dest="modes", metavar="MODE", help="pruning or sampler (default: both)"
    )
    p.add_argument("--workers", type=int, default=4, help="parallelTrialCount (default 4)")
    p.add_argument("--budget", type=int, default=100, help="trials per replay in sampler mode (default 100)")
    p.add_argument("--limit", type=int, default=None, help="trials per replay in pruning mode (default all)")
    p.add_argument("--algorithm", default="tpe", help="suggestion algorithm in sampler mode (default tpe)")
    p.add_argument("--seed", type=int, default=0, help="first seed (default 0)")
    p.add_argument("--json", action="store_true", help="print the results as JSON instead of a table")
    p.set_defaults(func=_run)
    bench.set_defaults(func=lambda _args: (bench.print_help(), 2)[1])


def _fmt(value: float, digits: int = 3) -> str:
    if not math.isfinite(value):
        return "-" if math.isnan(value) else "inf"
    return f"{value:.{digits}g}"


def _table(bank: Bank, summaries: list[PolicySummary], settings: BenchSettings) -> Table:
    table = Table(
        title=(
            f"bank {bank.name}: {len(bank.trials)} trials, objective {bank.metric} ({bank.direction}, "
            f"{bank.strategy}), true best {bank.true_best():.6g}; {settings.workers} workers, "
            f"{settings.seeds} seeds"
        ),
        caption="mean ± std over seeds \\[min–max]; compute = accelerator-seconds used / running every trial "
        "to its end; regret = best found vs the bank's true best",
    )
    table.add_column("mode")
    table.add_column("policy")
    table.add_column("compute used", justify="right")
    table.add_column("regret", justify="right")
    table.add_column("best found", justify="right")
    table.add_column("pruned / trials", justify="right")
    previous = None
    for s in summaries:
        if previous is not None and s.mode != previous:
            table.add_section()
        previous = s.mode
        c, r, b, p, n = (
            s.spread(a) for a in ("compute_fraction", "regret", "best_found", "pruned", "trials")
        )
        table.add_row(
            s.mode,
            s.policy,
            f"{c.mean:.3f} ± {c.std:.3f} [{c.min:.3f}–{c.max:.3f}]",
            f"{_fmt(r.mean, 2)} ± {_fmt(r.std, 2)} [{_fmt(r.min, 2)}–{_fmt(r.max, 2)}]",
            f"{_fmt(b.mean, 4)}",
            f"{p.mean:.1f} ± {p.std:.1f} / {n.mean:.0f}",
        )
    return table


def _run(args: argparse.Namespace) -> int:
    # Imported here: the bench loads the whole suggestion service (Optuna, scipy), about a second
    # that `katib-progress --help` should not pay.
    from katib_progress.bench import MODES, BenchSettings, default_policies, load_bank, run_bench

    err = Console(stderr=True)
    if logging.getLogger().getEffectiveLevel() > logging.DEBUG:
        # Per-decision INFO lines of the service under test would drown the progress bar.
        for name in ("katib_progress.suggestion", "katib_progress.bench"):
            logging.getLogger(name).setLevel(logging.WARNING)
    try:
        unknown = [m for m in args.modes or () if m not in MODES]
        if unknown:
            raise ConfigError("--mode", f"unknown mode {unknown[0]!r}; allowed: {', '.join(MODES)}")
        bank = load_bank(args.bank)
        settings = BenchSettings(
            policies=tuple(args.policies or default_policies()),
            seeds=args.seeds,
            workers=args.workers,
            modes=tuple(dict.fromkeys(args.modes or MODES)),
            sampler_budget=args.budget,
            pruning_limit=args.limit,
            algorithm=args.algorithm,
            base_seed=args.seed,
        )
    except (KatibProgressError, ValueError) as exc:
        err.print(f"[red]error:[/red] {exc}")
        return 2
    total = len(settings.modes) * len(settings.policies) * settings.seeds
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with Progress(*columns, console=err, transient=True) as progress:
        task = progress.add_task("replaying", total=total)

        def advance(mode: str, policy: str, seed: int) -> None:
            progress.update(task, advance=1, description=f"{mode} {policy} seed {seed}")

        try:
            summaries = run_bench(bank, settings, on_replay=advance)
        except KatibProgressError as exc:
            err.print(f"[red]error:[/red] {exc}")
            return 1
    if args.json:
        document = {
            "bank": bank.name,
            "trials": len(bank.trials),
            "objective": {"metric": bank.metric, "direction": bank.direction, "strategy": bank.strategy},
            "true_best": bank.true_best(),
            "settings": {
                "seeds": settings.seeds,
                "workers": settings.workers,
                "modes": list(settings.modes),
                "sampler_budget": settings.sampler_budget,
                "pruning_limit": settings.pruning_limit,
                "algorithm": settings.algorithm,
                "base_seed": settings.base_seed,
            },
            "results": [s.as_dict() for s in summaries],
        }
        sys.stdout.write(json.dumps(document, indent=2) + "\n")
    else:
        out = Console()
        if not out.is_terminal:
            out = Console(width=150)
        out.print(_table(bank, summaries, settings))
    return 0
