"""A tiny GJSON evaluator (the subset our trial templates use) and the successCondition design.

Katib evaluates a trial template's ``successCondition`` / ``failureCondition`` with
github.com/tidwall/gjson (v1.14) over the whole job object, metadata included, and counts the
condition as met when the result is an object or a non-empty array (it then unmarshals the first
element into {condition, reason, message}). No Go toolchain runs here, so the evaluator below
implements gjson's documented semantics for: keys with ``\\.`` escapes, array indexes, ``#``,
``#(query)`` (first match), ``#(query)#`` (all matches), nested queries, ``.`` (maps over the
elements after ``#``/``#(...)#``) vs ``|`` (applies to the result), and the ``..`` JSON-lines prefix.
Its own tests replay examples from gjson's SYNTAX.md and README.
"""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

MISSING: Any = type("Missing", (), {"__repr__": lambda self: "MISSING"})()
_OPS = ("==", "!=", "<=", ">=", "!%", "=", "<", ">", "%")

#: The canonical trial-template conditions (docs/deploy.md, "successCondition").
MARKER_ANNOTATION = "katib-progress.kubeflow.org/final-metrics"
MARKER_VALUE = "written"
SUCCESS_CONDITION = (
    r'..#(metadata.annotations.katib-progress\.kubeflow\.org/final-metrics=="written")#'
    r'|0.status.conditions.#(type=="Complete")#|#(status=="True")#'
)
STOCK_SUCCESS_CONDITION = 'status.conditions.#(type=="Complete")#|#(status=="True")#'
FAILURE_CONDITION = 'status.conditions.#(type=="Failed")#|#(status=="True")#'


def _split(path: str) -> list[tuple[str, str]]:
    """Components with the separator before each ('' first, then '.' or '|')."""
    parts: list[tuple[str, str]] = []
    sep, buf, depth, i = "", "", 0, 0
    while i < len(path):
        ch = path[i]
        if ch == "\\" and i + 1 < len(path):
            buf += path[i : i + 2]
            i += 2
            continue
        if ch == '"' and depth > 0:
            end = i + 1
            while end < len(path) and path[end] != '"':
                end += 2 if path[end] == "\\" else 1
            buf += path[i : end + 1]
            i = end + 1
            continue
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        if ch in ".|" and depth == 0:
            parts.append((sep, buf))
            sep, buf = ch, ""
        else:
            buf += ch
        i += 1
    parts.append((sep, buf))
    return parts


def _unescape(key: str) -> str:
    out, i = "", 0
    while i < len(key):
        if key[i] == "\\" and i + 1 < len(key):
            i += 1
        out += key[i]
        i += 1
    return out


def _literal(text: str) -> Any:
    text = text.strip()
    if len(text) >= 2 and text[0] == text[-1] == '"':
        return json.loads(text)
    if text in ("true", "false"):
        return text == "true"
    return float(text)


def _parse_query(inner: str) -> tuple[str, str | None, Any]:
    depth, i, quoted = 0, 0, False
    while i < len(inner):
        ch = inner[i]
        if ch == "\\":
            i += 2
            continue
        if ch == '"':
            quoted = not quoted
        elif not quoted and ch == "(":
            depth += 1
        elif not quoted and ch == ")":
            depth -= 1
        elif not quoted and depth == 0:
            for op in _OPS:
                if inner.startswith(op, i):
                    return inner[:i].strip(), op, _literal(inner[i + len(op) :])
        i += 1
    return inner.strip(), None, None


def _matches(element: Any, inner: str) -> bool:
    path, op, want = _parse_query(inner)
    got = _eval(element, _split(path)) if path else element
    if got is MISSING:
        return False
    if op is None:
        return True
    if op in ("==", "="):
        return bool(got == want)
    if op == "!=":
        return bool(got != want)
    numbers = all(isinstance(v, int | float) and not isinstance(v, bool) for v in (got, want))
    if not numbers and not (isinstance(got, str) and isinstance(want, str)):
        return False
    return {"<": got < want, "<=": got <= want, ">": got > want, ">=": got >= want}.get(op, False)


def _split_at_pipe(rest: list[tuple[str, str]]) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    for i, (sep, _tok) in enumerate(rest):
        if sep == "|":
            return rest[:i], rest[i:]
    return rest, []


def _map_rest(items: list[Any], rest: list[tuple[str, str]]) -> Any:
    """``#``/``#(...)#`` followed by ``.path``: apply path to each element, then the ``|`` tail."""
    if rest and rest[0][0] == ".":
        mapped, tail = _split_at_pipe(rest)
        mapped = [("", mapped[0][1]), *mapped[1:]]
        items = [r for r in (_eval(el, mapped) for el in items) if r is not MISSING]
        return _eval(items, tail)
    return _eval(items, rest)


def _eval(value: Any, comps: list[tuple[str, str]]) -> Any:
    if not comps:
        return value
    (_sep, tok), rest = comps[0], comps[1:]
    if tok == "#":
        if not isinstance(value, list):
            return MISSING
        if rest and rest[0][0] == ".":
            return _map_rest(value, rest)
        return _eval(len(value), rest)
    if tok.startswith("#(") and tok.endswith(")#"):
        if not isinstance(value, list):
            return MISSING
        return _map_rest([el for el in value if _matches(el, tok[2:-2])], rest)
    if tok.startswith("#(") and tok.endswith(")"):
        if not isinstance(value, list):
            return MISSING
        for el in value:
            if _matches(el, tok[2:-1]):
                return _eval(el, rest)
        return MISSING
    if isinstance(value, dict):
        key = _unescape(tok)
        return _eval(value[key], rest) if key in value else MISSING
    if isinstance(value, list) and tok.isdigit():
        index = int(tok)
        return _eval(value[index], rest) if index < len(value) else MISSING
    return MISSING


