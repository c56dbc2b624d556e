"""PruningHub's shared maps (experiment -> engine, trial -> experiment) are only touched under its lock.

No sleeps and no timing: the race is forced by pausing ``forget`` in the middle of its iteration and
running a writer in another thread until it has either written (the race) or is waiting for the
hub's lock (the fix).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import Any

from katib_progress.core.types import ProgressPoint
from katib_progress.suggestion.pruning.config import PruningConfig
from katib_progress.suggestion.pruning.service import PruningHub


class _TracingLock:
    """A lock that calls ``on_wait`` when a thread is about to block on it (it is held)."""

    def __init__(self, on_wait: Callable[[], None]) -> None:
        self._lock = threading.Lock()
        self._on_wait = on_wait

    def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
        if self._lock.acquire(blocking=False):
            return True
        self._on_wait()
        return self._lock.acquire(blocking, timeout)

    def release(self) -> None:
        self._lock.release()

    def locked(self) -> bool:
        return self._lock.locked()

    def __enter__(self) -> bool:
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()


class _PausingDict(dict[str, str]):
    """Iterating ``items()`` pauses after the first item and calls ``pause`` once."""

    def __init__(self, data: dict[str, str], pause: Callable[[], None]) -> None:
        super().__init__(data)
        self._pause: Callable[[], None] | None = pause

    def items(self) -> Any:
        view = super().items()

        def iterate() -> Iterator[tuple[str, str]]:
            for n, item in enumerate(view):
                if n == 1 and self._pause is not None:
                    pause, self._pause = self._pause, None
                    pause()
                yield item

        return iterate()


def _config() -> PruningConfig:
    return PruningConfig.from_settings("loss", "minimize", {})


def test_a_trial_noted_while_forget_iterates_does_not_break_forget() -> None:
    hub = PruningHub()
    hub.configure("exp", _config())
    for trial in ("t1", "t2", "t3"):
        hub.note_trial("exp", trial)
    progressed = threading.Event()  # the writer has written, or waits for the hub's lock
    hub._lock = _TracingLock(progressed.set)  # type: ignore[assignment]
    errors: list[BaseException] = []

    def writer() -> None:
        try:
            hub.note_trial("other", "t-new")
        finally:
            progressed.set()

    thread = threading.Thread(target=writer)

    def pause() -> None:
        thread.start()
        progressed.wait()

    hub._trial_experiment = _PausingDict(dict(hub._trial_experiment), pause)
    try:
        hub.forget("exp")
    except RuntimeError as exc:  # "dictionary changed size during iteration"
        errors.append(exc)
    thread.join()
    assert errors == []
    assert [hub.experiment_of(t) for t in ("t1", "t2", "t3")] == [None, None, None]
    assert hub.experiment_of("t-new") == "other"
    assert hub.engine("exp") is None


class _GuardedDict(dict[str, Any]):
    """Records every read or write made while ``lock`` is not held."""

    def __init__(self, data: dict[str, Any], lock: threading.Lock, unguarded: list[str]) -> None:
        super().__init__(data)
        self._guard = lock
        self._unguarded = unguarded

    def _check(self, op: str) -> None:
        if not self._guard.locked():
            self._unguarded.append(op)

    def get(self, key: str, default: Any = None) -> Any:
        self._check(f"get {key}")
        return super().get(key, default)

    def __getitem__(self, key: str) -> Any:
        self._check(f"[{key}]")
        return super().__getitem__(key)

    def __setitem__(self, key: str, value: Any) -> None:
        self._check(f"[{key}] =")
        super().__setitem__(key, value)

    def __delitem__(self, key: str) -> None:
        self._check(f"del [{key}]")
        super().__delitem__(key)

    def setdefault(self, key: str, default: Any = None) -> Any:
        self._check(f"setdefault {key}")
        return super().setdefault(key, default)

    def pop(self, key: str, *default: Any) -> Any:
        self._check(f"pop {key}")
        return super().pop(key, *default)

    def items(self) -> Any:
        self._check("items")
        return super().items()


def test_every_hub_operation_touches_its_maps_under_the_lock() -> None:
    hub = PruningHub()
    unguarded: list[str] = []
    hub._slots = _GuardedDict({}, hub._lock, unguarded)
    hub._trial_experiment = _GuardedDict({}, hub._lock, unguarded)
    hub.configure("exp", _config())
    hub.note_trial("exp", "t1")
    hub.experiment_of("t1")
    hub.engine("exp")
    point = ProgressPoint("exp", "t2", 0, datetime(2026, 1, 1, tzinfo=UTC), 10.0, metrics={"loss": 1.0})
    hub.decide(point)
    hub.decide(point, _config())
    hub.finish("exp", "t1", "COMPLETE")
    hub.curve("exp", "t2")
    hub.forget("exp")
    assert unguarded == []
