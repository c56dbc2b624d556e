"""Measurement plumbing of benchmarks/bench_load.py: the status a load job writes, the SQLite row
poller that times when rows become visible, and the ``db serve`` store (CPU, RSS and pinning come
from benchmarks/watchload/measure.py)."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from benchmarks.watchload.measure import pin

ROOT = Path(__file__).resolve().parents[1]
PERIOD_S = 5.0


def trainer_status(step: int, base: datetime) -> dict[str, Any]:
    return {
        "lastUpdatedTime": (base + timedelta(seconds=step)).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "progressPercentage": min(100, step),
        "estimatedRemainingSeconds": max(0, 500 - 5 * step),
        "metrics": [
            {"name": "step", "value": str(step)},
            {"name": "loss", "value": f"{2.3 / (1 + step):.6f}"},
            {"name": "eval_loss", "value": f"{2.5 / (1 + step):.6f}"},
            {"name": "eval_accuracy", "value": f"{min(0.99, 0.1 + step / 100):.4f}"},
            {"name": "learning_rate", "value": "3e-05"},
        ],
    }


class RowPoller:
    """Reads new ``step`` rows from the SQLite file every 5 ms; first-seen time per (trial, step)."""

    def __init__(self, db: Path) -> None:
        self.db = db
        self.seen: dict[tuple[str, int], float] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> RowPoller:
        self._thread.start()
        return self

    def _run(self) -> None:
        conn = sqlite3.connect(self.db, timeout=30)
        last = 0
        while not self._stop.wait(0.005):
            try:
                rows = conn.execute(
                    "SELECT id, trial_name, value FROM observation_logs WHERE metric_name='step' AND id > ?",
                    (last,),
                ).fetchall()
            except sqlite3.OperationalError:
                continue
            now = time.monotonic()
            for rid, trial, value in rows:
                last = max(last, rid)
                self.seen.setdefault((trial, int(value)), now)
        conn.close()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5)


@dataclass
class Result:
    path: str
    jobs: int
    offered: float
    processed: int
    seconds: float
    cpu_s: float
    latencies: list[float]
    rss_per_job_b: float
    rss_mb: float
    pinned: bool

    @property
    def rate(self) -> float:
        return self.processed / self.seconds

    @property
    def cpu_per_1000(self) -> float:
        return 1000 * self.cpu_s / max(1, self.processed)

    def pct(self, q: float) -> float:
        if not self.latencies:
            return float("nan")
        data = sorted(self.latencies)
        return data[min(len(data) - 1, int(q * len(data)))]


def start_store(tmp: Path) -> tuple[subprocess.Popen[bytes], str, Path]:
    from tests.faults._harness import free_port

    port = free_port()
    db = tmp / f"obs-{port}.sqlite"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "katib_progress.cli",
            "db",
            "serve",
            "--address",
            f"127.0.0.1:{port}",
            "--db",
            str(db),
        ],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    pin(proc.pid, 0)
    import grpc

    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
            try:
                grpc.channel_ready_future(channel).result(timeout=0.5)
                break
            except grpc.FutureTimeoutError:
                continue
    return proc, f"127.0.0.1:{port}", db
