"""``katib-progress report | watch | status``."""

from __future__ import annotations

import argparse
import json
import logging
import sys
from pathlib import Path
from typing import Any

from katib_progress import clikit
from katib_progress.core.errors import KatibProgressError

_log = logging.getLogger(__name__)
REPORT_FORMATS = ("html", "md", "csv", "json")
STATUS_FORMATS = ("table", "wide", "json", "yaml")
_SUFFIX_FORMATS = {"html": "html", "htm": "html", "md": "md", "markdown": "md", "csv": "csv", "json": "json"}


def _source_args(parser: argparse.ArgumentParser, *, positional: bool = True) -> None:
    if positional:
        parser.add_argument(
            "source", nargs="?", help="a local sweep's workdir (.katib-progress/<experiment>)"
        )
    parser.add_argument("--experiment", help="a cluster Experiment's name (read through the Kubernetes API)")
    parser.add_argument(
        "-n",
        "--namespace",
        default=None,
        help="the Experiment's namespace (default: the kubeconfig's current context's, else default)",
    )
    parser.add_argument("--kubeconfig", help="kubeconfig file (default: in-cluster, else ~/.kube/config)")
    parser.add_argument(
        "--accelerators-per-trial",
        type=float,
        default=0.0,
        help="accelerators assumed for a cluster trial whose TrainJob states none (default 0)",
    )


def register(subparsers: Any) -> None:
    rep = subparsers.add_parser("report", help="trial comparison report (HTML, Markdown, CSV, JSON)")
    _source_args(rep)
    rep.add_argument("--db-manager", help="Katib DB manager HOST:PORT for observation logs (cluster source)")
    rep.add_argument(
        "-o",
        "--output",
        metavar="FORMAT",
        help="output format: html, md, csv or json (default: from --output-file's suffix, else html)",
    )
    rep.add_argument(
        "--output-file",
        metavar="FILE",
        help="file to write (default: report.html for html, stdout for the others)",
    )
    # before -o meant the file: `--format` is the old spelling of -o
    rep.add_argument("--format", dest="output", action=clikit.DeprecatedFlag, new="-o/--output FORMAT")
    rep.add_argument(
        "--metric", action="append", default=[], help="extra metric to plot against progress (repeat)"
    )
    rep.add_argument("--gpu-hour-price", type=float, help="price of one GPU-hour, to show money")
    rep.add_argument("--stall-after", type=float, default=600.0, help="seconds without a report = stalled")
    rep.add_argument(
        "--importance",
        default="auto",
        choices=("auto", "fanova", "ped-anova", "mean-decrease-impurity", "none"),
        help="Optuna importance evaluator (auto: fanova if scikit-learn is installed, else ped-anova)",
    )
    rep.set_defaults(func=_run_report)

    wat = subparsers.add_parser("watch", help="live table of an experiment's trials")
    _source_args(wat)
    wat.add_argument(
        "--interval", type=float, default=5.0, help="seconds between refreshes (default 5, min 1)"
    )
    wat.set_defaults(func=_run_watch)

    st = subparsers.add_parser("status", help="one-shot table of an experiment's trials")
    _source_args(st)
    st.add_argument(
        "-o",
        "--output",
        choices=STATUS_FORMATS,
        default="table",
        help="table (default), wide (with each trial's parameters), json or yaml",
    )
    st.set_defaults(func=_run_status)


def _api_client(kubeconfig: str | None) -> Any:
    from katib_progress.collector.kube import load_api_client

    return load_api_client(kubeconfig)


def _loader(args: argparse.Namespace, *, db_manager: str | None = None) -> Any:
    if bool(args.source) == bool(args.experiment):
        raise KatibProgressError(
            "give either a sweep workdir (SOURCE) or --experiment NAME, not both or neither"
        )
    if args.source:
        from katib_progress.report.sources.local import load_local

        return lambda: load_local(args.source)
    from katib_progress.collector.kube import context_namespace
    from katib_progress.report.sources.cluster import load_cluster

    api = _api_client(args.kubeconfig)
    namespace = args.namespace or context_namespace(args.kubeconfig)
    return lambda: load_cluster(
        api,
        args.experiment,
        namespace,
        db_manager=db_manager,
        default_accelerators=args.accelerators_per_trial,
    )


