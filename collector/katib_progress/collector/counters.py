"""Thread-safe labelled counters (exported to Prometheus by whoever runs the process)."""

from __future__ import annotations

import threading

_Key = tuple[str, tuple[tuple[str, str], ...]]


def _key(name: str, labels: dict[str, object]) -> _Key:
    return name, tuple(sorted((k, str(v)) for k, v in labels.items()))


class Counters:
    """``inc(name, amount=1, **labels)``, ``get(name, **labels)``, ``snapshot()``."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._values: dict[_Key, int] = {}

    def inc(self, name: str, amount: int = 1, **labels: object) -> None:
        if amount < 0:
            raise ValueError(f"amount: counters only go up, got {amount}")
        key = _key(name, labels)
        with self._lock:
            self._values[key] = self._values.get(key, 0) + amount

    def get(self, name: str, **labels: object) -> int:
        with self._lock:
            return self._values.get(_key(name, labels), 0)

    def total(self, name: str) -> int:
        """Sum over every label combination of ``name``."""
        with self._lock:
            return sum(v for (n, _), v in self._values.items() if n == name)

    def snapshot(self) -> dict[str, int]:
        """``{"name{k=v,...}": value}`` (just ``name`` when unlabelled)."""
        with self._lock:
            items = list(self._values.items())
        out: dict[str, int] = {}
        for (name, labels), value in sorted(items):
            suffix = "{" + ",".join(f"{k}={v}" for k, v in labels) + "}" if labels else ""
            out[name + suffix] = value
        return out
