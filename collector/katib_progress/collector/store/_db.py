"""The SQLite file behind the embedded observation store (one table, Katib's columns).

Time is kept as integer microseconds since the epoch (UTC): Katib's MySQL column is DATETIME(6),
so microseconds are exactly what survives there too. Each thread gets its own connection; the file
runs in WAL mode so readers never block the single writer, and writers wait (busy timeout) for
each other instead of failing.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Sequence
from pathlib import Path

_SCHEMA = """
CREATE TABLE IF NOT EXISTS observation_logs (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    trial_name TEXT NOT NULL,
    time_us INTEGER NOT NULL,
    metric_name TEXT NOT NULL,
    value TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS observation_logs_trial_time ON observation_logs (trial_name, time_us, id);
"""

Row = tuple[int, str, str]  # (time_us, metric_name, value)


class ObservationDB:
    def __init__(self, path: str | Path, *, busy_timeout_s: float = 30.0) -> None:
        self.path = str(path)
        self._busy_timeout_s = busy_timeout_s
        self._local = threading.local()
        self._lock = threading.Lock()
        # SQLite has one writer: threads of this process take turns here rather than in SQLite's busy
        # handler, which sleeps 1, 2, 5, 10... ms between tries (another process still waits there).
        self._write_lock = threading.Lock()
        self._connections: list[sqlite3.Connection] = []
        self._closed = False
        conn = self._conn()
        conn.executescript(_SCHEMA)

    def _conn(self) -> sqlite3.Connection:
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is not None:
            return conn
        with self._lock:
            if self._closed:
                raise sqlite3.ProgrammingError("observation store is closed")
            conn = sqlite3.connect(
                self.path, timeout=self._busy_timeout_s, isolation_level=None, check_same_thread=False
            )
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")
            conn.execute(f"PRAGMA busy_timeout={int(self._busy_timeout_s * 1000)}")
            self._connections.append(conn)
        self._local.conn = conn
        return conn

    def insert(self, trial: str, rows: Sequence[Row], *, idempotent: bool = True) -> int:
        """Insert the rows of one request atomically, in the given order; returns how many were new.

        ``idempotent``: a row equal to one already stored (same trial, time, metric and value) is not
        stored again. The check runs inside the write transaction, so a request whose first attempt
        is still waiting for the write lock when the client resends it is stored once, whichever
        attempt commits first. Rows repeated within one request are all kept. ``idempotent=False``
        stores every row as given, as Katib's MySQL DB manager does.
        """
        if not rows:
            return 0
        conn = self._conn()
        with self._write_lock:
            return self._insert(conn, trial, rows, idempotent=idempotent)

    @staticmethod
    def _insert(conn: sqlite3.Connection, trial: str, rows: Sequence[Row], *, idempotent: bool) -> int:
        conn.execute("BEGIN IMMEDIATE")
        try:
            if idempotent:
                stored = set(
                    conn.execute(
                        "SELECT time_us, metric_name, value FROM observation_logs"
                        " WHERE trial_name = ? AND time_us BETWEEN ? AND ?",
                        (trial, min(r[0] for r in rows), max(r[0] for r in rows)),
                    )
                )
                rows = [row for row in rows if row not in stored]
            conn.executemany(
                "INSERT INTO observation_logs (trial_name, time_us, metric_name, value) VALUES (?, ?, ?, ?)",
                [(trial, t, name, value) for t, name, value in rows],
            )
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")
        return len(rows)

    def select(
        self, trial: str, metric: str = "", start_us: int | None = None, end_us: int | None = None
    ) -> list[Row]:
        """Rows of ``trial`` ordered by time (ties in insertion order); bounds are inclusive."""
        sql = "SELECT time_us, metric_name, value FROM observation_logs WHERE trial_name = ?"
        args: list[object] = [trial]
        if metric:
            sql += " AND metric_name = ?"
            args.append(metric)
        if start_us is not None:
            sql += " AND time_us >= ?"
            args.append(start_us)
        if end_us is not None:
            sql += " AND time_us <= ?"
            args.append(end_us)
        sql += " ORDER BY time_us, id"
        return [(int(t), str(n), str(v)) for t, n, v in self._conn().execute(sql, args)]

    def delete(self, trial: str) -> int:
        cur = self._conn().execute("DELETE FROM observation_logs WHERE trial_name = ?", (trial,))
        return cur.rowcount

    def count(self) -> int:
        return int(self._conn().execute("SELECT COUNT(*) FROM observation_logs").fetchone()[0])

    def close(self) -> None:
        with self._lock:
            self._closed = True
            connections, self._connections = self._connections, []
        for conn in connections:
            conn.close()
