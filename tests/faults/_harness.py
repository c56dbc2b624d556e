"""Fault-injection harness: real processes, a snapshot ledger and the exactly-once checker.

- ``Proc`` runs ``katib-progress ...`` as a subprocess (``python -m katib_progress.cli``), logs to a
  file, exposes ``rss_kb()`` from /proc and kill/terminate/restart.
- ``StoreProc``: ``katib-progress db serve`` on a fixed port and SQLite file, so a restart comes back
  on the same address with the same data (what a DB manager Deployment behind a Service does).
- ``Ledger`` records every trainerStatus snapshot a test writes to the API stand-in, each marked
  *required* (the collector was running and synced while it was the TrainJob's current status, so
  it was receivable) or *optional* (overwritten while no collector could observe it, or received by a
  collector that was SIGKILLed before delivering it). ``check_store`` then asserts the invariants
  documented in docs/reliability.md.
"""

from __future__ import annotations

import math
import os
import signal
import socket
import subprocess
import sys
import time
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import grpc
from kubeflow.katib import katib_api_pb2 as pb
from kubeflow.katib import katib_api_pb2_grpc as pb_grpc

from katib_progress.collector.rows import ELAPSED_METRIC, ETA_METRIC, PROGRESS_METRIC, SEQ_METRIC
from katib_progress.core.timefmt import parse_rfc3339
from tests.kubestandin.objects import trainer_status
from tests.kubestandin.waiting import wait_until

ROOT = Path(__file__).resolve().parents[2]
STEP_METRIC = "step"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Proc:
    """One ``katib-progress`` subprocess (restartable with the same arguments)."""

    def __init__(self, args: Sequence[str], log_path: Path) -> None:
        self.args = list(args)
        self.log_path = log_path
        self.proc: subprocess.Popen[bytes] | None = None
        self.starts = 0

    def start(self) -> Proc:
        self.starts += 1
        log = self.log_path.open("ab")
        log.write(f"--- start #{self.starts}: {' '.join(self.args)}\n".encode())
        log.flush()
        env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONUNBUFFERED": "1"}
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "katib_progress.cli", *self.args],
            cwd=ROOT,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        log.close()
        return self

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def rss_kb(self) -> int:
        """Resident set size of the process (VmRSS from /proc), in KiB."""
        for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
        raise AssertionError("no VmRSS")

    def kill(self) -> int:
        """SIGKILL and reap; returns the exit status (-9)."""
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        return self.proc.wait(timeout=10)

    def terminate(self, timeout: float = 30.0) -> int:
        """SIGTERM and wait for a clean exit; returns the exit status."""
        assert self.proc is not None
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=10)
            raise AssertionError(f"{self.args[:3]} did not stop on SIGTERM within {timeout}s") from None

    def assert_running(self) -> None:
        """A process that died on its own is a crash: fail with its log."""
        if not self.alive():
            raise AssertionError(
                f"{self.args[:3]} exited with {self.proc and self.proc.poll()}:\n{self.log()}"
            )

    def log(self, tail: int = 6000) -> str:
        text = self.log_path.read_text(errors="replace") if self.log_path.exists() else ""
        return text[-tail:]

    def stop_quietly(self) -> None:
        if self.alive():
            assert self.proc is not None
            self.proc.kill()
            self.proc.wait(timeout=10)


class StoreProc(Proc):
    """``katib-progress db serve`` on a fixed 127.0.0.1 port and SQLite file."""

    def __init__(self, db: Path, log_path: Path, port: int | None = None) -> None:
        self.port = port or free_port()
        self.db = db
        super().__init__(
            ["db", "serve", "--address", f"127.0.0.1:{self.port}", "--db", str(db), "--grace", "1"], log_path
        )

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self) -> StoreProc:
        super().start()
        wait_until(self.ready, timeout=30)
        return self

    def ready(self) -> bool:
        self.assert_running()
        try:
            with grpc.insecure_channel(self.address) as channel:
                grpc.channel_ready_future(channel).result(timeout=0.5)
        except grpc.FutureTimeoutError:
            return False
        return True


# The collector watches all namespaces: its list/watch path is ".../v1alpha1/trainjobs", which the
# test's own (namespaced) status writes never match, so faults can target the collector alone.
COLLECTOR_PATH = "v1alpha1/trainjobs"


