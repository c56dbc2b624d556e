"""trainerStatus: the strict CRD model and the lenient per-metric parser."""

from __future__ import annotations

import math
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from katib_progress.core.status import (
    MAX_METRICS,
    PROGRESS_METRIC,
    RejectReason,
    StatusError,
    TrainerStatus,
    convert_value,
    parse_trainer_status,
)
from katib_progress.core.timefmt import format_rfc3339nano, parse_rfc3339

# The upstream CRD, vendored unchanged from shared/reference/crds (CI may not have /work/shared).
CRD = Path(__file__).resolve().parents[1] / "kubestandin" / "crds" / "trainer.kubeflow.org_trainjobs.yaml"
T0 = "2026-03-01T12:00:05Z"


def _status(*metrics: tuple[Any, Any], **fields: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"lastUpdatedTime": T0, **fields}
    body["metrics"] = [{"name": n, "value": v} for n, v in metrics]
    return body


def _crd_schema() -> dict[str, Any]:
    doc = yaml.safe_load(CRD.read_text())
    version = doc["spec"]["versions"][0]
    return version["schema"]["openAPIV3Schema"]["properties"]["status"]["properties"]["trainerStatus"]


# ----------------------------------------------------------------------------- the model vs the CRD


def test_model_limits_match_the_crd_schema() -> None:
    schema = _crd_schema()
    props = schema["properties"]
    assert props["progressPercentage"]["minimum"] == 0 and props["progressPercentage"]["maximum"] == 100
    assert props["estimatedRemainingSeconds"]["minimum"] == 0
    assert props["metrics"]["maxItems"] == MAX_METRICS
    item = props["metrics"]["items"]
    assert item["required"] == ["name", "value"]
    for key in ("name", "value"):
        assert (item["properties"][key]["minLength"], item["properties"][key]["maxLength"]) == (1, 64)
    assert props["metrics"]["x-kubernetes-list-type"] == "atomic"  # duplicates are legal on the wire
    assert any("lastUpdatedTime" in rule["rule"] for rule in schema["x-kubernetes-validations"])


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({}, "lastUpdatedTime"),
        ({"lastUpdatedTime": None}, "lastUpdatedTime"),
        ({"lastUpdatedTime": "yesterday"}, "lastUpdatedTime"),
        ({"lastUpdatedTime": T0, "progressPercentage": 101}, "progressPercentage"),
        ({"lastUpdatedTime": T0, "progressPercentage": -1}, "progressPercentage"),
        ({"lastUpdatedTime": T0, "progressPercentage": "50"}, "progressPercentage"),
        ({"lastUpdatedTime": T0, "estimatedRemainingSeconds": -5}, "estimatedRemainingSeconds"),
        ({"lastUpdatedTime": T0, "estimatedRemainingSeconds": 2**31}, "estimatedRemainingSeconds"),
        ({"lastUpdatedTime": T0, "metrics": [{"name": "", "value": "1"}]}, "name"),
        ({"lastUpdatedTime": T0, "metrics": [{"name": "x" * 65, "value": "1"}]}, "name"),
        ({"lastUpdatedTime": T0, "metrics": [{"name": "a", "value": ""}]}, "value"),
        ({"lastUpdatedTime": T0, "metrics": [{"name": "a", "value": 1.5}]}, "value"),
        ({"lastUpdatedTime": T0, "metrics": [{"name": "a"}]}, "value"),
        ({"lastUpdatedTime": T0, "metrics": [{"name": "m", "value": "1"}] * 257}, "metrics"),
    ],
)
def test_model_rejects_what_the_crd_rejects_naming_the_field(body: dict[str, Any], field: str) -> None:
    with pytest.raises(ValidationError) as info:
        TrainerStatus.model_validate(body)
    assert field in str(info.value)


