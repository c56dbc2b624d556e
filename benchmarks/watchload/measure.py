"""What the benchmark measures from outside the processes: CPU and RSS from /proc, machine load, and the
moment each snapshot's rows become visible in ``db serve``'s SQLite file."""

from __future__ import annotations

import os
import signal
import sqlite3
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

CLK_TCK = os.sysconf("SC_CLK_TCK")
SEQ_METRIC = "trainjob/seq"  # one row per written snapshot (docs/collector.md, reserved metric names)


def cpu_s(pid: int) -> float:
    """utime + stime of every thread of ``pid`` (its children not included)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def busy_cores_counter() -> float:
    """Machine-wide CPU seconds spent not idle (all cores), from /proc/stat."""
    parts = Path("/proc/stat").read_text().splitlines()[0].split()[1:]
    values = [int(v) for v in parts]
    idle = values[3] + (values[4] if len(values) > 4 else 0)  # idle + iowait
    return (sum(values[:8]) - idle) / CLK_TCK


def load_average() -> float:
    return float(Path("/proc/loadavg").read_text().split()[0])


def interrupt_on_termination() -> None:
    """SIGTERM and SIGHUP (``kill``, a closed terminal) raise ``KeyboardInterrupt`` in the main thread, as
    Ctrl-C does, so a benchmark's ``finally`` blocks stop every process it started. Without this Python
    dies at once on SIGTERM and leaves the API stand-in, the collector or the store running."""

    def _interrupt(signum: int, _frame: object) -> None:
        raise KeyboardInterrupt(f"signal {signal.Signals(signum).name}")

    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, _interrupt)


def pin(pid: int, cpu: int) -> bool:
    try:
        os.sched_setaffinity(pid, {cpu % (os.cpu_count() or 1)})
    except (AttributeError, OSError):
        return False
    return True


@dataclass
class Sample:
    """CPU counters of the processes of a run and of the machine, at one moment."""

    at: float
    cpu: dict[str, float]
    machine_busy_s: float

    @classmethod
    def take(cls, pids: dict[str, int]) -> Sample:
        cpu = {}
        for name, pid in pids.items():
            try:
                cpu[name] = cpu_s(pid)
            except (FileNotFoundError, ProcessLookupError):
                cpu[name] = float("nan")
        cpu["driver"] = sum(os.times()[:2])
        return cls(time.monotonic(), cpu, busy_cores_counter())

    def cores_since(self, earlier: Sample) -> dict[str, float]:
        """Average cores used between ``earlier`` and this sample, per process and for the machine."""
        span = max(1e-9, self.at - earlier.at)
        out = {name: (self.cpu[name] - earlier.cpu.get(name, 0.0)) / span for name in self.cpu}
        out["machine"] = (self.machine_busy_s - earlier.machine_busy_s) / span
        out["others"] = out["machine"] - sum(v for k, v in out.items() if k != "machine" and v == v)
        return out


@dataclass
class RowPoller:
    """Polls the SQLite file every ``interval_s`` for new ``trainjob/seq`` rows (one per stored snapshot)
    and keeps, per (job index, lastUpdatedTime second), the first moment it was visible."""

    db: Path
    index_of: dict[str, int]
    interval_s: float = 0.005
    seen: dict[int, float] = field(default_factory=dict)
    duplicates: int = 0
    rows: int = 0
    unknown: int = 0
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    @staticmethod
    def key(index: int, second: int) -> int:
        return index << 34 | second

    def start(self) -> RowPoller:
        self._thread = threading.Thread(target=self._run, name="row-poller", daemon=True)
        self._thread.start()
        return self

    def tracked(self) -> int:
        return len({k >> 34 for k in list(self.seen)})

    def _run(self) -> None:
        while not self.db.exists() and not self._stop.wait(0.05):
            pass
        conn = sqlite3.connect(f"file:{self.db}?mode=ro", uri=True, timeout=30)
        last = 0
        query = (
            "SELECT id, trial_name, time_us FROM observation_logs"
            " WHERE id > ? AND metric_name = ? ORDER BY id"
        )
        while not self._stop.wait(self.interval_s):
            try:
                rows = conn.execute(query, (last, SEQ_METRIC)).fetchall()
            except sqlite3.OperationalError:  # the table is not created yet, or the file is busy
                continue
            now = time.monotonic()
            for rid, trial, time_us in rows:
                last = rid
                self._record(trial, time_us // 1_000_000, now)
        conn.close()

    def _record(self, trial: str, second: int, now: float) -> None:
        index = self.index_of.get(trial)
        if index is None:
            self.unknown += 1
            return
        self.rows += 1
        key = self.key(index, second)
        if key in self.seen:
            self.duplicates += 1
        else:
            self.seen[key] = now

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(10)


def duplicate_rows(db: Path) -> int:
    """Rows stored more than once: the same (trial, time, metric, value) twice."""
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=30)
    try:
        (count,) = conn.execute(
            "SELECT COALESCE(SUM(n - 1), 0) FROM (SELECT COUNT(*) AS n FROM observation_logs "
            "GROUP BY trial_name, time_us, metric_name, value HAVING n > 1)"
        ).fetchone()
    finally:
        conn.close()
    return int(count)


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    data = sorted(values)
    return data[min(len(data) - 1, int(q * len(data)))]
