"""Scenario g: ``katib-progress status``, ``watch`` and ``report --experiment`` against the real API
server and Katib's DB manager, on an Experiment real Katib ran."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.e2e.cluster import RealKatib
from tests.e2e.curves import every
from tests.e2e.launch import Launch, register
from tests.katibmodel.harness import KATIB_PROGRESS
from tests.katibmodel.scenarios import NS, converging, diverging, experiment


def _run(katib: RealKatib, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        katib.in_cluster([KATIB_PROGRESS, *args]),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


CLI = register(
    Launch(lambda: experiment("cli", max_trials=4, parallel=2), lambda: every(2, diverging, converging))
)


@pytest.mark.usefixtures("launched")
def test_status_watch_and_report_on_a_real_experiment(katib: RealKatib, tmp_path: Path) -> None:
    katib.wait_finished(NS, "cli")
    trials = {t["metadata"]["name"] for t in katib.trial_list(NS, "cli")}
    kube = f"--kubeconfig={katib.kubeconfig}"

    status = _run(katib, "status", "--experiment", "cli", "-n", NS, kube, "-o", "json")
    assert status.returncode == 0, status.stderr
    doc = json.loads(status.stdout)
    assert {t["name"] for t in doc["trials"]} == trials, doc

    watch = _run(katib, "watch", "--experiment", "cli", "-n", NS, kube, "--interval", "1", timeout=60)
    assert watch.returncode == 0, watch.stderr
    for name in trials:
        assert name in watch.stdout

    out = tmp_path / "report.json"
    db = f"--db-manager={katib.db_address}"
    report = _run(
        katib, "report", "--experiment", "cli", "-n", NS, kube, db, "--format", "json", "-o", str(out)
    )
    assert report.returncode == 0, report.stderr
    data = json.loads(out.read_text())
    assert data["source"] == "cluster" and data["status"] == "Succeeded", data
    assert not data["notes"], data["notes"]  # rows were read from Katib's DB manager
    board = {row["trial"]: row for row in data["leaderboard"]}
    assert set(board) == trials
    for name in trials:
        stored = [float(value) for _, value, _ in katib.rows(name, "loss")]
        assert stored, f"{name}: no rows in Katib's DB manager"
        assert board[name]["objective"] == min(stored)  # the objective's default strategy: min
