"""Group commit: the write requests that wait for SQLite's single writer are stored in one transaction.

Each gRPC handler thread calls ``GroupCommit.write``. When no commit is running, the caller becomes the
leader: it commits its own request together with every request queued meanwhile (one BEGIN ... COMMIT,
``ObservationDB.insert_many``), answers those callers, and hands the lead to the oldest request still
queued, if any. A caller that finds a commit running queues its request and sleeps until a leader has
stored it (or failed). No extra thread: an idle store commits each request at once, as before; a busy
one pays one transaction (and one lock round) per group instead of per request.

A failed transaction stores none of its requests and each of them gets the error (the clients retry
their own; the idempotent row check inside the transaction makes a resend harmless). A request is
answered only after the transaction holding its rows has committed.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field

from katib_progress.collector.store._db import ObservationDB, Row


@dataclass(eq=False)
class _Request:
    trial: str
    rows: Sequence[Row]
    woken: threading.Event = field(default_factory=threading.Event)
    lead: bool = False  # woken to commit the queue, not because it is stored
    error: sqlite3.Error | None = None


class GroupCommit:
    """Writes of one ``ObservationDB``, grouped into transactions (see module docstring)."""

    def __init__(self, db: ObservationDB, *, idempotent: bool, max_rows: int = 20_000) -> None:
        self._db = db
        self._idempotent = idempotent
        self._max_rows = max_rows
        self._lock = threading.Lock()
        self._queue: list[_Request] = []
        self._leading = False  # a caller is committing (or has been handed the lead)

    def write(self, trial: str, rows: Sequence[Row]) -> None:
        """Store ``rows`` of ``trial`` (idempotently if so configured); raises the commit's sqlite3.Error."""
        request = _Request(trial, rows)
        with self._lock:
            self._queue.append(request)
            lead = not self._leading
            self._leading = True
        if not lead:
            request.woken.wait()
            if not request.lead:
                if request.error is not None:
                    raise request.error
                return
        self._commit_from(request)
        if request.error is not None:
            raise request.error

    def _commit_from(self, leader: _Request) -> None:
        """Commit groups from the head of the queue until ``leader``'s own request is stored, then
        hand the lead to the next queued request (it commits the rest on its own thread)."""
        while True:
            with self._lock:
                group = self._take()
            error: sqlite3.Error | None = None
            try:
                self._db.insert_many([(r.trial, r.rows) for r in group], idempotent=self._idempotent)
            except sqlite3.Error as exc:
                error = exc
            for request in group:
                request.error = error
                if request is not leader:
                    request.woken.set()
            if leader in group:
                break
        with self._lock:
            if self._queue:
                successor = self._queue[0]
                successor.lead = True
                successor.woken.set()
            else:
                self._leading = False

    def _take(self) -> list[_Request]:
        """The oldest queued requests up to ``max_rows`` rows (at least one); lock held."""
        size = 0
        count = 0
        for request in self._queue:
            size += len(request.rows)
            if count and size > self._max_rows:
                break
            count += 1
        group, self._queue = self._queue[:count], self._queue[count:]
        return group
