"""The ``katib-progress`` command.

Each component owns its subcommands in its own module, exposing ``register(subparsers)`` (each
registered parser sets ``func=callable(args) -> int``); this module wires them together and plugs
the suggestion service's pruning implementation into the collector (the two never import each other).
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Sequence
from importlib.metadata import PackageNotFoundError, version

from katib_progress import bench_cli, clikit, earlystopping_cli, extras, katib_config
from katib_progress.collector import cli as collector_cli
from katib_progress.core import logs
from katib_progress.core.pruning import Pruner, PruningBackend, PruningSpec, RemotePruner
from katib_progress.local import cli as local_cli
from katib_progress.report import cli as report_cli
from katib_progress.suggestion import cli as suggestion_cli

_log = logging.getLogger(__name__)


class _LazyPruningBackend:
    """The suggestion service's pruning, imported on first use: it loads Optuna and scipy (about a
    second of start-up and tens of MiB), which ``collector run`` needs only once an Experiment uses
    our pruning (validate/connect run on forwarder threads, never on the watch)."""

    def _backend(self) -> PruningBackend:
        from katib_progress.suggestion.pruning.backend import BACKEND

        return BACKEND

    def validate(self, spec: PruningSpec) -> None:
        self._backend().validate(spec)

    def engine(self, spec: PruningSpec) -> Pruner:
        return self._backend().engine(spec)

    def connect(self, address: str, timeout: float) -> RemotePruner:
        return self._backend().connect(address, timeout)


def _pruning_backend() -> PruningBackend:
    return _LazyPruningBackend()


def _version() -> str:
    try:
        return version("katib-progress")
    except PackageNotFoundError:  # running from a checkout without an install
        return "unknown"


def build_parser() -> argparse.ArgumentParser:
    parser = clikit.Parser(prog=clikit.PROG, description=__doc__.splitlines()[0])
    parser.add_argument("--version", action="version", version=f"katib-progress {_version()}")
    clikit.add_global_flags(parser, top=True)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    collector_cli.register(sub, pruning=_pruning_backend)  # collector run, db serve
    suggestion_cli.register(sub)  # suggestion serve
    earlystopping_cli.register(sub)  # early-stopping serve
    local_cli.register(sub)  # sweep
    bench_cli.register(sub)  # bench pruning
    report_cli.register(sub)  # report, watch, status
    katib_config.register(sub)  # katib-config merge, remove
    # the global flags after the subcommand too (`katib-progress sweep X --log-level DEBUG`)
    for _name, child in clikit.subcommands(parser):
        clikit.add_global_flags(child, top=False)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    # gRPC's C core reads its log threshold once, when grpc is first imported (no handler has imported
    # it yet); without this grpcio >= 1.6x may print INFO lines ("Got goaway" when a loopback server
    # stops) to stderr, around our own logging. A user's GRPC_VERBOSITY still wins.
    os.environ.setdefault("GRPC_VERBOSITY", "ERROR")
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        logs.configure(args.log_level, json_lines=args.log_json)
    except ValueError:
        parser.error(f"--log-level: unknown level {args.log_level!r} (DEBUG, INFO, WARNING, ERROR)")
    if logging.getLogger().getEffectiveLevel() > logging.DEBUG:
        # the Kubernetes client's connection retries: what failed is said once, by the command
        # (not on "urllib3": the client's Configuration resets that logger's level)
        logging.getLogger("urllib3.connectionpool").setLevel(logging.ERROR)
    func = getattr(args, "func", None)
    if func is None:
        parser.print_help()
        return 2
    needs = extras.needed(args)
    problem = extras.problem(needs)
    if problem is not None:
        print(problem, file=sys.stderr)
        return 1
    try:
        result = func(args)
    except KeyboardInterrupt:
        return 130
    except ModuleNotFoundError as exc:
        message = extras.missing_module_message(exc, needs)
        if message is None:
            raise
        print(message, file=sys.stderr)
        return 1
    except clikit.user_errors() as exc:
        # a user's mistake (a path, a YAML file, a value, an address): one line, no traceback
        # (with --log-level DEBUG the traceback too)
        _log.debug("%s failed", args.command, exc_info=True)
        clikit.say("error", clikit.one_line(exc))
        return 1
    return int(result or 0)


if __name__ == "__main__":
    sys.exit(main())
