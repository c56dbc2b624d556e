"""Label selectors (equality and set based) and the metadata field selectors."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from tests.kubestandin._resources import ApiError

_TERM = re.compile(
    r"^\s*(?P<neg>!)?\s*(?P<key>[A-Za-z0-9_./-]+)\s*"
    r"(?:(?P<op>==|!=|=)\s*(?P<value>[A-Za-z0-9_.-]*)|\s+(?P<setop>in|notin)\s*\((?P<values>[^)]*)\))?\s*$"
)
_FIELDS = {"metadata.name": ("name",), "metadata.namespace": ("namespace",)}


def _split(text: str) -> list[str]:
    terms, depth, current = [], 0, ""
    for char in text:
        depth += char == "("
        depth -= char == ")"
        if char == "," and depth == 0:
            terms.append(current)
            current = ""
        else:
            current += char
    terms.append(current)
    return [t for t in terms if t.strip()]


@dataclass(frozen=True)
class Selector:
    labels: tuple[tuple[str, str, tuple[str, ...]], ...] = ()  # (key, op, values)
    fields: tuple[tuple[str, str, str], ...] = field(default=())  # (meta key, op, value)

    @classmethod
    def parse(cls, label_selector: str | None, field_selector: str | None) -> Selector:
        labels: list[tuple[str, str, tuple[str, ...]]] = []
        for term in _split(label_selector or ""):
            m = _TERM.match(term)
            if not m:
                raise ApiError(400, "BadRequest", f"unable to parse requirement: {term!r}")
            key = m.group("key")
            if m.group("neg"):
                labels.append((key, "!exists", ()))
            elif m.group("op"):
                op = "!=" if m.group("op") == "!=" else "="
                labels.append((key, op, (m.group("value"),)))
            elif m.group("setop"):
                values = tuple(v.strip() for v in m.group("values").split(",") if v.strip())
                labels.append((key, m.group("setop"), values))
            else:
                labels.append((key, "exists", ()))
        fields: list[tuple[str, str, str]] = []
        for term in _split(field_selector or ""):
            m = re.match(r"^\s*([A-Za-z.]+)\s*(==|!=|=)\s*(.*?)\s*$", term)
            if not m or m.group(1) not in _FIELDS:
                raise ApiError(400, "BadRequest", f'field label not supported: "{term.strip()}"')
            fields.append((_FIELDS[m.group(1)][0], "!=" if m.group(2) == "!=" else "=", m.group(3)))
        return cls(tuple(labels), tuple(fields))

    def matches(self, obj: dict[str, Any]) -> bool:
        meta = obj.get("metadata") or {}
        labels = meta.get("labels") or {}
        for key, op, values in self.labels:
            if not _label_ok(labels, key, op, values):
                return False
        return all((meta.get(key, "") == value) == (op == "=") for key, op, value in self.fields)


def _label_ok(labels: dict[str, str], key: str, op: str, values: tuple[str, ...]) -> bool:
    present = key in labels
    if op == "exists":
        return present
    if op == "!exists":
        return not present
    if op == "=":
        return present and labels[key] == values[0]
    if op == "!=":
        return not present or labels[key] != values[0]
    if op == "in":
        return present and labels[key] in values
    return not present or labels[key] not in values  # notin
