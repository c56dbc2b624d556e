"""Katib's pure rules about trials: observations, objective values, job conditions.

Each function names the upstream function it models (kubeflow/katib, commit 33c8ff4).
"""

from __future__ import annotations

import calendar
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tests.katibmodel._kube import get_condition, has_condition
from tests.test_examples_gjson import MISSING, gjson_get

#: consts.UnavailableMetricValue
UNAVAILABLE = "unavailable"

_RFC3339 = re.compile(r"^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})(\.\d+)?(Z|[+-]\d{2}:\d{2})$")
_GO_FLOAT = re.compile(
    r"^[+-]?(\d+\.?\d*([eE][+-]?\d+)?|\.\d+([eE][+-]?\d+)?|inf|infinity|nan)$", re.IGNORECASE
)


def parse_time(stamp: str) -> tuple[int, int]:
    """Go ``time.Parse(time.RFC3339Nano, s)`` as a sortable (unix seconds, nanoseconds); ValueError."""
    m = _RFC3339.match(stamp)
    if m is None:
        raise ValueError(f"failed to parse timestamps {stamp}")
    year, month, day, hour, minute, second = (int(m.group(i)) for i in range(1, 7))
    seconds = calendar.timegm((year, month, day, hour, minute, second, 0, 0, 0))
    zone = m.group(8)
    if zone != "Z":
        sign = 1 if zone[0] == "+" else -1
        seconds -= sign * (int(zone[1:3]) * 3600 + int(zone[4:6]) * 60)
    fraction = (m.group(7) or ".")[1:10].ljust(9, "0")
    return seconds, int(fraction)


def parse_float(value: str) -> float | None:
    """Go ``strconv.ParseFloat(s, 64)`` (decimal forms, inf/infinity/nan; no spaces or underscores)."""
    if value.lower().startswith(("0x", "+0x", "-0x")):
        try:
            return float.fromhex(value)
        except ValueError:
            return None
    if not _GO_FLOAT.match(value):
        return None
    return float(value)


def get_metrics(
    logs: Sequence[tuple[str, str, str]], strategies: Sequence[Mapping[str, str]]
) -> dict[str, Any]:
    """trial/trial_controller_util.go: getMetrics.

    ``logs`` are (metric name, value, timestamp) as GetObservationLog returns them. Only metrics
    named in ``strategies`` count. min/max over the values that parse as floats (the first sets
    both; afterwards ``if v < min {min} else if v > max {max}``), latest = the value with the
    greatest timestamp, ties going to the later row. Every metric starts "unavailable". Upstream
    returns them in Go map order (random); the model keeps the strategies' order. A timestamp that
    does not parse fails the whole call (ValueError).
    """
    metrics: dict[str, dict[str, str]] = {}
    stamps: dict[str, tuple[int, int] | None] = {}
    for strategy in strategies:
        name = strategy["name"]
        metrics[name] = {"name": name, "min": UNAVAILABLE, "max": UNAVAILABLE, "latest": UNAVAILABLE}
        stamps[name] = None
    for name, value, stamp in logs:
        metric = metrics.get(name)
        if metric is None:
            continue
        number = parse_float(value)
        if number is not None:
            if metric["min"] == UNAVAILABLE:
                metric["min"] = metric["max"] = value
            else:
                low, high = float(metric["min"]), float(metric["max"])
                if number < low:
                    metric["min"] = value
                elif number > high:
                    metric["max"] = value
        current = parse_time(stamp)
        seen = stamps[name]
        if seen is None or not seen > current:
            stamps[name] = current
            metric["latest"] = value
    return {"metrics": list(metrics.values())}


def strategies_of(trial: Mapping[str, Any]) -> list[dict[str, str]]:
    return list(((trial.get("spec") or {}).get("objective") or {}).get("metricStrategies") or [])


def is_observation_available(trial: Mapping[str, Any]) -> bool:
    """apis/controller/trials/v1beta1/util.go: IsObservationAvailable -- the objective's latest is
    not "unavailable"."""
    objective = (trial.get("spec") or {}).get("objective")
    if not objective:
        return False
    name = objective.get("objectiveMetricName")
    observation = (trial.get("status") or {}).get("observation") or {}
    return any(
        m.get("name") == name and m.get("latest") != UNAVAILABLE for m in observation.get("metrics") or ()
    )


def is_completed(trial: Mapping[str, Any]) -> bool:
    """trials/v1beta1/util.go: IsCompleted -- EarlyStopped and MetricsUnavailable count."""
    return any(
        has_condition(trial, c)
        for c in ("Succeeded", "Failed", "Killed", "EarlyStopped", "MetricsUnavailable")
    )


