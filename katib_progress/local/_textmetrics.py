"""Katib's StdOut and File metrics collectors, applied to a finished local trial's output.

Rules from Katib (kubeflow/katib, pkg/metricscollector/v1beta1/):
- ``common/const.go`` ``DefaultFilter``: ``([\\w|-]+)\\s*=\\s*([+-]?\\d*(\\.\\d+)?([Ee][+-]?\\d+)?)``
  (``loss=0.3``); ``metricsCollectorSpec.source.filter.metricsFormat`` replaces it (first group = name,
  second = value).
- ``file-metricscollector/file-metricscollector.go`` ``parseLogsInTextFormat``: a line is read only if
  it contains one of the metric names; its first space-separated word is the timestamp when it parses as
  RFC 3339, otherwise the zero time ``0001-01-01T00:00:00Z``; every match of every filter whose name is
  an objective/additional metric becomes a row with the matched value text (even an empty one).
- ``parseLogsInJsonFormat``: one JSON object per non-empty line; a metric's value must be a JSON string;
  ``timestamp`` is an RFC 3339 string or a number of seconds (``parseTimestamp``: Katib reads the
  fraction's digits as an integer count of nanoseconds, reproduced here); any line that is not JSON
  makes the whole collection fail.
- The StdOut collector reads the primary container's stdout and stderr together (the pod webhook
  appends ``1>FILE 2>&1``, pkg/webhook/v1beta1/pod/utils.go ``wrapWorkerContainer``).
Katib reads the file once, after the training process exited; so does a local sweep.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path

from katib_progress.core.timefmt import format_rfc3339nano, parse_rfc3339

DEFAULT_FILTER = r"([\w|-]+)\s*=\s*([+-]?\d*(\.\d+)?([Ee][+-]?\d+)?)"
ZERO_TIME = "0001-01-01T00:00:00Z"
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)

Row = tuple[str, str, str]  # (time_stamp, metric name, value text)


@dataclass(frozen=True, slots=True)
class Collector:
    """The Experiment's metrics collector after Katib's defaulting (experiment_defaults.go)."""

    kind: str = "StdOut"  # Push | StdOut | File
    path: str | None = None  # File: the absolute path the training code writes
    format: str = "TEXT"  # File: TEXT | JSON
    filters: tuple[str, ...] = ()

    @property
    def reads_output(self) -> bool:
        return self.kind in ("StdOut", "File")


def parse_text(text: str, metrics: Sequence[str], filters: Sequence[str] = ()) -> list[Row]:
    patterns = [re.compile(f, re.ASCII) for f in (filters or (DEFAULT_FILTER,))]
    rows: list[Row] = []
    for line in text.split("\n"):
        if not any(m in line for m in metrics):
            continue
        first, sep, _ = line.partition(" ")
        stamp = ZERO_TIME
        if sep:
            try:
                parse_rfc3339(first)
                stamp = first
            except ValueError:
                pass
        for pattern in patterns:
            for match in pattern.finditer(line):
                if pattern.groups < 2:
                    continue
                name, value = (match.group(1) or "").strip(), (match.group(2) or "").strip()
                if name in metrics:
                    rows.append((stamp, name, value))
    return rows


def parse_json(text: str, metrics: Sequence[str]) -> list[Row]:
    """Rows of a JSON-lines file; ValueError naming the line when one is not a JSON object."""
    rows: list[Row] = []
    for number, line in enumerate(text.split("\n"), start=1):
        if not line:
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ValueError(f"line {number} is not JSON ({exc.msg})") from None
        if not isinstance(obj, dict):
            raise ValueError(f"line {number} is not a JSON object")
        stamp = _json_timestamp(obj.get("timestamp")) or ZERO_TIME
        rows += [(stamp, m, obj[m]) for m in metrics if isinstance(obj.get(m), str)]
    return rows


def _json_timestamp(value: object) -> str | None:
    if isinstance(value, str):
        try:
            parse_rfc3339(value)
        except ValueError:
            return None
        return value
    if isinstance(value, int | float) and not isinstance(value, bool):
        whole, _, fraction = format(Decimal(repr(float(value))), "f").partition(".")
        try:
            moment = _EPOCH + timedelta(seconds=int(whole), microseconds=int(fraction or "0") / 1000)
        except (OverflowError, ValueError):
            return None
        return format_rfc3339nano(moment)
    return None


def collect(collector: Collector, source: Path, metrics: Sequence[str]) -> list[Row]:
    """Rows from the trial's metrics file (StdOut: its merged output); [] when the file is missing."""
    try:
        text = source.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return []
    if collector.kind == "File" and collector.format == "JSON":
        return parse_json(text, metrics)
    return parse_text(text, metrics, collector.filters)
