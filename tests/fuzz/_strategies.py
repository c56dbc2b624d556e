"""Hypothesis strategies for trainerStatus objects: valid, nearly valid and garbage, mixed.

Shared by the hypothesis properties (test_fuzz_status.py); the atheris harness (atheris_status.py)
builds its inputs from raw bytes instead.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from typing import Any

from hypothesis import strategies as st

EDGE_VALUES = [
    "0",
    "-0",
    "1",
    "0.5",
    ".5",
    "5.",
    "+1",
    "1e3",
    "1E-3",
    "1e999",
    "-1e999",
    "1e-999",
    "nan",
    "NaN",
    "-inf",
    "Infinity",
    "inf",
    "0x10",
    "1_000",
    " 1",
    "1 ",
    "",
    "١٢",
    "１２",
    "1,5",
    "e5",
    "--1",
    "9" * 64,
    "9" * 65,
    "1.7976931348623157e308",
    "4.9e-324",
    "\u202e1",
    "1\u200b",
    "\ud800",
    "abc",
]
EDGE_NAMES = [
    "loss",
    "eval_loss",
    "trainjob/seq",
    "trainjob/x",
    "",
    "n" * 64,
    "n" * 65,
    "\ud800",
    "lo\u200bss",
]

json_scalars = st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20)
json_values = st.recursive(
    json_scalars,
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=12,
)

decimal_texts = st.from_regex(
    r"[+-]?([0-9]{1,20}(\.[0-9]{0,10})?|\.[0-9]{1,10})([eE][+-]?[0-9]{1,4})?", fullmatch=True
)
metric_values = st.one_of(
    decimal_texts,
    st.sampled_from(EDGE_VALUES),
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.text(max_size=70),
    json_values,
)
metric_names = st.one_of(
    st.sampled_from(["loss", "acc", "eval_loss", "lr"]),
    st.sampled_from(EDGE_NAMES),
    st.text(min_size=0, max_size=70),
    json_values,
)
entries = st.one_of(
    st.fixed_dictionaries({"name": metric_names, "value": metric_values}),
    st.fixed_dictionaries({}, optional={"name": metric_names, "value": metric_values, "x": json_values}),
    json_values,
)


@st.composite
def times(draw: st.DrawFn) -> Any:
    kind = draw(st.integers(0, 9))
    if kind <= 5:
        moment = draw(
            st.datetimes(
                min_value=datetime(1, 1, 2), max_value=datetime(9999, 12, 30), timezones=st.just(UTC)
            )
        )
        offset = draw(st.integers(-14 * 60, 14 * 60))
        moment = moment.astimezone(timezone(timedelta(minutes=offset)))
        text = moment.isoformat()
        return text.replace("+00:00", "Z") if draw(st.booleans()) else text
    if kind <= 7:
        return draw(st.sampled_from(["", "yesterday", "2026-13-01T00:00:00Z", "2026-03-01 12:00:00", "0"]))
    return draw(json_values)


@st.composite
def trainer_statuses(draw: st.DrawFn) -> Any:
    if draw(st.integers(0, 19)) == 0:
        return draw(json_values)  # not even an object
    status: dict[str, Any] = {}
    if draw(st.integers(0, 9)) > 0:
        status["lastUpdatedTime"] = draw(times())
    if draw(st.booleans()):
        status["progressPercentage"] = draw(st.one_of(st.integers(-5, 105), st.integers(), json_values))
    if draw(st.booleans()):
        status["estimatedRemainingSeconds"] = draw(st.one_of(st.integers(-5, 2**31 + 5), json_values))
    if draw(st.integers(0, 9)) > 0:
        status["metrics"] = draw(st.one_of(st.lists(entries, max_size=12), json_values))
    return status


@st.composite
def stream_statuses(draw: st.DrawFn, second: int) -> dict[str, Any]:
    """A status at ``second`` (+ a sub-second fraction) with mostly numeric, some edge values."""
    base = datetime(2026, 3, 1, tzinfo=UTC) + timedelta(
        seconds=second, milliseconds=draw(st.integers(0, 999))
    )
    names = draw(st.lists(st.sampled_from(["loss", "acc", "lr", "epoch"]), min_size=0, max_size=4))
    return {
        "lastUpdatedTime": base.isoformat().replace("+00:00", "Z"),
        "progressPercentage": draw(st.integers(0, 100)),
        "metrics": [
            {"name": n, "value": draw(st.one_of(decimal_texts, st.sampled_from(EDGE_VALUES)))} for n in names
        ],
    }