def objective_value(trial: Mapping[str, Any]) -> str:
    """experiment/util/status_util.go: getObjectiveMetricValue (min/max fall back to latest)."""
    observation = (trial.get("status") or {}).get("observation")
    if observation is None:
        return UNAVAILABLE
    name = trial["spec"]["objective"]["objectiveMetricName"]
    strategy = next((s.get("value") for s in strategies_of(trial) if s.get("name") == name), None)
    for metric in observation.get("metrics") or ():
        if metric.get("name") != name:
            continue
        if strategy == "min":
            return str(metric["latest"] if metric.get("min") == UNAVAILABLE else metric.get("min"))
        if strategy == "max":
            return str(metric["latest"] if metric.get("max") == UNAVAILABLE else metric.get("max"))
        if strategy == "latest":
            return str(metric.get("latest"))
    return UNAVAILABLE


def observation_values(trial: Mapping[str, Any]) -> list[tuple[str, str]]:
    """suggestionclient.go: convertTrialObservation -- one value per metric by its strategy
    (min/max fall back to latest when unavailable; no strategy: the empty string)."""
    strategies = {s.get("name"): s.get("value") for s in strategies_of(trial)}
    observation = (trial.get("status") or {}).get("observation") or {}
    values = []
    for m in observation.get("metrics") or ():
        strategy = strategies.get(m.get("name"))
        if strategy == "min":
            value = m.get("latest") if m.get("min") == UNAVAILABLE else m.get("min")
        elif strategy == "max":
            value = m.get("latest") if m.get("max") == UNAVAILABLE else m.get("max")
        elif strategy == "latest":
            value = m.get("latest")
        else:
            value = ""
        values.append((str(m.get("name") or ""), str(value or "")))
    return values


def last_condition_type(trial: Mapping[str, Any]) -> str | None:
    """suggestionclient.go ConvertTrials: "We send only the latest condition of the Trial!" --
    the type of the LAST entry of status.conditions, whatever its status."""
    conds = (trial.get("status") or {}).get("conditions") or []
    return str(conds[-1].get("type")) if conds else None


@dataclass(frozen=True)
class JobStatus:
    condition: str  # Running, Succeeded, Failed (trial/util/job_util.go ConditionType)
    reason: str = ""
    message: str = ""


class JobStatusError(Exception):
    pass


def _unmarshal(result: Any, condition: str) -> JobStatus:
    """json.Unmarshal of the gjson result (first element of an array) into TrialJobStatus."""
    element = result[0] if isinstance(result, list) else result
    if element is None:
        return JobStatus(condition)  # "null" unmarshals into a struct as a no-op
    if not isinstance(element, dict):
        raise JobStatusError(f"cannot unmarshal {json.dumps(element)} into Go value of type TrialJobStatus")
    fields = {k.lower(): v for k, v in element.items()}
    for key in ("reason", "message", "condition"):
        if key in fields and fields[key] is not None and not isinstance(fields[key], str):
            raise JobStatusError(f"cannot unmarshal {key} {fields[key]!r} into a string")
    return JobStatus(condition, str(fields.get("reason") or ""), str(fields.get("message") or ""))


def _met(result: Any) -> bool:
    """job_util.go: met when the result IsObject, or IsArray with len > 0."""
    return isinstance(result, dict) or (isinstance(result, list) and len(result) > 0)


def deployed_job_status(trial: Mapping[str, Any], job: Mapping[str, Any]) -> JobStatus | None:
    """trial/util/job_util.go: GetDeployedJobStatus -- failureCondition first, then successCondition
    (gjson over the whole job JSON); else Running when the Trial is not Running yet; else None.
    Raises JobStatusError when the matched value does not unmarshal (upstream: nil + error)."""
    spec = trial.get("spec") or {}
    failed = gjson_get(job, spec.get("failureCondition") or "")
    if failed is not MISSING and _met(failed):
        return _unmarshal(failed, "Failed")
    succeeded = gjson_get(job, spec.get("successCondition") or "")
    if succeeded is not MISSING and _met(succeeded):
        return _unmarshal(succeeded, "Succeeded")
    if not has_condition(trial, "Running") and (job.get("metadata") or {}).get("name"):
        return JobStatus("Running")
    return None


def classify(trial: Mapping[str, Any]) -> str:
    """experiment/util/status_util.go: updateTrialsSummary -- the first matching bucket, in this
    order: Killed, Failed, Succeeded, EarlyStopped, Running, MetricsUnavailable, else Pending."""
    for kind in ("Killed", "Failed", "Succeeded", "EarlyStopped", "Running", "MetricsUnavailable"):
        if has_condition(trial, kind):
            return kind
    return "Pending"


def condition_message(trial: Mapping[str, Any], kind: str) -> str:
    cond = get_condition(trial, kind)
    return str(cond.get("message") or "") if cond else ""