def collector_proc(kubeconfig: Path, db_address: str, log_path: Path, *extra: str) -> Proc:
    return Proc(
        [
            "--log-json",
            "collector",
            "run",
            "--kubeconfig",
            str(kubeconfig),
            "--db-manager",
            db_address,
            "--rpc-timeout",
            "2",
            *extra,
        ],
        log_path,
    )


# --------------------------------------------------------------------------- reading the store


@dataclass(frozen=True)
class Row:
    stamp: datetime
    name: str
    value: str


def read_log(address: str, trial: str, metric: str = "") -> list[Row]:
    """A trial's observation log through Katib's DBManager API (ordered by time)."""
    with grpc.insecure_channel(address) as channel:
        reply = pb_grpc.DBManagerStub(channel).GetObservationLog(
            pb.GetObservationLogRequest(trial_name=trial, metric_name=metric), timeout=10
        )
    return [
        Row(parse_rfc3339(m.time_stamp, field="time_stamp"), m.metric.name, m.metric.value)
        for m in reply.observation_log.metric_logs
    ]


def stored_steps(address: str, trial: str) -> list[int]:
    return [int(r.value) for r in read_log(address, trial, STEP_METRIC)]


# --------------------------------------------------------------------------- snapshots and ledger


def snapshot(base: datetime, step: int, total: int) -> dict[str, Any]:
    """Snapshot ``step`` of a run of ``total``: pairs share a second (sub-second stamps exercised);
    ``step`` is a metric, so every stored row group names the snapshot it came from."""
    progress = min(100, (step + 1) * 100 // total)
    return trainer_status(
        base + timedelta(seconds=step // 2, milliseconds=400 * (step % 2)),
        progress=progress,
        eta=max(0, (total - step - 1) * 5),
        metrics={
            STEP_METRIC: str(step),
            "loss": f"{2.3 * math.exp(-step / 15) + 0.05:.6f}",
            "eval_accuracy": f"{0.1 + 0.85 * (1 - math.exp(-step / 12)):.4f}",
        },
    )


def expected_rows(status: dict[str, Any]) -> dict[str, str]:
    rows = {m["name"]: m["value"] for m in status.get("metrics", [])}
    if "progressPercentage" in status:
        rows[PROGRESS_METRIC] = str(status["progressPercentage"])
    if "estimatedRemainingSeconds" in status:
        rows[ETA_METRIC] = str(status["estimatedRemainingSeconds"])
    return rows


@dataclass
class Written:
    step: int
    status: dict[str, Any]
    required: bool


@dataclass
class TrialLedger:
    trial: str
    written: list[Written] = field(default_factory=list)

    @property
    def last(self) -> Written:
        return self.written[-1]


class Ledger:
    """What a test wrote, per trial, and which snapshots the collector must have stored."""

    def __init__(self) -> None:
        self.trials: dict[str, TrialLedger] = {}

    def record(self, trial: str, step: int, status: dict[str, Any], *, required: bool) -> None:
        self.trials.setdefault(trial, TrialLedger(trial)).written.append(Written(step, status, required))

    def demote_after(self, trial: str, stored: set[int]) -> int:
        """Mark required snapshots not in ``stored`` optional (a SIGKILLed collector may have held
        them in memory); returns how many were demoted."""
        count = 0
        for w in self.trials[trial].written:
            if w.required and w.step not in stored:
                w.required = False
                count += 1
        return count

    def promote_current(self) -> None:
        """Each trial's current (latest) snapshot is receivable by the next collector's list."""
        for ledger in self.trials.values():
            if ledger.written:
                ledger.last.required = True


@dataclass
class CheckResult:
    trials: int = 0
    stored: int = 0
    required: int = 0
    optional_missing: int = 0
    rows: int = 0


def check_store(address: str, ledger: Ledger) -> CheckResult:
    """Assert the invariants (docs/reliability.md) for every trial of ``ledger``:

    1. every stored row group (rows sharing a stamp) is exactly one written snapshot: its user metrics,
       progress and ETA, one ``trainjob/seq`` row, at most one elapsed row, nothing else;
    2. exactly once, in order: the stored snapshots' steps strictly increase with time, and their
       ``trainjob/seq`` values are 0, 1, 2, ... (no gap, no repeat);
    3. every required snapshot is stored, and the final snapshot of every trial is stored.
    """
    result = CheckResult()
    for trial, tl in ledger.trials.items():
        by_step = {w.step: w for w in tl.written}
        rows = read_log(address, trial)
        groups: dict[datetime, list[Row]] = defaultdict(list)
        for row in rows:
            groups[row.stamp].append(row)
        steps: list[int] = []
        seqs: list[int] = []
        for stamp in sorted(groups):
            group = groups[stamp]
            names = [r.name for r in group]
            assert len(names) == len(set(names)), f"{trial} @ {stamp}: duplicate rows {sorted(names)}"
            values = {r.name: r.value for r in group}
            assert SEQ_METRIC in values and STEP_METRIC in values, f"{trial} @ {stamp}: {values}"
            step = int(values[STEP_METRIC])
            assert step in by_step, f"{trial}: stored step {step} was never written"
            user = {k: v for k, v in values.items() if k not in (SEQ_METRIC, ELAPSED_METRIC)}
            assert user == expected_rows(by_step[step].status), f"{trial} step {step}: {user}"
            steps.append(step)
            seqs.append(int(values[SEQ_METRIC]))
        assert steps == sorted(steps) and len(set(steps)) == len(steps), f"{trial}: order {steps}"
        assert seqs == list(range(len(seqs))), f"{trial}: seq {seqs}"
        stored = set(steps)
        missing = [w.step for w in tl.written if w.required and w.step not in stored]
        assert not missing, f"{trial}: required snapshots missing from the store: {missing} (stored {steps})"
        assert tl.last.step in stored, f"{trial}: final snapshot {tl.last.step} missing"
        result.trials += 1
        result.stored += len(stored)
        result.required += sum(w.required for w in tl.written)
        result.optional_missing += sum(1 for w in tl.written if w.step not in stored)
        result.rows += len(rows)
    return result


def wait_stored(address: str, ledger: Ledger, *, timeout: float = 60.0, procs: Sequence[Proc] = ()) -> None:
    """Wait until every trial's final snapshot is in the store (processes must stay alive)."""

    def done() -> bool:
        for proc in procs:
            proc.assert_running()
        return all(t.last.step in set(stored_steps(address, name)) for name, t in ledger.trials.items())

    wait_until(done, timeout=timeout, interval=0.2)


def watch_count(kube: Any) -> int:
    return sum(1 for r in kube.requests if r.verb == "watch" and r.resource == "trainjobs")


def list_count(kube: Any) -> int:
    return sum(1 for r in kube.requests if r.verb == "list" and r.resource == "trainjobs")


def wait_synced(kube: Any, before: int, proc: Proc | None = None, timeout: float = 30.0) -> None:
    """Wait for a new TrainJob watch (a collector lists, delivers, then watches)."""

    def seen() -> bool:
        if proc is not None:
            proc.assert_running()
        return watch_count(kube) > before

    wait_until(seen, timeout=timeout, interval=0.05)


def pace(seconds: float) -> None:
    time.sleep(seconds)


class Writer:
    """Writes snapshots of several trials round-robin through the API (as the status server does)."""

    def __init__(self, objs: Any, ledger: Ledger, base: datetime, total: int) -> None:
        self.objs = objs
        self.ledger = ledger
        self.base = base
        self.total = total
        self.next_step: dict[str, int] = {}

    def add(self, trial: str, experiment: str = "faults") -> None:
        self.objs.trial_job(trial, experiment)
        self.next_step[trial] = 0

    def write(self, trial: str, *, required: bool) -> int:
        step = self.next_step[trial]
        status = snapshot(self.base, step, self.total)
        self.objs.set_status(trial, status)
        self.ledger.record(trial, step, status, required=required)
        self.next_step[trial] = step + 1
        return step

    def round(self, trials: Sequence[str] | None = None, *, required: bool = True, gap: float = 0.0) -> None:
        for trial in trials if trials is not None else list(self.next_step):
            if self.next_step[trial] < self.total:
                self.write(trial, required=required)
        if gap:
            time.sleep(gap)

    def finished(self) -> bool:
        return all(step >= self.total for step in self.next_step.values())
