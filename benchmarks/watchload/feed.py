"""The state behind the API stand-in: N TrainJobs whose trainerStatus changes every ``period_s``, the
watch-cache history, list snapshots and the open watch streams.

Modelled on the Kubernetes API server (k8s.io/apiserver, paths under staging/src/k8s.io/apiserver/pkg/):

- One global resourceVersion, bumped by every write (etcd revision). A status update is one MODIFIED
  event carrying the whole object.
- History (storage/cacher/watch_cache.go, ``watchCache``): a ring of recent events whose capacity grows
  by doubling from 100 until it holds ``eventFreshDuration`` (75 s) of events, at most 100 * 1024
  (``defaultUpperBoundCapacity``). A watch from a resourceVersion older than the ring's oldest event
  gets an ERROR event ``410 Expired`` "too old resource version" (``getAllEventsSinceLocked``); from a
  newer one it gets every later event in order, then live events.
- Slow watchers (storage/cacher/cache_watcher.go ``add``, time_budget.go, watch_cache.go
  ``suggestedWatchChannelSize``): each watcher buffers at most two channels of ``chanSize`` events
  (capacity / 75 s, clamped to [10, 100] for an unindexed watch) beyond what the socket accepts. When
  an event does not fit, the dispatcher waits at most the shared time budget (refilled 50 ms per
  second, at most 100 ms) and then terminates the watcher: the response ends and the client must
  re-watch from the last resourceVersion it saw.
- Bookmarks (cache_watcher.go ``nextBookmarkTime``): roughly every minute and 2 s before the watch's
  deadline, when the client allowed them. ``timeoutSeconds`` ends the response cleanly.
- Lists with ``limit``/``continue`` are consistent snapshots at the first page's resourceVersion,
  in namespace/name order (etcd key order).
"""

from __future__ import annotations

import math
import time
from array import array
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from benchmarks.watchload.objects import TRAINER_API, Job, UpdateEncoder, dumps, rfc3339

EVENT_FRESH_S = 75.0
MIN_CAPACITY, MAX_CAPACITY = 100, 100 * 1024
MIN_CHAN, MAX_CHAN_UNINDEXED = 10, 100
BUDGET_REFILL_PER_S, BUDGET_MAX_S = 0.05, 0.1
BOOKMARK_EVERY_S = 60.0
FIRST_RV = 1_000_000


def history_capacity(events_per_s: float) -> int:
    capacity = MIN_CAPACITY
    while capacity < events_per_s * EVENT_FRESH_S and capacity < MAX_CAPACITY:
        capacity *= 2
    return min(capacity, MAX_CAPACITY)


def chan_size(capacity: int) -> int:
    return max(MIN_CHAN, min(MAX_CHAN_UNINDEXED, math.ceil(capacity / EVENT_FRESH_S)))


def chunk(line: bytes) -> bytes:
    """One HTTP/1.1 chunk (the server flushes after every watch event)."""
    return b"%x\r\n%s\r\n" % (len(line), line)


@dataclass
class Stats:
    published: int = 0
    terminated: int = 0
    expired: int = 0
    bookmarks: int = 0
    max_slip_s: float = 0.0
    requests: dict[str, int] = field(default_factory=dict)
    watch_starts: list[float] = field(default_factory=list)
    list_starts: list[float] = field(default_factory=list)


class TimeBudget:
    """storage/cacher/time_budget.go: +50 ms per second, at most 100 ms, taken whole."""

    def __init__(self) -> None:
        self._budget = 0.0
        self._at = time.monotonic()

    def take(self) -> float:
        now = time.monotonic()
        self._budget = min(BUDGET_MAX_S, self._budget + (now - self._at) * BUDGET_REFILL_PER_S)
        self._at = now
        taken, self._budget = self._budget, 0.0
        return taken

    def give_back(self, unused: float) -> None:
        self._budget = min(BUDGET_MAX_S, self._budget + max(0.0, unused))


