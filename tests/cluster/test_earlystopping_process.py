"""The early-stopping image's process (``katib-progress early-stopping serve``; the Dockerfile CMD's
``earlystopping serve`` is its deprecated spelling) as Katib's suggestion client and a stock metrics
collector use it: EarlyStopping API on one port, and SetTrialStatus marks the Trial EarlyStopped the
way Katib's medianstop does (pkg/earlystopping/v1beta1/medianstop/service.py), in the pod's
namespace."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import grpc
from kubeflow.katib import katib_api_pb2 as _pb
from kubeflow.katib import katib_api_pb2_grpc as pb_grpc

from katib_progress.collector.store import start_store_server
from katib_progress.earlystopping_cli import pod_namespace
from tests.kubestandin import KubeStandin
from tests.kubestandin.objects import KATIB, Objects

pb: Any = _pb
ROOT = Path(__file__).resolve().parents[2]


def _start(kubeconfig: Path, log: Path, *extra: str) -> tuple[subprocess.Popen[bytes], str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "KUBECONFIG": str(kubeconfig)}
    env.pop("POD_NAMESPACE", None)
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "katib_progress.cli",
                "early-stopping",
                "serve",
                "--address",
                "127.0.0.1:0",
                *extra,
            ],
            env=env,
            cwd=ROOT,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        match = re.search(r"listening on (\S+)", log.read_text(errors="replace"))
        if match:
            return proc, match.group(1)
        assert proc.poll() is None, log.read_text()
        time.sleep(0.1)
    proc.kill()
    raise AssertionError(f"no address logged:\n{log.read_text()}")


def test_set_trial_status_marks_the_trial_like_medianstop(kube: KubeStandin, tmp_path: Path) -> None:
    kubeconfig = kube.write_kubeconfig(tmp_path / "kubeconfig", namespace="team-b")
    objects = Objects(kube.api_client())
    objects.trial_job("exp-x", "exp", namespace="team-b")
    proc, address = _start(kubeconfig, tmp_path / "es.log")
    try:
        with grpc.insecure_channel(address) as channel:
            stub = pb_grpc.EarlyStoppingStub(channel)
            objective = pb.ObjectiveSpec(type=pb.MINIMIZE, objective_metric_name="loss")
            spec = pb.EarlyStoppingSpec(algorithm_name="katib-progress")
            experiment = pb.Experiment(
                name="exp", spec=pb.ExperimentSpec(objective=objective, early_stopping=spec)
            )
            stub.GetEarlyStoppingRules(
                pb.GetEarlyStoppingRulesRequest(experiment=experiment, trials=[pb.Trial(name="exp-x")]),
                timeout=10,
            )
            stub.SetTrialStatus(pb.SetTrialStatusRequest(trial_name="exp-x"), timeout=10)
            stub.SetTrialStatus(pb.SetTrialStatusRequest(trial_name="exp-x"), timeout=10)  # idempotent
            # a Trial that does not exist: the call fails (Katib's collector sees the error)
            try:
                stub.SetTrialStatus(pb.SetTrialStatusRequest(trial_name="nope"), timeout=10)
                gone_ok = True
            except grpc.RpcError:
                gone_ok = False
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0
    trial = objects.api.get_namespaced_custom_object(*KATIB, "team-b", "trials", "exp-x")
    stopped = [c for c in trial["status"]["conditions"] if c["type"] == "EarlyStopped"]
    assert [(c["status"], c["reason"], c["message"]) for c in stopped] == [
        ("True", "TrialEarlyStopped", "Trial is early stopped")
    ]
    assert "observation" not in trial["status"]  # Katib reads it itself (the stock collector stored it)
    assert gone_ok  # medianstop would raise on a missing Trial; we answer and log (nothing to mark)


def test_pod_namespace_prefers_the_service_account_file(tmp_path: Path, monkeypatch: Any) -> None:
    sa = tmp_path / "namespace"
    sa.write_text("katib-ns\n")
    monkeypatch.setenv("POD_NAMESPACE", "other")
    assert pod_namespace(sa) == "katib-ns"
    assert pod_namespace(tmp_path / "missing") == "other"


def test_serve_rebuilds_an_experiment_from_the_trials_and_the_db_manager(
    kube: KubeStandin, tmp_path: Path
) -> None:
    """``--db-manager`` names the DB manager the restarted process reads the stored curves from."""
    kubeconfig = kube.write_kubeconfig(tmp_path / "kubeconfig", namespace="team-b")
    objects = Objects(kube.api_client())
    objects.trial("exp-a", "exp", namespace="team-b")
    store = start_store_server(tmp_path / "observations.sqlite")
    try:
        rows = [
            pb.MetricLog(time_stamp=f"2026-01-01T00:00:0{i}Z", metric=pb.Metric(name=name, value=value))
            for i in range(3)
            for name, value in (("trainjob/progress", str(30 * (i + 1))), ("loss", str(1.0 / (i + 1))))
        ]
        with grpc.insecure_channel(store.address) as channel:
            pb_grpc.DBManagerStub(channel).ReportObservationLog(
                pb.ReportObservationLogRequest(
                    trial_name="exp-a", observation_log=pb.ObservationLog(metric_logs=rows)
                ),
                timeout=10,
            )
        log = tmp_path / "es.log"
        proc, address = _start(kubeconfig, log, "--db-manager", store.address)
        try:
            with grpc.insecure_channel(address) as channel:
                objective = pb.ObjectiveSpec(type=pb.MINIMIZE, objective_metric_name="loss")
                spec = pb.EarlyStoppingSpec(algorithm_name="katib-progress")
                experiment = pb.Experiment(
                    name="exp", spec=pb.ExperimentSpec(objective=objective, early_stopping=spec)
                )
                pb_grpc.EarlyStoppingStub(channel).GetEarlyStoppingRules(
                    pb.GetEarlyStoppingRulesRequest(experiment=experiment), timeout=30
                )
        finally:
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(30) == 0
    finally:
        store.stop(0)
    text = log.read_text()
    assert "experiment exp: loaded 3 stored points of 1 trial(s), 0 ended" in text, text
    assert "experiment exp: rebuilt from 3 stored points" in text, text
