"""Regenerate the bad-input corpus: ``.venv/bin/python -m tests.corpus._generate``.

Each ``tests/corpus/*.json`` file is one entry (the JSON files are what is checked in and what
``tests/test_corpus.py`` reads; this script only documents how they were made):

```
{"description": str,
 "crd_valid": bool | null,        # does TrainerStatus (the CRD as Go types see it) accept it
                                  # (null: trainerStatus is not an object)
 "standin_valid": bool,           # optional: the API stand-in's answer when it differs (documented)
 "sequence": [trainerStatus, ...],  # delivered in order to one TrainJob
 "expect": [{"outcome": "written"|"stale"|"repeat"|"invalid",
             "reasons": {reason: count},   # exact multiset of RejectReasons (omitted: none)
             "kept": {name: text},         # finite metrics written, exactly
             "non_finite": [name, ...]}]}  # NaN/Inf metrics (kept for pruning, never written)
```

The expectations are written here from the documented rules (docs/collector.md), independently of
the parser's code.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
T0 = "2026-03-01T12:00:00Z"
ENTRIES: dict[str, dict[str, Any]] = {}


def ts(second: int) -> str:
    return f"2026-03-01T12:{second // 60:02d}:{second % 60:02d}Z"


def status(metrics: Any = None, *, when: Any = T0, **extra: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if when is not None:
        out["lastUpdatedTime"] = when
    if metrics is not None:
        out["metrics"] = metrics
    out.update(extra)
    return out


def m(name: Any, value: Any) -> dict[str, Any]:
    return {"name": name, "value": value}


def one(
    key: str,
    description: str,
    trainer_status: Any,
    *,
    crd_valid: bool | None,
    outcome: str = "written",
    reasons: dict[str, int] | None = None,
    kept: dict[str, str] | None = None,
    non_finite: list[str] | None = None,
) -> None:
    expect: dict[str, Any] = {"outcome": outcome}
    if reasons:
        expect["reasons"] = reasons
    if kept is not None:
        expect["kept"] = kept
    if non_finite:
        expect["non_finite"] = non_finite
    ENTRIES[key] = {
        "description": description,
        "crd_valid": crd_valid,
        "sequence": [trainer_status],
        "expect": [expect],
    }


def bad_value(key: str, value: Any, reason: str, description: str, *, crd_valid: bool = True) -> None:
    one(
        key,
        description,
        status([m("loss", "0.5"), m("bad", value)], progressPercentage=50),
        crd_valid=crd_valid,
        reasons={reason: 1},
        kept={"loss": "0.5"},
        non_finite=["bad"] if reason == "non_finite" else None,
    )


def build() -> None:
    # ---- CRD limits at their edges
    many = [m(f"m{i:03d}", f"{i}.5") for i in range(256)]
    one(
        "limit_256_metrics",
        "exactly 256 metrics (the CRD maximum)",
        status(many),
        crd_valid=True,
        kept={f"m{i:03d}": f"{i}.5" for i in range(256)},
    )
    one(
        "limit_257_metrics",
        "257 metrics: the 257th is rejected, the first 256 kept",
        status([*many, m("loss", "0.1")]),
        crd_valid=False,
        reasons={"too_many": 1},
        kept={f"m{i:03d}": f"{i}.5" for i in range(256)},
    )
    one(
        "limit_name_64",
        "a 64-character name",
        status([m("n" * 64, "1")]),
        crd_valid=True,
        kept={"n" * 64: "1"},
    )
    one(
        "limit_name_65",
        "a 65-character name",
        status([m("n" * 65, "1"), m("loss", "2")]),
        crd_valid=False,
        reasons={"invalid_name": 1},
        kept={"loss": "2"},
    )
    one(
        "limit_value_64",
        "a 64-character value (a 64-digit number)",
        status([m("big", "9" * 64)]),
        crd_valid=True,
        kept={"big": "9" * 64},
    )
    bad_value("limit_value_65", "9" * 65, "too_long", "a 65-character value", crd_valid=False)
    one(
        "limit_empty_name",
        "an empty name",
        status([m("", "1"), m("loss", "2")]),
        crd_valid=False,
        reasons={"invalid_name": 1},
        kept={"loss": "2"},
    )
    bad_value("limit_empty_value", "", "empty", "an empty value", crd_valid=False)
    for progress, valid in ((-1, False), (0, True), (100, True), (101, False)):
        one(
            f"limit_progress_{progress}".replace("-", "minus"),
            f"progressPercentage {progress}",
            status([m("loss", "1")], progressPercentage=progress),
            crd_valid=valid,
            reasons=None if valid else {"out_of_range": 1},
            kept={"loss": "1"},
        )
    for eta, valid in ((-1, False), (0, True), (2**31 - 1, True), (2**31, False)):
        one(
            f"limit_eta_{eta}".replace("-", "minus"),
            f"estimatedRemainingSeconds {eta}",
            status([m("loss", "1")], estimatedRemainingSeconds=eta),
            crd_valid=valid,
            reasons=None if valid else {"out_of_range": 1},
            kept={"loss": "1"},
        )

    # ---- not numbers
    for i, (value, reason) in enumerate(
        [
            ("abc", "not_a_number"),
            ("0x10", "not_a_number"),
            ("1_000", "not_a_number"),
            ("0.5s", "not_a_number"),
            ("12%", "not_a_number"),
            ("1,5", "not_a_number"),
            ("e5", "not_a_number"),
            (".", "not_a_number"),
            ("+", "not_a_number"),
            ("1e", "not_a_number"),
            ("--1", "not_a_number"),
            ("1.2.3", "not_a_number"),
            ("true", "not_a_number"),
            ("null", "not_a_number"),
            (" 1.0", "whitespace"),
            ("1.0 ", "whitespace"),
            ("1\n", "whitespace"),
            ("1 000", "whitespace"),
            ("\t", "whitespace"),
        ]
    ):
        bad_value(f"nonnumeric_{i:02d}", value, reason, f"value {value!r}")

    # ---- NaN / Inf spellings, overflow, underflow
    for i, value in enumerate(
        [
            "nan",
            "NaN",
            "NAN",
            "-nan",
            "+nan",
            "inf",
            "Inf",
            "-inf",
            "+inf",
            "Infinity",
            "-Infinity",
            "INFINITY",
            "+infinity",
        ]
    ):
        bad_value(f"nonfinite_{i:02d}", value, "non_finite", f"value {value!r}")
    for i, value in enumerate(["nan(123)", "∞", "-∞", "1.#INF", "NaN%", "inff"]):
        bad_value(f"nonfinite_odd_{i:02d}", value, "not_a_number", f"value {value!r} (not a Go float)")
    for i, value in enumerate(["1e999", "-1e999", "1.8e308"]):
        bad_value(f"huge_overflow_{i}", value, "out_of_range", f"value {value!r} overflows a double")
    for i, value in enumerate(
        [
            "1e308",
            "1.7976931348623157e308",
            "-1.7976931348623157e308",
            "1e-999",
            "4.9e-324",
            "-0",
            "0e0",
            "00012",
            "+.5",
            "5.",
            "123456789012345678901234567890",
        ]
    ):
        one(
            f"huge_ok_{i:02d}",
            f"value {value!r} is a plain decimal",
            status([m("loss", value)]),
            crd_valid=True,
            kept={"loss": value},
        )

    # ---- unicode
    for i, (value, reason) in enumerate(
        [
            ("\u202e1.0", "not_a_number"),  # right-to-left override before the number
            ("1\u200b0", "not_a_number"),  # zero-width space inside (not whitespace for str.isspace)
            ("\ufeff1.0", "not_a_number"),  # byte-order mark
            ("１２３", "not_a_number"),  # full-width digits
            ("١٢", "not_a_number"),  # Arabic-Indic digits
            ("\u00a01.0", "whitespace"),  # no-break space
            ("1.0\u2028", "whitespace"),  # line separator
            ("\udc00", "not_a_number"),  # a lone surrogate (JSON escape)
        ]
    ):
        bad_value(f"unicode_value_{i}", value, reason, f"value {value!r}")
    one(
        "unicode_rtl_name",
        "a right-to-left (Arabic) metric name",
        status([m("خسارة", "0.25")]),
        crd_valid=True,
        kept={"خسارة": "0.25"},
    )
    one(
        "unicode_zero_width_name",
        "a name with a zero-width joiner: a different name than 'loss'",
        status([m("lo\u200dss", "0.25"), m("loss", "0.5")]),
        crd_valid=True,
        kept={"lo\u200dss": "0.25", "loss": "0.5"},
    )
    one(
        "unicode_emoji_name",
        "a name outside the BMP (a valid surrogate pair in JSON)",
        status([m("\U0001f525loss", "0.25")]),
        crd_valid=True,
        kept={"\U0001f525loss": "0.25"},
    )
    one(
        "unicode_lone_surrogate_name",
        "a name holding a lone surrogate escape (cannot be UTF-8 encoded)",
        status([m("\ud800loss", "0.25"), m("loss", "0.5")]),
        crd_valid=False,
        reasons={"invalid_name": 1},
        kept={"loss": "0.5"},
    )
    one(
        "unicode_64_astral",
        "64 astral characters (128 UTF-16 units): 64 characters for the CRD",
        status([m("\U0001f600" * 64, "1")]),
        crd_valid=True,
        kept={"\U0001f600" * 64: "1"},
    )
    one(
        "unicode_nul_name",
        "a name holding NUL",
        status([m("lo\u0000ss", "1"), m("loss", "2")]),
        crd_valid=True,
        kept={"lo\u0000ss": "1", "loss": "2"},
    )

    # ---- duplicates, reserved names
    one(
        "duplicate_names",
        "the same name twice with different values: both rejected",
        status([m("loss", "0.5"), m("loss", "0.7"), m("acc", "0.9")]),
        crd_valid=True,
        reasons={"duplicate_name": 2},
        kept={"acc": "0.9"},
    )
    one(
        "duplicate_same_value",
        "the same name three times, same value: all rejected",
        status([m("loss", "0.5")] * 3 + [m("acc", "0.9")]),
        crd_valid=True,
        reasons={"duplicate_name": 3},
        kept={"acc": "0.9"},
    )
    one(
        "reserved_name",
        "a user metric under the collector's trainjob/ prefix",
        status([m("trainjob/progress", "99"), m("trainjob/seq", "0"), m("loss", "0.5")]),
        crd_valid=True,
        reasons={"reserved_name": 2},
        kept={"loss": "0.5"},
    )

    # ---- time
    one(
        "time_missing",
        "no lastUpdatedTime",
        status([m("loss", "1")], when=None),
        crd_valid=False,
        outcome="invalid",
    )
    for i, when in enumerate(
        [
            "",
            "yesterday",
            "2026-13-01T00:00:00Z",
            "2026-03-01 12:00:00",
            "2026-03-01T12:00:00",
            "2026-02-30T00:00:00Z",
            "12:00:00Z",
            "2026-03-01t12:00:00z",  # lowercase: Go's time.Parse(RFC3339) refuses it
            "0001-01-01T00:30:00+01:00",
            "9999-12-31T23:30:00-01:00",
        ]
    ):  # UTC out of range  # lowercase: Go's time.Parse(RFC3339) refuses it
        one(
            f"time_garbage_{i}",
            f"lastUpdatedTime {when!r}",
            status([m("loss", "1")], when=when),
            crd_valid=False,
            outcome="invalid",
        )
        if when == "2026-03-01t12:00:00z":
            # The CRD's format check (go-openapi strfmt) lower-cases before matching, so the API server
            # accepts it; Go's metav1.Time (the status server) and TrainerStatus refuse it.
            ENTRIES[f"time_garbage_{i}"]["standin_valid"] = True
    for i, when in enumerate([12345, True, ["2026-03-01T12:00:00Z"], {"seconds": 1}]):
        one(
            f"time_wrong_type_{i}",
            f"lastUpdatedTime of type {type(when).__name__}",
            status([m("loss", "1")], when=when),
            crd_valid=False,
            outcome="invalid",
        )
    for i, when in enumerate(
        ["2026-03-01T12:00:00.123456789+05:30", "0001-01-01T00:00:00Z", "9999-12-31T23:59:59Z"]
    ):
        one(
            f"time_edge_{i}",
            f"lastUpdatedTime {when!r} (valid RFC 3339)",
            status([m("loss", "1")], when=when),
            crd_valid=True,
            kept={"loss": "1"},
        )
    ENTRIES["time_backwards"] = {
        "description": "time goes backwards: the earlier snapshot is stale, later ones continue",
        "crd_valid": True,
        "sequence": [
            status([m("loss", "0.9")], when=ts(10)),
            status([m("loss", "0.8")], when=ts(20)),
            status([m("loss", "0.7")], when=ts(15)),
            status([m("loss", "0.8")], when=ts(20)),
            status([m("loss", "0.6")], when=ts(21)),
        ],
        "expect": [
            {"outcome": "written", "kept": {"loss": "0.9"}},
            {"outcome": "written", "kept": {"loss": "0.8"}},
            {"outcome": "stale"},
            {"outcome": "repeat"},
            {"outcome": "written", "kept": {"loss": "0.6"}},
        ],
    }
    ENTRIES["time_same_second"] = {
        "description": "three different snapshots within one second, then an exact repeat",
        "crd_valid": True,
        "sequence": [
            status([m("loss", "0.9")], when=ts(5)),
            status([m("loss", "0.8")], when="2026-03-01T12:00:05.4Z"),
            status([m("loss", "0.7")], when="2026-03-01T12:00:05.9Z"),
            status([m("loss", "0.7")], when=ts(5)),
        ],
        "expect": [
            {"outcome": "written", "kept": {"loss": "0.9"}},
            {"outcome": "written", "kept": {"loss": "0.8"}},
            {"outcome": "written", "kept": {"loss": "0.7"}},
            {"outcome": "repeat"},
        ],
    }

    # ---- wrong JSON types
    one(
        "type_metrics_object",
        "metrics is an object, not a list",
        status({"loss": "1"}),
        crd_valid=False,
        reasons={"invalid_entry": 1},
        kept={},
    )
    one(
        "type_metrics_string",
        "metrics is a string",
        status("loss=1"),
        crd_valid=False,
        reasons={"invalid_entry": 1},
        kept={},
    )
    one(
        "type_metric_entries",
        "entries that are not objects",
        status(["loss", 1, None, [1], m("acc", "0.9")]),
        crd_valid=False,
        reasons={"invalid_entry": 4},
        kept={"acc": "0.9"},
    )
    one(
        "type_value_number",
        "a numeric value (must be a string)",
        status([m("loss", 0.5), m("acc", "0.9")]),
        crd_valid=False,
        reasons={"wrong_type": 1},
        kept={"acc": "0.9"},
    )
    one(
        "type_value_null_bool",
        "null and boolean values",
        status([m("loss", None), m("x", True), m("acc", "0.9")]),
        crd_valid=False,
        reasons={"wrong_type": 2},
        kept={"acc": "0.9"},
    )
    one(
        "type_name_number",
        "a numeric name",
        status([m(7, "1"), m("acc", "0.9")]),
        crd_valid=False,
        reasons={"invalid_name": 1},
        kept={"acc": "0.9"},
    )
    one(
        "type_missing_fields",
        "entries without name or value",
        status([{"name": "loss"}, {"value": "1"}, m("acc", "1")]),
        crd_valid=False,
        reasons={"wrong_type": 1, "invalid_name": 1},
        kept={"acc": "1"},
    )
    one(
        "type_progress_string",
        "progressPercentage as a string",
        status([m("loss", "1")], progressPercentage="50"),
        crd_valid=False,
        reasons={"wrong_type": 1},
        kept={"loss": "1"},
    )
    one(
        "type_progress_fraction",
        "progressPercentage 50.5",
        status([m("loss", "1")], progressPercentage=50.5),
        crd_valid=False,
        reasons={"wrong_type": 1},
        kept={"loss": "1"},
    )
    one(
        "type_eta_bool",
        "estimatedRemainingSeconds true",
        status([m("loss", "1")], estimatedRemainingSeconds=True),
        crd_valid=False,
        reasons={"wrong_type": 1},
        kept={"loss": "1"},
    )
    one(
        "type_progress_huge",
        "progressPercentage 10**30",
        status([m("loss", "1")], progressPercentage=10**30),
        crd_valid=False,
        reasons={"out_of_range": 1},
        kept={"loss": "1"},
    )
    one(
        "type_unknown_fields",
        "unknown fields are ignored (the API server prunes them)",
        status(
            [
                m(
                    "loss",
                    "1",
                )
                | {"unit": "s"}
            ],
            extra={"a": 1},
        ),
        crd_valid=True,
        kept={"loss": "1"},
    )
    for i, raw in enumerate([["not", "an", "object"], "trainerStatus", 42]):
        one(
            f"type_status_{i}",
            f"trainerStatus itself is a {type(raw).__name__}",
            raw,
            crd_valid=None,
            outcome="invalid",
        )
    one(
        "type_deep_nesting",
        "a value nested 200 levels deep",
        status([m("loss", _nest(200)), m("acc", "1")]),
        crd_valid=False,
        reasons={"wrong_type": 1},
        kept={"acc": "1"},
    )
    one(
        "type_huge_name",
        "a 10,000-character name",
        status([m("x" * 10_000, "1"), m("acc", "1")]),
        crd_valid=False,
        reasons={"invalid_name": 1},
        kept={"acc": "1"},
    )


def _nest(depth: int) -> Any:
    value: Any = "1"
    for _ in range(depth):
        value = {"v": value}
    return value


def _has_lone_surrogate(value: Any) -> bool:
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return True
        return False
    if isinstance(value, dict):
        return any(_has_lone_surrogate(k) or _has_lone_surrogate(v) for k, v in value.items())
    if isinstance(value, list):
        return any(_has_lone_surrogate(v) for v in value)
    return False


def main() -> None:
    build()
    for entry in ENTRIES.values():
        # The strict model (pydantic) refuses strings that are not valid Unicode; Go's JSON decoder
        # would replace a lone surrogate by U+FFFD instead (see docs/reliability.md).
        if _has_lone_surrogate(entry["sequence"]):
            entry["crd_valid"] = False
    for old in HERE.glob("*.json"):
        old.unlink()
    for key, entry in ENTRIES.items():
        (HERE / f"{key}.json").write_text(
            json.dumps(entry, indent=None if key == "type_deep_nesting" else 1, ensure_ascii=True) + "\n"
        )
    print(f"{len(ENTRIES)} corpus entries written to {HERE}")


if __name__ == "__main__":
    main()
