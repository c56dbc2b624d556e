"""The docs agree with the code: the CLI reference page is generated from the parser and current, and
every ``--flag`` a page, the README or an example names for a ``katib-progress`` command exists in that
command's parser (a hidden, deprecated spelling only where the line says it is deprecated). The site
itself is built by ``mkdocs build --strict`` in ``make test`` (broken links, pages missing from the nav).
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from katib_progress import clikit
from katib_progress.cli import build_parser

REPO = Path(__file__).resolve().parents[1]
DOCS = sorted(
    [
        REPO / "README.md",
        REPO / "CHANGELOG.md",
        *(REPO / "docs").rglob("*.md"),
        *(REPO / "examples").rglob("*.md"),
        *(REPO / "examples").rglob("*.yaml"),
        *(REPO / "examples").rglob("*.py"),
    ]
)
_COMMAND = re.compile(
    r"katib-progress((?:\s+--log-json|\s+--log-level[ =]\S+)*)\s+([a-z][a-z-]*)(?:\s+([a-z][a-z-]*))?"
)
_FLAG = re.compile(r"(?<![\w-])(--[a-z][a-z0-9-]*)")
# where a command line ends: a pipe, a shell separator, a comment, a closing code span or a sentence
_END = re.compile(r"\s\|\s|;|&&|\s#|`|\)\s|:\s")


def _parsers() -> dict[str, argparse.ArgumentParser]:
    return dict(clikit.subcommands(build_parser()))


def _options(parser: argparse.ArgumentParser) -> tuple[set[str], set[str]]:
    """(shown, hidden) option strings of ``parser``."""
    shown: set[str] = set()
    hidden: set[str] = set()
    for action in parser._actions:
        (hidden if action.help == argparse.SUPPRESS else shown).update(action.option_strings)
    return shown, hidden


def _lines(path: Path) -> list[str]:
    """The file's lines, shell continuations (`\\` at the end) joined."""
    out: list[str] = []
    pending = ""
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.rstrip().endswith("\\"):
            pending += line.rstrip()[:-1] + " "
            continue
        out.append(pending + line)
        pending = ""
    return out


def _named_flags() -> list[tuple[str, int, str, str, str]]:
    """(file, line number, command, flag, line) for every flag named after a katib-progress command."""
    parsers = _parsers()
    found = []
    for path in DOCS:
        for number, line in enumerate(_lines(path), start=1):
            for match in _COMMAND.finditer(line):
                first, second = match.group(2), match.group(3)
                command = f"{first} {second}" if f"{first} {second}" in parsers else first
                if command not in parsers:
                    continue
                rest = line[match.end() :]
                end = _END.search(rest)
                for flag in _FLAG.findall(rest[: end.start()] if end else rest):
                    found.append((str(path.relative_to(REPO)), number, command, flag, line))
    return found


def test_the_cli_reference_page_is_generated_from_the_parser() -> None:
    done = subprocess.run(
        [sys.executable, "scripts/gen_cli_reference.py", "--check"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr


def test_the_reference_names_every_shown_flag_of_every_command() -> None:
    page = (REPO / "docs" / "reference" / "cli.md").read_text(encoding="utf-8")
    for path, parser in _parsers().items():
        if path.startswith("earlystopping"):
            continue
        shown, _hidden = _options(parser)
        for flag in shown - {"-h", "--help", "--log-level", "--log-json"}:
            if flag.startswith("--"):
                assert f"`{flag}`" in page, (path, flag)


def test_every_flag_the_docs_name_exists() -> None:
    parsers = _parsers()
    top_shown, _ = _options(build_parser())
    named = _named_flags()
    assert len(named) > 50, "the scan found too few command lines: is the pattern broken?"
    wrong = []
    for where, number, command, flag, line in named:
        shown, hidden = _options(parsers[command])
        if flag in shown or flag in top_shown:
            continue
        if flag in hidden and "deprecated" in line.lower():
            continue
        wrong.append(f"{where}:{number}: katib-progress {command} {flag}")
    assert not wrong, "\n".join(wrong)


def test_the_scan_catches_a_flag_that_does_not_exist(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("run `katib-progress report --experiment x --no-such-flag`\n")
    parsers = _parsers()
    (match,) = _COMMAND.finditer(_lines(page)[0])
    assert match.group(2) == "report" and "report" in parsers
    assert "--no-such-flag" in _FLAG.findall(page.read_text())
    shown, hidden = _options(parsers["report"])
    assert "--no-such-flag" not in shown | hidden


@pytest.mark.parametrize("config", ["mkdocs.yml"])
def test_every_docs_page_is_in_the_nav(config: str) -> None:
    """mkdocs --strict fails on a page missing from the nav too; this names it without building."""

    def pages(nav: object) -> list[str]:
        if isinstance(nav, str):
            return [nav]
        if isinstance(nav, list):
            return [p for item in nav for p in pages(item)]
        if isinstance(nav, dict):
            return [p for value in nav.values() for p in pages(value)]
        return []

    doc = yaml.safe_load((REPO / config).read_text(encoding="utf-8"))
    in_nav = set(pages(doc["nav"]))
    on_disk = {str(p.relative_to(REPO / "docs")) for p in (REPO / "docs").rglob("*.md")}
    assert on_disk == in_nav
