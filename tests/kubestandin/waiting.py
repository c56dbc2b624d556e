"""Small helpers for tests that run a blocking loop in a thread and wait for an effect."""

from __future__ import annotations

import faulthandler
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any


def wait_until(predicate: Callable[[], Any], *, timeout: float = 10.0, interval: float = 0.02) -> Any:
    """Poll ``predicate`` until it returns something truthy; fail the test after ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            faulthandler.dump_traceback(all_threads=True)  # what every thread was doing, for diagnosis
            raise AssertionError(f"condition not met within {timeout}s: {predicate}")
        time.sleep(interval)


@contextmanager
def running(
    run: Callable[[], Any], stop: Callable[[], Any], *, join_timeout: float = 10.0
) -> Iterator[threading.Thread]:
    """Run ``run`` in a thread for the ``with`` body, then ``stop`` it and require that it ends."""
    errors: list[BaseException] = []

    def target() -> None:
        try:
            run()
        except BaseException as exc:
            errors.append(exc)

    thread = threading.Thread(target=target, name="test-runner", daemon=True)
    thread.start()
    try:
        yield thread
    finally:
        stop()
        thread.join(join_timeout)
    assert not thread.is_alive(), "the loop did not stop"
    if errors:
        raise errors[0]
