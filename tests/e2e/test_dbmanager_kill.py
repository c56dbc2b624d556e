"""Exactly-once against Katib's own DB manager: ``katib-db-manager`` (v0.19.0, on MariaDB) is SIGKILLed while
the collector's sink (``DBManagerSink``) streams reports to it, and the rows in MariaDB are checked.

What Katib does with one ``ReportObservationLog`` (pkg/db/v1beta1/mysql/mysql.go
``RegisterObservationLog``): one ``INSERT INTO observation_logs ... VALUES (...), (...), ...`` for all the
report's rows, prepared and executed on a pooled connection in autocommit mode, so InnoDB stores all of them
or none; the RPC's deadline is not passed to the database. Killing the DB manager between sending that
INSERT and answering leaves the outcome unknown to the client: the statement may still commit after the
process is gone (MariaDB only learns that its client left when it writes the answer). Two kills here:

1. an INSERT is made to wait on a table lock (``LOCK TABLES observation_logs WRITE`` from another session),
   the DB manager is killed while it waits, the lock is released: the orphaned INSERT commits after its
   client is gone (the test checks that it did), so a blind resend would store it twice;
2. a plain SIGKILL in the middle of the stream.

The sink waits ``lock_wait_s`` after an ambiguous failure, reads the batch back and resends it only when its
rows are not there. Afterwards every row of every report is in MariaDB exactly once, and each trial's rows
are in report order.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from collections import Counter
from pathlib import Path

from katib_progress.collector.katib.dbmanager import DBManagerSink
from katib_progress.collector.katib.dbsettings import DBManagerSettings
from katib_progress.collector.rows import MetricRow
from katib_progress.core.errors import TemporaryError
from tests.e2e.controlplane import free_port
from tests.e2e.katib import DB_PASSWORD, KatibDBManager, MariaDB

TRIALS = [f"trial-{i:02d}" for i in range(12)]
NAMES = ("loss", "grad_norm", "learning_rate", "epoch", "eval_loss", "eval_accuracy")
BASE = 1_780_000_000


def snapshot(trial: int, seq: int) -> list[MetricRow]:
    """Ten rows at one stamp, as the collector writes a snapshot (6 metrics, progress, ETA, elapsed, seq)."""
    sec = BASE + seq
    stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(sec))
    rows = [MetricRow(name, f"{(trial + 1) * 0.001 + seq * 1e-6:.6f}", stamp) for name in NAMES]
    extra = {
        "trainjob/progress": seq % 101,
        "trainjob/eta_seconds": 9999 - seq,
        "trainjob/elapsed_seconds": seq,
    }
    rows += [MetricRow(name, str(value), stamp) for name, value in extra.items()]
    return [*rows, MetricRow("trainjob/seq", str(seq), stamp)]


class Stream:
    """Reports snapshots round-robin over TRIALS from a thread, retrying refused ones; keeps what it sent."""

    def __init__(self, sink: DBManagerSink, rate: float) -> None:
        self.sink, self.interval = sink, 1.0 / rate
        self.sent: dict[str, list[MetricRow]] = {t: [] for t in TRIALS}
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)

    def run(self) -> None:
        seq = 0
        while not self.stop.is_set():
            for i, trial in enumerate(TRIALS):
                rows = snapshot(i, seq)
                while not self.stop.is_set():
                    try:
                        self.sink.report(trial, rows)
                        self.sent[trial] += rows
                        break
                    except TemporaryError:
                        time.sleep(0.05)
                time.sleep(self.interval)
            seq += 1


def stored(db: MariaDB) -> dict[str, list[tuple[str, str, str]]]:
    """Each trial's rows in id order as (time as RFC 3339 second, metric, value)."""
    out: dict[str, list[tuple[str, str, str]]] = {t: [] for t in TRIALS}
    for trial, at, metric, value in db.observation_rows():
        out[trial].append((at.replace(" ", "T").split(".")[0] + "Z", metric, value))
    return out


