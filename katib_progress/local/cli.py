"""``katib-progress sweep EXPERIMENT.yaml``: run a Katib Experiment on this machine."""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path
from typing import Any

from katib_progress.core.errors import ConfigError, KatibProgressError

_log = logging.getLogger(__name__)


def register(subparsers: Any) -> None:
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "sweep",
        help="run a Katib Experiment (TrainJob trials) on this machine, with live pruning",
        description=(
            "Run a Katib Experiment YAML locally: trials are local processes reporting progress through a "
            "local TrainJob status endpoint; the same collector pipeline, store and suggestion/pruning "
            "services as on a cluster. Run the same command again to resume."
        ),
    )
    parser.add_argument("experiment", type=Path, help="Katib Experiment YAML (kubeflow.org/v1beta1)")
    parser.add_argument("--workdir", type=Path, default=None, help="default ./.katib-progress/<experiment>/")
    parser.add_argument("--fresh", action="store_true", help="discard the work directory's earlier results")
    parser.add_argument(
        "--grace", type=float, default=5.0, help="seconds between SIGTERM and SIGKILL (default 5)"
    )
    view = parser.add_mutually_exclusive_group()
    view.add_argument("--live", dest="live", action="store_true", default=None, help="force the live view")
    view.add_argument("--plain", dest="live", action="store_false", help="plain line output")
    parser.add_argument(
        "--suggestion-address",
        default=None,
        help="use a running suggestion service instead of an embedded one",
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from katib_progress.local.experiment import load_experiment
    from katib_progress.local.runner import SweepOptions, default_workdir, run_sweep

    try:
        exp = load_experiment(args.experiment)
        result = run_sweep(
            exp,
            SweepOptions(
                workdir=args.workdir or default_workdir(exp),
                grace_s=args.grace,
                live=args.live,
                fresh=args.fresh,
                suggestion_address=args.suggestion_address,
                log_file=True,
                quiet_console=getattr(args, "log_level", "INFO") == "INFO",
            ),
        )
    except KeyboardInterrupt:
        _say("interrupted before any trial started")
        return 130
    except ConfigError as exc:
        _say(f"invalid experiment: {exc}")
        return 2
    except KatibProgressError as exc:
        _say(str(exc))
        return 1
    if result.exit_code != 0:
        _say(f"{result.summary.reason}: {result.message}")
    return result.exit_code


def _say(text: str) -> None:
    """One line on stderr; a closed terminal or pipe loses the line, not the exit status."""
    try:
        sys.stderr.write(f"katib-progress sweep: {' '.join(text.split())}\n")
        sys.stderr.flush()
    except OSError:
        _log.warning("stderr closed: %s", text)