def test_model_accepts_a_full_status_and_round_trips_to_the_wire() -> None:
    body = _status(("loss", "0.2347"), ("loss", "0.3"), progressPercentage=40, estimatedRemainingSeconds=0)
    body["unknownField"] = "pruned"
    model = TrainerStatus.model_validate(body)
    wire = model.to_wire()
    assert wire["lastUpdatedTime"] == T0
    assert wire["progressPercentage"] == 40 and wire["estimatedRemainingSeconds"] == 0
    assert [m["name"] for m in wire["metrics"]] == ["loss", "loss"]
    assert "unknownField" not in wire
    # sub-second input is served back at one-second precision, as metav1.Time does
    assert TrainerStatus.model_validate({"lastUpdatedTime": "2026-03-01T12:00:05.987Z"}).to_wire() == {
        "lastUpdatedTime": T0
    }


def test_rfc3339_parse_and_format_follow_go() -> None:
    assert (
        format_rfc3339nano(parse_rfc3339("2026-03-01T14:00:05.1234567+02:00"))
        == "2026-03-01T12:00:05.123456Z"
    )
    assert format_rfc3339nano(parse_rfc3339("2026-03-01T12:00:05.000000Z")) == T0
    assert format_rfc3339nano(datetime(2026, 3, 1, 12, 0, 5, 10, tzinfo=UTC)) == "2026-03-01T12:00:05.00001Z"
    for bad in [
        "2026-03-01 12:00:05Z",
        "2026-03-01T12:00:05",
        "2026-03-01",
        "2026-02-30T00:00:00Z",
        "",
        "١٢",
    ]:
        with pytest.raises(ValueError, match="time"):
            parse_rfc3339(bad)


# ----------------------------------------------------------------------------- per-metric conversion


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("nan", RejectReason.NON_FINITE),
        ("NaN", RejectReason.NON_FINITE),
        ("inf", RejectReason.NON_FINITE),
        ("-inf", RejectReason.NON_FINITE),
        ("Infinity", RejectReason.NON_FINITE),
        ("abc", RejectReason.NOT_A_NUMBER),
        ("", RejectReason.EMPTY),
        ("1e999", RejectReason.OUT_OF_RANGE),
        ("-1e999", RejectReason.OUT_OF_RANGE),
        ("0x10", RejectReason.NOT_A_NUMBER),
        ("1_000", RejectReason.NOT_A_NUMBER),
        (" 1.0", RejectReason.WHITESPACE),
        ("1.0 ", RejectReason.WHITESPACE),
        ("1 000", RejectReason.WHITESPACE),
        ("0.5 s", RejectReason.WHITESPACE),
        ("0.5s", RejectReason.NOT_A_NUMBER),
        ("12%", RejectReason.NOT_A_NUMBER),
        ("3ms", RejectReason.NOT_A_NUMBER),
        ("1,5", RejectReason.NOT_A_NUMBER),
        ("١٢", RejectReason.NOT_A_NUMBER),  # Arabic-Indic digits: Python's float() would accept them
        ("e5", RejectReason.NOT_A_NUMBER),
        ("1" * 65, RejectReason.TOO_LONG),
    ],
)
def test_bad_values_are_rejected_with_a_named_reason(text: str, reason: RejectReason) -> None:
    parsed = parse_trainer_status(_status(("bad", text), ("loss", "0.25"), progressPercentage=10))
    assert parsed.values == {"loss": 0.25}  # the rest of the snapshot still counts
    assert parsed.progress == 10
    assert [(r.name, r.reason) for r in parsed.rejections] == [("bad", reason)]
    assert parsed.rejections[0].detail


@pytest.mark.parametrize(
    ("text", "number"),
    [
        ("0.2347", 0.2347),
        ("1", 1.0),
        ("-3", -3.0),
        ("+2.5", 2.5),
        ("1.", 1.0),
        (".5", 0.5),
        ("1e-3", 1e-3),
        ("6.02E23", 6.02e23),
        ("1e-999", 0.0),
        ("-0", -0.0),
    ],
)
def test_decimal_values_convert(text: str, number: float) -> None:
    parsed = parse_trainer_status(_status(("m", text)))
    assert parsed.values == {"m": number}
    assert parsed.texts == {"m": text}  # written unchanged
    assert not parsed.rejections


