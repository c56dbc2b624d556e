"""``status.trainerStatus`` of a Kubeflow Trainer TrainJob: the wire model and the lenient parser.

Two entry points with different jobs:

- ``TrainerStatus`` is the strict Pydantic model of the field exactly as the TrainJob CRD defines it
  (``trainer.kubeflow.org_trainjobs.yaml``). ``TrainerStatus.model_validate(obj)`` rejects what the API
  server would reject and raises ``pydantic.ValidationError`` naming the field.
- ``parse_trainer_status(raw)`` turns one observed snapshot into numbers for the collector. It never
  raises because of one bad metric: each bad metric becomes a ``MetricRejection`` with a
  ``RejectReason`` and the rest of the snapshot still counts. It raises ``StatusError`` only when the
  snapshot as a whole is unusable (no valid ``lastUpdatedTime``).

The rules are documented in docs/collector.md.
"""

from __future__ import annotations

import enum
import hashlib
import math
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from types import MappingProxyType
from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, StrictInt, StrictStr, field_serializer

from katib_progress.core.errors import PermanentError
from katib_progress.core.timefmt import floor_second, format_rfc3339nano, parse_rfc3339

INT32_MAX = 2**31 - 1
MAX_METRICS = 256
MAX_TEXT = 64

# Metric names the collector writes itself. A user metric under this prefix is rejected.
RESERVED_PREFIX = "trainjob/"
PROGRESS_METRIC = "trainjob/progress"
ETA_METRIC = "trainjob/eta_seconds"
ELAPSED_METRIC = "trainjob/elapsed_seconds"
SEQ_METRIC = "trainjob/seq"


class StatusError(PermanentError):
    """A trainerStatus snapshot that cannot be used at all (e.g. no valid lastUpdatedTime)."""


# --------------------------------------------------------------------------- strict wire model

_Text = Annotated[StrictStr, Field(min_length=1, max_length=MAX_TEXT)]


def _parse_time(value: object) -> datetime:
    if value is None:
        raise ValueError("lastUpdatedTime is required when trainerStatus is present")
    if isinstance(value, datetime):
        if value.tzinfo is None:
            raise ValueError(f"lastUpdatedTime: naive datetime {value!r} has no zone")
        return value
    return parse_rfc3339(value, field="lastUpdatedTime")