class WatchStream:
    """One watch response. ``write(data)`` sends bytes; ``paused()`` says the socket is full."""

    def __init__(
        self,
        feed: Feed,
        write: Callable[[bytes], None],
        paused: Callable[[], bool],
        *,
        replay: deque[tuple[int, int, int, int]],
        timeout_s: float,
        bookmarks: bool,
    ) -> None:
        self.feed = feed
        self._write, self._paused = write, paused
        self.replay = replay
        self.live: deque[bytes] = deque()
        now = time.monotonic()
        self.deadline = now + timeout_s
        self.bookmarks = bookmarks
        self.next_bookmark = min(now + BOOKMARK_EVERY_S, self.deadline - 2.0)
        self.overflow_until: float | None = None
        self.overflow_budget = 0.0
        self.done = False
        self.on_done: Callable[[], None] = lambda: None

    def offer(self, data: bytes) -> None:
        if not self.done:
            self.live.append(data)

    def flush(self, max_replay: int = 2000) -> None:
        if self.done:
            return
        out: list[bytes] = []
        while self.replay and max_replay > 0 and not self._paused():
            rv, i, step, sec = self.replay.popleft()
            out.append(chunk(self.feed.event_line(rv, i, step, sec)))
            max_replay -= 1
            if len(out) >= 200:
                self._write(b"".join(out))
                out.clear()
        if not self.replay:
            while self.live and not self._paused() and len(out) < 1000:
                out.append(self.live.popleft())
        if out:
            self._write(b"".join(out))

    def check(self, now: float, limit: int, budget: TimeBudget) -> None:
        """Bookmarks, the deadline and the slow-watcher rule, once per dispatch tick."""
        if self.done:
            return
        if now >= self.deadline:
            self.end()
            return
        if self.bookmarks and now >= self.next_bookmark and len(self.live) < limit:
            self.live.append(chunk(self.feed.bookmark_line()))
            self.feed.stats.bookmarks += 1
            self.next_bookmark = min(now + BOOKMARK_EVERY_S, self.deadline - 2.0)
            if self.next_bookmark <= now:
                self.next_bookmark = self.deadline + 1.0
        if len(self.live) <= limit:
            if self.overflow_until is not None:
                budget.give_back(self.overflow_until - now)
                self.overflow_until = None
            return
        if self.overflow_until is None:
            self.overflow_until = now + budget.take()
        if now >= self.overflow_until:
            self.feed.stats.terminated += 1
            self.end()

    def end(self) -> None:
        if self.done:
            return
        self.done = True
        self.replay.clear()
        self.live.clear()
        self._write(b"0\r\n\r\n")
        self.on_done()


