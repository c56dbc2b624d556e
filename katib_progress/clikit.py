"""Conventions every ``katib-progress`` command shares (docs/reference/cli.md).

- Global flags (``--log-level``, ``--log-json``) are accepted before or after the subcommand.
- Old spellings keep working, hidden from ``--help``, with one deprecation line on stderr.
- A user error is one line on stderr and a non-zero exit, never a traceback
  (``user_errors()``, caught by ``katib_progress.cli.main``; ``--log-level DEBUG`` logs the traceback).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from typing import Any, NoReturn

import yaml

from katib_progress.core.errors import KatibProgressError

PROG = "katib-progress"


def say(level: str, text: str) -> None:
    """One line on stderr, ``katib-progress: <level>: <text>``; a closed stderr loses only the line."""
    try:
        sys.stderr.write(f"{PROG}: {level}: {text}\n")
        sys.stderr.flush()
    except OSError:
        pass


def deprecated(old: str, new: str) -> None:
    say("warning", f"{old} is deprecated and will be removed; use {new}")


class DeprecatedFlag(argparse.Action):
    """A hidden old spelling of a flag: stores into the new flag's ``dest`` and prints a deprecation line."""

    def __init__(self, option_strings: Sequence[str], dest: str, *, new: str, **kwargs: Any) -> None:
        kwargs.setdefault("help", argparse.SUPPRESS)
        kwargs.setdefault("default", argparse.SUPPRESS)
        super().__init__(option_strings, dest, **kwargs)
        self.new = new

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: Any,
        option_string: str | None = None,
    ) -> None:
        deprecated(str(option_string), self.new)
        setattr(namespace, self.dest, values)


def deprecated_command(func: Callable[[argparse.Namespace], int], old: str, new: str) -> Callable[..., int]:
    """``func`` run under an old command spelling: the deprecation line first."""

    def run(args: argparse.Namespace) -> int:
        deprecated(old, new)
        return func(args)

    return run


class Parser(argparse.ArgumentParser):
    """argparse's parser, with a usage error in one line (argparse prints the usage block first)."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {' '.join(message.split())} (see {self.prog} --help)\n")


def format_or_old_file(
    output: str | None, output_file: str | None, formats: Sequence[str], flag: str
) -> tuple[str | None, str | None]:
    """(format, file) from ``-o/--output`` and ``--output-file``. ``flag`` named the output file
    before ``-o`` named the format: a value that is no format is still taken as the file, with a
    deprecation line; with ``--output-file`` given too it is an unknown format (``ValueError``)."""
    if output is None or output in formats:
        return output, output_file
    if output_file is not None:
        known = ", ".join(formats)
        raise ValueError(f"-o {output!r}: unknown format ({known}); the file is --output-file")
    deprecated(f"{flag} FILE ({output})", "--output-file FILE (-o is now the format)")
    return None, output


def add_global_flags(parser: argparse.ArgumentParser, *, top: bool) -> None:
    """``--log-level`` and ``--log-json``: on the top parser with their defaults; on a subcommand
    without defaults (``SUPPRESS``), so they override the top's only when given after the subcommand."""
    level_default: Any = "INFO" if top else argparse.SUPPRESS
    json_default: Any = False if top else argparse.SUPPRESS
    parser.add_argument(
        "--log-level", default=level_default, help="logging level: DEBUG, INFO, WARNING, ERROR (default INFO)"
    )
    parser.add_argument(
        "--log-json", action="store_true", default=json_default, help="structured JSON log lines on stderr"
    )


def subcommands(parser: argparse.ArgumentParser) -> list[tuple[str, argparse.ArgumentParser]]:
    """Every (name, parser) under ``parser``, recursively, aliases once (the same parser object)."""
    out: list[tuple[str, argparse.ArgumentParser]] = []
    seen: set[int] = set()

    def walk(p: argparse.ArgumentParser, path: str) -> None:
        for action in p._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, child in action.choices.items():
                    if id(child) in seen:
                        continue
                    seen.add(id(child))
                    full = f"{path} {name}".strip()
                    out.append((full, child))
                    walk(child, full)

    walk(parser, "")
    return out


#: (module, class) of the libraries' errors a user's input or an unreachable peer raises. A library
#: not imported by the command that failed cannot have raised its errors, so none is imported here
#: (start-up time, `--help`): each is looked up among the modules already loaded.
_LIBRARY_ERRORS = (
    ("grpc", "RpcError"),
    ("kubernetes.config.config_exception", "ConfigException"),
    ("kubernetes.client.exceptions", "OpenApiException"),
    ("urllib3.exceptions", "HTTPError"),
    ("sqlite3", "Error"),
    ("sqlalchemy.exc", "SQLAlchemyError"),
)


def user_errors() -> tuple[type[BaseException], ...]:
    """What a command raises for a user's mistake (bad path, bad YAML, bad value, unreachable peer)."""
    loaded = [getattr(sys.modules[m], name, None) for m, name in _LIBRARY_ERRORS if m in sys.modules]
    return (
        KatibProgressError,
        OSError,
        ValueError,
        yaml.YAMLError,
        *(cls for cls in loaded if isinstance(cls, type) and issubclass(cls, BaseException)),
    )


def one_line(exc: BaseException) -> str:
    """The exception as one line: gRPC errors by their details, an unreachable HTTP peer by its
    address and reason, others by their text."""
    pool, reason = getattr(exc, "pool", None), getattr(exc, "reason", None)
    if pool is not None and reason is not None:  # urllib3's MaxRetryError: the Kubernetes API server
        cause = getattr(reason, "reason", None) or reason
        return " ".join(f"cannot reach {pool.host}:{pool.port}: {cause}".split())
    details = getattr(exc, "details", None)
    text = str(details() or "") if callable(details) else ""
    text = text or str(exc) or type(exc).__name__
    if isinstance(exc, OSError) and exc.filename is not None and exc.strerror:
        text = f"{exc.strerror}: {exc.filename}"
    return " ".join(text.split())
