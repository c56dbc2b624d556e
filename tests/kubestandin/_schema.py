"""CRD structural schema handling: prune, default, normalise metav1 times, validate.

The openAPIV3Schema of a CRD version is turned into a JSON Schema that ``jsonschema`` checks
(``nullable``, ``x-kubernetes-int-or-string``, int32/int64 bounds, RFC 3339 ``date-time``); the
CEL ``x-kubernetes-validations`` are evaluated for the small subset in ``_cel``. Errors come back
as Kubernetes-style causes naming the field path (``status.trainerStatus.progressPercentage``).
"""

from __future__ import annotations

import copy
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import jsonschema

from tests.kubestandin import _cel

_INT_BOUNDS = {"int32": (-(2**31), 2**31 - 1), "int64": (-(2**63), 2**63 - 1)}
_RFC3339 = re.compile(r"^\d{4}-\d{2}-\d{2}[Tt]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})$")
_DROP = {"description", "nullable", "format", "example", "externalDocs", "default"}


@dataclass(frozen=True, slots=True)
class Cause:
    reason: str  # FieldValueRequired, FieldValueInvalid, FieldValueNotSupported, FieldValueTooLong, ...
    field: str
    message: str


def parse_time(value: str) -> datetime | None:
    if not isinstance(value, str) or not _RFC3339.match(value):
        return None
    text = value.upper().replace("Z", "+00:00")
    if "." in text:  # Python's fromisoformat accepts at most microseconds
        head, _, rest = text.partition(".")
        digits = re.match(r"\d+", rest)
        frac = digits.group(0) if digits else ""
        text = head + "." + (frac[:6].ljust(6, "0")) + rest[len(frac) :]
    try:
        moment = datetime.fromisoformat(text)
        moment.astimezone(UTC)  # a zone offset may push it out of Python's range (year 0 or 10000)
    except (ValueError, OverflowError):
        return None
    return moment


def format_time(moment: datetime) -> str:
    """metav1.Time wire format: UTC, whole seconds."""
    # Not strftime: glibc's %Y drops the zero padding of years before 1000 ("1-01-01T00:00:00Z").
    m = moment.astimezone(UTC)
    return f"{m.year:04d}-{m.month:02d}-{m.day:02d}T{m.hour:02d}:{m.minute:02d}:{m.second:02d}Z"


def _format_checker() -> jsonschema.FormatChecker:
    checker = jsonschema.FormatChecker(formats=())
    checker.checks("date-time")(lambda value: not isinstance(value, str) or parse_time(value) is not None)
    return checker


def to_json_schema(node: dict[str, Any]) -> dict[str, Any]:
    """OpenAPI v3 (Kubernetes structural schema dialect) -> JSON Schema draft 7."""
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key in _DROP or key.startswith("x-kubernetes-"):
            continue
        if key == "properties":
            out[key] = {name: to_json_schema(sub) for name, sub in value.items()}
        elif key in ("items", "additionalProperties", "not") and isinstance(value, dict):
            out[key] = to_json_schema(value)
        elif key in ("allOf", "anyOf", "oneOf"):
            out[key] = [to_json_schema(sub) for sub in value]
        else:
            out[key] = value
    fmt = node.get("format")
    if fmt in _INT_BOUNDS and node.get("type") == "integer":
        low, high = _INT_BOUNDS[fmt]
        out.setdefault("minimum", low)
        out.setdefault("maximum", high)
    elif fmt == "date-time":
        out["format"] = "date-time"
    if node.get("x-kubernetes-int-or-string"):
        out.pop("type", None)
        out["anyOf"] = [{"type": "integer"}, {"type": "string"}]
    if node.get("nullable") and "type" in out:
        out["type"] = [out["type"], "null"]
    return out


def _path(parts: Any) -> str:
    text = ""
    for part in parts:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text


def _cause(error: jsonschema.ValidationError) -> Cause:
    field = _path(error.absolute_path)
    value = error.instance
    kind = error.validator
    if kind == "required":
        missing = next((n for n in error.validator_value if n not in (value or {})), "?")
        return Cause("FieldValueRequired", f"{field}.{missing}" if field else missing, "Required value")
    shown = repr(value) if not isinstance(value, dict | list) else type(value).__name__
    if kind == "enum":
        allowed = ", ".join(f'"{v}"' for v in error.validator_value)
        return Cause(
            "FieldValueNotSupported", field, f"Unsupported value: {shown}: supported values: {allowed}"
        )
    if kind in ("maxLength", "maxItems", "maxProperties"):
        what = "bytes" if kind == "maxLength" else "items"
        return Cause(
            "FieldValueTooLong" if kind == "maxLength" else "FieldValueTooMany",
            field,
            f"Too long: may not be more than {error.validator_value} {what}",
        )
    messages = {
        "maximum": f"should be less than or equal to {error.validator_value}",
        "minimum": f"should be greater than or equal to {error.validator_value}",
        "minLength": f"should be at least {error.validator_value} chars long",
        "minItems": f"should have at least {error.validator_value} items",
        "minProperties": f"should have at least {error.validator_value} properties",
        "pattern": f"should match '{error.validator_value}'",
        "type": f"must be of type {error.validator_value}",
        "format": f"must be of type {error.validator_value}",
    }
    detail = messages.get(str(kind), error.message)
    return Cause("FieldValueInvalid", field, f"Invalid value: {shown}: {field} in body {detail}")


