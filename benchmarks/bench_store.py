"""CPU per ReportObservationLog of the embedded store (``katib-progress db serve``), measured from outside.

Run: .venv/bin/python benchmarks/bench_store.py [--rate 1000] [--seconds 20] [--trials 10000] [--repeat 1]

Starts ``katib-progress db serve`` on a fresh SQLite file and drives it with the collector's own DB
manager client (``DBManagerSink``, 8 senders, at most one RPC in flight per trial), offering
snapshot-shaped reports at ``--rate`` per second: each is one trial's 10 rows with one timestamp (six
Hugging Face metrics plus progress, ETA, elapsed and seq, as ``benchmarks/bench_watch.py`` produces),
trials taken round-robin so one trial reports every ``trials / rate`` seconds. Prints, per repeat,
the RPCs the store answered, their rate, and the store's CPU per RPC from /proc (utime + stime, and
each), plus context switches per RPC over all its threads. When the store falls behind, the client's
buffer fills and reports are offered later (counted), and queued reports of one trial are coalesced
into one RPC (rows per RPC above 10): compare CPU per RPC at a rate the store sustains. The store's
CPU does not include this driver; on a machine with other load the figures are higher (more
switches, colder caches).
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.bench_watch import CLI, ENV, free_port, wait_for  # noqa: E402
from benchmarks.watchload.measure import CLK_TCK  # noqa: E402
from katib_progress.core.errors import TemporaryError  # noqa: E402

NAMES = ("loss", "grad_norm", "learning_rate", "epoch", "eval_loss", "eval_accuracy")
RESERVED = ("trainjob/progress", "trainjob/eta", "trainjob/elapsed", "trainjob/seq")


@dataclass
class Counts:
    utime_s: float
    stime_s: float
    switches: int

    @classmethod
    def of(cls, pid: int) -> Counts:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        switches = 0
        for status in Path(f"/proc/{pid}/task").glob("*/status"):
            for line in status.read_text().splitlines():
                if "ctxt_switches" in line:
                    switches += int(line.split()[1])
        return cls(int(fields[11]) / CLK_TCK, int(fields[12]) / CLK_TCK, switches)


class CountingStub:
    """Counts the ReportObservationLog calls the sink makes (one per RPC, coalesced or not)."""

    def __init__(self, stub: Any) -> None:
        self._stub, self.calls = stub, 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stub, name)

    @property
    def ReportObservationLog(self) -> Any:
        self.calls += 1
        return self._stub.ReportObservationLog


def rows(trial: int, round_: int, base: datetime) -> list[Any]:
    from katib_progress.collector.rows import MetricRow
    from katib_progress.core.timefmt import format_rfc3339nano

    stamp = format_rfc3339nano(base + timedelta(seconds=5 * round_, microseconds=trial))
    values = [f"{(trial * 31 + round_ * 7 + k) % 997 / 1000:.4f}" for k in range(len(NAMES))]
    return [MetricRow(n, v, stamp) for n, v in zip(NAMES, values, strict=True)] + [
        MetricRow(RESERVED[0], "42", stamp),
        MetricRow(RESERVED[1], "1800", stamp),
        MetricRow(RESERVED[2], str(5 * round_), stamp),
        MetricRow(RESERVED[3], str(round_), stamp),
    ]


def drive(sink: Any, stub: CountingStub, pid: int, args: Any, base: datetime, first_round: int) -> str:
    before, calls0, start = Counts.of(pid), stub.calls, time.monotonic()
    sent = refused = 0
    while (elapsed := time.monotonic() - start) < args.seconds:
        while sent < int(elapsed * args.rate):
            trial = sent % args.trials
            try:
                sink.report(f"trial-{trial}", rows(trial, first_round + sent // args.trials, base))
            except TemporaryError:  # the client's buffer is full: the store is behind, offer it later
                refused += 1
                break
            sent += 1
        time.sleep(0.002)
    if not sink.flush(120):
        raise RuntimeError("the store did not take every report within 120 s")
    span, after = time.monotonic() - start, Counts.of(pid)
    rpcs = stub.calls - calls0
    cpu = (after.utime_s - before.utime_s) + (after.stime_s - before.stime_s)
    return (
        f"{sent:,} reports ({refused:,} times the client's buffer was full), {rpcs:,} RPCs in "
        f"{span:.1f} s ({rpcs / span:,.0f}/s, {10 * sent / max(1, rpcs):.1f} rows each); store CPU "
        f"{1000 * cpu / rpcs:.3f} ms per RPC (user {1000 * (after.utime_s - before.utime_s) / rpcs:.3f},"
        f" system {1000 * (after.stime_s - before.stime_s) / rpcs:.3f}), {cpu / span:.2f} cores, "
        f"{(after.switches - before.switches) / rpcs:.1f} context switches per RPC"
    )


def main() -> None:
    import grpc

    from katib_progress.collector.katib.dbmanager import DBManagerSink

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rate", type=float, default=1000.0, help="reports offered per second")
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--trials", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=1)
    args = parser.parse_args()
    base = datetime(2026, 1, 1, tzinfo=UTC)
    with tempfile.TemporaryDirectory(prefix="bench-store-") as tmp:
        address = f"127.0.0.1:{free_port()}"
        store = subprocess.Popen(
            [*CLI, "db", "serve", "--address", address, "--db", str(Path(tmp) / "o.sqlite")],
            cwd=ROOT,
            env=ENV,
            stdout=subprocess.DEVNULL,
            stderr=(Path(tmp) / "store.log").open("wb"),
        )
        sink = None
        try:
            sink = DBManagerSink(address)
            wait_for("db serve", lambda: grpc.channel_ready_future(sink._channel).result(60) is None, 60)
            stub = sink._stub = CountingStub(sink._stub)
            for trial in range(args.trials):  # every trial has its first round stored (not measured)
                sink.report(f"trial-{trial}", rows(trial, 0, base))
            sink.flush(300)
            print(
                f"db serve (pid {store.pid}); {args.rate:,.0f} reports/s offered for {args.seconds:.0f} s, "
                f"{args.trials:,} trials, 10 rows each",
                flush=True,
            )
            for r in range(args.repeat):
                print(drive(sink, stub, store.pid, args, base, 1 + 1000 * r), flush=True)
        finally:
            if sink is not None:
                sink.close()
            store.send_signal(signal.SIGTERM)
            store.wait(60)


if __name__ == "__main__":
    from benchmarks.watchload.measure import interrupt_on_termination

    interrupt_on_termination()  # kill / a closed terminal: stop what was started, as Ctrl-C does
    os.environ.setdefault("GRPC_VERBOSITY", "ERROR")
    main()
