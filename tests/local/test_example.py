"""The README's main command on the bundled example: a shortened smoke sweep in the fast suite (the
real ``katib-progress sweep`` and ``katib-progress report`` commands), the full one in the slow profile."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from katib_progress.local.summary import read_summary

from .conftest import sweep

EXAMPLE = Path(__file__).parents[2] / "examples" / "local" / "experiment.yaml"
CLI = Path(sys.executable).parent / "katib-progress"


def _shortened(tmp_path: Path) -> Path:
    """The bundled example with 4 trials, 2 at a time, each paced to about 6 s instead of 20 s."""
    shutil.copy(EXAMPLE.parent / "train.py", tmp_path / "train.py")
    doc = yaml.safe_load(EXAMPLE.read_text())
    doc["spec"].update(maxTrialCount=4, parallelTrialCount=2)
    trainer = doc["spec"]["trialTemplate"]["trialSpec"]["spec"]["trainer"]
    trainer["command"] = [
        "--epochs=12" if a.startswith("--epochs=") else "--seconds=6" if a.startswith("--seconds=") else a
        for a in trainer["command"]
    ]
    path = tmp_path / "experiment.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


@pytest.mark.timeout(300)
def test_smoke_sweep_with_the_real_command(tmp_path: Path) -> None:
    path, work = _shortened(tmp_path), tmp_path / "work"
    done = subprocess.run(
        [str(CLI), "sweep", str(path), "--workdir", str(work), "--plain"],
        capture_output=True,
        text=True,
        timeout=280,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("katib-progress sweep digits-mlp: minimize eval_loss, algorithm tpe")
    assert "Experiment Succeeded (MaxTrialsReached): 4 trials completed (maxTrialCount)" in done.stdout
    summary = read_summary(work)
    assert summary is not None and summary.status == "Succeeded" and len(summary.trials) == 4
    assert summary.best is not None and summary.best.objective > 0
    assert all(t.progress is not None for t in summary.trials)
    assert (work / "sweep.log").exists() and (work / "observations.sqlite").exists()
    report = subprocess.run(
        [
            str(CLI),
            "report",
            str(work),
            "--output-file",
            str(tmp_path / "report.html"),
            "--importance",
            "none",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert report.returncode == 0, report.stderr
    assert (tmp_path / "report.html").read_text().startswith("<!DOCTYPE html>")


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_example_sweep_prunes_and_finds_a_best_configuration(tmp_path: Path) -> None:
    result, out = sweep(EXAMPLE, tmp_path / "work", grace_s=5.0)
    assert result.exit_code == 0, out
    summary = result.summary
    assert summary.status == "Succeeded" and len(summary.trials) == 14
    pruned = [t for t in summary.trials if t.status == "EarlyStopped"]
    assert pruned and all(t.message for t in pruned)
    assert summary.compute_saved_s > 0
    assert summary.best is not None and summary.best.objective < 0.5
    assert "Best trial" in out
