"""Reports, ``status`` and ``watch`` from a cluster experiment: the Kubernetes API stand-in (real HTTP,
the official client) plus Katib's DBManager API served by the embedded store over loopback gRPC.

Hand-computed (maximize accuracy, strategy max; now = 10:30):
trial  state         accelerators                        run          GPU-h   objective
cx-1   Succeeded     2 GPU x 2 nodes (TrainJob)           09:00-10:00  4.0     0.9 (Trial observation max)
cx-2   EarlyStopped  1 GPU x 1 node  (TrainJob)           09:00-09:30  0.5     0.6 (log max)
       saved by pruning: ETA 1800 s at the prune x 1 accelerator = 0.5 GPU-h
cx-3   Running       none stated -> --accelerators 0      09:30-now    0.0     0.7 (log)
cx-4   Failed        8 GPU x 1 node (Trial runSpec; job gone) 09:00-09:06 0.8  -
"""

from __future__ import annotations

import io
import json
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import grpc
import pytest
import yaml
from kubeflow.katib import katib_api_pb2 as pb
from kubeflow.katib import katib_api_pb2_grpc as pb_grpc
from kubernetes import client
from rich.console import Console

from katib_progress.collector.rows import ETA_METRIC, PROGRESS_METRIC
from katib_progress.report import TrialStatus, build_report, render
from katib_progress.report.live import status_lines, trial_rows, watch
from katib_progress.report.sources.cluster import load_cluster
from tests import kubestandin

NS = "team"
DAY = "2026-11-02"
NOW = datetime(2026, 11, 2, 10, 30, tzinfo=UTC)
REPO = Path(__file__).resolve().parents[2]
CLI = (sys.executable, "-m", "katib_progress.cli")


def ts(hms: str) -> str:
    return f"{DAY}T{hms}Z"


def _trainjob(name: str, gpus: int | None, nodes: int) -> dict[str, Any]:
    trainer: dict[str, Any] = {"numNodes": nodes, "image": "example/train:1"}
    if gpus is not None:
        trainer["resourcesPerNode"] = {"limits": {"nvidia.com/gpu": str(gpus), "cpu": "4"}}
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": name, "namespace": NS},
        "spec": {"runtimeRef": {"name": "torch-distributed"}, "trainer": trainer},
    }


def _trial(
    name: str, lr: str, conditions: list[dict[str, str]], status: dict[str, Any], run_spec=None
) -> dict:
    spec: dict[str, Any] = {
        "objective": {"type": "maximize", "objectiveMetricName": "accuracy"},
        "parameterAssignments": [{"name": "lr", "value": lr}],
    }
    if run_spec is not None:
        spec["runSpec"] = run_spec
    return {
        "apiVersion": "kubeflow.org/v1beta1",
        "kind": "Trial",
        "metadata": {"name": name, "namespace": NS, "labels": {"katib.kubeflow.org/experiment": "cx"}},
        "spec": spec,
        "status": {"conditions": conditions, **status},
    }


def _cond(kind: str, at: str, reason: str = "", message: str = "") -> dict[str, str]:
    return {
        "type": kind,
        "status": "True",
        "reason": reason or f"Trial{kind}",
        "message": message,
        "lastTransitionTime": ts(at),
    }


EXPERIMENT = {
    "apiVersion": "kubeflow.org/v1beta1",
    "kind": "Experiment",
    "metadata": {"name": "cx", "namespace": NS},
    "spec": {
        "objective": {
            "type": "maximize",
            "objectiveMetricName": "accuracy",
            "metricStrategies": [{"name": "accuracy", "value": "max"}],
        },
        "parameters": [
            {"name": "lr", "parameterType": "double", "feasibleSpace": {"min": "0.001", "max": "0.5"}}
        ],
        "algorithm": {"algorithmName": "optuna"},
    },
}

TRIALS = [
    _trial(
        "cx-1",
        "0.1",
        [_cond("Running", "09:00:00"), _cond("Succeeded", "10:00:00")],
        {
            "startTime": ts("09:00:00"),
            "completionTime": ts("10:00:00"),
            "observation": {"metrics": [{"name": "accuracy", "min": "0.5", "max": "0.9", "latest": "0.88"}]},
        },
    ),
    _trial(
        "cx-2",
        "0.01",
        [_cond("EarlyStopped", "09:30:00", "TrialEarlyStopped", "median rule: 0.6 < median 0.8 at 50%")],
        {"startTime": ts("09:00:00")},
    ),
    _trial("cx-3", "0.2", [_cond("Running", "09:30:00")], {"startTime": ts("09:30:00")}),
    _trial(
        "cx-4",
        "0.5",
        [_cond("Failed", "09:06:00", "TrialFailed", "TrainJob failed: OOMKilled")],
        {"startTime": ts("09:00:00"), "completionTime": ts("09:06:00")},
        run_spec=_trainjob("cx-4", 8, 1),
    ),
]

