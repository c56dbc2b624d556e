"""Turn stored observation rows back into progress points, so a restarted engine can be rebuilt.

The collector writes each snapshot of a trial as observation rows sharing one timestamp: the reserved
``trainjob/progress``, ``trainjob/eta_seconds``, ``trainjob/elapsed_seconds`` and ``trainjob/seq``
rows plus one row per metric (``katib_progress.collector.rows``). Katib's DBManager returns them from
``GetObservationLog`` (an empty metric name gives every metric) as (time_stamp, name, value). Katib-free:
the caller fetches the rows (over DBManager gRPC, or from the local sweep's store) and calls
``PruningEngine.rebuild(points_from_rows(...), ends)``.

What rows cannot restore: non-finite metric values are never written as rows, so a trial that only
ever reported NaN has no points to replay (its stored trial state still ends it).
"""

from __future__ import annotations

import logging
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

_log = logging.getLogger(__name__)

Row = tuple[str, str, str]  # (time_stamp, metric name, value), as GetObservationLog returns them


def _number(text: str) -> float | None:
    try:
        value = float(text)
    except ValueError:
        return None
    return value


def points_from_rows(experiment: str, trial: str, rows: Iterable[Row]) -> list[ProgressPoint]:
    """One point per distinct timestamp, in time order. ``seq`` is the stored ``trainjob/seq`` (the
    collector's snapshot counter) or, for rows without one, the snapshot's index. Rows with a bad
    timestamp or a non-numeric value are skipped (logged at debug)."""
    snapshots: dict[datetime, dict[str, float]] = {}
    for stamp, name, value in rows:
        try:
            moment = parse_rfc3339(stamp, field="time_stamp")
        except ValueError:
            _log.debug("%s: skipping a row with a bad timestamp %r", trial, stamp)
            continue
        number = _number(value)
        if number is None:
            _log.debug("%s: skipping %s=%r (not a number)", trial, name, value)
            continue
        snapshots.setdefault(moment, {})[name] = number
    points = []
    for index, moment in enumerate(sorted(snapshots)):
        values = snapshots[moment]
        progress = values.get(PROGRESS_METRIC)
        eta = values.get(ETA_METRIC)
        elapsed = values.get(ELAPSED_METRIC)
        seq = values.get(SEQ_METRIC)
        points.append(
            ProgressPoint(
                experiment=experiment,
                trial=trial,
                seq=int(seq) if seq is not None and math.isfinite(seq) else index,
                timestamp=moment,
                progress=progress if progress is not None and 0 <= progress <= 100 else None,
                elapsed_s=elapsed
                if elapsed is not None and math.isfinite(elapsed) and elapsed >= 0
                else None,
                eta_s=eta if eta is not None and math.isfinite(eta) and eta >= 0 else None,
                metrics={k: v for k, v in values.items() if not k.startswith(RESERVED_PREFIX)},
            )
        )
    return points
