"""The ``katib-progress`` command.

Each area owns its subcommands in its own module, exposing ``register(subparsers)``; this file only
wires them together, so adding a command never means editing another area's code.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import sys
from collections.abc import Sequence

from katib_progress import __version__, logs

# Modules that expose ``register(subparsers: argparse._SubParsersAction) -> None``.
# Each registered parser must set ``func=callable(args) -> int`` via ``set_defaults``.
_COMMAND_MODULES = (
    "collector.cli",  # collector run, db serve
    "suggestion.cli",  # suggestion serve
    "katib_progress.local.cli",  # sweep
    "katib_progress.bench_cli",  # bench pruning
    "katib_progress.report.cli",  # report, watch, status
)

_log = logging.getLogger(__name__)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="katib-progress", description=__doc__.splitlines()[0])
    parser.add_argument("--version", action="version", version=f"katib-progress {__version__}")
    parser.add_argument("--log-level", default="INFO", help="logging level (default INFO)")
    parser.add_argument("--log-json", action="store_true", help="structured JSON log lines on stderr")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in _COMMAND_MODULES:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            # Only tolerate the module itself being absent (an area not built yet), never a
            # missing dependency inside it.
            if exc.name is None or not (name == exc.name or name.startswith(exc.name + ".")):
                raise
            continue
        module.register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    logs.configure(args.log_level, json_lines=args.log_json)
    func = getattr(args, "func", None)
    if func is None:
        parser.print_help()
        return 2
    result = func(args)
    return int(result or 0)


if __name__ == "__main__":
    sys.exit(main())