ROWS = {
    "cx-2": [("09:15:00", 25, "0.5", 2700), ("09:30:00", 50, "0.6", 1800)],
    "cx-3": [("10:00:00", 40, "0.7", 1200)],
}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory):
    from katib_progress.collector.store import start_store_server

    store = start_store_server(tmp_path_factory.mktemp("db") / "katib.sqlite")
    with grpc.insecure_channel(store.address) as channel:
        stub = pb_grpc.DBManagerStub(channel)
        for trial, points in ROWS.items():
            logs = []
            for hms, progress, acc, eta in points:
                for name, value in (
                    ("accuracy", acc),
                    (PROGRESS_METRIC, str(progress)),
                    (ETA_METRIC, str(eta)),
                ):
                    logs.append(pb.MetricLog(time_stamp=ts(hms), metric=pb.Metric(name=name, value=value)))
            stub.ReportObservationLog(
                pb.ReportObservationLogRequest(
                    trial_name=trial, observation_log=pb.ObservationLog(metric_logs=logs)
                ),
                timeout=10,
            )
    standin = kubestandin.KubeStandin().start()
    api = client.CustomObjectsApi(standin.api_client())
    api.create_namespaced_custom_object("kubeflow.org", "v1beta1", NS, "experiments", EXPERIMENT)
    for trial in TRIALS:
        # like a real API server, create ignores .status: it is written through the subresource
        api.create_namespaced_custom_object("kubeflow.org", "v1beta1", NS, "trials", trial)
        name = trial["metadata"]["name"]
        patch = {"status": trial["status"]}
        api.patch_namespaced_custom_object_status("kubeflow.org", "v1beta1", NS, "trials", name, patch)
    jobs = {
        "cx-1": _trainjob("cx-1", 2, 2),
        "cx-2": _trainjob("cx-2", 1, 1),
        "cx-3": _trainjob("cx-3", None, 1),
    }
    for job in jobs.values():
        api.create_namespaced_custom_object("trainer.kubeflow.org", "v1alpha1", NS, "trainjobs", job)
    live = {
        "trainerStatus": {
            "progressPercentage": 40,
            "estimatedRemainingSeconds": 1200,
            "metrics": [{"name": "accuracy", "value": "0.7"}],
            "lastUpdatedTime": ts("10:00:00"),
        }
    }
    api.patch_namespaced_custom_object_status(
        "trainer.kubeflow.org", "v1alpha1", NS, "trainjobs", "cx-3", {"status": live}
    )
    standin.clear_requests()
    yield standin, store.address
    standin.stop()
    store.stop(None)


def test_report_numbers_from_the_cluster(cluster) -> None:
    standin, db = cluster
    record = load_cluster(standin.api_client(), "cx", NS, db_manager=db)
    report = build_report(record, now=NOW, gpu_hour_price=2.0, importance="none")
    rows = [(r.rank, r.trial, r.objective, r.status, r.accelerators) for r in report.leaderboard]
    assert rows == [
        (1, "cx-1", 0.9, TrialStatus.SUCCEEDED, 4.0),
        (2, "cx-2", 0.6, TrialStatus.PRUNED, 1.0),
        (3, "cx-3", 0.7, TrialStatus.RUNNING, 0.0),
        (4, "cx-4", None, TrialStatus.FAILED, 8.0),
    ]
    hours = {r.trial: r.gpu_hours for r in report.leaderboard}
    assert hours == pytest.approx({"cx-1": 4.0, "cx-2": 0.5, "cx-3": 0.0, "cx-4": 0.8})
    assert report.cost.total_gpu_hours == pytest.approx(5.3)
    assert report.cost.saved_gpu_hours == pytest.approx(0.5)
    assert report.cost.total_cost == pytest.approx(10.6)
    assert report.cost.accelerators_assumed == ("cx-3",)
    pruned = report.leaderboard[1]
    assert pruned.progress_at_prune == 50
    assert pruned.reason == "median rule: 0.6 < median 0.8 at 50%"
    assert {(i.kind, i.trial) for i in report.incidents} == {("crashed", "cx-4"), ("stalled", "cx-3")}
    assert "OOMKilled" in render(report, "md")
    # read-only: the report only gets and lists
    assert {r[0] for r in standin.requests} <= {"get", "list"}


