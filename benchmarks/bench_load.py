"""Load benchmark of the collector: N TrainJobs each updating trainerStatus every 5 s.

Run: .venv/bin/python benchmarks/bench_load.py [--quick] [--seconds S] [--jobs 100,1000] [--inproc-jobs 10000]

1. N = 100 and 1,000 through the real watch path: the API stand-in (tests/kubestandin, HTTP) ->
   ``katib-progress collector run`` (a subprocess pinned to one core) -> ``katib-progress db serve``
   (a subprocess, SQLite). The writer PUTs each job's status every 5 s (phases spread evenly).
2. N = 10,000 through a faster in-process source: a child process pinned to one core feeds
   ``SnapshotProcessor`` -> ``DBManagerSink`` -> the same ``db serve`` directly (no API server).
3. Katib's alternative for comparison: a metrics-collector sidecar per trial pod, parsing stdout
   with its default filter regex. Its default resource requests (50m CPU, 10Mi memory per trial pod;
   limits 500m, 100Mi) are multiplied by N, and a Python re-implementation of the regex line
   parser is measured on log lines carrying the same metrics (the real sidecar is Go).

Latency = from just before the status PUT (or the ``process()`` call) to the moment the row is
visible in the SQLite file (polled every 5 ms by this process). CPU = utime + stime of the
collector process (/proc), all its threads. Memory per job = RSS growth of the collector from
0 jobs to N tracked jobs, divided by N.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import re
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

PERIOD_S = 5.0
# Katib's default StdOut/File metrics filter (pkg/metricscollector/v1beta1/common/const.go).
KATIB_DEFAULT_FILTER = r"([\w|-]+)\s*=\s*([+-]?\d*(\.\d+)?([Ee][+-]?\d+)?)"
SIDECAR_CPU_REQUEST_M, SIDECAR_MEM_REQUEST_MI = 50, 10
SIDECAR_CPU_LIMIT_M, SIDECAR_MEM_LIMIT_MI = 500, 100
CLK_TCK = os.sysconf("SC_CLK_TCK")


def _pin(pid: int, cpu: int) -> bool:
    try:
        os.sched_setaffinity(pid, {cpu % (os.cpu_count() or 1)})
    except (AttributeError, OSError):
        return False
    return True


def _cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def _rss_kb(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def _status(step: int, base: datetime) -> dict[str, Any]:
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


def _store(tmp: Path) -> tuple[subprocess.Popen[bytes], str, Path]:
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
    _pin(proc.pid, 0)
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


# --------------------------------------------------------------------------- 1. watch path


def run_watch(jobs: int, seconds: float, tmp: Path) -> Result:
    from kubernetes import client

    from tests.kubestandin import KubeStandin
    from tests.kubestandin.objects import TRAINER, Objects

    store, address, db = _store(tmp)
    kube = KubeStandin(bookmark_interval=1.0).start()
    kubeconfig = kube.write_kubeconfig(tmp / f"kubeconfig-{jobs}")
    collector = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "katib_progress.cli",
            "collector",
            "run",
            "--kubeconfig",
            str(kubeconfig),
            "--db-manager",
            address,
        ],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    pinned = _pin(collector.pid, 1)
    poller = RowPoller(db).start()
    base = datetime.now(UTC).replace(microsecond=0)
    try:
        while not any(r.verb == "watch" for r in kube.requests):
            time.sleep(0.05)
        time.sleep(1.0)
        rss0 = _rss_kb(collector.pid)
        objs = Objects(kube.api_client())
        names = [f"load-{i:05d}" for i in range(jobs)]
        bodies: dict[str, dict[str, Any]] = {}
        with ThreadPoolExecutor(4) as pool:
            for name, body in zip(names, pool.map(lambda n: objs.trial_job(n, "load"), names), strict=True):
                bodies[name] = body
        api = client.CustomObjectsApi(kube.api_client())
        sent: dict[tuple[str, int], float] = {}

        def put(name: str, step: int) -> None:
            body = {**bodies[name], "status": {"trainerStatus": _status(step, base)}}
            body["metadata"] = {k: v for k, v in body["metadata"].items() if k != "resourceVersion"}
            sent[(name, step)] = time.monotonic()
            api.replace_namespaced_custom_object_status(*TRAINER, "default", "trainjobs", name, body)

        with ThreadPoolExecutor(4) as pool:  # step 0 of every job: now every job is tracked
            list(pool.map(lambda n: put(n, 0), names))
        while sum(1 for (_, s) in poller.seen if s == 0) < jobs:
            time.sleep(0.1)
        time.sleep(1.0)
        rss1 = _rss_kb(collector.pid)

        # Steady state: job i writes at t0 + i * PERIOD / N + k * PERIOD.
        t0 = time.monotonic() + 0.5
        cpu0, seen0 = _cpu_s(collector.pid), len(poller.seen)
        schedule = sorted(
            (t0 + i * PERIOD_S / jobs + k * PERIOD_S, names[i], k + 1)
            for k in range(int(seconds // PERIOD_S))
            for i in range(jobs)
        )
        with ThreadPoolExecutor(6) as pool:
            for when, name, step in schedule:
                delay = when - time.monotonic()
                if delay > 0:
                    time.sleep(delay)
                pool.submit(put, name, step)
        end_writes = time.monotonic()
        expected = len(schedule)
        deadline = time.monotonic() + 60
        while len(poller.seen) - seen0 < expected and time.monotonic() < deadline:
            time.sleep(0.05)
        window = max(time.monotonic(), end_writes) - t0
        cpu = _cpu_s(collector.pid) - cpu0
        processed = len(poller.seen) - seen0
        lat = [poller.seen[k] - sent[k] for k in sent if k in poller.seen and k[1] > 0]
        rss_now = _rss_kb(collector.pid)
    finally:
        poller.stop()
        collector.terminate()
        collector.wait(30)
        kube.stop()
        store.terminate()
        store.wait(30)
    return Result(
        f"watch (stand-in HTTP) N={jobs}",
        jobs,
        jobs / PERIOD_S,
        processed,
        window,
        cpu,
        lat,
        (rss1 - rss0) * 1024 / jobs,
        rss_now / 1024,
        pinned,
    )


# --------------------------------------------------------------------------- 2. in-process source


def _inproc_child(address: str, jobs: int, seconds: float, out: Any) -> None:
    import logging

    logging.disable(logging.ERROR)  # buffer-full refusals are expected here; they are counted instead
    from katib_progress.collector.katib.dbmanager import DBManagerSink
    from katib_progress.collector.pipeline import JobRef, SnapshotProcessor

    pinned = _pin(0, 1)
    base = datetime.now(UTC).replace(microsecond=0)
    sink = DBManagerSink(address)
    processor = SnapshotProcessor(sink)
    refs = [JobRef("default", f"inproc-{i:05d}", f"uid-{i}", "load", f"inproc-{i:05d}") for i in range(jobs)]
    rss0 = _rss_kb(os.getpid())
    refused = 0

    def deliver(ref: JobRef, status: dict[str, Any]) -> None:
        # As the controller does: a snapshot the sink refuses (buffer full) is delivered again later.
        nonlocal refused
        while processor.process(ref, status).retry:
            refused += 1
            time.sleep(0.01)

    for ref in refs:
        deliver(ref, _status(0, base))
    sink.flush(120)
    rss1 = _rss_kb(os.getpid())
    sent: dict[tuple[str, int], float] = {}
    t0 = time.monotonic() + 0.2
    cpu0 = time.process_time()
    rounds = int(seconds // PERIOD_S)
    for k in range(rounds):
        for i, ref in enumerate(refs):
            when = t0 + i * PERIOD_S / jobs + k * PERIOD_S
            delay = when - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            sent[(ref.trial, k + 1)] = time.monotonic()
            deliver(ref, _status(k + 1, base))
    sink.flush(120)
    end = time.monotonic()
    cpu = time.process_time() - cpu0
    sink.close()
    out.put((sent, cpu, end - t0, rss0, rss1, _rss_kb(os.getpid()), pinned, refused))


def run_inproc(jobs: int, seconds: float, tmp: Path) -> Result:
    store, address, db = _store(tmp)
    poller = RowPoller(db).start()
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    child = ctx.Process(target=_inproc_child, args=(address, jobs, seconds, queue))
    child.start()
    try:
        sent, cpu, window, rss0, rss1, rss_end, pinned, refused = queue.get(timeout=seconds * 4 + 300)
        child.join(60)
        deadline = time.monotonic() + 30
        while sum(1 for k in sent if k in poller.seen) < len(sent) and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        poller.stop()
        store.terminate()
        store.wait(30)
    lat = [poller.seen[k] - t for k, t in sent.items() if k in poller.seen]
    if refused:
        print(f"in-process source: {refused} deliveries refused by the full sink buffer and retried")
    return Result(
        f"in-process source N={jobs}",
        jobs,
        jobs / PERIOD_S,
        len(lat),
        window,
        cpu,
        lat,
        (rss1 - rss0) * 1024 / jobs,
        rss_end / 1024,
        pinned,
    )


# --------------------------------------------------------------------------- 3. sidecar regex


def regex_sidecar_cpu_per_1000(lines: int) -> float:
    """CPU seconds per 1,000 log lines of a Python re-implementation of Katib's line parser:
    optional leading RFC 3339 timestamp, ``findall`` with the default filter, keep wanted names."""
    pattern = re.compile(KATIB_DEFAULT_FILTER)
    wanted = {"loss", "eval_loss", "eval_accuracy", "learning_rate", "step"}
    text = [
        f"2026-03-01T12:00:{i % 60:02d}Z step={i} loss={2.3 / (1 + i):.6f} eval_loss={2.5 / (1 + i):.6f} "
        f"eval_accuracy={min(0.99, 0.1 + i / 1e5):.4f} learning_rate=3e-05 "
        f"progress={i % 100}% eta={500 - i % 500}s"
        for i in range(lines)
    ]
    start = time.process_time()
    logs: list[tuple[str, str, str]] = []
    for line in text:
        head, _, rest = line.partition(" ")
        try:
            stamp = datetime.fromisoformat(head.replace("Z", "+00:00")).isoformat()
            body = rest
        except ValueError:
            stamp, body = datetime.now(UTC).isoformat(), line
        for name, value, *_ in pattern.findall(body):
            if name in wanted:
                logs.append((stamp, name, value))
    return 1000 * (time.process_time() - start) / lines


def collector_parse_cpu_per_1000(snapshots: int) -> float:
    """CPU seconds per 1,000 snapshots of the collector's own parsing (no I/O, no sequencing)."""
    from katib_progress.collector.rows import snapshot_rows
    from katib_progress.core.status import parse_trainer_status

    base = datetime(2026, 3, 1, tzinfo=UTC)
    statuses = [_status(i, base) for i in range(snapshots)]
    start = time.process_time()
    for i, status in enumerate(statuses):
        parsed = parse_trainer_status(status)
        snapshot_rows(parsed, stamp=parsed.last_updated, seq=i)
    return 1000 * (time.process_time() - start) / snapshots


