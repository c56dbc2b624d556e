"""The report's data model, Katib strategies and the cluster adapter's pure conversions."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from katib_progress.collector.rows import ELAPSED_METRIC, ETA_METRIC, PROGRESS_METRIC, SEQ_METRIC
from katib_progress.report import (
    CurvePoint,
    ExperimentRecord,
    Objective,
    TrialRecord,
    TrialStatus,
    build_report,
)
from katib_progress.report._extract import extract
from katib_progress.report.sources._observations import rows_to_curve
from katib_progress.report.sources.cluster import accelerators, trial_state


def test_objective_validation_names_the_field() -> None:
    with pytest.raises(ValueError, match="direction"):
        Objective(metric="loss", direction="down")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"strategies\['loss'\]"):
        Objective(metric="loss", strategies={"loss": "median"})
    with pytest.raises(ValueError, match="duplicate trial names"):
        ExperimentRecord("e", Objective("loss"), trials=(TrialRecord("a"), TrialRecord("a")))


def test_default_strategy_follows_the_direction() -> None:
    assert Objective("acc", "maximize").strategy("acc") == "max"
    assert Objective("loss").strategy("loss") == "min"
    assert Objective("loss", strategies={"loss": "latest"}).strategy("loss") == "latest"


def test_extract_per_strategy_skips_non_finite() -> None:
    t0 = datetime(2026, 1, 1, tzinfo=UTC)
    curve = [CurvePoint(t0, metrics={"loss": v}) for v in (0.5, 0.2, float("nan"), 0.4)]
    trial = TrialRecord("t", curve=tuple(curve))
    assert extract(trial, "loss", "min") == 0.2
    assert extract(trial, "loss", "max") == 0.5
    assert extract(trial, "loss", "latest") == 0.4


def test_caller_mappings_are_copied() -> None:
    params = {"lr": "0.1"}
    trial = TrialRecord("t", params=params)
    params["lr"] = "9"
    assert trial.params["lr"] == "0.1"


def test_rows_to_curve_groups_by_timestamp() -> None:
    rows = [
        ("2026-01-01T00:00:01.5Z", "loss", "0.9"),
        ("2026-01-01T00:00:01.5Z", PROGRESS_METRIC, "10"),
        ("2026-01-01T00:00:01.5Z", ETA_METRIC, "90"),
        ("2026-01-01T00:00:01.5Z", ELAPSED_METRIC, "10"),
        ("2026-01-01T00:00:01.5Z", SEQ_METRIC, "1"),
        ("2026-01-01T00:00:02Z", "loss", "0.8"),
        ("not a time", "loss", "0.1"),
        ("2026-01-01T00:00:03Z", "loss", "n/a"),
    ]
    curve = rows_to_curve(rows)
    assert len(curve) == 2
    assert (curve[0].progress, curve[0].eta_s, curve[0].elapsed_s, dict(curve[0].metrics)) == (
        10,
        90,
        10,
        {"loss": 0.9},
    )
    assert curve[1].progress is None and dict(curve[1].metrics) == {"loss": 0.8}


def test_accelerators_from_trainjob_resources() -> None:
    job = {
        "spec": {
            "trainer": {"numNodes": 3, "resourcesPerNode": {"limits": {"nvidia.com/gpu": "2", "cpu": "8"}}}
        }
    }
    assert accelerators(job) == 6
    tpu = {"spec": {"trainer": {"resourcesPerNode": {"requests": {"google.com/tpu": "4"}}}}}
    assert accelerators(tpu) == 4
    cpu_only = {"spec": {"trainer": {"numNodes": 2, "resourcesPerNode": {"limits": {"cpu": "8"}}}}}
    assert accelerators(cpu_only) == 0
    assert accelerators({"spec": {"trainer": {}}}) is None


def test_trial_state_priority() -> None:
    trial = {
        "status": {
            "conditions": [
                {"type": "Running", "status": "False"},
                {"type": "EarlyStopped", "status": "True", "reason": "TrialEarlyStopped", "message": "m"},
            ]
        }
    }
    assert trial_state(trial)[:3] == (TrialStatus.PRUNED, "TrialEarlyStopped", "m")
    assert trial_state({"status": {}})[0] is TrialStatus.PENDING


def test_pruned_trial_without_eta_saves_nothing_and_is_listed() -> None:
    t0 = datetime(2026, 1, 1, tzinfo=UTC)
    trial = TrialRecord(
        "p", status=TrialStatus.PRUNED, started=t0, ended=t0, curve=(CurvePoint(t0, progress=10),)
    )
    report = build_report(
        ExperimentRecord("e", Objective("loss"), trials=(trial,)), now=t0, importance="none"
    )
    assert report.cost.saved_gpu_hours == 0
    assert report.cost.pruned_without_eta == ("p",)


def test_negative_price_is_rejected() -> None:
    with pytest.raises(ValueError, match="gpu_hour_price"):
        build_report(ExperimentRecord("e", Objective("loss")), gpu_hour_price=-1, importance="none")
