from __future__ import annotations

import io
from datetime import UTC, datetime
from types import MappingProxyType

from rich.console import Console

from katib_progress.local._pipeline import Live
from katib_progress.local._view import SweepView, fmt_s
from katib_progress.local.summary import BestTrial, ObjectiveSummary, SweepSummary, TrialSummary


def _summary() -> SweepSummary:
    now = datetime.now(UTC)
    trials = [
        TrialSummary(name="e-aaaa", params={"lr": "0.1"}, status="Succeeded", progress=100.0, objective=0.25),
        TrialSummary(
            name="e-bbbb",
            params={"lr": "9"},
            status="EarlyStopped",
            progress=12.0,
            eta_at_prune_s=80.0,
            message="loss is nan at 12%: the trial diverged",
        ),
        TrialSummary(name="e-cccc", params={"lr": "0.01"}, status="Running"),
    ]
    return SweepSummary(
        experiment="e",
        namespace="default",
        source="e.yaml",
        fingerprint="f",
        objective=ObjectiveSummary(type="minimize", metric="loss"),
        algorithm="random",
        max_trial_count=5,
        started_at=now,
        updated_at=now,
        compute_used_s=100.0,
        compute_saved_s=80.0,
        counts={"Succeeded": 1, "EarlyStopped": 1, "Running": 1},
        best=BestTrial(trial="e-aaaa", objective=0.25, params={"lr": "0.1"}, observation={"loss": 0.25}),
        trials=trials,
    )


def test_live_table_shows_progress_eta_objective_status_and_reason() -> None:
    out = io.StringIO()
    console = Console(file=out, width=200, force_terminal=False)
    view = SweepView(live=False, console=console)
    view._metric = "loss"
    live = {"e-cccc": Live(progress=40.0, eta_s=95.0, metrics=MappingProxyType({"loss": 0.5}))}
    console.print(view.render(_summary(), live))
    text = out.getvalue()
    assert "trials 2/5 done · 1 running · 1 pruned · 0 failed" in text
    assert "best loss=0.25 (e-aaaa: lr=0.1)" in text
    assert "saved by pruning ~1m20s" in text
    row = next(line for line in text.splitlines() if "cccc" in line)
    assert "40%" in row and "1m35s" in row and "0.5" in row and "Running" in row
    pruned = next(line for line in text.splitlines() if "bbbb" in line)
    assert "EarlyStopped" in pruned and "diverged" in pruned and "saved 1m20s" in pruned


def test_fmt_s() -> None:
    assert [fmt_s(None), fmt_s(5), fmt_s(75), fmt_s(7300)] == ["-", "5s", "1m15s", "2h01m"]
