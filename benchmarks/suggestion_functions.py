"""Test functions for the suggestion benchmark, all over ONE 5-parameter Katib search space.

The space mixes every Katib parameter kind: a uniform double ``x`` in [0, 1], a logUniform double
``scale`` in [1e-5, 1], an int ``k`` in [1, 16], a categorical ``kind`` (a, b, c, d) and a discrete
``level`` (0.1 .. 0.9). Every function is minimised and takes the typed assignment and an optional
``numpy`` generator for the noise (None: the noise-free value, used to score what was found).

- ``hartmann5``: the Hartmann-6 function (Dixon and Szegő) with its sixth input fixed at its optimum
  (0.6573) and the five others mapped from the space (``scale`` on a log axis, ``k`` and the
  categorical onto [0, 1]). Optimum over this space about -3.30.
- ``branin``: Branin-Hoo on (``x``, ``scale`` on a log axis) plus extra terms for ``k``, ``kind`` and
  ``level``, with Gaussian noise (sd 1). Noise-free optimum about 0.42.
- ``ml``: a validation-loss-like surface: the best learning rate (``scale``) depends on the
  optimizer (``kind``), too large a rate blows up, ``k`` (depth) trades under- for over-fitting that
  dropout (``x``) must match, momentum (``level``) matters mostly for SGD; multiplicative log-normal
  noise (sd 0.15) plus a small additive term. Noise-free optimum about 0.047.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

KINDS = ("a", "b", "c", "d")
LEVELS = ("0.1", "0.3", "0.5", "0.7", "0.9")

Params = Mapping[str, Any]
Function = Callable[[Params, "np.random.Generator | None"], float]

_H6_A = np.array(
    [
        [10, 3, 17, 3.5, 1.7, 8],
        [0.05, 10, 17, 0.1, 8, 14],
        [3, 3.5, 1.7, 10, 17, 8],
        [17, 8, 0.05, 10, 0.1, 14],
    ]
)
_H6_P = 1e-4 * np.array(
    [
        [1312, 1696, 5569, 124, 8283, 5886],
        [2329, 4135, 8307, 3736, 1004, 9991],
        [2348, 1451, 3522, 2883, 3047, 6650],
        [4047, 8828, 8732, 5743, 1091, 381],
    ]
)
_H6_ALPHA = np.array([1.0, 1.2, 3.0, 3.2])
_KIND_UNIT = {"a": 0.05, "b": 0.3, "c": 0.55, "d": 0.8}
_LR_OPT = {"a": -3.0, "b": -1.0, "c": -3.5, "d": -2.0}  # log10 of the best rate per optimizer


def _unit_scale(scale: float) -> float:
    return (math.log10(scale) + 5.0) / 5.0  # 1e-5 .. 1 -> 0 .. 1


def hartmann5(p: Params, rng: np.random.Generator | None = None) -> float:
    z = np.array(
        [
            p["x"],
            _unit_scale(p["scale"]),
            (p["k"] - 1) / 15.0,
            _KIND_UNIT[p["kind"]],
            float(p["level"]),
            0.6573,
        ]
    )
    return float(-np.sum(_H6_ALPHA * np.exp(-np.sum(_H6_A * (z - _H6_P) ** 2, axis=1))))


def branin(p: Params, rng: np.random.Generator | None = None) -> float:
    u = -5.0 + 15.0 * p["x"]
    v = 15.0 * _unit_scale(p["scale"])
    b = (v - 5.1 / (4 * math.pi**2) * u * u + 5 / math.pi * u - 6) ** 2
    b += 10 * (1 - 1 / (8 * math.pi)) * math.cos(u) + 10
    extra = ((p["k"] - 5) / 4.0) ** 2 + {"a": 0.0, "b": 0.5, "c": 1.0, "d": 2.0}[p["kind"]]
    extra += 4 * (float(p["level"]) - 0.3) ** 2
    return b + extra + (float(rng.normal(0, 1.0)) if rng is not None else 0.0)


def ml(p: Params, rng: np.random.Generator | None = None) -> float:
    d = math.log10(p["scale"]) - _LR_OPT[p["kind"]]
    lr_term = 0.08 * d * d + (0.5 * (d - 1.0) ** 2 if d > 1.0 else 0.0)
    k = p["k"]
    drop_opt = min(0.05 + 0.04 * k, 0.6)
    over = 0.004 * max(k - 3, 0) * (1 + 8 * max(drop_opt - p["x"], 0)) + 0.1 * max(p["x"] - drop_opt, 0) ** 2
    level = float(p["level"])
    momentum = 0.05 * (level - 0.9) ** 2 if p["kind"] == "b" else 0.01 * (level - 0.5) ** 2
    base = {"a": 0.0, "b": 0.005, "c": 0.003, "d": 0.01}[p["kind"]]
    value = 0.01 + base + lr_term + 0.15 / k + over + momentum
    if rng is not None:
        value = value * math.exp(float(rng.normal(0, 0.15))) + abs(float(rng.normal(0, 0.003)))
    return value


FUNCTIONS: dict[str, Function] = {"hartmann5": hartmann5, "branin": branin, "ml": ml}


def typed(assignments: Mapping[str, str]) -> dict[str, Any]:
    """Katib's assignment strings -> the typed parameters the functions take."""
    return {
        "x": float(assignments["x"]),
        "scale": float(assignments["scale"]),
        "k": int(float(assignments["k"])),
        "kind": assignments["kind"],
        "level": assignments["level"],
    }
