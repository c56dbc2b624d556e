"""A pruned Trial's observation, computed as Katib's getMetrics computes it
(pkg/controller.v1beta1/trial/trial_controller_util.go), from rows read back from the real store."""

from __future__ import annotations

import math
from pathlib import Path

import grpc
import pytest
from kubeflow.katib import katib_api_pb2 as pb
from kubeflow.katib import katib_api_pb2_grpc as pb_grpc

from katib_progress.collector.enforce import Enforcer, EnforceResult
from katib_progress.collector.katib.observation import (
    UNAVAILABLE,
    get_metrics,
    go_parse_float,
    observation_available,
)
from katib_progress.collector.katib.readback import StoredRowsReader
from katib_progress.collector.pipeline import JobRef
from katib_progress.collector.rows import SEQ_METRIC, MetricRow
from katib_progress.collector.store import start_store_server
from katib_progress.core.errors import TemporaryError
from katib_progress.core.types import Decision, Verdict
from tests.kubestandin import KubeStandin
from tests.kubestandin.objects import KATIB, TRAINER, Objects

DECISION = Decision(Verdict.PRUNE, "worse than the median", "median", {"progress": 40.0})


def _row(name: str, value: str, second: int, frac: str = "") -> MetricRow:
    return MetricRow(name, value, f"2026-01-01T00:00:{second:02d}{frac}Z")


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("1.5", 1.5),
        ("-2", -2.0),
        (".5", 0.5),
        ("5.", 5.0),
        ("1e3", 1000.0),
        ("+Inf", math.inf),
        ("-infinity", -math.inf),
        ("0x1p-2", 0.25),
        ("1e-400", 0.0),  # underflow is no error in Go
        ("1e400", None),  # ErrRange
        ("+nan", None),  # Go's nan takes no sign
        (" 1", None),
        ("1_000", None),
        ("", None),
        ("abc", None),
    ],
)
def test_go_parse_float(text: str, value: float | None) -> None:
    assert go_parse_float(text) == value


def test_go_parse_float_nan() -> None:
    parsed = go_parse_float("NaN")
    assert parsed is not None and math.isnan(parsed)


def test_get_metrics_min_max_keep_strings_latest_by_time_ties_to_later_row() -> None:
    rows = [
        _row("loss", "2.50", 1),
        _row("loss", "abc", 4),  # not a number: latest only
        _row("loss", "1.0", 2),
        _row("loss", "3e0", 3),
        _row("acc", "0.7", 9),
        _row("acc", "0.8", 9),  # same stamp: the later row wins
        _row("other", "5", 10),  # no strategy: ignored
    ]
    metrics = get_metrics(rows, ["loss", "acc", "f1"])
    assert metrics == [
        {"name": "loss", "min": "1.0", "max": "3e0", "latest": "abc"},
        {"name": "acc", "min": "0.7", "max": "0.8", "latest": "0.8"},
        {"name": "f1", "min": UNAVAILABLE, "max": UNAVAILABLE, "latest": UNAVAILABLE},
    ]
    assert get_metrics([], ["loss"]) is None  # Katib leaves the observation unset
    with pytest.raises(ValueError, match="time_stamp"):
        get_metrics([MetricRow("loss", "1", "yesterday")], ["loss"])
    # an earlier stamp read later does not replace latest (sub-second order counts)
    assert get_metrics([_row("loss", "1", 5, ".5"), _row("loss", "2", 5, ".25")], ["loss"]) == [
        {"name": "loss", "min": "1", "max": "2", "latest": "1"}
    ]
    assert observation_available({"metrics": metrics}, "loss")
    assert not observation_available({"metrics": metrics}, "f1")
    assert not observation_available(None, "loss")


def _store_rows(address: str, trial: str, rows: list[MetricRow]) -> None:
    log = pb.ObservationLog(
        metric_logs=[
            pb.MetricLog(time_stamp=r.timestamp, metric=pb.Metric(name=r.name, value=r.value)) for r in rows
        ]
    )
    with grpc.insecure_channel(address) as channel:
        pb_grpc.DBManagerStub(channel).ReportObservationLog(
            pb.ReportObservationLogRequest(trial_name=trial, observation_log=log), timeout=5
        )


def _running_trial(objects: Objects, name: str, *, additional: list[str] | None = None) -> JobRef:
    job = objects.trial_job(name)
    if additional:
        trial = objects.api.get_namespaced_custom_object(*KATIB, "default", "trials", name)
        objective = {
            **trial["spec"]["objective"],
            "additionalMetricNames": additional,
            "metricStrategies": [{"name": "loss", "value": "min"}]
            + [{"name": m, "value": "max"} for m in additional],
        }
        objects.api.patch_namespaced_custom_object(
            *KATIB, "default", "trials", name, {"spec": {"objective": objective}}
        )
    objects.api.patch_namespaced_custom_object_status(
        *KATIB,
        "default",
        "trials",
        name,
        {"status": {"conditions": [{"type": "Running", "status": "True", "reason": "TrialRunning"}]}},
    )
    return JobRef("default", name, job["metadata"]["uid"], "exp", name)


