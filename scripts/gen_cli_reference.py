#!/usr/bin/env python3
"""Write docs/reference/cli.md from the argparse definitions of ``katib-progress``.

    .venv/bin/python scripts/gen_cli_reference.py           # rewrite docs/reference/cli.md
    .venv/bin/python scripts/gen_cli_reference.py --check   # exit 1 if the page is stale (tests/test_docs.py)

Options whose help is hidden (deprecated spellings) are left out, as in ``--help``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from katib_progress import clikit
from katib_progress.cli import build_parser

PAGE = Path(__file__).resolve().parents[1] / "docs" / "reference" / "cli.md"
GLOBAL = {"--log-level", "--log-json", "-h", "--help", "--version"}

HEADER = """# CLI reference

Generated from the argparse definitions by `scripts/gen_cli_reference.py` (the tests fail when this page
is stale). `katib-progress COMMAND --help` prints the same.

Conventions shared by every command:

- **Global flags** `--log-level LEVEL` (DEBUG, INFO, WARNING, ERROR; default INFO) and `--log-json` (one
  JSON object per log line) go before or after the subcommand.
- **`-o` is the output format** wherever it appears (`report`, `status`, `katib-config`, `bench
  pruning`); a file has its own flag (`--output-file`).
- **`-n/--namespace`** of `report`, `watch` and `status` defaults to the kubeconfig's current context's
  namespace, else `default`, as kubectl.
- **Errors**: a user's mistake (a path, a YAML file, a value, an address) is one line on stderr and a
  non-zero exit: 2 for a usage error, 1 or 2 for the others; `--log-level DEBUG` adds the traceback.
- **Deprecated spellings** still work, hidden from `--help`, each with one warning line on stderr:
  `earlystopping serve` (now `early-stopping serve`), `katib-config merge --earlystopping-image` (now
  `--early-stopping-image`), `report --format` (now `-o`), and a file given to `report -o` or
  `katib-config --output` (now `--output-file`); see the changelog.
- **Default ports**: `suggestion serve` 6789 (Katib dials its suggestion pods there), `early-stopping
  serve` 6788 (Katib's early-stopping port), `db serve` 6790.
"""


def _flags(action: argparse.Action) -> str:
    if not action.option_strings:
        return f"`{action.metavar or action.dest}`"
    names = ", ".join(f"`{o}`" for o in action.option_strings)
    if action.nargs == 0:
        return names
    metavar = action.metavar or action.dest.upper()
    return f"{names} `{metavar}`"


def _default(action: argparse.Action) -> str:
    # a help text that states the default says it better (and some defaults come from the
    # environment, $POD_NAME or the host name, which would make this page differ per machine)
    if "default" in (action.help or "") or action.nargs == 0:
        return ""
    if action.default in (None, argparse.SUPPRESS, False, [], ""):
        return ""
    return f"`{action.default}`"


def _help(action: argparse.Action) -> str:
    text = " ".join((action.help or "").split()).replace("|", "\\|")
    if action.choices is not None and not isinstance(action, argparse._SubParsersAction):
        choices = ", ".join(f"`{c}`" for c in action.choices)
        text = f"{text} (one of {choices})" if text else f"one of {choices}"
    if action.required and action.option_strings:
        text = f"required. {text}"
    return text


def _has_subcommands(parser: argparse.ArgumentParser) -> bool:
    return any(isinstance(a, argparse._SubParsersAction) for a in parser._actions)


def render() -> str:
    parser = build_parser()
    out = [HEADER]
    for path, sub in clikit.subcommands(parser):
        if _has_subcommands(sub) or path.split()[0] == "earlystopping":
            continue  # groups (`db`, `collector`...) have no flags; the old spelling is hidden
        out.append(f"\n## `katib-progress {path}`\n")
        description = " ".join((sub.description or "").split())
        if description:
            out.append(f"{description}\n")
        out.append("| argument | default | meaning |\n|---|---|---|")
        for action in sub._actions:
            if action.help == argparse.SUPPRESS or set(action.option_strings) & GLOBAL:
                continue
            out.append(f"| {_flags(action)} | {_default(action)} | {_help(action)} |")
    return "\n".join(out) + "\n"


def main(argv: list[str]) -> int:
    text = render()
    if "--check" in argv:
        if PAGE.read_text(encoding="utf-8") != text:
            sys.stderr.write(f"{PAGE} is stale: run scripts/gen_cli_reference.py\n")
            return 1
        return 0
    PAGE.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
