"""A deliberately tiny subset of CEL, enough for the rule shapes the reference CRDs use.

Supported shapes (anything else is reported as unsupported and skipped, never guessed):

- ``has(self.field)``
- ``self == oldSelf`` (a transition rule: only evaluated on update when the old value exists)
- ``self OP N`` with OP one of ``== != >= > <= <`` and N an integer literal
- ``self in ['a', "b", ...]``
- ``self == '' || self.matches('regex')``
"""

from __future__ import annotations

import ast
import operator
import re
from collections.abc import Callable
from typing import Any

# (value, old value or _MISSING) -> True (passes), False (fails)
Rule = Callable[[Any, Any], bool]
MISSING: Any = object()

_HAS = re.compile(r"^has\(self\.([A-Za-z_][A-Za-z0-9_]*)\)$")
_IMMUTABLE = re.compile(r"^self\s*==\s*oldSelf$")
_COMPARE = re.compile(r"^self\s*(==|!=|>=|<=|>|<)\s*(-?\d+)$")
_IN = re.compile(r"^self\s+in\s+(\[.*\])$")
_EMPTY_OR_MATCHES = re.compile(r"""^self\s*==\s*''\s*\|\|\s*self\.matches\('((?:[^'\\]|\\.)*)'\)$""")

_OPS: dict[str, Callable[[Any, Any], bool]] = {
    "==": operator.eq,
    "!=": operator.ne,
    ">=": operator.ge,
    "<=": operator.le,
    ">": operator.gt,
    "<": operator.lt,
}


def compile_rule(rule: str) -> Rule | None:
    """Return a checker for ``rule``, or None when the shape is outside the supported subset."""
    text = rule.strip()
    if m := _HAS.match(text):
        name = m.group(1)
        return lambda value, _old: isinstance(value, dict) and name in value
    if _IMMUTABLE.match(text):
        return lambda value, old: old is MISSING or value == old
    if m := _COMPARE.match(text):
        op, bound = _OPS[m.group(1)], int(m.group(2))
        return lambda value, _old: isinstance(value, int | float) and op(value, bound)
    if m := _IN.match(text):
        try:
            allowed = ast.literal_eval(m.group(1))
        except (ValueError, SyntaxError):
            return None
        return lambda value, _old: value in allowed
    if m := _EMPTY_OR_MATCHES.match(text):
        pattern = re.compile(m.group(1).replace("\\\\", "\\"))
        return lambda value, _old: (
            value == "" or (isinstance(value, str) and pattern.search(value) is not None)
        )
    return None
