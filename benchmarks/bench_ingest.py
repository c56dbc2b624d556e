"""Ingest throughput and per-job memory of the collector data path.

Run: .venv/bin/python benchmarks/bench_ingest.py [--snapshots N] [--jobs N]

1. snapshots/s through parse -> sequence -> rows -> sink, for MemorySink (in-process baseline) and for
   DBManagerSink -> embedded SQLite store over gRPC loopback (timed until every row is committed);
2. resident memory per tracked TrainJob: the RSS growth of a SnapshotProcessor tracking N jobs'
   sequencing state (rows go to a sink that keeps nothing), and the tracemalloc figure beside it.
"""

from __future__ import annotations

import argparse
import gc
import os
import tempfile
import time
import tracemalloc
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from katib_progress.collector.katib.dbmanager import DBManagerSettings, DBManagerSink
from katib_progress.collector.pipeline import JobRef, OutcomeKind, SnapshotProcessor
from katib_progress.collector.rows import MetricRow
from katib_progress.collector.sinks import ObservationSink
from katib_progress.collector.store import start_store_server
from katib_progress.collector.testing import MemorySink
from katib_progress.core.timefmt import format_rfc3339nano

T0 = datetime(2026, 3, 1, 12, 0, 0, tzinfo=UTC)
METRICS = ["loss", "learning_rate", "epoch", "grad_norm", "eval_loss", "eval_accuracy", "eval_f1", "step"]


class _NullSink:
    def report(self, trial: str, rows: Sequence[MetricRow]) -> None:
        return None

    def latest(self, trial: str) -> list[MetricRow]:
        return []

    def flush(self, timeout: float) -> bool:
        return True

    def delete(self, trial: str) -> None:
        return None

    def close(self) -> None:
        return None


def _workload(n_jobs: int, n_snapshots: int) -> list[tuple[JobRef, dict[str, Any]]]:
    """Round-robin snapshots over jobs, one per job per second, like a watch stream."""
    jobs = [
        JobRef("bench", f"trial-{j}", f"uid-{j}", "bench", f"trial-{j}", started_at=T0) for j in range(n_jobs)
    ]
    work = []
    for i in range(n_snapshots):
        job = jobs[i % n_jobs]
        step = i // n_jobs
        body = {
            "lastUpdatedTime": format_rfc3339nano(T0 + timedelta(seconds=5 * (step + 1))),
            "progressPercentage": min(100, step),
            "estimatedRemainingSeconds": max(0, 500 - 5 * step),
            "metrics": [{"name": m, "value": repr(1.0 / (step + k + 1))} for k, m in enumerate(METRICS)],
        }
        work.append((job, body))
    return work


def _throughput(sink: ObservationSink, work: list[tuple[JobRef, dict[str, Any]]]) -> tuple[float, float, int]:
    """Wall seconds, process CPU seconds (all threads, store included) and rows written."""
    proc = SnapshotProcessor(sink)
    rows = 0
    cpu = time.process_time()
    start = time.perf_counter()
    for job, body in work:
        out = proc.process(job, body)
        if out.kind is not OutcomeKind.WRITTEN:
            raise RuntimeError(f"unexpected outcome {out}")
        rows += out.rows
    if not sink.flush(600):
        raise RuntimeError("sink did not drain")
    return time.perf_counter() - start, time.process_time() - cpu, rows


def _rss_bytes() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError("no VmRSS")


def _memory_per_job(n_jobs: int) -> tuple[float, float]:
    work = _workload(n_jobs, n_jobs)
    jobs_bodies = [(j, b) for j, b in work]
    proc = SnapshotProcessor(_NullSink())
    gc.collect()
    tracemalloc.start()
    before_rss = _rss_bytes()
    before_tm, _ = tracemalloc.get_traced_memory()
    for job, body in jobs_bodies:
        proc.process(job, body)
    gc.collect()
    after_tm, _ = tracemalloc.get_traced_memory()
    after_rss = _rss_bytes()
    tracemalloc.stop()
    assert len(proc) == n_jobs
    return (after_rss - before_rss) / n_jobs, (after_tm - before_tm) / n_jobs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--snapshots", type=int, default=20_000)
    parser.add_argument("--jobs", type=int, default=200, help="jobs the snapshots are spread over")
    parser.add_argument("--track", type=int, default=10_000, help="jobs tracked for the memory figure")
    args = parser.parse_args()
    console = Console(width=150)

    work = _workload(args.jobs, args.snapshots)
    mem_s, mem_cpu, mem_rows = _throughput(MemorySink(), work)
    with tempfile.TemporaryDirectory() as tmp:
        server = start_store_server(Path(tmp) / "bench.sqlite")
        sink = DBManagerSink(server.address, settings=DBManagerSettings(max_buffered_rows=10_000_000))
        try:
            grpc_s, grpc_cpu, grpc_rows = _throughput(sink, work)
            stored = server.db.count()
        finally:
            sink.close()
            server.stop(0)
    if stored != grpc_rows:
        raise RuntimeError(f"store holds {stored} rows, expected {grpc_rows}")

    table = Table(
        title=f"collector ingest: {args.snapshots:,} snapshots over {args.jobs} TrainJobs, "
        f"{len(METRICS)} metrics + progress/ETA/elapsed/seq rows each"
    )
    for col in ("path", "wall s", "CPU s", "snapshots/s", "rows/s", "CPU µs/snapshot", "vs MemorySink"):
        table.add_column(col, justify="right" if col != "path" else "left")
    n = args.snapshots
    table.add_row(
        "parse->rows->MemorySink (in process)",
        f"{mem_s:.2f}",
        f"{mem_cpu:.2f}",
        f"{n / mem_s:,.0f}",
        f"{mem_rows / mem_s:,.0f}",
        f"{1e6 * mem_cpu / n:,.0f}",
        "1.00x",
    )
    table.add_row(
        "parse->rows->DBManagerSink->gRPC->SQLite store",
        f"{grpc_s:.2f}",
        f"{grpc_cpu:.2f}",
        f"{n / grpc_s:,.0f}",
        f"{grpc_rows / grpc_s:,.0f}",
        f"{1e6 * grpc_cpu / n:,.0f}",
        f"{mem_s / grpc_s:.2f}x",
    )
    console.print(f"load average before: {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    console.print(table)

    rss, traced = _memory_per_job(args.track)
    mem = Table(title=f"memory per tracked TrainJob ({args.track:,} jobs' sequencing state)")
    mem.add_column("measure")
    mem.add_column("bytes/job", justify="right")
    mem.add_row("RSS growth / jobs", f"{rss:,.0f}")
    mem.add_row("tracemalloc growth / jobs", f"{traced:,.0f}")
    console.print(mem)


if __name__ == "__main__":
    main()