def test_non_finite_values_are_kept_for_divergence_detection() -> None:
    parsed = parse_trainer_status(_status(("loss", "nan"), ("grad", "-inf"), ("acc", "0.5")))
    assert math.isnan(parsed.non_finite["loss"]) and parsed.non_finite["grad"] == -math.inf
    assert dict(parsed.values) == {"acc": 0.5}
    assert {r.name for r in parsed.rejections if r.reason is RejectReason.NON_FINITE} == {"loss", "grad"}


def test_duplicate_names_reject_every_occurrence() -> None:
    parsed = parse_trainer_status(_status(("loss", "1"), ("acc", "0.5"), ("loss", "2")))
    assert dict(parsed.values) == {"acc": 0.5}
    assert [(r.name, r.value, r.reason) for r in parsed.rejections] == [
        ("loss", "1", RejectReason.DUPLICATE_NAME),
        ("loss", "2", RejectReason.DUPLICATE_NAME),
    ]


def test_reserved_and_malformed_names_and_entries() -> None:
    body = _status((PROGRESS_METRIC, "50"), ("trainjob/anything", "1"), ("", "1"), ("x" * 65, "1"), (7, "1"))
    body["metrics"].append("not-an-object")
    body["metrics"].append({"name": "typed", "value": 3})
    parsed = parse_trainer_status(body)
    reasons = [r.reason for r in parsed.rejections]
    assert reasons == [
        RejectReason.RESERVED_NAME,
        RejectReason.RESERVED_NAME,
        RejectReason.INVALID_NAME,
        RejectReason.INVALID_NAME,
        RejectReason.INVALID_NAME,
        RejectReason.INVALID_ENTRY,
        RejectReason.WRONG_TYPE,
    ]
    assert not parsed.values


def test_bad_progress_and_eta_are_rejected_but_metrics_count() -> None:
    parsed = parse_trainer_status(
        _status(("loss", "1"), progressPercentage=150, estimatedRemainingSeconds="soon")
    )
    assert parsed.progress is None and parsed.eta_s is None
    assert {(r.name, r.reason) for r in parsed.rejections} == {
        ("progressPercentage", RejectReason.OUT_OF_RANGE),
        ("estimatedRemainingSeconds", RejectReason.WRONG_TYPE),
    }
    assert dict(parsed.values) == {"loss": 1.0}


def test_more_than_256_metrics_keeps_the_first_256() -> None:
    body = _status(*[(f"m{i}", str(i)) for i in range(300)])
    parsed = parse_trainer_status(body)
    assert len(parsed.values) == 256
    assert [r.name for r in parsed.rejections] == [f"m{i}" for i in range(256, 300)]
    assert {r.reason for r in parsed.rejections} == {RejectReason.TOO_MANY}


@pytest.mark.parametrize(
    "body",
    [{}, {"lastUpdatedTime": None}, {"lastUpdatedTime": "12:00"}, {"lastUpdatedTime": 1700000000}],
)
def test_whole_snapshot_unusable_raises_status_error(body: dict[str, Any]) -> None:
    with pytest.raises(StatusError, match="lastUpdatedTime"):
        parse_trainer_status(body)


