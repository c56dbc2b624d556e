"""Which optional dependencies (pyproject's extras) a command needs, and one line saying so.

The core install (``pip install katib-progress``) runs ``--help`` and ``katib-config``; each
component's third-party packages are an extra (``collector``, ``suggestion``, ``earlystopping``,
``report``, ``bench``, ``all``), so each image carries only its own. A command whose extra is not
installed stops before it starts, naming the extra, instead of failing with an ImportError's
traceback (or later, on a worker thread).
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Callable, Iterable
from importlib.metadata import PackageNotFoundError, distribution, requires

DIST = "katib-progress"

#: Top-level command -> the extra it needs; a command not listed needs only the core.
COMMAND_EXTRAS = {
    "collector": "collector",
    "db": "collector",
    "suggestion": "suggestion",
    "early-stopping": "earlystopping",
    "earlystopping": "earlystopping",  # the deprecated spelling
    "sweep": "all",
    "bench": "bench",
    "report": "report",
    "watch": "report",
    "status": "report",
}

_NAME = re.compile(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(?:\[([^\]]*)\])?")
_EXTRA_MARKER = re.compile(r"""extra\s*==\s*["']([^"']+)["']""")


def canonical(name: str) -> str:
    """A distribution name as PEP 503 compares them."""
    return re.sub(r"[-_.]+", "-", name).lower()


def needed(args: argparse.Namespace) -> list[str]:
    """The extras the parsed command line needs."""
    extra = COMMAND_EXTRAS.get(getattr(args, "command", None) or "")
    found = [extra] if extra else []
    if extra == "collector" and getattr(args, "watchdog", False):
        found.append("suggestion")  # the watchdog runs pruning engines in-process
    return found


def requirements(extra: str, requires_dist: Iterable[str]) -> set[str]:
    """The distributions ``extra`` needs (canonical names), following ``katib-progress[a,b]``."""
    lines = list(requires_dist)
    found: set[str] = set()
    todo, seen = [canonical(extra)], set()
    while todo:
        current = todo.pop()
        if current in seen:
            continue
        seen.add(current)
        for line in lines:
            head, _, marker = line.partition(";")
            wanted = _EXTRA_MARKER.search(marker)
            name = _NAME.match(head)
            if wanted is None or name is None or canonical(wanted.group(1)) != current:
                continue
            if canonical(name.group(1)) == DIST:
                todo.extend(canonical(e) for e in (name.group(2) or "").split(",") if e.strip())
            else:
                found.add(canonical(name.group(1)))
    return found


def _installed(name: str) -> bool:
    try:
        distribution(name)
    except PackageNotFoundError:
        return False
    return True


def problem(
    extras: Iterable[str],
    requires_dist: Iterable[str] | None = None,
    installed: Callable[[str], bool] | None = None,
) -> str | None:
    """One line naming the first extra whose packages are not all installed; None when they are
    (or when katib-progress itself is not installed, running from a checkout)."""
    if requires_dist is None:
        try:
            requires_dist = requires(DIST) or []
        except PackageNotFoundError:
            return None
    lines = list(requires_dist)
    check = installed or _installed
    for extra in extras:
        absent = sorted(name for name in requirements(extra, lines) if not check(name))
        if absent:
            return (
                f"katib-progress: this command needs the '{extra}' extra "
                f"(missing {', '.join(absent)}): pip install 'katib-progress[{extra}]'"
            )
    return None


def missing_module_message(exc: ModuleNotFoundError, extras: Iterable[str]) -> str | None:
    """One line for a third-party module that failed to import; None for one of ours (a bug)."""
    module = (exc.name or "").split(".")[0]
    names = list(extras)
    if not module or module == "katib_progress":
        return None
    hint = f": pip install 'katib-progress[{names[0]}]'" if names else ""
    return f"katib-progress: the Python package {module!r} is not installed{hint}"
