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
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.loadkit import (  # noqa: E402
    PERIOD_S,
    Result,
    RowPoller,
    start_store,
    trainer_status,
)
from benchmarks.watchload.measure import cpu_s, pin, rss_kib  # noqa: E402

# Katib's default StdOut/File metrics filter (pkg/metricscollector/v1beta1/common/const.go).
KATIB_DEFAULT_FILTER = r"([\w|-]+)\s*=\s*([+-]?\d*(\.\d+)?([Ee][+-]?\d+)?)"
SIDECAR_CPU_REQUEST_M, SIDECAR_MEM_REQUEST_MI = 50, 10
SIDECAR_CPU_LIMIT_M, SIDECAR_MEM_LIMIT_MI = 500, 100


# --------------------------------------------------------------------------- 1. watch path


def _collector_process(kubeconfig: Path, address: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
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


class _StatusWriter:
    """Creates ``jobs`` Trial-owned TrainJobs in the stand-in and PUTs their statuses, noting when."""

    def __init__(self, kube: Any, jobs: int) -> None:
        from kubernetes import client

        from tests.kubestandin.objects import Objects

        objs = Objects(kube.api_client())
        self.names = [f"load-{i:05d}" for i in range(jobs)]
        with ThreadPoolExecutor(4) as pool:
            self._bodies = dict(
                zip(self.names, pool.map(lambda n: objs.trial_job(n, "load"), self.names), strict=True)
            )
        self._api = client.CustomObjectsApi(kube.api_client())
        self._base = datetime.now(UTC).replace(microsecond=0)
        self.sent: dict[tuple[str, int], float] = {}

    def put(self, name: str, step: int) -> None:
        from tests.kubestandin.objects import TRAINER

        body = {**self._bodies[name], "status": {"trainerStatus": trainer_status(step, self._base)}}
        body["metadata"] = {k: v for k, v in body["metadata"].items() if k != "resourceVersion"}
        self.sent[(name, step)] = time.monotonic()
        self._api.replace_namespaced_custom_object_status(*TRAINER, "default", "trainjobs", name, body)


def _steady_state(
    writer: _StatusWriter, poller: RowPoller, pid: int, seconds: float
) -> tuple[int, float, float, list[float]]:
    """Job i writes at t0 + i * PERIOD / N + k * PERIOD; (rows seen, window s, CPU s, latencies)."""
    jobs = len(writer.names)
    t0 = time.monotonic() + 0.5
    cpu0, seen0 = cpu_s(pid), len(poller.seen)
    schedule = sorted(
        (t0 + i * PERIOD_S / jobs + k * PERIOD_S, writer.names[i], k + 1)
        for k in range(int(seconds // PERIOD_S))
        for i in range(jobs)
    )
    with ThreadPoolExecutor(6) as pool:
        for when, name, step in schedule:
            delay = when - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            pool.submit(writer.put, name, step)
    end_writes = time.monotonic()
    deadline = time.monotonic() + 60
    while len(poller.seen) - seen0 < len(schedule) and time.monotonic() < deadline:
        time.sleep(0.05)
    window = max(time.monotonic(), end_writes) - t0
    cpu = cpu_s(pid) - cpu0
    lat = [poller.seen[k] - writer.sent[k] for k in writer.sent if k in poller.seen and k[1] > 0]
    return len(poller.seen) - seen0, window, cpu, lat


def run_watch(jobs: int, seconds: float, tmp: Path) -> Result:
    from tests.kubestandin import KubeStandin

    store, address, db = start_store(tmp)
    kube = KubeStandin(bookmark_interval=1.0).start()
    collector = _collector_process(kube.write_kubeconfig(tmp / f"kubeconfig-{jobs}"), address)
    pinned = pin(collector.pid, 1)
    poller = RowPoller(db).start()
    try:
        while not any(r.verb == "watch" for r in kube.requests):
            time.sleep(0.05)
        time.sleep(1.0)
        rss0 = rss_kib(collector.pid)
        writer = _StatusWriter(kube, jobs)
        with ThreadPoolExecutor(4) as pool:  # step 0 of every job: now every job is tracked
            list(pool.map(lambda n: writer.put(n, 0), writer.names))
        while sum(1 for (_, s) in poller.seen if s == 0) < jobs:
            time.sleep(0.1)
        time.sleep(1.0)
        rss1 = rss_kib(collector.pid)
        processed, window, cpu, lat = _steady_state(writer, poller, collector.pid, seconds)
        rss_now = rss_kib(collector.pid)
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

    pinned = pin(0, 1)
    base = datetime.now(UTC).replace(microsecond=0)
    sink = DBManagerSink(address)
    processor = SnapshotProcessor(sink)
    refs = [JobRef("default", f"inproc-{i:05d}", f"uid-{i}", "load", f"inproc-{i:05d}") for i in range(jobs)]
    rss0 = rss_kib(os.getpid())
    refused = 0

    def deliver(ref: JobRef, status: dict[str, Any]) -> None:
        # As the controller does: a snapshot the sink refuses (buffer full) is delivered again later.
        nonlocal refused
        while processor.process(ref, status).retry:
            refused += 1
            time.sleep(0.01)

    for ref in refs:
        deliver(ref, trainer_status(0, base))
    sink.flush(120)
    rss1 = rss_kib(os.getpid())
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
            deliver(ref, trainer_status(k + 1, base))
    sink.flush(120)
    end = time.monotonic()
    cpu = time.process_time() - cpu0
    sink.close()
    out.put((sent, cpu, end - t0, rss0, rss1, rss_kib(os.getpid()), pinned, refused))


def run_inproc(jobs: int, seconds: float, tmp: Path) -> Result:
    store, address, db = start_store(tmp)
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
    statuses = [trainer_status(i, base) for i in range(snapshots)]
    start = time.process_time()
    for i, status in enumerate(statuses):
        parsed = parse_trainer_status(status)
        snapshot_rows(parsed, stamp=parsed.last_updated, seq=i)
    return 1000 * (time.process_time() - start) / snapshots


# --------------------------------------------------------------------------- report


def _load_table(results: list[Result], pinned_self: bool) -> Table:
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
    return table


def _sidecar_table(results: list[Result]) -> Table:
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
    return side


def _parse_table(results: list[Result], regex_ms: float, parse_ms: float) -> Table:
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
    return parse


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="shorter windows (about 2 minutes in all)")
    parser.add_argument("--seconds", type=float, default=None, help="steady-state window per scenario")
    parser.add_argument("--jobs", default="100,1000", help="TrainJob counts through the watch path")
    parser.add_argument("--inproc-jobs", type=int, default=10_000)
    args = parser.parse_args()
    seconds = args.seconds or (10.0 if args.quick else 30.0)
    console = Console(width=170)
    pinned_self = pin(0, 0)
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

    console.print(_load_table(results, pinned_self))
    console.print(_sidecar_table(results))
    console.print(_parse_table(results, regex_ms, parse_ms))
    console.print(
        "Latency is measured from just before the status write (or process() call) to the row being "
        "visible in SQLite (5 ms polling). The sidecar regex figure covers parsing only; the real sidecar "
        "is Go and also tails files and talks gRPC."
    )


if __name__ == "__main__":
    from benchmarks.watchload.measure import interrupt_on_termination

    interrupt_on_termination()  # kill / a closed terminal: stop what was started, as Ctrl-C does
    main()
