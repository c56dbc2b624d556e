"""Resume restores the pruning service's memory: every finished trial's progress points are read back
from the observation log (the rows the collector pipeline wrote for them) and replayed to the pruning
service in their original order, then its end is reported, so comparative policies see the same
history as a sweep that never stopped.

A row group sharing one timestamp is one snapshot; the reserved ``trainjob/*`` rows carry progress,
ETA, elapsed and the snapshot's sequence number (the same number the live point had, so an engine that
already knows the point treats the replay as a repeat). NaN/Inf values are never observation rows, so
they are not replayed.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from datetime import datetime

from katib_progress.core.status import (
    ELAPSED_METRIC,
    ETA_METRIC,
    PROGRESS_METRIC,
    RESERVED_PREFIX,
    SEQ_METRIC,
)
from katib_progress.core.timefmt import parse_rfc3339
from katib_progress.core.types import ProgressPoint


def _number(text: str) -> float | None:
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def stored_points(experiment: str, trial: str, rows: Iterable[tuple[str, str, str]]) -> list[ProgressPoint]:
    """ProgressPoints of ``trial`` from its (time_stamp, metric, value) observation rows, in time order."""
    snapshots: dict[datetime, dict[str, float]] = {}
    for stamp, name, text in rows:
        value = _number(text)
        try:
            moment = parse_rfc3339(stamp, field="time_stamp")
        except ValueError:
            continue
        if value is not None:
            snapshots.setdefault(moment, {})[name] = value
    points = []
    for index, moment in enumerate(sorted(snapshots)):
        values = snapshots[moment]
        progress = values.get(PROGRESS_METRIC)
        eta = values.get(ETA_METRIC)
        elapsed = values.get(ELAPSED_METRIC)
        points.append(
            ProgressPoint(
                experiment=experiment,
                trial=trial,
                seq=int(values.get(SEQ_METRIC, index)),
                timestamp=moment,
                progress=progress if progress is not None and 0 <= progress <= 100 else None,
                eta_s=eta if eta is not None and eta >= 0 else None,
                elapsed_s=elapsed if elapsed is not None and elapsed >= 0 else None,
                metrics={k: v for k, v in values.items() if not k.startswith(RESERVED_PREFIX)},
            )
        )
    return points
