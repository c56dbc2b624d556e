"""The collector's Prometheus counters: declared once with their label names, kept per process.

Each module declares what it counts as a ``CounterSpec`` (name, help, label names); ``Counters``
holds the matching ``prometheus_client.Counter`` objects in a registry of its own (one per collector,
so tests and several collectors in one process never share values) and ``/metrics`` exports that
registry (``collector/observability.py``). A counter ``x_total`` is exported as
``katib_progress_x_total``; incrementing it with other label names than declared is an error.
Histograms (``HistogramSpec``, ``observe``) live in the same registry.
"""

from __future__ import annotations

import contextlib
import threading
from dataclasses import dataclass
from typing import Any

from prometheus_client import CollectorRegistry
from prometheus_client import Counter as _Counter
from prometheus_client import Histogram as _Histogram

NAMESPACE = "katib_progress"


@dataclass(frozen=True, slots=True)
class CounterSpec:
    """A counter's name (ending in ``_total``), help text and label names."""

    name: str
    help: str
    labels: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not self.name.endswith("_total"):
            raise ValueError(f"name: a counter's name ends in _total, got {self.name!r}")

    @property
    def exported(self) -> str:
        """The sample name on ``/metrics``."""
        return f"{NAMESPACE}_{self.name}"


@dataclass(frozen=True, slots=True)
class HistogramSpec:
    """A histogram's name (its unit last, e.g. ``_seconds``), help text and bucket bounds."""

    name: str
    help: str
    buckets: tuple[float, ...]

    @property
    def exported(self) -> str:
        return f"{NAMESPACE}_{self.name}"


def _exported(counter: CounterSpec | str) -> str:
    return counter.exported if isinstance(counter, CounterSpec) else f"{NAMESPACE}_{counter}"


class Counters:
    """``inc(spec, amount=1, **labels)``; ``get(spec, **labels)`` and ``total(spec)`` read them back."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self._lock = threading.Lock()
        self._counters: dict[str, tuple[CounterSpec, _Counter]] = {}
        # (id(spec), labels as passed) -> (spec, the labelled child): inc() on the per-event path
        # skips prometheus_client's label validation and lookups after the first time.
        self._children: dict[tuple[int, tuple[tuple[str, object], ...]], tuple[CounterSpec, Any]] = {}
        self._histograms: dict[str, tuple[HistogramSpec, _Histogram]] = {}

    def _counter(self, spec: CounterSpec) -> _Counter:
        with self._lock:
            found = self._counters.get(spec.name)
            if found is None:
                counter = _Counter(
                    spec.name.removesuffix("_total"),
                    spec.help,
                    spec.labels,
                    namespace=NAMESPACE,
                    registry=self.registry,
                )
                found = self._counters[spec.name] = (spec, counter)
        if found[0] != spec:
            raise ValueError(f"counter {spec.name} declared twice: {found[0]} and {spec}")
        return found[1]

    def inc(self, spec: CounterSpec, amount: int = 1, **labels: object) -> None:
        if amount < 0:
            raise ValueError(f"amount: counters only go up, got {amount}")
        key = (id(spec), tuple(labels.items()))
        try:
            cached = self._children.get(key)
        except TypeError:  # an unhashable label value: not cached
            cached = None
        if cached is not None and cached[0] is spec:
            cached[1].inc(amount)
            return
        counter = self._counter(spec)
        if spec.labels:
            child = counter.labels(**{k: str(v) for k, v in labels.items()})
        elif labels:
            raise ValueError(f"counter {spec.name} has no labels, got {sorted(labels)}")
        else:
            child = counter
        child.inc(amount)
        with contextlib.suppress(TypeError):  # an unhashable label value: not cached
            self._children[key] = (spec, child)

    def observe(self, spec: HistogramSpec, value: float) -> None:
        with self._lock:
            found = self._histograms.get(spec.name)
            if found is None:
                histogram = _Histogram(
                    spec.name, spec.help, namespace=NAMESPACE, buckets=spec.buckets, registry=self.registry
                )
                found = self._histograms[spec.name] = (spec, histogram)
        if found[0] != spec:
            raise ValueError(f"histogram {spec.name} declared twice: {found[0]} and {spec}")
        found[1].observe(value)

    def observed(self, spec: HistogramSpec) -> tuple[int, float]:
        """How many values ``spec`` observed, and their sum."""
        count = self.registry.get_sample_value(f"{spec.exported}_count")
        total = self.registry.get_sample_value(f"{spec.exported}_sum")
        return int(count or 0), float(total or 0.0)

    def get(self, counter: CounterSpec | str, **labels: object) -> int:
        """The count of one label combination (0 before the first ``inc``); ``counter`` is a spec or
        its name."""
        value = self.registry.get_sample_value(_exported(counter), {k: str(v) for k, v in labels.items()})
        return int(value or 0)

    def total(self, counter: CounterSpec | str) -> int:
        """Sum over every label combination of ``counter`` (a spec or its name)."""
        exported = _exported(counter)
        return int(
            sum(
                sample.value
                for family in self.registry.collect()
                for sample in family.samples
                if sample.name == exported
            )
        )

    def snapshot(self) -> dict[str, int]:
        """``{"name{k=v,...}": value}`` of every count so far (for a log line)."""
        out: dict[str, int] = {}
        for family in self.registry.collect():
            for sample in family.samples:
                if not sample.name.endswith("_total"):
                    continue  # the _created series
                name = sample.name.removeprefix(f"{NAMESPACE}_")
                labels = ",".join(f"{k}={v}" for k, v in sorted(sample.labels.items()))
                out[name + ("{" + labels + "}" if labels else "")] = int(sample.value)
        return dict(sorted(out.items()))