# --------------------------------------------------------------------------- report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="shorter windows (about 2 minutes in all)")
    parser.add_argument("--seconds", type=float, default=None, help="steady-state window per scenario")
    parser.add_argument("--jobs", default="100,1000", help="TrainJob counts through the watch path")
    parser.add_argument("--inproc-jobs", type=int, default=10_000)
    args = parser.parse_args()
    seconds = args.seconds or (10.0 if args.quick else 30.0)
    console = Console(width=170)
    pinned_self = _pin(0, 0)
    results: list[Result] = []
    with tempfile.TemporaryDirectory() as tmpdir:
        tmp = Path(tmpdir)
        for jobs in [int(j) for j in args.jobs.split(",") if j]:
            console.print(f"watch path, {jobs} TrainJobs, {seconds:.0f} s ...")
            results.append(run_watch(jobs, seconds, tmp))
        console.print(f"in-process source, {args.inproc_jobs} TrainJobs, {seconds:.0f} s ...")
        results.append(run_inproc(args.inproc_jobs, seconds, tmp))
    regex_ms = regex_sidecar_cpu_per_1000(20_000 if args.quick else 200_000) * 1000
    parse_ms = collector_parse_cpu_per_1000(20_000 if args.quick else 100_000) * 1000

    table = Table(
        title=f"collector load (1 core pinned: {pinned_self and all(r.pinned for r in results)}; "
        f"{os.cpu_count()} CPUs, load avg {os.getloadavg()[0]:.1f})"
    )
    for col in [
        "path",
        "offered snap/s",
        "sustained snap/s",
        "capacity snap/s per core",
        "latency p50 ms",
        "latency p99 ms",
        "CPU ms / 1000 snap",
        "RSS / tracked job",
        "collector RSS MB",
    ]:
        table.add_column(col, justify="right")
    for r in results:
        table.add_row(
            r.path,
            f"{r.offered:,.0f}",
            f"{r.rate:,.1f}",
            f"{1000 / max(r.cpu_per_1000, 1e-9):,.0f}",
            f"{r.pct(0.5) * 1000:.1f}",
            f"{r.pct(0.99) * 1000:.1f}",
            f"{r.cpu_per_1000 * 1000:,.0f}",
            f"{r.rss_per_job_b / 1024:,.1f} KiB",
            f"{r.rss_mb:,.0f}",
        )
    console.print(table)

    side = Table(
        title="vs. Katib's sidecar per trial pod (default requests 50m CPU / 10Mi; limits 500m / 100Mi)"
    )
    for col in [
        "N trials",
        "sidecars: CPU requested",
        "sidecars: memory requested",
        "collector: CPU used",
        "collector: RSS",
        "CPU ratio (req/used)",
        "memory ratio (req/RSS)",
    ]:
        side.add_column(col, justify="right")
    for r in results:
        used_cores = r.cpu_s / r.seconds
        side.add_row(
            f"{r.jobs:,}",
            f"{r.jobs * SIDECAR_CPU_REQUEST_M / 1000:,.1f} cores",
            f"{r.jobs * SIDECAR_MEM_REQUEST_MI:,} MiB",
            f"{used_cores:.3f} cores",
            f"{r.rss_mb:,.0f} MiB",
            f"{r.jobs * SIDECAR_CPU_REQUEST_M / 1000 / max(used_cores, 1e-9):,.0f}x",
            f"{r.jobs * SIDECAR_MEM_REQUEST_MI / max(r.rss_mb, 1e-9):,.1f}x",
        )
    console.print(side)
    parse = Table(title="parsing cost per 1,000 snapshots (5 metrics + progress/ETA each)")
    parse.add_column("what")
    parse.add_column("CPU ms / 1000", justify="right")
    parse.add_row(
        "Python re-implementation of the sidecar's regex line parser (parse only)", f"{regex_ms:,.1f}"
    )
    parse.add_row("collector parse only (parse_trainer_status + snapshot_rows)", f"{parse_ms:,.1f}")
    parse.add_row("ratio collector parse / regex parse", f"{parse_ms / max(regex_ms, 1e-9):,.1f}x")
    for r in results:
        parse.add_row(f"collector end to end, {r.path}", f"{r.cpu_per_1000 * 1000:,.0f}")
    console.print(parse)
    console.print(
        "Latency is measured from just before the status write (or process() call) to the row being "
        "visible in SQLite (5 ms polling). The sidecar regex figure covers parsing only; the real sidecar "
        "is Go and also tails files and talks gRPC."
    )


if __name__ == "__main__":
    main()