def test_time_is_floored_to_the_second_and_fingerprint_ignores_time() -> None:
    a = parse_trainer_status({"lastUpdatedTime": "2026-03-01T12:00:05.900Z", "progressPercentage": 5})
    b = parse_trainer_status({"lastUpdatedTime": "2026-03-01T12:00:07Z", "progressPercentage": 5})
    c = parse_trainer_status({"lastUpdatedTime": "2026-03-01T12:00:07Z", "progressPercentage": 6})
    assert a.last_updated == datetime(2026, 3, 1, 12, 0, 5, tzinfo=UTC)
    assert a.fingerprint == b.fingerprint != c.fingerprint
    d = parse_trainer_status(_status(("loss", "0.10")))
    e = parse_trainer_status(_status(("loss", "0.1")))
    assert d.fingerprint != e.fingerprint  # different content on the wire is a different snapshot


def test_parser_does_not_mutate_its_input() -> None:
    body = _status(("loss", "1"), ("loss", "2"), ("x", "nan"), progressPercentage=3)
    snapshot = repr(body)
    parse_trainer_status(body)
    assert repr(body) == snapshot


# ----------------------------------------------------------------------------- properties

_values = st.one_of(
    st.text(max_size=70),
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.integers().map(str),
    st.sampled_from(["nan", "inf", "-inf", "1e999", "0x10", " 1", "1 s", "abc", ""]),
    st.integers(),
    st.floats(),
    st.none(),
)
_names = st.one_of(
    st.text(max_size=70),
    st.sampled_from(["loss", "acc", "trainjob/progress"]),
    st.integers(),
    st.lists(st.integers(), max_size=2),  # unhashable
    st.dictionaries(st.tuples(st.integers()), st.none(), max_size=1),  # not JSON-encodable
)
_entries = st.one_of(
    st.fixed_dictionaries({"name": _names, "value": _values}), st.text(max_size=5), st.none()
)


@settings(max_examples=300, deadline=None)
@given(
    entries=st.lists(_entries, max_size=30),
    progress=st.one_of(st.none(), st.integers(), st.floats(), st.text()),
)
def test_arbitrary_input_never_crashes_and_every_metric_is_accounted_for(
    entries: list[Any], progress: Any
) -> None:
    parsed = parse_trainer_status({"lastUpdatedTime": T0, "metrics": entries, "progressPercentage": progress})
    non_finite_rejected = {r.name for r in parsed.rejections if r.reason is RejectReason.NON_FINITE}
    other_rejections = [r for r in parsed.rejections if r.reason is not RejectReason.NON_FINITE]
    progress_rejected = int(progress is not None and parsed.progress is None)
    # each metric entry ends up in exactly one bucket: a value, a non-finite, or a rejection
    assert set(parsed.values).isdisjoint(parsed.non_finite)
    assert non_finite_rejected == set(parsed.non_finite)
    assert len(parsed.values) + len(parsed.non_finite) + len(other_rejections) - progress_rejected == len(
        entries
    )
    assert all(math.isfinite(v) for v in parsed.values.values())
    assert all(not math.isfinite(v) for v in parsed.non_finite.values())
    assert parsed.progress is None or 0 <= parsed.progress <= 100


@settings(max_examples=500, deadline=None)
@given(st.text(max_size=80))
def test_convert_value_is_total_and_consistent(text: str) -> None:
    number, reason, _detail = convert_value(text)
    if reason is None:
        assert number is not None and math.isfinite(number)
        assert number == float(text)
        assert not any(ch.isspace() for ch in text)
    elif reason is RejectReason.NON_FINITE:
        assert number is not None and not math.isfinite(number)
    else:
        assert number is None


@settings(max_examples=200, deadline=None)
@given(st.floats(allow_nan=False, allow_infinity=False))
def test_every_finite_double_repr_round_trips(number: float) -> None:
    parsed, reason, _ = convert_value(repr(number))
    assert reason is None and parsed == number


@settings(max_examples=300, deadline=None)
@given(st.datetimes(timezones=st.just(UTC)))
def test_rfc3339nano_round_trips_every_microsecond_time(moment: datetime) -> None:
    text = format_rfc3339nano(moment)
    assert parse_rfc3339(text) == moment
    assert len(text.split("T")[0]) == 10
