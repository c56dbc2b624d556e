"""Katib's own sink for the load benchmarks: Katib v0.19.0's ``katib-db-manager`` on MariaDB, started as the
end-to-end tier starts them (tests/e2e/katib.py ``MariaDB``, ``KatibDBManager``), and what the benchmark reads
from the database: when each snapshot's ``trainjob/seq`` row became visible, and the row counts.

The table is Katib's ``katib.observation_logs`` (pkg/db/v1beta1/mysql/init.go: ``id`` auto-increment
primary key, ``trial_name``, ``time DATETIME(6)``, ``metric_name``, ``value TEXT``; no other index). It is
read through one long-lived ``mariadb`` client process (Debian's, installed with the server by
scripts/e2e_deps.sh), so no MySQL driver is needed in the venv: each query is followed by a sentinel
``SELECT`` whose line ends its result.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import threading
import time
from pathlib import Path

from benchmarks.watchload.measure import SEQ_METRIC, RowPoller

SENTINEL = "__katib_progress_end__"


def pin_all(pid: int, cpu: int) -> bool:
    """Pin every thread of ``pid`` (threads it starts later inherit it): a Go or C server has started its
    threads before it answers, and ``sched_setaffinity(pid)`` alone moves only the main thread."""
    ok = False
    try:
        tids = [int(t) for t in os.listdir(f"/proc/{pid}/task")]
    except OSError:
        return False
    for tid in tids:
        try:
            os.sched_setaffinity(tid, {cpu % (os.cpu_count() or 1)})
            ok = True
        except (AttributeError, OSError):
            continue
    return ok


class MariaClient:
    """One ``mariadb`` client process on the server's socket; ``query()`` returns the rows as string tuples
    (tab-separated batch output). Thread-safe (one query at a time)."""

    def __init__(self, socket_path: Path, password: str) -> None:
        client = shutil.which("mariadb") or shutil.which("mysql") or "mariadb"
        self.proc = subprocess.Popen(
            [client, f"--socket={socket_path}", "-uroot", f"-p{password}", "-N", "-B", "--unbuffered",
             "--force", "katib"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, bufsize=1,
        )  # fmt: skip
        self._lock = threading.Lock()
        self.query("SET time_zone = '+00:00'")

    def query(self, statement: str) -> list[tuple[str, ...]]:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        with self._lock:
            self.proc.stdin.write(f"{statement.rstrip(';')};\nSELECT '{SENTINEL}';\n")
            self.proc.stdin.flush()
            rows: list[tuple[str, ...]] = []
            while True:
                line = self.proc.stdout.readline()
                if not line:
                    raise RuntimeError(f"mariadb client exited ({self.proc.poll()}) during: {statement}")
                line = line.rstrip("\n")
                if line == SENTINEL:
                    return rows
                rows.append(tuple(line.split("\t")))

    def scalar(self, statement: str) -> int:
        rows = self.query(statement)
        return int(rows[0][0]) if rows and rows[0][0] not in ("", "NULL") else 0

    def close(self) -> None:
        if self.proc.poll() is None:
            assert self.proc.stdin is not None
            self.proc.stdin.close()
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


class MariaRowPoller(RowPoller):
    """``RowPoller`` on Katib's table: new ``trainjob/seq`` rows by id (the primary key, so each poll is a
    range read), keyed by (job index, UTC second of the row's time).

    Concurrent INSERTs take their auto-increment ids when they start and commit in any order, so a row can
    become visible after rows with higher ids: every ``recheck_every`` polls the last ``recheck_ids`` ids
    are read again and rows not seen before are recorded (ids seen are remembered in that window)."""

    def __init__(
        self,
        client: MariaClient,
        index_of: dict[str, int],
        interval_s: float = 0.005,
        recheck_every: int = 20,
        recheck_ids: int = 20_000,
    ) -> None:
        super().__init__(Path("/nonexistent"), index_of, interval_s)
        self.client = client
        self.recheck_every, self.recheck_ids = recheck_every, recheck_ids

    def _run(self) -> None:
        last, polls = 0, 0
        ids: set[int] = set()
        while not self._stop.wait(self.interval_s):
            polls += 1
            since = max(0, last - self.recheck_ids) if polls % self.recheck_every == 0 else last
            try:
                rows = self.client.query(
                    "SELECT id, trial_name, FLOOR(UNIX_TIMESTAMP(time)) FROM observation_logs"
                    f" WHERE id > {since} AND metric_name = '{SEQ_METRIC}' ORDER BY id"
                )
            except RuntimeError:
                return
            now = time.monotonic()
            for rid, trial, second in rows:
                row_id = int(rid)
                if row_id in ids:
                    continue
                ids.add(row_id)
                last = max(last, row_id)
                self._record(trial, int(second), now)
            if polls % (self.recheck_every * 20) == 0:
                floor = last - 2 * self.recheck_ids
                ids = {i for i in ids if i > floor}

    def stop(self) -> None:
        super().stop()
        self.client.close()


def duplicate_rows(client: MariaClient) -> int:
    """Rows stored more than once: the same (trial, time, metric, value) twice."""
    return client.scalar(
        "SELECT COALESCE(SUM(n - 1), 0) FROM (SELECT COUNT(*) AS n FROM observation_logs "
        "GROUP BY trial_name, time, metric_name, value HAVING n > 1) AS d"
    )


def row_counts(client: MariaClient) -> tuple[int, int, int]:
    """(rows, ``trainjob/seq`` rows, distinct snapshots = distinct (trial, time) among the seq rows)."""
    (row,) = client.query(
        f"SELECT COUNT(*), SUM(metric_name = '{SEQ_METRIC}'), "
        f"(SELECT COUNT(*) FROM (SELECT DISTINCT trial_name, time FROM observation_logs "
        f"WHERE metric_name = '{SEQ_METRIC}') AS s) FROM observation_logs"
    )
    return tuple(int(v) if v not in ("", "NULL") else 0 for v in row)  # type: ignore[return-value]


class KatibSink:
    """MariaDB + ``katib-db-manager`` in ``workdir`` (tests/e2e/katib.py's classes) + a measuring client."""

    def __init__(self, workdir: Path) -> None:
        from tests.e2e.controlplane import free_port
        from tests.e2e.katib import DB_PASSWORD, KatibDBManager, MariaDB

        self.workdir = workdir
        self.db = MariaDB(workdir)
        self.address = f"127.0.0.1:{free_port()}"
        self.manager = KatibDBManager(workdir, self.db, self.address)
        self.password = DB_PASSWORD
        self.client: MariaClient | None = None

    def start(self) -> KatibSink:
        self.db.start()
        self.manager.start()
        self.client = MariaClient(self.db.socket, self.password)
        return self

    @property
    def pids(self) -> dict[str, int]:
        assert self.db.proc is not None and self.manager.proc is not None
        return {"store": self.manager.proc.proc.pid, "database": self.db.proc.proc.pid}

    def pin(self, cpu: int) -> bool:
        return all([pin_all(pid, cpu) for pid in self.pids.values()])

    def stop(self) -> None:
        if self.client is not None:
            self.client.close()
        self.manager.stop()
        self.db.stop()