class Feed:
    def __init__(self, jobs: list[Job], created: str, *, period_s: float = 5.0) -> None:
        self.jobs = jobs
        self.created = created
        self.period_s = period_s
        self.encoder = UpdateEncoder(jobs, created)
        self.by_name = {(j.namespace, j.name): j.index for j in jobs}
        self.order = sorted(range(len(jobs)), key=lambda i: (jobs[i].namespace, jobs[i].name))
        n = len(jobs)
        self.present = False
        self.updating = False
        self.step = array("i", [0] * n)
        self.sec = array("q", [0] * n)
        self.obj_rv = array("q", [0] * n)
        self.rv = FIRST_RV
        self.capacity = history_capacity(n / period_s)
        self.chan = chan_size(self.capacity)
        self.history: deque[tuple[int, int, int, int]] = deque(maxlen=self.capacity)
        self.watchers: list[WatchStream] = []
        self.budget = TimeBudget()
        self.stats = Stats()
        self.pub_i, self.pub_step = array("i"), array("i")
        self.pub_sec, self.pub_t = array("q"), array("d")
        self._round_start = 0.0
        self._cursor = 0
        self._snapshots: dict[int, tuple[bytes, bytes, bytes]] = {}

    # -- objects -----------------------------------------------------------------------------------

    def object_json(self, i: int, rv: int, step: int, sec: int) -> str:
        if step == 0:
            return dumps(self.encoder.full(i, rv, 0, sec))
        return self.encoder.encode(i, rv, step, sec)

    def event_line(self, rv: int, i: int, step: int, sec: int) -> bytes:
        kind = "ADDED" if step == 0 else "MODIFIED"
        return f'{{"type":"{kind}","object":{self.object_json(i, rv, step, sec)}}}\n'.encode()

    def bookmark_line(self) -> bytes:
        obj = {"apiVersion": TRAINER_API, "kind": "TrainJob", "metadata": {"resourceVersion": str(self.rv)}}
        return f'{{"type":"BOOKMARK","object":{dumps(obj)}}}\n'.encode()

    # -- writes ------------------------------------------------------------------------------------

    def _emit(self, i: int, step: int) -> None:
        self.rv += 1
        sec = int(time.time())
        self.step[i], self.sec[i], self.obj_rv[i] = step, sec, self.rv
        self.history.append((self.rv, i, step, sec))
        if self.watchers:
            data = chunk(self.event_line(self.rv, i, step, sec))
            for watcher in self.watchers:
                watcher.offer(data)
        if step:
            self.stats.published += 1
            self.pub_i.append(i)
            self.pub_step.append(step)
            self.pub_sec.append(sec)
            self.pub_t.append(time.monotonic())

    def activate(self, start_in_s: float = 1.0) -> None:
        """Every TrainJob appears (ADDED, no trainerStatus yet); status updates start ``start_in_s`` later."""
        if self.present:
            return
        self.present = True
        for i in range(len(self.jobs)):
            self._emit(i, 0)
        self._round_start = time.monotonic() + start_in_s
        self.updating = True

    def tick(self) -> None:
        """Publish every update that is due, push bytes to the watchers, apply the slow-watcher rule."""
        now = time.monotonic()
        n = len(self.jobs)
        while self.updating and n:
            due = self._round_start + self._cursor * self.period_s / n
            if due > now:
                break
            self.stats.max_slip_s = max(self.stats.max_slip_s, now - due)
            self._emit(self._cursor, self.step[self._cursor] + 1)
            self._cursor += 1
            if self._cursor == n:
                self._cursor = 0
                self._round_start += self.period_s
        limit = 2 * self.chan
        for watcher in list(self.watchers):
            watcher.flush()
            watcher.check(now, limit, self.budget)

    # -- reads -------------------------------------------------------------------------------------

    def since(self, rv: int) -> deque[tuple[int, int, int, int]] | None:
        """Events after ``rv`` from the history; None when ``rv`` is older than the history holds."""
        if self.history and rv < self.history[0][0] - 1:
            return None
        return deque(e for e in self.history if e[0] > rv)

    def current(self) -> deque[tuple[int, int, int, int]]:
        """Synthetic ADDED events of the current objects (a watch without a resourceVersion)."""
        if not self.present:
            return deque()
        return deque((int(self.obj_rv[i]), i, int(self.step[i]), int(self.sec[i])) for i in self.order)

    def list_page(self, snapshot_rv: int | None, start: int, limit: int) -> tuple[list[str], dict[str, Any]]:
        """Items ``start..start+limit`` of the list at ``snapshot_rv`` (None: a new snapshot now)."""
        if snapshot_rv is None:
            snapshot_rv = self.rv
            self._snapshots[snapshot_rv] = (self.step.tobytes(), self.sec.tobytes(), self.obj_rv.tobytes())
            while len(self._snapshots) > 8:
                del self._snapshots[next(iter(self._snapshots))]
        saved = self._snapshots.get(snapshot_rv)
        if saved is None:
            raise KeyError(snapshot_rv)
        step, sec, obj_rv = array("i"), array("q"), array("q")
        step.frombytes(saved[0])
        sec.frombytes(saved[1])
        obj_rv.frombytes(saved[2])
        total = len(self.jobs) if self.present else 0
        end = total if limit <= 0 else min(total, start + limit)
        items = [self.object_json(i, obj_rv[i], step[i], sec[i]) for i in self.order[start:end]]
        meta: dict[str, Any] = {"resourceVersion": str(snapshot_rv)}
        if end < total:
            meta["continue"] = f"{snapshot_rv}:{end}"
            meta["remainingItemCount"] = total - end
        return items, meta

    def published_since(self, index: int) -> dict[str, Any]:
        return {
            "i": self.pub_i[index:].tolist(),
            "step": self.pub_step[index:].tolist(),
            "sec": self.pub_sec[index:].tolist(),
            "t": self.pub_t[index:].tolist(),
        }

    def status_times(self) -> dict[str, str]:
        return {"created": self.created, "now": rfc3339(time.time())}
