"""The work directory: validation comes first, ``--fresh`` never deletes, a rejected experiment leaves
nothing behind."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from katib_progress.core.errors import ConfigError
from katib_progress.local.summary import read_summary

from .conftest import experiment_doc, sweep, write_experiment

X = "--x=${trialParameters.x}"


@pytest.fixture
def finished(tmp_path: Path, run_dir: Path) -> Path:
    """A finished one-trial sweep in ``run_dir``; returns the Experiment file."""
    path = write_experiment(
        tmp_path / "e.yaml", experiment_doc([X, "--steps=2"], maxTrialCount=1, parallelTrialCount=1)
    )
    result, out = sweep(path, run_dir)
    assert result.exit_code == 0, out
    return path


def _typo(path: Path, where: str) -> None:
    import yaml

    doc = yaml.safe_load(path.read_text())
    if where == "algorithm":
        doc["spec"]["algorithm"] = {"algorithmName": "randomm"}
    else:
        doc["spec"]["earlyStopping"] = {
            "algorithmName": "katib-progress",
            "algorithmSettings": [{"name": "percentile", "value": "150"}],
        }
    path.write_text(yaml.safe_dump(doc))


@pytest.mark.parametrize("where", ["algorithm", "earlyStopping"])
def test_a_typo_shows_the_real_error_not_the_fresh_advice(finished: Path, run_dir: Path, where: str) -> None:
    _typo(finished, where)
    with pytest.raises(ConfigError) as info:
        sweep(finished, run_dir)
    text = str(info.value)
    assert "different search" not in text and "--fresh" not in text
    assert ("randomm" in text) if where == "algorithm" else ("percentile" in text)


def test_fresh_with_an_invalid_spec_keeps_the_finished_sweep(finished: Path, run_dir: Path) -> None:
    before = read_summary(run_dir)
    trials = sorted(p.name for p in (run_dir / "trials").iterdir())
    _typo(finished, "algorithm")
    with pytest.raises(ConfigError, match="randomm"):
        sweep(finished, run_dir, fresh=True)
    assert read_summary(run_dir) == before
    assert sorted(p.name for p in (run_dir / "trials").iterdir()) == trials
    assert not list(run_dir.parent.glob(f"{run_dir.name}.old-*"))


def test_fresh_moves_the_old_results_aside(finished: Path, run_dir: Path) -> None:
    before = read_summary(run_dir)
    assert before is not None
    result, out = sweep(finished, run_dir, fresh=True)
    assert result.exit_code == 0, out
    (old,) = run_dir.parent.glob(f"{run_dir.name}.old-*")
    assert read_summary(old) == before  # nothing lost: summary, store and trial logs moved intact
    assert (old / "observations.sqlite").exists()
    assert {p.name for p in (old / "trials").iterdir()} == {t.name for t in before.trials}
    assert str(old) in out
    again = read_summary(run_dir)
    assert again is not None and len(again.trials) == 1
    assert again.trials[0].pid != before.trials[0].pid  # run again, not copied


def test_a_rejected_experiment_creates_no_work_dir(tmp_path: Path) -> None:
    doc = experiment_doc([X], algorithm={"algorithmName": "randomm"})
    path = write_experiment(tmp_path / "e.yaml", doc)
    run_dir = tmp_path / "never"
    proc = subprocess.run(
        [sys.executable, "-m", "katib_progress.cli", "sweep", str(path), "--workdir", str(run_dir)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 2, proc.stderr
    assert "spec.algorithm" in proc.stderr and "randomm" in proc.stderr
    assert not run_dir.exists()


def test_service_logs_go_to_sweep_log_not_the_terminal(tmp_path: Path) -> None:
    path = write_experiment(
        tmp_path / "e.yaml", experiment_doc([X, "--steps=2"], maxTrialCount=1, parallelTrialCount=1)
    )
    run_dir = tmp_path / "w"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "katib_progress.cli",
            "sweep",
            str(path),
            "--workdir",
            str(run_dir),
            "--plain",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""
    log = (run_dir / "sweep.log").read_text()
    # suggestion/server.py logs "serving ...; listening on ..." before the work dir existed: kept
    assert "katib_progress.suggestion.server: serving" in log and "listening on" in log