def test_pruned_trial_gets_condition_and_observation_in_one_patch(kube: KubeStandin, tmp_path: Path) -> None:
    store = start_store_server(tmp_path / "db.sqlite")
    reader = StoredRowsReader(store.address)
    try:
        objects = Objects(kube.api_client())
        job = _running_trial(objects, "t", additional=["acc"])
        enforcer = Enforcer(kube.api_client(), observations=reader)
        _store_rows(
            store.address, "t", [_row("loss", "2.0", 1), _row("acc", "0.5", 1), _row(SEQ_METRIC, "0", 1)]
        )
        # The decision was made on snapshot 1, whose rows are not stored yet: nothing is written.
        with pytest.raises(TemporaryError, match="not stored yet"):
            enforcer.prune(job, DECISION, seq=1)
        trial = objects.api.get_namespaced_custom_object(*KATIB, "default", "trials", "t")
        assert "observation" not in trial["status"]
        _store_rows(
            store.address, "t", [_row("loss", "2.5", 2), _row("acc", "0.7", 2), _row(SEQ_METRIC, "1", 2)]
        )
        kube.clear_requests()
        assert enforcer.prune(job, DECISION, seq=1) is EnforceResult.PRUNED
        patches = [
            r for r in kube.requests if (r.verb, r.resource, r.subresource) == ("patch", "trials", "status")
        ]
        assert len(patches) == 1
        trial = objects.api.get_namespaced_custom_object(*KATIB, "default", "trials", "t")
        assert trial["status"]["observation"] == {
            "metrics": [
                {"name": "loss", "min": "2.0", "max": "2.5", "latest": "2.5"},
                {"name": "acc", "min": "0.5", "max": "0.7", "latest": "0.7"},
            ]
        }
        stopped = [c for c in trial["status"]["conditions"] if c["type"] == "EarlyStopped"]
        assert [(c["status"], c["reason"]) for c in stopped] == [("True", "TrialEarlyStopped")]
        assert objects.api.get_namespaced_custom_object(*TRAINER, "default", "trainjobs", "t")["spec"][
            "suspend"
        ]
        assert enforcer.prune(job, DECISION, seq=1) is EnforceResult.ALREADY_STOPPED
    finally:
        reader.close()
        store.stop(0)


def test_no_objective_value_stored_means_not_early_stopped(kube: KubeStandin, tmp_path: Path) -> None:
    store = start_store_server(tmp_path / "db.sqlite")
    reader = StoredRowsReader(store.address)
    try:
        objects = Objects(kube.api_client())
        job = _running_trial(objects, "n")
        _store_rows(store.address, "n", [_row("accuracy", "0.1", 1), _row(SEQ_METRIC, "0", 1)])
        enforcer = Enforcer(kube.api_client(), observations=reader)
        assert enforcer.prune(job, DECISION, seq=0) is EnforceResult.NO_OBSERVATION
        trial = objects.api.get_namespaced_custom_object(*KATIB, "default", "trials", "n")
        assert not [c for c in trial["status"]["conditions"] if c["type"] == "EarlyStopped"]
        assert (
            objects.api.get_namespaced_custom_object(*TRAINER, "default", "trainjobs", "n")["spec"].get(
                "suspend"
            )
            is not True
        )
    finally:
        reader.close()
        store.stop(0)


def test_metrics_unavailable_trial_is_never_early_stopped(kube: KubeStandin, tmp_path: Path) -> None:
    store = start_store_server(tmp_path / "db.sqlite")
    reader = StoredRowsReader(store.address)
    try:
        objects = Objects(kube.api_client())
        job = _running_trial(objects, "m")
        _store_rows(store.address, "m", [_row("loss", "1", 1), _row(SEQ_METRIC, "0", 1)])
        objects.api.patch_namespaced_custom_object_status(
            *KATIB,
            "default",
            "trials",
            "m",
            {
                "status": {
                    "conditions": [
                        {"type": "MetricsUnavailable", "status": "True", "reason": "MetricsUnavailable"}
                    ]
                }
            },
        )
        assert Enforcer(kube.api_client(), observations=reader).prune(job, DECISION, seq=0) is (
            EnforceResult.TRIAL_FINISHED
        )
        trial = objects.api.get_namespaced_custom_object(*KATIB, "default", "trials", "m")
        assert [c["type"] for c in trial["status"]["conditions"]] == ["MetricsUnavailable"]
    finally:
        reader.close()
        store.stop(0)
