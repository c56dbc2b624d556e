"""Trial sources for the replay: the bank in seeded random order, and nearest-configuration lookup."""

from __future__ import annotations

import math
import random
from collections.abc import Mapping, Sequence
from typing import Any

from katib_progress.bench._bank import Bank, BankParameter, BankTrial
from katib_progress.bench._sim import TrialOutcome


class RandomOrder:
    """Every bank trial (or the first ``limit`` of a seeded permutation), one after another."""

    def __init__(self, bank: Bank, seed: int, limit: int | None = None) -> None:
        order = list(bank.trials)
        random.Random(seed).shuffle(order)
        self._queue = order[:limit] if limit else order
        self._next = 0

    def next_trials(self, count: int, now_s: float) -> Sequence[tuple[str, BankTrial]]:
        out = []
        while count > 0 and self._next < len(self._queue):
            trial = self._queue[self._next]
            out.append((f"trial-{self._next:04d}-b{trial.index}", trial))
            self._next += 1
            count -= 1
        return out

    def running(self, name: str, points: int) -> None:
        return None

    def ended(self, outcome: TrialOutcome) -> None:
        return None


def _coordinate(param: BankParameter, value: Any) -> float:
    """``value`` normalised to [0, 1] along ``param`` (log space for log parameters)."""
    if param.type == "discrete":
        numbers = sorted(float(v) for v in param.values)
        x = float(value)
        # Rank position (interpolated), so 16/32/64/... are evenly spaced.
        if len(numbers) == 1:
            return 0.0
        for i in range(len(numbers) - 1):
            lo, hi = numbers[i], numbers[i + 1]
            if x <= hi or i == len(numbers) - 2:
                frac = 0.0 if hi == lo else min(max((x - lo) / (hi - lo), 0.0), 1.0)
                return (i + frac) / (len(numbers) - 1)
        return 1.0
    lo, hi, x = float(param.min or 0.0), float(param.max or 0.0), float(value)
    if param.log and lo > 0 and x > 0:
        lo, hi, x = math.log(lo), math.log(hi), math.log(x)
    return 0.0 if hi == lo else (x - lo) / (hi - lo)


class NearestConfig:
    """Maps any assignment to the bank's nearest configuration.

    Distance: Euclidean over numeric parameters normalised to [0, 1] (log parameters in log space,
    discrete ones by rank); categorical parameters must match exactly (if no bank configuration
    matches every categorical value, each mismatch adds 1 to the distance). Ties go to the lower index.
    """

    def __init__(self, bank: Bank) -> None:
        self._bank = bank
        self._numeric = [p for p in bank.parameters if p.type != "categorical"]
        self._categorical = [p for p in bank.parameters if p.type == "categorical"]
        self._coords = [tuple(_coordinate(p, t.params[p.name]) for p in self._numeric) for t in bank.trials]
        self._cats = [tuple(str(t.params[p.name]) for p in self._categorical) for t in bank.trials]

    def nearest(self, assignment: Mapping[str, Any]) -> BankTrial:
        missing = [p.name for p in self._bank.parameters if p.name not in assignment]
        if missing:
            raise ValueError(f"assignment lacks parameters {missing}")
        target = tuple(_coordinate(p, assignment[p.name]) for p in self._numeric)
        cats = tuple(str(assignment[p.name]) for p in self._categorical)
        exact = [i for i, c in enumerate(self._cats) if c == cats]
        candidates = exact or range(len(self._coords))
        best_i, best_d = -1, math.inf
        for i in candidates:
            d = sum((a - b) ** 2 for a, b in zip(self._coords[i], target, strict=True))
            if not exact:
                d += sum(a != b for a, b in zip(self._cats[i], cats, strict=True))
            if d < best_d:
                best_i, best_d = i, d
        return self._bank.trials[best_i]
