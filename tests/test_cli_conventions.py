"""The conventions every ``katib-progress`` command keeps (docs/reference/cli.md): a user error is one
line on stderr and a non-zero exit, never a traceback; one spelling for early stopping (old ones
accepted with a deprecation line, hidden from help); ``-o`` is the output format and files have their
own flag; global flags after the subcommand too; distinct default ports; a bare ``katib-config merge``
in a terminal says what it expects.

Long-running services retry an unreachable peer by design (``collector run`` waits for its API server
and DB manager, logging each retry): for them "unreachable" is a listen address they cannot bind.
"""

from __future__ import annotations

import logging
import os
import pty
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from katib_progress import clikit
from katib_progress.cli import build_parser, main

REPO = Path(__file__).resolve().parents[1]
CLI = (sys.executable, "-m", "katib_progress.cli")
LEAVES = (
    "db serve",
    "collector run",
    "suggestion serve",
    "early-stopping serve",
    "sweep",
    "bench pruning",
    "report",
    "watch",
    "status",
    "katib-config merge",
    "katib-config remove",
)

#: what a command requires, so the bad flag is what fails
REQUIRED = {
    "db serve": ["--db", "x"],
    "collector run": ["--db-manager", "h:1"],
    "sweep": ["x.yaml"],
    "bench pruning": ["--bank", "x"],
}


@pytest.fixture(autouse=True)
def _restore_logging() -> Iterator[None]:
    """``main`` configures the root logger for a process; give the next test its own back."""
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, list[str], str]:
    """(exit code, stderr lines, stdout) of ``katib-progress argv`` run in this process."""
    try:
        code = main(argv)
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    captured = capsys.readouterr()
    return code, [line for line in captured.err.splitlines() if line.strip()], captured.out


@pytest.fixture
def files(tmp_path: Path) -> dict[str, str]:
    bad_yaml = tmp_path / "bad.yaml"
    bad_yaml.write_text("spec: [unclosed\n")
    bad_json = tmp_path / "bad.json"
    bad_json.write_text("{not json")
    unreachable = tmp_path / "unreachable-kubeconfig"
    unreachable.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "c", "cluster": {"server": "http://127.0.0.1:1"}}],
                "users": [{"name": "u", "user": {"token": "t"}}],
                "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u", "namespace": "team"}}],
                "current-context": "x",
            }
        )
    )
    return {
        "missing": str(tmp_path / "missing" / "file"),
        "missing_dir_db": str(tmp_path / "missing" / "store.sqlite"),
        "bad_yaml": str(bad_yaml),
        "bad_json": str(bad_json),
        "unreachable": str(unreachable),
        "tmp": str(tmp_path),
    }


@pytest.fixture
def busy_port() -> Iterator[str]:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        yield f"127.0.0.1:{sock.getsockname()[1]}"


def _cases(f: dict[str, str], busy: str) -> dict[str, list[str]]:
    kube = ["--experiment", "x", "--kubeconfig"]
    collector = ["collector", "run", "--db-manager", "h:1", "--kubeconfig"]
    early = ["early-stopping", "serve", "--address"]
    return {
        # bad paths
        "db serve, store in a missing directory": ["db", "serve", "--db", f["missing_dir_db"]],
        "collector run, missing kubeconfig": [*collector, f["missing"]],
        "suggestion serve, storage in a missing directory": [
            "suggestion", "serve", "--address", "127.0.0.1:0", "--storage", f"sqlite:///{f['missing_dir_db']}",
        ],
        "sweep, missing experiment": ["sweep", f["missing"]],
        "bench pruning, missing bank": ["bench", "pruning", "--bank", f["missing"]],
        "report, missing workdir": ["report", f["missing"], "-o", "md"],
        "watch, missing workdir": ["watch", f["missing"]],
        "status, missing workdir": ["status", f["missing"]],
        "katib-config merge, missing input": ["katib-config", "merge", "--input", f["missing"]],
        "katib-config remove, missing input": ["katib-config", "remove", "-f", f["missing"]],
        "report, missing kubeconfig": ["report", *kube, f["missing"]],
        # bad YAML (or JSON, or a file of the wrong kind)
        "db serve, not a database": ["db", "serve", "--db", f["bad_yaml"], "--address", "127.0.0.1:0"],
        "collector run, bad kubeconfig": [*collector, f["bad_yaml"]],
        "sweep, bad YAML": ["sweep", f["bad_yaml"]],
        "bench pruning, bad JSON": ["bench", "pruning", "--bank", f["bad_json"]],
        "katib-config merge, bad YAML": ["katib-config", "merge", "--input", f["bad_yaml"]],
        "katib-config remove, bad YAML": ["katib-config", "remove", "--input", f["bad_yaml"]],
        "status, bad kubeconfig": ["status", *kube, f["bad_yaml"]],
        # unreachable or unbindable addresses
        "report, unreachable API server": ["report", *kube, f["unreachable"], "-o", "json"],
        "watch, unreachable API server": ["watch", *kube, f["unreachable"], "--interval", "1"],
        "status, unreachable API server": ["status", *kube, f["unreachable"]],
        "db serve, unresolvable host": ["db", "serve", "--db", "x", "--address", "nowhere.invalid:1"],
        "db serve, port in use": ["db", "serve", "--db", f"{f['tmp']}/s.sqlite", "--address", busy],
        "suggestion serve, port in use": ["suggestion", "serve", "--address", busy],
        "suggestion serve, not HOST:PORT": ["suggestion", "serve", "--address", "6789"],
        "early-stopping serve, port in use": [*early, busy],
        "early-stopping serve, unresolvable host": [*early, "nowhere.invalid:1"],
        # bad values
        "global flag after the subcommand, bad level": ["status", f["tmp"], "--log-level", "LOUD"],
        "report, unknown format and a file": ["report", f["tmp"], "-o", "pdf", "--output-file", "r.pdf"],
        "katib-config merge, unknown format and a file": [
            "katib-config", "merge", "--input", f["bad_yaml"], "-o", "toml", "--output-file", "x",
        ],
    }  # fmt: skip


