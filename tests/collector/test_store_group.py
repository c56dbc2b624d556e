"""Group commit in the embedded store: requests waiting for the writer share one transaction."""

from __future__ import annotations

import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from katib_progress.collector.store._db import ObservationDB, Row
from katib_progress.collector.store._group import GroupCommit


def _rows(i: int) -> list[Row]:
    return [(1_000_000 * i, "loss", f"0.{i}"), (1_000_000 * i, "trainjob/seq", str(i))]


class _Counting(ObservationDB):
    """Counts transactions (``insert_many`` calls) and the requests in each."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.groups: list[int] = []

    def insert_many(self, requests: Any, *, idempotent: bool = True) -> list[int]:
        self.groups.append(len(requests))
        return super().insert_many(requests, idempotent=idempotent)


def _wait(what: str, check: Any, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} not within {timeout:.0f}s")
        time.sleep(0.01)


def _start(writes: GroupCommit, indices: range, errors: list[BaseException]) -> list[threading.Thread]:
    def write(i: int) -> None:
        try:
            writes.write(f"t{i % 3}", _rows(i))
        except sqlite3.Error as exc:
            errors.append(exc)

    threads = [threading.Thread(target=write, args=(i,)) for i in indices]
    for thread in threads:
        thread.start()
    return threads


def test_requests_queued_behind_a_waiting_commit_are_stored_in_one_transaction(tmp_path: Path) -> None:
    db = _Counting(tmp_path / "o.sqlite")
    writes = GroupCommit(db, idempotent=True)
    holder = sqlite3.connect(db.path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")  # the first commit waits for SQLite's write lock
    errors: list[BaseException] = []
    threads = _start(writes, range(1), errors)
    _wait("the first request waiting for the lock", lambda: db.groups == [1])
    threads += _start(writes, range(1, 12), errors)
    _wait("11 requests queued behind it", lambda: len(writes._queue) == 11)
    holder.execute("ROLLBACK")
    for thread in threads:
        thread.join(30)
    assert not errors
    assert db.groups == [1, 11]  # the leader's own request, then everything that queued meanwhile
    stored = sorted(db.select("t0") + db.select("t1") + db.select("t2"))
    assert stored == sorted(row for i in range(12) for row in _rows(i))


def test_a_failed_transaction_stores_none_of_its_requests_and_fails_each(tmp_path: Path) -> None:
    db = _Counting(tmp_path / "o.sqlite", busy_timeout_s=0.3)
    writes = GroupCommit(db, idempotent=True)
    holder = sqlite3.connect(db.path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")  # held for the whole test: every transaction times out
    errors: list[BaseException] = []
    threads = _start(writes, range(6), errors)
    for thread in threads:
        thread.join(30)
    holder.execute("ROLLBACK")
    assert len(errors) == 6 and all(isinstance(e, sqlite3.OperationalError) for e in errors)
    assert db.count() == 0


def test_a_resend_in_the_same_group_is_stored_once(tmp_path: Path) -> None:
    db = ObservationDB(tmp_path / "o.sqlite")
    assert db.insert_many([("t", _rows(1)), ("t", _rows(1)), ("t", _rows(2))]) == [2, 0, 2]
    assert db.insert_many([("t", _rows(1))], idempotent=False) == [2]
    assert len(db.select("t")) == 6


@pytest.mark.parametrize("idempotent", [True, False])
def test_an_empty_request_writes_nothing(tmp_path: Path, idempotent: bool) -> None:
    db = ObservationDB(tmp_path / "o.sqlite")
    GroupCommit(db, idempotent=idempotent).write("t", [])
    assert db.count() == 0
