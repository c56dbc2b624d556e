"""A recorded local sweep, written by hand in the sweep's workdir format (docs/local.md).

summary.json follows ``katib_progress.local.summary.SweepSummary``; observations.sqlite is written
through the embedded store's real DBManager gRPC API. Every figure the tests expect is computed by
hand in the comments below (times are 2026-11-01, UTC).

trial  status        params            start-end      GPU-h     curve (time: progress%, loss, eta s)
t-a    Succeeded     lr=0.01 layers=2  10:00-11:00    1.0       10:15 25 0.9 2700 | 10:30 50 0.5 2400 |
                                                                  10:45 75 0.3 600 | 11:00 100 0.35 0
t-b    Succeeded     lr=0.1  layers=4  10:00-10:30    0.5       10:10 33 0.8 1200 | 10:20 66 0.25 600 |
                                                                  10:30 100 0.2 0
t-c    EarlyStopped  lr=0.001 layers=2 10:30-10:42    0.2       10:36 20 1.2 2400 | 10:42 40 0.9 1800
t-d    Failed        lr=0.5  layers=8  10:40-10:41    1/60      10:40:30 1 5.0 -
t-e    EarlyStopped  lr=1.0  layers=1  10:45-10:51    0.1       10:47 10 2.0 3000 | 10:49 20 1.5 2400 |
                                                                  10:51 30 4.0 2100
t-f    Running       lr=0.05 layers=3  11:00-(now)    1/3 @11:20  11:05 10 1.0 2700
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import grpc
from kubeflow.katib import katib_api_pb2 as pb
from kubeflow.katib import katib_api_pb2_grpc as pb_grpc

from katib_progress.collector.rows import ELAPSED_METRIC, ETA_METRIC, PROGRESS_METRIC

DAY = "2026-11-01"
NOW = datetime(2026, 11, 1, 11, 20, tzinfo=UTC)  # the summary's updated_at


def ts(hms: str) -> str:
    return f"{DAY}T{hms}Z"


def at(hms: str) -> datetime:
    return datetime.fromisoformat(f"{DAY}T{hms}+00:00")


# trial -> [(time, progress, loss, eta)]
CURVES: dict[str, list[tuple[str, int, float, int | None]]] = {
    "t-a": [
        ("10:15:00", 25, 0.9, 2700),
        ("10:30:00", 50, 0.5, 2400),
        ("10:45:00", 75, 0.3, 600),
        ("11:00:00", 100, 0.35, 0),
    ],
    "t-b": [("10:10:00", 33, 0.8, 1200), ("10:20:00", 66, 0.25, 600), ("10:30:00", 100, 0.2, 0)],
    "t-c": [("10:36:00", 20, 1.2, 2400), ("10:42:00", 40, 0.9, 1800)],
    "t-d": [("10:40:30", 1, 5.0, None)],
    "t-e": [("10:47:00", 10, 2.0, 3000), ("10:49:00", 20, 1.5, 2400), ("10:51:00", 30, 4.0, 2100)],
    "t-f": [("11:05:00", 10, 1.0, 2700)],
}

# name, params, status, reason, message, start, end, progress, eta_at_prune, observation
TRIALS = [
    (
        "t-a",
        {"lr": "0.01", "layers": "2"},
        "Succeeded",
        "",
        "",
        "10:00:00",
        "11:00:00",
        100,
        None,
        {"loss": 0.3},
    ),
    ("t-b", {"lr": "0.1", "layers": "4"}, "Succeeded", "", "", "10:00:00", "10:30:00", 100, None, {}),
    (
        "t-c",
        {"lr": "0.001", "layers": "2"},
        "EarlyStopped",
        "median: 0.9 worse than median 0.5 at 40%",
        "",
        "10:30:00",
        "10:42:00",
        40,
        1800,
        {},
    ),
    (
        "t-d",
        {"lr": "0.5", "layers": "8"},
        "Failed",
        "Failed",
        "exit code 1",
        "10:40:00",
        "10:41:00",
        1,
        None,
        {},
    ),
    (
        "t-e",
        {"lr": "1.0", "layers": "1"},
        "EarlyStopped",
        "diverged: loss rose above its best",
        "",
        "10:45:00",
        "10:51:00",
        30,
        2100,
        {},
    ),
    ("t-f", {"lr": "0.05", "layers": "3"}, "Running", "", "", "11:00:00", None, 10, None, {}),
]

STDERR_D = "Traceback (most recent call last):\nRuntimeError: CUDA out of memory\n"


def summary_doc(workdir: Path) -> dict:
    trials = []
    for name, params, status, reason, message, start, end, progress, eta_prune, obs in TRIALS:
        trials.append(
            {
                "name": name,
                "params": params,
                "labels": {},
                "status": status,
                "reason": reason,
                "message": message,
                "progress": progress,
                "eta_s": None,
                "eta_at_prune_s": eta_prune,
                "started_at": ts(start),
                "ended_at": ts(end) if end else None,
                "elapsed_s": 0.0,
                "objective": obs.get("loss"),
                "observation": obs,
                "latest_metrics": {},
                "exit_code": 1 if status == "Failed" else None,
                "attempts": 1,
            }
        )
    return {
        "schema_version": 1,
        "experiment": "fx",
        "namespace": "default",
        "source": str(workdir / "experiment.yaml"),
        "fingerprint": "0" * 16,
        "status": "Running",
        "objective": {
            "type": "minimize",
            "metric": "loss",
            "goal": None,
            "additional_metrics": [],
            "strategies": {},
        },
        "algorithm": "random",
        "early_stopping": "medianstop",
        "parallel_trial_count": 2,
        "started_at": ts("10:00:00"),
        "updated_at": ts("11:20:00"),
        "counts": {},
        "trials": trials,
    }


def write_rows(address: str) -> None:
    with grpc.insecure_channel(address) as channel:
        stub = pb_grpc.DBManagerStub(channel)
        for trial, points in CURVES.items():
            start = at(next(t[5] for t in TRIALS if t[0] == trial))
            logs = []
            for hms, progress, loss, eta in points:
                stamp = ts(hms)
                elapsed = (at(hms) - start).total_seconds()
                values = [
                    ("loss", repr(loss)),
                    (PROGRESS_METRIC, str(progress)),
                    (ELAPSED_METRIC, f"{elapsed:g}"),
                ]
                if eta is not None:
                    values.append((ETA_METRIC, str(eta)))
                logs += [pb.MetricLog(time_stamp=stamp, metric=pb.Metric(name=n, value=v)) for n, v in values]
            stub.ReportObservationLog(
                pb.ReportObservationLogRequest(
                    trial_name=trial, observation_log=pb.ObservationLog(metric_logs=logs)
                ),
                timeout=10,
            )


def make_workdir(root: Path) -> Path:
    """Write the recorded sweep under ``root/fx`` and return that workdir."""
    from katib_progress.collector.store import start_store_server

    workdir = root / "fx"
    (workdir / "trials" / "t-d").mkdir(parents=True)
    (workdir / "trials" / "t-d" / "stderr.log").write_text(STDERR_D, encoding="utf-8")
    (workdir / "summary.json").write_text(json.dumps(summary_doc(workdir), indent=2), encoding="utf-8")
    server = start_store_server(workdir / "observations.sqlite")
    try:
        write_rows(server.address)
    finally:
        server.stop(None)
    return workdir
