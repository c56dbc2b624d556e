"""A Trial's ``status.observation`` computed from its stored observation log, as Katib computes it.

Katib's trial controller fills ``status.observation`` in ``UpdateTrialStatusObservation``
(pkg/controller.v1beta1/trial/trial_controller_util.go) from the rows that
``managerclient.GetTrialObservationLog`` (pkg/controller.v1beta1/trial/managerclient/managerclient.go)
reads: one ``GetObservationLog`` call for the objective, then one per additional metric, the replies
concatenated in that order (each reply ordered by time: ``ORDER BY time`` in the DB manager's
``GetObservationLog``, pkg/db/v1beta1/mysql/mysql.go). ``get_metrics`` models ``getMetrics`` of
trial_controller_util.go:

- one metric per ``spec.objective.metricStrategies`` entry (the strategy *value* is not used there:
  every metric gets min, max and latest), initialised to ``"unavailable"``
  (``consts.UnavailableMetricValue``); rows of other metrics are ignored;
- min/max keep the *original value string* of the smallest/largest row that Go's
  ``strconv.ParseFloat`` accepts (``go_parse_float``); a row it rejects still counts for latest;
- latest is the value of the row with the greatest timestamp (``time.Parse(time.RFC3339Nano)``);
  on equal timestamps the later row wins (``!timestamp.After(currentTime)``); an unparsable
  timestamp fails the whole computation (``ValueError``);
- no rows at all: Katib leaves the observation unset (``len(MetricLogs) != 0``): ``None`` here.

Timestamps compare at microsecond precision (``core.timefmt.parse_rfc3339``; Katib's MySQL column is
``DATETIME(6)``, so stored stamps never carry more). Go's ParseFloat also accepts hexadecimal
mantissas and ``_`` digit separators in them; this model accepts hexadecimal (``0x1p-2``) but not
``_`` separators (the collector never writes either).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

from katib_progress.collector.rows import MetricRow
from katib_progress.core.timefmt import parse_rfc3339

UNAVAILABLE = "unavailable"  # pkg/controller.v1beta1/consts/const.go: UnavailableMetricValue

_DECIMAL = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?", re.ASCII)
_HEX = re.compile(r"[+-]?0[xX](?:[0-9a-fA-F]+\.?[0-9a-fA-F]*|\.[0-9a-fA-F]+)[pP][+-]?[0-9]+", re.ASCII)
_INF = re.compile(r"[+-]?(?:inf|infinity)", re.ASCII | re.IGNORECASE)


def go_parse_float(text: str) -> float | None:
    """``strconv.ParseFloat(text, 64)``: the value, or None where Go returns an error.

    Go accepts ``inf``/``infinity`` (any case, optional sign) and ``nan`` (any case, no sign); a
    finite literal beyond float64's range is an error (``ErrRange``), an underflow is 0.
    """
    if _INF.fullmatch(text):
        return -math.inf if text.startswith("-") else math.inf
    if text.lower() == "nan":
        return math.nan
    if _DECIMAL.fullmatch(text):
        value = float(text)
    elif _HEX.fullmatch(text):
        sign = -1.0 if text.startswith("-") else 1.0
        try:
            value = sign * float.fromhex(text.lstrip("+-"))
        except OverflowError:
            return None
    else:
        return None
    return None if math.isinf(value) else value


def get_metrics(rows: Iterable[MetricRow], strategy_names: Sequence[str]) -> list[dict[str, str]] | None:
    """``getMetrics``: ``[{name, min, max, latest}]`` in strategy order; None without rows.

    Raises ``ValueError`` on an unparsable timestamp (Katib's reconcile fails the same way)."""
    logs = list(rows)
    if not logs:
        return None
    metrics = {
        n: {"name": n, "min": UNAVAILABLE, "max": UNAVAILABLE, "latest": UNAVAILABLE} for n in strategy_names
    }
    latest_at: dict[str, datetime] = {}
    for row in logs:
        metric = metrics.get(row.name)
        if metric is None:
            continue
        value = go_parse_float(row.value)
        if value is not None:
            if metric["min"] == UNAVAILABLE:
                metric["min"] = metric["max"] = row.value
            else:
                low, high = go_parse_float(metric["min"]), go_parse_float(metric["max"])
                if low is not None and value < low:
                    metric["min"] = row.value
                elif high is not None and value > high:
                    metric["max"] = row.value
        moment = parse_rfc3339(row.timestamp, field="time_stamp")
        previous = latest_at.get(row.name)
        if previous is None or not previous > moment:
            latest_at[row.name] = moment
            metric["latest"] = row.value
    return [metrics[n] for n in dict.fromkeys(strategy_names)]


def observation_available(observation: Mapping[str, Any] | None, objective: str) -> bool:
    """``Trial.IsObservationAvailable`` (pkg/apis/controller/trials/v1beta1/util.go): the objective
    metric is present with a latest value other than ``"unavailable"``."""
    return any(
        isinstance(metric, Mapping)
        and metric.get("name") == objective
        and metric.get("latest") != UNAVAILABLE
        for metric in (observation or {}).get("metrics") or ()
    )


def metric_names(trial: Mapping[str, Any]) -> tuple[str, list[str], list[str]]:
    """(objective, metrics to read in ``GetTrialObservationLog`` order, metricStrategies names)."""
    objective = (trial.get("spec") or {}).get("objective") or {}
    name = str(objective.get("objectiveMetricName") or "")
    additional = [str(m) for m in objective.get("additionalMetricNames") or () if isinstance(m, str)]
    strategies = [
        str(s.get("name"))
        for s in objective.get("metricStrategies") or ()
        if isinstance(s, Mapping) and s.get("name")
    ]
    return name, [name, *additional], strategies