def test_without_db_manager_curves_are_the_latest_snapshot(cluster) -> None:
    standin, _ = cluster
    record = load_cluster(standin.api_client(), "cx", NS)
    by = {t.name: t for t in record.trials}
    assert [(p.progress, p.eta_s, dict(p.metrics)) for p in by["cx-3"].curve] == [
        (40, 1200, {"accuracy": 0.7})
    ]
    assert by["cx-2"].curve == ()
    assert any("db-manager" in n for n in record.notes)


def test_status_namespace_defaults_to_the_kubeconfig_context(
    cluster, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """No -n: the kubeconfig's current context's namespace, as kubectl; -o wide and -o yaml."""
    from katib_progress.cli import main

    standin, _ = cluster
    kubeconfig = str(standin.write_kubeconfig(tmp_path / "kubeconfig", namespace=NS))
    assert main(["status", "--experiment", "cx", "--kubeconfig", kubeconfig, "-o", "wide"]) == 0
    header, *lines = capsys.readouterr().out.splitlines()
    assert header.split() == ["NAME", "STATUS", "PROGRESS", "ETA", "OBJECTIVE", "PARAMETERS", "REASON"]
    assert any(line.startswith("cx-3") and "lr=" in line for line in lines), lines
    assert main(["status", "--experiment", "cx", "--kubeconfig", kubeconfig, "-o", "yaml"]) == 0
    doc = yaml.safe_load(capsys.readouterr().out)
    assert doc["best"]["trial"] == "cx-1"
    other = str(standin.write_kubeconfig(tmp_path / "other", namespace="elsewhere"))
    assert main(["status", "--experiment", "cx", "--kubeconfig", other]) != 0
    assert "elsewhere" in capsys.readouterr().err


def test_status_table_and_json(cluster, tmp_path: Path) -> None:
    standin, _ = cluster
    record = load_cluster(standin.api_client(), "cx", NS)
    text = status_lines(record)
    header, *lines = text.splitlines()
    assert header.split() == ["NAME", "STATUS", "PROGRESS", "ETA", "OBJECTIVE", "REASON"]
    running = next(line for line in lines if line.startswith("cx-3"))
    assert running.split()[:5] == ["cx-3", "running", "40%", "0:20:00", "0.7"]
    kubeconfig = standin.write_kubeconfig(tmp_path / "kubeconfig")
    done = subprocess.run(
        [*CLI, "status", "--experiment", "cx", "-n", NS, "--kubeconfig", str(kubeconfig), "-o", "json"],
        check=False,
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    assert doc["counts"]["running"] == 1 and doc["best"]["trial"] == "cx-1"
    assert {t["name"]: t["progress"] for t in doc["trials"]}["cx-3"] == 40


def test_watch_refreshes_from_the_api(cluster) -> None:
    standin, _ = cluster
    api_client = standin.api_client()
    out = io.StringIO()
    console = Console(file=out, width=160, force_terminal=False)
    loads = []

    def load():
        loads.append(1)
        return load_cluster(api_client, "cx", NS)

    record = watch(load, console=console, interval_s=1.0, _iterations=2)
    assert len(loads) == 2
    assert record is not None
    text = out.getvalue()
    assert "cx-3" in text and "40%" in text and "median rule" in text
    assert [r.progress for r in trial_rows(record) if r.name == "cx-3"] == [40]


def test_watch_rejects_a_busy_poll(cluster) -> None:
    with pytest.raises(ValueError, match="interval"):
        watch(lambda: None, console=Console(file=io.StringIO()), interval_s=0.1, _iterations=1)  # type: ignore[arg-type,return-value]


def test_experiment_state_and_killed_trials() -> None:
    from katib_progress.report.sources.cluster import experiment_state, trial_state

    experiment = {
        "status": {
            "conditions": [
                {"type": "Created", "status": "True", "reason": "ExperimentCreated"},
                {"type": "Running", "status": "False", "reason": "ExperimentRunning"},
                {"type": "Succeeded", "status": "True", "reason": "ExperimentGoalReached", "message": "goal"},
            ]
        }
    }
    assert experiment_state(experiment) == {
        "status": "Succeeded",
        "reason": "ExperimentGoalReached",
        "message": "goal",
    }
    killed = {"status": {"conditions": [_cond("Killed", "09:00:00", "TrialKilled", "goal reached")]}}
    assert trial_state(killed)[0] is TrialStatus.KILLED  # not a failure, not a crash