def _quiet_services(args: argparse.Namespace, *, to_stdout: bool) -> None:
    """Unless ``--log-level`` was given: no INFO lines from the services a report starts (the embedded
    store), and none at all when the report itself goes to stdout (pipes, CI logs)."""
    if getattr(args, "log_level", "INFO").upper() != "INFO":
        return
    logging.getLogger("collector").setLevel(logging.WARNING)
    if to_stdout:
        logging.getLogger().setLevel(logging.WARNING)


def _fail(exc: Exception) -> int:
    clikit.say("error", clikit.one_line(exc))
    return 1


def _run_report(args: argparse.Namespace) -> int:
    from katib_progress.report.analysis import build_report
    from katib_progress.report.render import render

    fmt, output_file = report_target(args.output, args.output_file)
    output = output_file or ("report.html" if fmt == "html" else None)
    _quiet_services(args, to_stdout=output is None)
    try:
        record = _loader(args, db_manager=args.db_manager)()
        report = build_report(
            record,
            gpu_hour_price=args.gpu_hour_price,
            metrics=args.metric,
            stall_after_s=args.stall_after,
            importance=args.importance,
        )
        text = render(report, fmt)
    except (KatibProgressError, ValueError) as exc:
        return _fail(exc)
    if output is None:
        sys.stdout.write(text)
    else:
        Path(output).write_text(text, encoding="utf-8")
        _log.info("wrote %s report of %d trials to %s", fmt, len(report.leaderboard), output)
    return 0


def report_target(output: str | None, output_file: str | None) -> tuple[str, str | None]:
    """(format, file) from ``-o`` and ``--output-file`` (clikit.format_or_old_file); without a format,
    the file's suffix, else html."""
    output, output_file = clikit.format_or_old_file(output, output_file, REPORT_FORMATS, "-o")
    if output is None:
        suffix = Path(output_file).suffix.lower().lstrip(".") if output_file else ""
        output = _SUFFIX_FORMATS.get(suffix, "html")
    return output, output_file


def _experiment_done(record: Any) -> bool:
    """The watch ends once the experiment has ended: its Succeeded/Failed condition on a cluster (a
    cluster record has no ``observed_at``: the e2e tier found ``watch --experiment`` never ending), or
    every trial terminal and the sweep's summary written, locally."""
    if record.finished:
        return True
    return (
        bool(record.trials)
        and all(t.status.terminal for t in record.trials)
        and record.observed_at is not None
    )


def _run_watch(args: argparse.Namespace) -> int:
    from rich.console import Console

    from katib_progress.report.live import watch

    try:
        load = _loader(args)
        watch(load, console=Console(), interval_s=args.interval, done=_experiment_done)
    except KeyboardInterrupt:
        return 130
    except (KatibProgressError, ValueError) as exc:
        return _fail(exc)
    return 0


def _run_status(args: argparse.Namespace) -> int:
    from datetime import UTC, datetime

    from katib_progress.report.live import status_lines, totals, trial_rows

    try:
        record = _loader(args)()
    except (KatibProgressError, ValueError) as exc:
        return _fail(exc)
    if args.output in ("json", "yaml"):
        body = {**totals(record, datetime.now(UTC)), "trials": [r.as_dict() for r in trial_rows(record)]}
        if args.output == "json":
            sys.stdout.write(json.dumps(body, indent=2) + "\n")
        else:
            import yaml

            sys.stdout.write(yaml.safe_dump(body, sort_keys=False))
    else:
        sys.stdout.write(status_lines(record, wide=args.output == "wide"))
    return 0
