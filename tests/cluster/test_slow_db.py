"""Exactly-once when the DB manager is slow rather than down: its write lock is held past the client's
deadline while snapshots arrive, so attempts time out and the server still commits them later.

Our store checks row keys inside the write transaction (a resent batch is stored once); against a
stock DB manager (no dedup) the client reads a timed-out batch back only after the server's lock wait
and resends only what is missing. Either way: one row per snapshot, in order, and the final-metrics
marker is set."""

from __future__ import annotations

import sqlite3
import time
from collections import Counter as Multiset
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from katib_progress.collector.backoff import BackoffSettings
from katib_progress.collector.counters import Counters
from katib_progress.collector.final_metrics import MARKER_ANNOTATION
from katib_progress.collector.katib.dbmanager import RECOVERED, RETRIES, DBManagerSettings
from katib_progress.collector.store import start_store_server
from tests.cluster._harness import Stack, running_collector, wait_until

SLOW = DBManagerSettings(
    rpc_timeout_s=0.4, backoff=BackoffSettings(initial_s=0.05, max_s=0.3), close_timeout_s=10
)


@contextmanager
def write_lock(db: str, seconds: float) -> Iterator[None]:
    """Hold SQLite's write lock on ``db`` (another process or connection would block the same way)."""
    conn = sqlite3.connect(db, isolation_level=None)
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield
        time.sleep(max(0.0, seconds))
    finally:
        conn.execute("ROLLBACK")
        conn.close()


def _run(stack: Stack, settings: DBManagerSettings, hold_s: float) -> Counters:
    stack.experiment(settings={"policy": "nop"})
    stack.trial_job("exp-t")
    counters = Counters()
    with running_collector(stack.collector(counters=counters, db_settings=settings)):
        stack.report("exp-t", 0, loss="0.9")
        wait_until(lambda: len(stack.seqs("exp-t")) == 1, timeout=20)
        started = time.monotonic()
        with write_lock(stack.store.db.path, 0.0):
            for i in (1, 2, 3):  # each write waits on the lock past the 0.4 s deadline
                stack.report("exp-t", i, loss=f"0.{9 - i}")
                time.sleep(0.3)
            time.sleep(max(0.0, hold_s - (time.monotonic() - started)))
        stack.report("exp-t", 4, loss="0.25")
        stack.complete("exp-t")
        wait_until(
            lambda: (stack.trainjob("exp-t")["metadata"].get("annotations") or {}).get(MARKER_ANNOTATION),
            timeout=60,
        )
    rows = stack.rows("exp-t")
    assert stack.seqs("exp-t") == [0, 1, 2, 3, 4]  # one row per snapshot, in order
    assert max(Multiset(rows).values()) == 1  # no row stored twice
    assert counters.get(RETRIES, code="DEADLINE_EXCEEDED") >= 1  # the deadline did pass
    return counters


def test_idempotent_store_stores_a_resent_batch_once(stack: Stack) -> None:
    _run(stack, SLOW, hold_s=2.5)


def test_stock_db_manager_is_read_back_after_its_lock_wait(stack: Stack, tmp_path: Path) -> None:
    # A store that stores duplicates as Katib's MySQL DB manager does; its writes wait 3 s for the lock.
    stock = start_store_server(tmp_path / "stock.sqlite", idempotent=False, busy_timeout_s=3.0)
    try:
        counters = _run(
            Stack(stack.kube, stock, stack.pruning_address, stack.front),
            SLOW.model_copy(update={"lock_wait_s": 4.0}),
            hold_s=1.5,
        )
    finally:
        stock.stop(0)
    assert counters.get(RECOVERED) >= 1  # found committed on read-back, not resent
