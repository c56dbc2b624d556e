"""``katib-progress bench pruning``: compare pruning policies by replaying learning-curve banks."""

from __future__ import annotations

import argparse
import json
import logging
import sys
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from katib_progress import clikit
from katib_progress.core.errors import ConfigError, KatibProgressError

if TYPE_CHECKING:
    from katib_progress.bench import BankResult, BenchSettings

#: Mean normalized regret a reference stock policy must reach (the bench's REGRET_TARGET).
REGRET_TARGET = 0.01

_log = logging.getLogger(__name__)


def register(subparsers: Any) -> None:
    bench = subparsers.add_parser("bench", help="benchmarks")
    sub = bench.add_subparsers(dest="bench_command", metavar="BENCH")
    p = sub.add_parser(
        "pruning",
        help="replay learning-curve banks under several pruning policies",
        description=__doc__,
    )
    p.add_argument(
        "--bank",
        action="append",
        dest="banks",
        required=True,
        metavar="FILE",
        help="curve bank file (.json or .json.gz, curve-bank schema); repeatable",
    )
    p.add_argument("--seeds", type=int, default=30, help="replays per policy and mode (default 30)")
    p.add_argument(
        "--policy",
        action="append",
        dest="policies",
        metavar="NAME",
        help="none, katib-medianstop, optuna-median, optuna-sh, optuna-hyperband, engine:POLICY|k=v|..., "
        "grpc:POLICY|k=v|... (repeatable; default: the stock policies plus grpc:default)",
    )
    p.add_argument(
        "--mode",
        action="append",
        dest="modes",
        metavar="MODE",
        help="pruning, sampler or stall; repeatable (default: pruning and stall)",
    )
    p.add_argument("--workers", type=int, default=4, help="parallelTrialCount (default 4)")
    p.add_argument(
        "--trials", type=int, default=40, help="trials drawn per replay in pruning mode (default 40)"
    )
    p.add_argument("--budget", type=int, default=100, help="trials per replay in sampler mode (default 100)")
    p.add_argument("--algorithm", default="tpe", help="suggestion algorithm in sampler mode (default tpe)")
    p.add_argument("--seed", type=int, default=0, help="first seed (default 0)")
    p.add_argument(
        "--regret-target",
        type=float,
        default=REGRET_TARGET,
        help=f"mean regret a reference stock policy must reach (default {REGRET_TARGET:g})",
    )
    p.add_argument(
        "-o",
        "--output",
        choices=("table", "json"),
        default="table",
        help="output format: table (default) or json",
    )
    p.add_argument("--json", dest="output", action="store_const", const="json", help="the same as -o json")
    p.add_argument(
        "--cv",
        action="store_true",
        help="leave-one-family-out cross-validation of the default: replays the stock policies and the "
        "candidate defaults in pruning mode and prints, per bank, the candidate chosen on the other "
        "banks and what it did on this one (docs/benchmarks.md)",
    )
    p.add_argument(
        "--cv-margin",
        type=float,
        default=None,
        metavar="M",
        help="with --cv: on the banks a candidate is chosen on, it must be safe within M x the regret "
        "targets (default 0.5; 1: the targets themselves)",
    )
    p.add_argument(
        "--calibration",
        action="store_true",
        help="reliability table and expected calibration error of the predictive policy's probabilities: "
        "replays every bank without pruning and scores each forecast against how the trial ended; "
        "settings from one --policy engine:predictive|k=v|... (default: the predict_* defaults)",
    )
    p.set_defaults(func=_run)
    bench.set_defaults(func=lambda _args: (bench.print_help(), 2)[1])


def _settings(args: argparse.Namespace) -> BenchSettings:
    from katib_progress.bench import BenchSettings, default_policies
    from katib_progress.bench._cv import cv_policies

    if args.cv and (args.policies or args.modes):
        raise ConfigError("cv", "--cv replays its own policies in pruning mode; drop --policy and --mode")
    if args.cv and len(args.banks) < 2:
        raise ConfigError("cv", "--cv needs at least two banks (one family each)")
    return BenchSettings(
        policies=tuple(cv_policies() if args.cv else args.policies or default_policies()),
        seeds=args.seeds,
        workers=args.workers,
        modes=("pruning",) if args.cv else tuple(dict.fromkeys(args.modes or ("pruning", "stall"))),
        trials=args.trials,
        sampler_budget=args.budget,
        algorithm=args.algorithm,
        base_seed=args.seed,
        regret_target=args.regret_target,
    )


