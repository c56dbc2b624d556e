"""A report of a real local sweep agrees with its summary.json on every figure: experiment status,
counts per state (interrupted apart), best trial, hours of every attempt, non-finite finals."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from katib_progress.local._view import SweepView
from katib_progress.local.summary import SweepSummary, read_summary
from katib_progress.report import TrialStatus, build_report, render
from katib_progress.report.sources.local import load_local
from tests.local.conftest import experiment_doc, sweep, write_experiment

MODES = ["ok", "nanlast", "interrupt"]
_REPORT_STATE = {
    "Succeeded": "succeeded",
    "EarlyStopped": "pruned",
    "Failed": "failed",
    "MetricsUnavailable": "metrics unavailable",
    "Killed": "killed",
    "Interrupted": "interrupted",
    "Running": "running",
    "Created": "pending",
}


def _doc() -> dict[str, Any]:
    # grid: every mode exactly once
    return experiment_doc(
        ["--mode=${trialParameters.mode}", "--steps=3"],
        parameters=[{"name": "mode", "parameterType": "categorical", "feasibleSpace": {"list": MODES}}],
        algorithm={"algorithmName": "grid"},
        maxTrialCount=3,
        parallelTrialCount=3,
    )


@pytest.fixture(scope="module")
def interrupted(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, SweepSummary, str]:
    """A sweep of 3 trials; the "interrupt" trial sends SIGINT to the sweep on its first attempt."""
    root = tmp_path_factory.mktemp("sweep")
    doc = _doc()
    path = write_experiment(root / "e.yaml", doc)
    run_dir = root / "work"
    result, out = sweep(path, run_dir)
    assert result.exit_code == 130, out
    summary = read_summary(run_dir)
    assert summary is not None
    return path, run_dir, summary, out


def _report(run_dir: Path) -> Any:
    return build_report(load_local(run_dir), importance="none")


def test_the_report_of_an_interrupted_sweep_agrees_with_its_summary(interrupted: Any) -> None:
    _, run_dir, summary, _ = interrupted
    assert (summary.status, summary.reason) == ("Interrupted", "SweepInterrupted")
    by_mode = {t.params["mode"]: t for t in summary.trials}
    assert by_mode["interrupt"].status == "Interrupted"
    report = _report(run_dir)
    assert (report.experiment.status, report.experiment.reason) == ("Interrupted", "SweepInterrupted")
    expected = {state: 0 for state in report.counts()}
    for state, n in summary.counts.items():
        expected[_REPORT_STATE[state]] += n
    assert report.counts() == expected
    assert report.counts()["interrupted"] == 1 and report.counts()["failed"] == 0
    assert not [i for i in report.incidents if i.kind == "crashed"]
    assert summary.best is not None and report.best is not None
    assert report.best.trial == summary.best.trial
    assert report.cost.total_gpu_hours == pytest.approx(summary.compute_used_s / 3600)
    assert report.cost.saved_gpu_hours == pytest.approx(summary.compute_saved_s / 3600)
    assert report.generated_at > summary.updated_at  # the report's own time, not the sweep's
    text = render(report, "md")
    assert "status: Interrupted (SweepInterrupted)" in text
    unit = "GPU-hours" if summary.accelerator == "GPU" else "compute-hours"
    assert summary.accelerator in ("GPU", "compute") and unit in text
    doc = json.loads(render(report, "json"))
    assert doc["status"] == "Interrupted" and doc["counts"]["interrupted"] == 1


def test_a_nan_final_is_shown_and_reported_as_an_incident(interrupted: Any) -> None:
    _, run_dir, summary, out = interrupted
    trial = next(t for t in summary.trials if t.params["mode"] == "nanlast")
    assert math.isnan(trial.latest_metrics["loss"])
    assert trial.objective is not None and math.isfinite(trial.objective)  # min ignores the later NaN
    assert f"succeeded {trial.name} objective={trial.objective:.6g}" in out
    assert "(last loss=nan)" in out
    incidents = {i.trial: i for i in _report(run_dir).incidents}
    assert incidents[trial.name].kind == "diverged" and "final loss is nan" in incidents[trial.name].summary


def test_hours_count_every_attempt_after_a_resume(interrupted: Any) -> None:
    path, run_dir, _, _ = interrupted
    result, out = sweep(path, run_dir)
    assert result.exit_code == 0, out
    assert "run again from scratch" in out
    summary = result.summary
    again = next(t for t in summary.trials if t.params["mode"] == "interrupt")
    assert again.status == "Succeeded" and again.attempts == 2
    assert again.compute_s > again.elapsed_s + 1.0  # the first attempt held for 1.5 s
    report = _report(run_dir)
    row = next(r for r in report.leaderboard if r.trial == again.name)
    assert row.gpu_hours == pytest.approx(again.compute_s / 3600)
    assert report.cost.total_gpu_hours == pytest.approx(summary.compute_used_s / 3600)


def test_the_live_view_counts_compute_of_running_trials(tmp_path: Path) -> None:
    seen: list[SweepSummary] = []

    class Recording(SweepView):
        def update(self, summary: SweepSummary, live: Any) -> None:
            seen.append(summary)
            super().update(summary, live)

    doc = experiment_doc(["--x=${trialParameters.x}", "--steps=4", "--sleep=0.3"], maxTrialCount=1)
    doc["spec"]["parallelTrialCount"] = 1
    path = write_experiment(tmp_path / "e.yaml", doc)
    import io

    from rich.console import Console

    from katib_progress.local.experiment import load_experiment
    from katib_progress.local.runner import SweepOptions, run_sweep

    view = Recording(live=False, console=Console(file=io.StringIO()))
    result = run_sweep(load_experiment(path), SweepOptions(workdir=tmp_path / "w", poll_s=0.05), view=view)
    assert result.exit_code == 0
    running = [s for s in seen if s.counts.get("Running")]
    assert running and max(s.compute_used_s for s in running) > 0.5


def test_log_scale_parameters_get_log_axes(tmp_path: Path) -> None:
    from katib_progress.report import _figures as figs
    from tests.report._fixture import make_workdir

    workdir = make_workdir(tmp_path)
    doc = json.loads((workdir / "summary.json").read_text())
    doc["parameters"] = [
        {"name": "lr", "type": "double", "min": "0.001", "max": "1", "distribution": "logUniform"},
        {"name": "layers", "type": "int", "min": "1", "max": "8"},
    ]
    (workdir / "summary.json").write_text(json.dumps(doc))
    report = _report(workdir)
    assert [p.log for p in report.experiment.parameters] == [True, False]
    axes = figs.all_axes(report)
    assert [(a.name, a.log_scale) for a in axes] == [("lr", True), ("layers", False)]
    slices = figs.slices(report, axes)
    assert slices.layout.xaxis.type == "log" and slices.layout.xaxis2.type != "log"
    parallel = figs.parallel(report, axes)
    lr = parallel.data[0].dimensions[0]
    assert lr.label == "lr (log)"
    shown = {t.name: float(t.params["lr"]) for t in report.experiment.trials}
    objectives = {r.trial: r.objective for r in report.leaderboard}
    kept = [shown[t.name] for t in report.experiment.trials if objectives[t.name] is not None]
    assert list(lr.values) == pytest.approx([math.log10(v) for v in kept])
    assert "0.001" in lr.ticktext and "1" in lr.ticktext


def test_md_and_csv_reports_print_no_log_lines(interrupted: Any) -> None:
    for fmt in ("md", "csv"):
        done = subprocess.run(
            [sys.executable, "-m", "katib_progress.cli", "report", str(interrupted[1]), "-o", fmt],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert done.returncode == 0 and done.stdout, done.stderr
        assert done.stderr == ""


def test_killed_and_interrupted_are_their_own_states() -> None:
    assert (
        TrialStatus("killed") is TrialStatus.KILLED and TrialStatus("interrupted") is TrialStatus.INTERRUPTED
    )
    assert datetime.now(UTC)  # keep the import honest