FILE_KEYS = ("missing", "missing_dir_db", "bad_yaml", "bad_json", "unreachable", "tmp")
CASE_NAMES = tuple(_cases(dict.fromkeys(FILE_KEYS, ""), ""))


@pytest.mark.parametrize("case", CASE_NAMES)
def test_a_user_error_is_one_line_and_a_non_zero_exit(
    case: str, files: dict[str, str], busy_port: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, err, _out = _run(_cases(files, busy_port)[case], capsys)
    assert code != 0, err
    assert len(err) == 1, err
    assert "Traceback" not in err[0]
    # `katib-progress: error: ...`, or a log line from a service (JSON with --log-json)
    assert "error" in err[0].lower(), err
    assert len(err[0].split()) >= 4, err  # says something, not just a class name


@pytest.mark.parametrize("leaf", LEAVES)
def test_a_bad_flag_is_one_line_naming_it(leaf: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, err, _out = _run([*leaf.split(), *REQUIRED.get(leaf, []), "--no-such-flag"], capsys)
    assert code == 2
    assert len(err) == 1 and "--no-such-flag" in err[0] and "--help" in err[0], err


def test_every_command_is_covered_by_the_error_tests() -> None:
    shown = {name for name, parser in clikit.subcommands(build_parser()) if not _has_subcommands(parser)}
    assert shown == {*LEAVES, "earlystopping serve"}  # the last: the deprecated spelling
    for leaf in LEAVES:
        assert any(case.startswith(f"{leaf},") for case in CASE_NAMES), leaf


def _has_subcommands(parser: object) -> bool:
    import argparse

    assert isinstance(parser, argparse.ArgumentParser)
    return any(isinstance(a, argparse._SubParsersAction) for a in parser._actions)


def test_errors_in_a_real_process_have_no_traceback(files: dict[str, str]) -> None:
    for argv in (
        ["katib-config", "merge", "--input", files["bad_yaml"]],
        ["report", "--experiment", "x", "--kubeconfig", files["unreachable"]],
    ):
        done = subprocess.run(
            [*CLI, *argv], cwd=REPO, capture_output=True, text=True, timeout=120, check=False
        )
        assert done.returncode != 0
        assert "Traceback" not in done.stderr and len(done.stderr.strip().splitlines()) == 1, done.stderr


def test_bare_katib_config_merge_in_a_terminal_says_what_it_expects() -> None:
    primary, secondary = pty.openpty()
    try:
        done = subprocess.run(
            [*CLI, "katib-config", "merge"],
            stdin=secondary,
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    finally:
        os.close(primary)
        os.close(secondary)
    assert done.returncode == 2
    (line,) = done.stderr.strip().splitlines()
    assert "stdin" in line and "--input FILE" in line and "kubectl" in line


def test_early_stopping_has_one_spelling_the_old_ones_warn(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], busy_port: str
) -> None:
    help_text = build_parser().format_help()
    assert "early-stopping" in help_text and "earlystopping" not in help_text
    code, err, _ = _run(["earlystopping", "serve", "--address", busy_port], capsys)
    assert code != 0
    assert "deprecated" in err[0] and "`early-stopping serve`" in err[0] and len(err) == 2, err
    source = tmp_path / "katib-config.yaml"
    source.write_text(yaml.safe_dump({"apiVersion": "config.kubeflow.org/v1beta1", "kind": "KatibConfig"}))
    merge = ["katib-config", "merge", "--input", str(source)]
    code, err, out = _run([*merge, "--early-stopping-image", "reg/es:1"], capsys)
    assert code == 0 and not any("deprecated" in line for line in err)
    assert {e["image"] for e in yaml.safe_load(out)["runtime"]["earlyStoppings"]} == {"reg/es:1"}
    code, err, out = _run([*merge, "--earlystopping-image", "reg/es:2"], capsys)
    assert code == 0 and "--early-stopping-image" in err[0] and "deprecated" in err[0]
    assert {e["image"] for e in yaml.safe_load(out)["runtime"]["earlyStoppings"]} == {"reg/es:2"}
    merge_help = _subparser("katib-config merge").format_help()
    assert "--early-stopping-image" in merge_help and "--earlystopping-image" not in merge_help


def _subparser(path: str) -> object:
    return dict(clikit.subcommands(build_parser()))[path]


def test_o_is_the_format_and_files_have_their_own_flag(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = tmp_path / "katib-config.yaml"
    source.write_text(yaml.safe_dump({"apiVersion": "config.kubeflow.org/v1beta1", "kind": "KatibConfig"}))
    merge = ["katib-config", "merge", "--input", str(source)]
    code, _err, out = _run([*merge, "-o", "json"], capsys)
    assert code == 0 and out.lstrip().startswith("{")
    target = tmp_path / "merged.yaml"
    code, err, out = _run([*merge, "--output-file", str(target)], capsys)
    assert code == 0 and out == "" and "kp-tpe" in target.read_text()
    assert not any("deprecated" in line for line in err)
    old = tmp_path / "old.yaml"
    code, err, out = _run([*merge, "--output", str(old)], capsys)  # the old meaning: a file
    assert code == 0 and out == "" and "kp-tpe" in old.read_text()
    assert "deprecated" in err[0] and "--output-file" in err[0]


def test_report_o_is_the_format_old_o_file_still_works(tmp_path: Path) -> None:
    from katib_progress.report.cli import report_target

    assert report_target(None, None) == ("html", None)
    assert report_target("md", None) == ("md", None)
    assert report_target(None, "r.csv") == ("csv", "r.csv")
    assert report_target("json", "r.txt") == ("json", "r.txt")
    assert report_target("report.md", None) == ("md", "report.md")  # old -o FILE, with a warning


def test_global_flags_before_or_after_the_subcommand() -> None:
    parser = build_parser()
    after = parser.parse_args(["sweep", "x.yaml", "--log-level", "DEBUG", "--log-json"])
    assert after.log_level == "DEBUG" and after.log_json is True
    before = parser.parse_args(["--log-level", "WARNING", "--log-json", "katib-config", "merge"])
    assert before.log_level == "WARNING" and before.log_json is True
    neither = parser.parse_args(["db", "serve", "--db", "x"])
    assert neither.log_level == "INFO" and neither.log_json is False


def test_db_serve_and_suggestion_serve_default_to_different_ports() -> None:
    from katib_progress.collector.cli import DB_SERVE_ADDRESS
    from katib_progress.suggestion.cli import SUGGESTION_ADDRESS

    assert build_parser().parse_args(["db", "serve", "--db", "x"]).address == DB_SERVE_ADDRESS
    assert SUGGESTION_ADDRESS.endswith(":6789")  # Katib dials its suggestion pods there
    assert DB_SERVE_ADDRESS.rsplit(":", 1)[1] != SUGGESTION_ADDRESS.rsplit(":", 1)[1]


def test_namespace_comes_from_the_kubeconfig_context(tmp_path: Path) -> None:
    from katib_progress.collector.kube import context_namespace

    config = tmp_path / "kubeconfig"
    config.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "c", "cluster": {"server": "http://127.0.0.1:1"}}],
                "users": [{"name": "u", "user": {}}],
                "contexts": [
                    {"name": "a", "context": {"cluster": "c", "user": "u", "namespace": "team-a"}},
                    {"name": "b", "context": {"cluster": "c", "user": "u"}},
                ],
                "current-context": "a",
            }
        )
    )
    assert context_namespace(str(config)) == "team-a"
    config.write_text(config.read_text().replace("current-context: a", "current-context: b"))
    assert context_namespace(str(config)) == "default"
    assert context_namespace(str(tmp_path / "none")) == "default"