def _calibration(args: argparse.Namespace, err: Console) -> int:
    """``--calibration``: the predictive policy's reliability table (docs/benchmarks.md)."""
    from katib_progress.bench import load_bank, parse_policy
    from katib_progress.bench._calibration import calibrate_bank, calibration_markdown

    try:
        if args.cv or args.modes or len(args.policies or []) > 1:
            raise ConfigError("calibration", "--calibration takes at most one --policy and no --cv or --mode")
        settings: dict[str, str] = {}
        if args.policies:
            spec = parse_policy(args.policies[0])
            if spec.kind != "engine" or "predictive" not in spec.policy.split(","):
                raise ConfigError("calibration", f"{spec.name}: give engine:predictive|k=v|...")
            settings = dict(spec.settings)
        banks = [load_bank(path) for path in args.banks]
        seeds = range(args.seed, args.seed + args.seeds)
        results = [
            calibrate_bank(bank, seeds=seeds, trials=args.trials, workers=args.workers, settings=settings)
            for bank in banks
        ]
    except (KatibProgressError, ValueError) as exc:
        err.print(f"[red]error:[/red] {exc}")
        return 2
    sys.stdout.write(calibration_markdown(results, settings) + "\n")
    return 0


def _run(args: argparse.Namespace) -> int:
    # Imported here: the bench loads the whole suggestion service (Optuna, scipy), about a second
    # that `katib-progress --help` should not pay.
    from katib_progress.bench import load_bank, run_bench
    from katib_progress.bench._report import json_document, replay_table, stall_table
    from katib_progress.bench._run import replays_per_bank

    err = Console(stderr=True)
    if logging.getLogger().getEffectiveLevel() > logging.DEBUG:
        # Per-decision INFO lines of the service under test would drown the progress bar.
        for name in ("katib_progress.suggestion", "katib_progress.bench"):
            logging.getLogger(name).setLevel(logging.WARNING)
    if args.calibration:
        return _calibration(args, err)
    try:
        banks = [load_bank(path) for path in args.banks]
        settings = _settings(args)
    except (KatibProgressError, ValueError) as exc:
        clikit.say("error", clikit.one_line(exc))
        return 2
    total = len(banks) * replays_per_bank(settings)
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    results: list[BankResult] = []
    with Progress(*columns, console=err, transient=True) as progress:
        task = progress.add_task("replaying", total=total)
        try:
            for bank in banks:

                def advance(mode: str, policy: str, seed: int, bank_name: str = bank.name) -> None:
                    progress.update(task, advance=1, description=f"{bank_name} {mode} {policy} seed {seed}")

                results.append(run_bench(bank, settings, on_replay=advance))
        except KatibProgressError as exc:
            clikit.say("error", clikit.one_line(exc))
            return 2 if isinstance(exc, ConfigError) else 1
    if args.cv:
        from katib_progress.bench._cv import TRAIN_MARGIN, cross_validate, cv_markdown

        seeds = range(settings.base_seed, settings.base_seed + settings.seeds)
        cv = cross_validate(
            results,
            seeds=seeds,
            trials=settings.trials,
            regret_target=settings.regret_target,
            workers=settings.workers,
            margin=TRAIN_MARGIN if args.cv_margin is None else args.cv_margin,
        )
        if args.output == "json":
            sys.stdout.write(json.dumps(cv.as_dict(), indent=2) + "\n")
        else:
            sys.stdout.write(cv_markdown(cv) + "\n")
        return 0
    if args.output == "json":
        sys.stdout.write(json.dumps(json_document(results, settings), indent=2) + "\n")
        return 0
    out = Console()
    if not out.is_terminal:
        out = Console(width=160)
    for result in results:
        if result.summaries:
            out.print(replay_table(result, settings))
        if result.stall:
            out.print(stall_table(result))
    return 0