class CrdSchema:
    """One CRD version's openAPIV3Schema with the server-side behaviours built on it."""

    def __init__(self, openapi: dict[str, Any]) -> None:
        self.openapi = openapi
        self._validator = jsonschema.Draft7Validator(
            to_json_schema(openapi), format_checker=_format_checker()
        )
        self.unsupported_rules: list[str] = []
        self._rules: dict[str, _cel.Rule | None] = {}
        self._collect_rules(openapi)

    def _collect_rules(self, node: dict[str, Any]) -> None:
        for entry in node.get("x-kubernetes-validations", ()):
            rule = entry["rule"]
            if rule not in self._rules:
                self._rules[rule] = _cel.compile_rule(rule)
                if self._rules[rule] is None:
                    self.unsupported_rules.append(rule)
        for sub in node.get("properties", {}).values():
            self._collect_rules(sub)
        for key in ("items", "additionalProperties"):
            if isinstance(node.get(key), dict):
                self._collect_rules(node[key])

    # -- write-path transforms (all return new objects; inputs are never mutated) --------------

    def prune(self, obj: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
        """Drop fields the schema does not know (as the API server does); return the dropped paths."""
        dropped: list[str] = []
        pruned = _prune(copy.deepcopy(obj), self.openapi, "", dropped, root=True)
        return pruned, dropped

    def apply_defaults(self, obj: dict[str, Any]) -> dict[str, Any]:
        result = copy.deepcopy(obj)
        _default(result, self.openapi)
        return result

    def normalise_times(self, obj: dict[str, Any]) -> dict[str, Any]:
        """metav1.Time fields (format date-time) travel at one-second precision, in UTC."""
        return _times(copy.deepcopy(obj), self.openapi)

    def validate(self, obj: dict[str, Any], old: dict[str, Any] | None) -> list[Cause]:
        causes = [_cause(err) for err in sorted(self._validator.iter_errors(obj), key=lambda e: e.path)]
        self._check_rules(obj, _cel.MISSING if old is None else old, self.openapi, "", causes)
        return causes

    def _check_rules(self, value: Any, old: Any, node: dict[str, Any], field: str, out: list[Cause]) -> None:
        for entry in node.get("x-kubernetes-validations", ()):
            check = self._rules.get(entry["rule"])
            if check is not None and not check(value, old):
                message = entry.get("message") or f"failed rule: {entry['rule']}"
                out.append(
                    Cause("FieldValueInvalid", field, f"Invalid value: {type(value).__name__}: {message}")
                )
        if isinstance(value, dict):
            props = node.get("properties", {})
            extra = node.get("additionalProperties")
            for key, sub_value in value.items():
                sub = props.get(key) or (extra if isinstance(extra, dict) else None)
                if sub is None:
                    continue
                sub_old = old.get(key, _cel.MISSING) if isinstance(old, dict) else _cel.MISSING
                self._check_rules(sub_value, sub_old, sub, f"{field}.{key}" if field else key, out)
        elif isinstance(value, list) and isinstance(node.get("items"), dict):
            # Items are not correlated with the old list: transition rules inside lists are skipped.
            for index, item in enumerate(value):
                self._check_rules(item, _cel.MISSING, node["items"], f"{field}[{index}]", out)


def _prune(value: Any, node: dict[str, Any], field: str, dropped: list[str], *, root: bool = False) -> Any:
    if isinstance(value, dict):
        props = node.get("properties", {})
        extra = node.get("additionalProperties")
        keep_unknown = node.get("x-kubernetes-preserve-unknown-fields") or extra is True
        for key in list(value):
            sub_field = f"{field}.{key}" if field else key
            if root and key in ("apiVersion", "kind", "metadata"):
                continue
            if key in props:
                value[key] = _prune(value[key], props[key], sub_field, dropped)
            elif isinstance(extra, dict):
                value[key] = _prune(value[key], extra, sub_field, dropped)
            elif not keep_unknown and (props or "type" in node):
                dropped.append(sub_field)
                del value[key]
    elif isinstance(value, list) and isinstance(node.get("items"), dict):
        return [_prune(item, node["items"], f"{field}[{i}]", dropped) for i, item in enumerate(value)]
    return value


def _default(value: Any, node: dict[str, Any]) -> None:
    if isinstance(value, dict):
        for key, sub in node.get("properties", {}).items():
            if key not in value and "default" in sub:
                value[key] = copy.deepcopy(sub["default"])
            if key in value:
                _default(value[key], sub)
        extra = node.get("additionalProperties")
        if isinstance(extra, dict):
            for sub_value in value.values():
                _default(sub_value, extra)
    elif isinstance(value, list) and isinstance(node.get("items"), dict):
        for item in value:
            _default(item, node["items"])


def _times(value: Any, node: dict[str, Any]) -> Any:
    if node.get("format") == "date-time" and isinstance(value, str):
        moment = parse_time(value)
        return format_time(moment) if moment is not None else value
    if isinstance(value, dict):
        props = node.get("properties", {})
        extra = node.get("additionalProperties")
        for key in value:
            sub = props.get(key) or (extra if isinstance(extra, dict) else None)
            if sub is not None:
                value[key] = _times(value[key], sub)
    elif isinstance(value, list) and isinstance(node.get("items"), dict):
        return [_times(item, node["items"]) for item in value]
    return value