class TrainerMetric(BaseModel):
    """One ``{name, value}`` entry; both are strings of 1..64 characters."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    name: _Text
    value: _Text


class TrainerStatus(BaseModel):
    """``status.trainerStatus`` exactly as the CRD defines it.

    Unknown fields are ignored, as the API server prunes them from a structural CRD. ``null`` for an
    optional field means absent (the API server drops such nulls too).
    """

    model_config = ConfigDict(extra="ignore", frozen=True)

    progressPercentage: Annotated[StrictInt, Field(ge=0, le=100)] | None = None
    estimatedRemainingSeconds: Annotated[StrictInt, Field(ge=0, le=INT32_MAX)] | None = None
    metrics: Annotated[list[TrainerMetric], Field(max_length=MAX_METRICS)] | None = None
    lastUpdatedTime: Annotated[datetime, BeforeValidator(_parse_time)]

    @field_serializer("lastUpdatedTime")
    def _dump_time(self, value: datetime) -> str:
        # metav1.Time: RFC 3339 at one-second precision.
        return format_rfc3339nano(floor_second(value))

    def to_wire(self) -> dict[str, Any]:
        """The JSON object the API server would store and serve back."""
        return self.model_dump(mode="json", exclude_none=True)


# --------------------------------------------------------------------------- lenient parser


class RejectReason(enum.StrEnum):
    """Why one metric (or one optional field) of a snapshot was not turned into a number."""

    EMPTY = "empty"  # value is ""
    TOO_LONG = "too_long"  # value longer than 64 characters
    WHITESPACE = "whitespace"  # value contains spaces, tabs or newlines (e.g. " 1.0", "1 s")
    NOT_A_NUMBER = "not_a_number"  # "abc", "0x10", "1_000", "0.5s", "12%"
    NON_FINITE = "non_finite"  # "nan", "inf", "-inf": kept in ParsedSnapshot.non_finite
    OUT_OF_RANGE = "out_of_range"  # "1e999" (overflows a double), or an int field out of range
    WRONG_TYPE = "wrong_type"  # not a string (metric value) or not an integer (progress, ETA)
    INVALID_NAME = "invalid_name"  # missing, non-string, empty or longer than 64 characters
    DUPLICATE_NAME = "duplicate_name"  # the name occurs more than once: every occurrence is rejected
    RESERVED_NAME = "reserved_name"  # the name starts with "trainjob/" (the collector's own rows)
    INVALID_ENTRY = "invalid_entry"  # a metrics entry that is not an object, or metrics not a list
    TOO_MANY = "too_many"  # entries after the 256th


@dataclass(frozen=True, slots=True)
class MetricRejection:
    name: str
    value: str
    reason: RejectReason
    detail: str = ""


@dataclass(frozen=True, slots=True)
class ParsedSnapshot:
    """One trainerStatus snapshot as numbers.

    ``last_updated`` is floored to the whole second (the API server keeps no more). ``values`` holds
    the finite metrics, ``texts`` their exact original strings (written as rows unchanged),
    ``non_finite`` the NaN/Inf metrics (never written, but the pruning side needs them).
    ``fingerprint`` digests the content (progress, ETA and the metrics list in order, raw), not the time.
    """

    last_updated: datetime
    progress: int | None
    eta_s: int | None
    values: Mapping[str, float]
    non_finite: Mapping[str, float]
    rejections: tuple[MetricRejection, ...]
    fingerprint: str
    texts: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))


_DECIMAL = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?", re.ASCII)
_NON_FINITE = {
    "nan": math.nan,
    "+nan": math.nan,
    "-nan": math.nan,
    "inf": math.inf,
    "+inf": math.inf,
    "-inf": -math.inf,
    "infinity": math.inf,
    "+infinity": math.inf,
    "-infinity": -math.inf,
}


def _encodable(text: str) -> bool:
    """False for a str holding lone surrogates (possible from Python's JSON decoder, never from the
    API server): it cannot be encoded as UTF-8, so it could never be sent to the DB manager."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _clip(value: object) -> str:
    text = value if isinstance(value, str) else repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _classify(text: str) -> tuple[RejectReason, str]:
    """Why ``text`` (not a plain decimal) is rejected."""
    if text == "":
        return RejectReason.EMPTY, "empty string"
    if any(ch.isspace() for ch in text):
        return RejectReason.WHITESPACE, "contains whitespace"
    if text.lower().startswith(("0x", "+0x", "-0x")):
        return RejectReason.NOT_A_NUMBER, "hexadecimal is not accepted"
    if _DECIMAL.match(text):
        return RejectReason.NOT_A_NUMBER, "trailing text (units?) after the number"
    return RejectReason.NOT_A_NUMBER, "not a decimal number"


def convert_value(text: str) -> tuple[float | None, RejectReason | None, str]:
    """Convert one metric value string: ``(number, None, "")`` or ``(maybe_number, reason, detail)``.

    A non-finite literal returns its NaN/Inf together with ``RejectReason.NON_FINITE``.
    """
    if len(text) > MAX_TEXT:
        return None, RejectReason.TOO_LONG, f"{len(text)} characters > {MAX_TEXT}"
    if _DECIMAL.fullmatch(text) is None:
        special = _NON_FINITE.get(text.lower())
        if special is not None:
            return special, RejectReason.NON_FINITE, "not a finite number"
        reason, detail = _classify(text)
        return None, reason, detail
    number = float(text)
    if not math.isfinite(number):
        return None, RejectReason.OUT_OF_RANGE, "overflows a 64-bit float"
    return number, None, ""


def _int_field(raw: Mapping[str, Any], key: str, upper: int, rejections: list[MetricRejection]) -> int | None:
    value = raw.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        rejections.append(MetricRejection(key, _clip(value), RejectReason.WRONG_TYPE, "expected an integer"))
        return None
    if isinstance(value, float) and not value.is_integer():
        rejections.append(MetricRejection(key, _clip(value), RejectReason.WRONG_TYPE, "expected an integer"))
        return None
    number = int(value)
    if not 0 <= number <= upper:
        rejections.append(
            MetricRejection(key, _clip(value), RejectReason.OUT_OF_RANGE, f"expected 0..{upper}")
        )
        return None
    return number


def _fingerprint(raw: Mapping[str, Any], metrics: Sequence[Any]) -> str:
    entries = [
        (entry.get("name"), entry.get("value")) if isinstance(entry, Mapping) else ("<entry>", entry)
        for entry in metrics
    ]
    # repr, not JSON: total over arbitrary (even unhashable or non-JSON) input, and exact for str/int.
    canonical = repr((raw.get("progressPercentage"), raw.get("estimatedRemainingSeconds"), entries))
    return hashlib.blake2b(canonical.encode("utf-8", "surrogatepass"), digest_size=16).hexdigest()