def waiting_inserts(db: MariaDB) -> int:
    out = db.sql(
        "SELECT COUNT(*) FROM information_schema.processlist WHERE info LIKE 'INSERT INTO observation_logs%'",
        check=True,
    ).stdout
    return int(out.strip() or 0)


def kill(manager: KatibDBManager) -> None:
    assert manager.proc is not None
    os.kill(manager.proc.proc.pid, signal.SIGKILL)
    manager.proc.proc.wait(10)


def test_katib_db_manager_killed_mid_write_stores_every_row_once(tmp_path: Path) -> None:
    import subprocess

    db = MariaDB(tmp_path).start()
    manager = KatibDBManager(tmp_path, db, f"127.0.0.1:{free_port()}")
    locker: subprocess.Popen[str] | None = None
    sink: DBManagerSink | None = None
    try:
        manager.start()
        # lock_wait_s: here nothing but the test's own LOCK TABLES delays an INSERT, and it is released
        # before the wait ends (a cluster keeps the default 60 s, above InnoDB's 50 s lock wait)
        settings = DBManagerSettings(rpc_timeout_s=1.0, lock_wait_s=4.0, senders=4)
        sink = DBManagerSink(manager.address, settings=settings)
        stream = Stream(sink, rate=300)
        stream.thread.start()
        time.sleep(1.0)

        # 1. an INSERT waits on a table lock; the DB manager dies meanwhile; the lock goes
        locker = subprocess.Popen(
            ["mariadb", f"--socket={db.socket}", "-uroot", f"-p{DB_PASSWORD}", "-N", "-B", "--unbuffered",
             "katib"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        )  # fmt: skip
        assert locker.stdin is not None and locker.stdout is not None
        # the lock holder alone can read the table meanwhile: the rows stored before the lock
        locker.stdin.write("LOCK TABLES observation_logs WRITE; SELECT COUNT(*) FROM observation_logs;\n")
        locker.stdin.flush()
        rows_before = int(locker.stdout.readline())
        deadline = time.monotonic() + 10
        while waiting_inserts(db) == 0:
            assert time.monotonic() < deadline, "no INSERT came to wait on the lock"
            time.sleep(0.05)
        orphaned = waiting_inserts(db)
        kill(manager)
        locker.stdin.write("UNLOCK TABLES; SELECT 'unlocked';\n")
        locker.stdin.flush()
        assert locker.stdout.readline().strip() == "unlocked"
        deadline = time.monotonic() + 10
        while waiting_inserts(db):  # the orphaned INSERTs run to their end, client gone
            assert time.monotonic() < deadline
            time.sleep(0.05)
        committed_orphans = len(db.observation_rows()) - rows_before
        time.sleep(0.5)
        manager.start()
        time.sleep(1.5)

        # 2. a plain SIGKILL mid-stream
        kill(manager)
        time.sleep(0.7)
        manager.start()
        time.sleep(1.5)

        stream.stop.set()
        stream.thread.join(10)
        assert sink.flush(60), f"{sink.buffered_rows} rows still buffered"
        recovered = sink.counters.total("dbmanager_batches_found_committed_total")
        retries = sink.counters.total("dbmanager_retries_total")
        got = stored(db)
    finally:
        if sink is not None:
            sink.close()
        if locker is not None:
            locker.kill()
            locker.wait()
        manager.stop()
        db.stop()

    # the first kill did leave work that committed behind the client's back
    assert orphaned >= 1 and committed_orphans >= 10 * orphaned, (orphaned, committed_orphans)
    for trial in TRIALS:
        want = [(r.timestamp, r.name, r.value) for r in stream.sent[trial]]
        assert want, trial
        counts = Counter(got[trial])
        lost, extra = Counter(want) - counts, counts - Counter(want)
        assert counts == Counter(want), f"{trial}: lost {lost}, extra {extra}"
        times = [t for t, _, _ in got[trial]]
        assert times == sorted(times), f"{trial}: rows stored out of report order"
    # the sink saw the failures, and found at least the orphaned batches stored when it read them back
    assert retries >= 2 and recovered >= orphaned, (retries, recovered, orphaned)
