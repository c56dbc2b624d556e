"""Reports from a recorded local sweep; every expected figure is computed by hand in _fixture.py."""

from __future__ import annotations

import csv
import io
import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from katib_progress.report import TrialStatus, build_report, render
from katib_progress.report.sources.local import load_local
from tests.report._fixture import NOW, make_workdir

REPO = Path(__file__).resolve().parents[2]
CLI = (sys.executable, "-m", "katib_progress.cli")


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_workdir(tmp_path_factory.mktemp("sweep"))


@pytest.fixture(scope="module")
def report(workdir: Path):
    return build_report(load_local(workdir), now=NOW, gpu_hour_price=3.0, importance="ped-anova")


def test_curves_come_from_the_store(workdir: Path) -> None:
    record = load_local(workdir)
    by = {t.name: t for t in record.trials}
    assert [p.progress for p in by["t-a"].curve] == [25, 50, 75, 100]
    assert [p.metrics["loss"] for p in by["t-e"].curve] == [2.0, 1.5, 4.0]
    assert [p.eta_s for p in by["t-c"].curve] == [2400, 1800]
    assert by["t-a"].curve[1].elapsed_s == 1800
    # reserved rows are not metrics
    assert set(by["t-a"].curve[0].metrics) == {"loss"}
    assert by["t-c"].status is TrialStatus.PRUNED
    assert by["t-d"].log_tail.endswith("CUDA out of memory")


def test_ranks_and_objectives(report) -> None:
    rows = [(r.rank, r.trial, r.objective, r.status.value) for r in report.leaderboard]
    assert rows == [
        (1, "t-b", 0.2, "succeeded"),  # min over 0.8, 0.25, 0.2 (no observation in summary)
        (2, "t-a", 0.3, "succeeded"),  # the summary's observation
        (3, "t-c", 0.9, "pruned"),
        (4, "t-e", 1.5, "pruned"),  # min of 2.0, 1.5, 4.0
        (5, "t-f", 1.0, "running"),
        (6, "t-d", 5.0, "failed"),
    ]
    assert report.best is not None and report.best.trial == "t-b"
    pruned = {
        r.trial: (r.progress_at_prune, r.eta_at_prune_s) for r in report.leaderboard if r.progress_at_prune
    }
    assert pruned == {"t-c": (40, 1800), "t-e": (30, 2100)}


def test_cost_totals_and_savings(report) -> None:
    hours = {r.trial: r.gpu_hours for r in report.leaderboard}
    expected = {"t-a": 1.0, "t-b": 0.5, "t-c": 0.2, "t-d": 1 / 60, "t-e": 0.1, "t-f": 1 / 3}
    assert hours == pytest.approx(expected)
    assert report.cost.total_gpu_hours == pytest.approx(2.15)
    assert dict(report.cost.saved_by_trial) == pytest.approx({"t-c": 0.5, "t-e": 2100 / 3600})
    assert report.cost.saved_gpu_hours == pytest.approx(0.5 + 2100 / 3600)
    assert report.cost.total_cost == pytest.approx(2.15 * 3.0)
    assert report.cost.saved_cost == pytest.approx((0.5 + 2100 / 3600) * 3.0)
    assert len(report.cost.accelerators_assumed) == 6  # 1 per trial locally, nothing stated


def test_eta_accuracy(report) -> None:
    acc = {e.trial: e for e in report.eta}
    assert set(acc) == {"t-a", "t-b"}  # only finished trials have a real finish
    a = acc["t-a"]
    assert [s.error_s for s in a.samples] == [0, 600, -300, 0]
    assert a.mean_abs_error_s == pytest.approx(225)
    assert a.max_abs_error_s == 600
    assert a.mean_abs_rel_error == pytest.approx((0 + 600 / 1800 + 300 / 900) / 3)
    assert acc["t-b"].mean_abs_error_s == 0


def test_incidents(report) -> None:
    kinds = {(i.kind, i.trial) for i in report.incidents}
    assert kinds == {("crashed", "t-d"), ("diverged", "t-e"), ("stalled", "t-f")}
    crashed = next(i for i in report.incidents if i.kind == "crashed")
    assert "CUDA out of memory" in crashed.evidence["log tail"]
    stalled = next(i for i in report.incidents if i.kind == "stalled")
    assert "900 s" in stalled.summary


def test_a_longer_stall_limit_clears_the_stall(workdir: Path) -> None:
    report = build_report(load_local(workdir), now=NOW, stall_after_s=901, importance="none")
    assert "stalled" not in {i.kind for i in report.incidents}


def test_csv_and_json_carry_the_same_numbers(report) -> None:
    rows = list(csv.DictReader(io.StringIO(render(report, "csv"))))
    assert [r["trial"] for r in rows] == ["t-b", "t-a", "t-c", "t-e", "t-f", "t-d"]
    assert rows[0]["param.lr"] == "0.1" and rows[0]["best"] == "true"
    assert math.fsum(float(r["gpu_hours"]) for r in rows) == pytest.approx(2.15, abs=1e-5)
    assert math.fsum(float(r["saved_gpu_hours"]) for r in rows) == pytest.approx(0.5 + 2100 / 3600, abs=1e-5)
    doc = json.loads(render(report, "json"))
    assert doc["best"] == "t-b"
    assert doc["counts"]["pruned"] == 2 and doc["counts"]["running"] == 1
    assert doc["cost"]["total_gpu_hours"] == pytest.approx(2.15)
    assert doc["leaderboard"][2]["progress_at_prune"] == 40


def test_markdown_names_the_strategy_and_prune_reason(report) -> None:
    text = render(report, "md")
    assert "loss (minimize, min)" in text
    assert "pruned at 40% (median: 0.9 worse than median 0.5 at 40%)" in text
    assert "| 1 | **t-b** |" in text


def test_html_is_self_contained(report) -> None:
    text = render(report, "html")
    assert "<script src=" not in text  # plotly.js is inlined, nothing is fetched
    assert text.count("Plotly.newPlot") >= 5  # curve, parallel, slices, cost, ETA plots


def test_cli_report_runs_as_a_subprocess(workdir: Path, tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "katib_progress.cli",
            "report",
            str(workdir),
            "--output-file",
            str(out),
            "--importance",
            "none",
        ],
        check=False,
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    doc = json.loads(out.read_text())
    assert [r["trial"] for r in doc["leaderboard"]][:2] == ["t-b", "t-a"]
    html = tmp_path / "r.html"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "katib_progress.cli",
            "report",
            str(workdir),
            "--output-file",
            str(html),
            "--gpu-hour-price",
            "2",
            "--importance",
            "ped-anova",
        ],
        check=False,
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert html.read_text().startswith("<!DOCTYPE html>")


def test_cli_rejects_a_directory_without_summary(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "katib_progress.cli", "report", str(tmp_path), "-o", "md"],
        check=False,
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 1
    assert "summary.json" in done.stderr
    assert not (tmp_path / "observations.sqlite").exists()