def _last_updated(raw: Mapping[str, Any]) -> datetime:
    if raw.get("lastUpdatedTime") is None:
        raise StatusError("trainerStatus.lastUpdatedTime: required when trainerStatus is present")
    try:
        return floor_second(parse_rfc3339(raw["lastUpdatedTime"], field="trainerStatus.lastUpdatedTime"))
    except ValueError as exc:
        raise StatusError(str(exc)) from None


def _metric_entries(raw: Mapping[str, Any], rejections: list[MetricRejection]) -> Sequence[Any]:
    metrics_raw = raw.get("metrics")
    if metrics_raw is None:
        return ()
    if isinstance(metrics_raw, list | tuple):
        return metrics_raw
    rejections.append(
        MetricRejection("metrics", _clip(metrics_raw), RejectReason.INVALID_ENTRY, "expected a list")
    )
    return ()


def _invalid_name(label: str, name: object, shown: str) -> MetricRejection | None:
    if isinstance(name, str) and 1 <= len(name) <= MAX_TEXT and _encodable(name):
        return None
    if not isinstance(name, str):
        detail = "missing or not a string"
    elif not _encodable(name):
        detail = "not valid Unicode (lone surrogate)"
    else:
        detail = f"length {len(name)}"
    return MetricRejection(
        _clip(name) if isinstance(name, str) and name and _encodable(name) else label,
        shown,
        RejectReason.INVALID_NAME,
        detail,
    )


def _entry_rejection(index: int, entry: object, names: Counter[str]) -> MetricRejection | None:
    """Why the metrics entry at ``index`` is unusable before its value is read; None when usable
    (then it is a mapping whose ``name`` is a valid, unique, unreserved str and ``value`` a str)."""
    label = f"metrics[{index}]"
    if index >= MAX_METRICS:
        name = entry.get("name") if isinstance(entry, Mapping) else None
        text = _clip(entry.get("value") if isinstance(entry, Mapping) else entry)
        return MetricRejection(
            name if isinstance(name, str) else label, text, RejectReason.TOO_MANY, f"> {MAX_METRICS}"
        )
    if not isinstance(entry, Mapping):
        return MetricRejection(label, _clip(entry), RejectReason.INVALID_ENTRY, "expected {name, value}")
    name, value = entry.get("name"), entry.get("value")
    shown = _clip(value) if value is not None else ""
    invalid = _invalid_name(label, name, shown)
    if invalid is not None or not isinstance(name, str):
        return invalid
    if names[name] > 1:
        return MetricRejection(name, shown, RejectReason.DUPLICATE_NAME, f"{names[name]} occurrences")
    if name.startswith(RESERVED_PREFIX):
        return MetricRejection(name, shown, RejectReason.RESERVED_NAME, f"prefix {RESERVED_PREFIX!r}")
    if not isinstance(value, str):
        return MetricRejection(name, shown, RejectReason.WRONG_TYPE, "value must be a string")
    return None


def parse_trainer_status(raw: Mapping[str, Any]) -> ParsedSnapshot:
    """Parse one ``status.trainerStatus`` object leniently (see the module docstring)."""
    if not isinstance(raw, Mapping):
        raise StatusError(f"trainerStatus: expected an object, got {type(raw).__name__}")
    last = _last_updated(raw)
    rejections: list[MetricRejection] = []
    progress = _int_field(raw, "progressPercentage", 100, rejections)
    eta = _int_field(raw, "estimatedRemainingSeconds", INT32_MAX, rejections)
    metrics = _metric_entries(raw, rejections)
    names = Counter(
        name
        for entry in metrics[:MAX_METRICS]
        if isinstance(entry, Mapping) and isinstance(name := entry.get("name"), str)
    )
    values: dict[str, float] = {}
    texts: dict[str, str] = {}
    non_finite: dict[str, float] = {}
    for index, entry in enumerate(metrics):
        rejected = _entry_rejection(index, entry, names)
        if rejected is not None:
            rejections.append(rejected)
            continue
        name, value = entry["name"], entry["value"]
        number, reason, detail = convert_value(value)
        if reason is None and number is not None:
            values[name] = number
            texts[name] = value
            continue
        if reason is RejectReason.NON_FINITE and number is not None:
            non_finite[name] = number
        rejections.append(MetricRejection(name, _clip(value), reason or RejectReason.NOT_A_NUMBER, detail))

    return ParsedSnapshot(
        last_updated=last,
        progress=progress,
        eta_s=eta,
        values=MappingProxyType(values),
        non_finite=MappingProxyType(non_finite),
        rejections=tuple(rejections),
        fingerprint=_fingerprint(raw, metrics),
        texts=MappingProxyType(texts),
    )