def gjson_get(doc: Any, path: str) -> Any:
    """Evaluate ``path`` over ``doc`` (a JSON value); ``..path`` treats doc as JSON lines."""
    if path.startswith(".."):
        lines = doc if isinstance(doc, list) else [doc]
        return _eval(lines, _split(path[2:]))
    return _eval(doc, _split(path))


def katib_condition_met(job: dict[str, Any], condition: str) -> bool:
    """Katib's rule: met when the result is an object, or a non-empty array of objects."""
    result = gjson_get(job, condition)
    if isinstance(result, dict):
        return True
    if isinstance(result, list) and result:
        assert isinstance(result[0], dict), f"Katib cannot unmarshal {result[0]!r} into a job status"
        return True
    return False


# ---- the evaluator replays gjson's documented examples ----------------------------------------

_DOC: dict[str, Any] = {
    "name": {"first": "Tom", "last": "Anderson"},
    "age": 37,
    "children": ["Sara", "Alex", "Jack"],
    "fav.movie": "Deer Hunter",
    "friends": [
        {"first": "Dale", "last": "Murphy", "age": 44, "nets": ["ig", "fb", "tw"]},
        {"first": "Roger", "last": "Craig", "age": 68, "nets": ["fb", "tw"]},
        {"first": "Jane", "last": "Murphy", "age": 47, "nets": ["ig", "tw"]},
    ],
}


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("name.last", "Anderson"),
        ("children.1", "Alex"),
        (r"fav\.movie", "Deer Hunter"),
        ("friends.#", 3),
        ("friends.#.age", [44, 68, 47]),
        ('friends.#(last=="Murphy").first', "Dale"),
        ('friends.#(last=="Murphy")#.first', ["Dale", "Jane"]),
        ("friends.#(age>45)#.last", ["Craig", "Murphy"]),
        ('friends.#(nets.#(=="fb"))#.first', ["Dale", "Roger"]),
        ("friends|0.first", "Dale"),
        ('friends.#(last="Murphy")#|first', MISSING),
        ('friends.#(last="Murphy")#.0', []),
        ('friends.#(last="Murphy")#|0', _DOC["friends"][0]),
        ('friends.#(last="Murphy")#|#', 2),
        ("nope.deeper", MISSING),
    ],
)
def test_evaluator_replays_gjson_syntax_examples(path: str, expected: Any) -> None:
    assert gjson_get(_DOC, path) == expected


def test_evaluator_json_lines_prefix() -> None:
    lines = [{"name": "Gilbert", "age": 61}, {"name": "Alexa", "age": 34}, {"name": "May", "age": 57}]
    assert gjson_get(lines, "..#") == 3
    assert gjson_get(lines, "..1") == {"name": "Alexa", "age": 34}
    assert gjson_get(lines, '..#(name="May").age') == 57
    assert gjson_get(lines, "..#(age>40)#|#") == 2


# ---- the successCondition design ---------------------------------------------------------------


def _condition(kind: str, status: str) -> dict[str, str]:
    return {
        "type": kind,
        "status": status,
        "reason": f"JobSet{kind}" if status == "True" else "Pending",
        "message": f"TrainJob is {kind.lower()}",
        "lastTransitionTime": "2026-01-02T03:04:05Z",
    }


def trainjob(conditions: list[dict[str, str]], marker: str | None = None) -> dict[str, Any]:
    job: dict[str, Any] = {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": "exp-abcdefgh", "namespace": "ns", "annotations": {"other": "x"}},
        "spec": {"runtimeRef": {"name": "torch-distributed"}},
        "status": {"conditions": conditions},
    }
    if marker is not None:
        job["metadata"]["annotations"][MARKER_ANNOTATION] = marker
    return job


@pytest.mark.parametrize(
    ("conditions", "marker", "met"),
    [
        ([], None, False),
        ([_condition("Complete", "True")], None, False),  # the race the marker closes
        ([], MARKER_VALUE, False),
        ([_condition("Complete", "False")], MARKER_VALUE, False),
        ([_condition("Complete", "True")], "pending", False),
        ([_condition("Failed", "True")], MARKER_VALUE, False),
        ([_condition("Complete", "True")], MARKER_VALUE, True),
        ([_condition("Created", "True"), _condition("Complete", "True")], MARKER_VALUE, True),
    ],
)
def test_success_condition_needs_complete_and_marker(
    conditions: list[dict[str, str]], marker: str | None, met: bool
) -> None:
    job = trainjob(conditions, marker)
    before = copy.deepcopy(job)
    assert katib_condition_met(job, SUCCESS_CONDITION) is met
    assert job == before


def test_success_condition_hands_katib_the_complete_condition() -> None:
    job = trainjob([_condition("Created", "True"), _condition("Complete", "True")], MARKER_VALUE)
    result = gjson_get(job, SUCCESS_CONDITION)
    assert result == [_condition("Complete", "True")]  # reason/message flow into the Trial as stock


def test_stock_condition_would_succeed_before_the_final_metrics() -> None:
    job = trainjob([_condition("Complete", "True")])
    assert katib_condition_met(job, STOCK_SUCCESS_CONDITION)
    assert not katib_condition_met(job, SUCCESS_CONDITION)


def test_failure_condition_unaffected_by_marker() -> None:
    assert katib_condition_met(trainjob([_condition("Failed", "True")]), FAILURE_CONDITION)
    assert not katib_condition_met(
        trainjob([_condition("Complete", "True")], MARKER_VALUE), FAILURE_CONDITION
    )
