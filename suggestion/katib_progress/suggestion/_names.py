"""Katib-style trial names derived from a seed, so a restarted service regenerates them.

Katib names trials ``<suggestion name>-<8 random characters>`` from Kubernetes' random-string
alphabet (no vowels); the suggestion is named after the experiment. Name ``k`` here is a pure
function of (experiment, seed, k), which lets a restarted service recover each trial's index.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Iterable

# Kubernetes' utilrand alphabet (no vowels, no confusable characters).
_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
_SUFFIX = 8


def trial_name(experiment: str, seed: int, index: int) -> str:
    rng = random.Random(f"katib-progress/{experiment}/{seed}/{index}")
    return f"{experiment}-{''.join(rng.choice(_ALPHABET) for _ in range(_SUFFIX))}"


def derive_seed(seed: int, *parts: object) -> int:
    """A 32-bit seed from ``seed`` and ``parts`` (stable across processes and Python versions)."""
    text = "/".join([str(seed), *(str(p) for p in parts)])
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:4], "big")


def default_seed(experiment: str) -> int:
    """The seed used when ``random_state`` is not set: stable for a given experiment name."""
    return derive_seed(0, "default", experiment)


class NameIndex:
    """Maps this service's generated trial names back to their index (lazily generated)."""

    def __init__(self, experiment: str, seed: int) -> None:
        self._experiment = experiment
        self._seed = seed
        self._names: list[str] = []
        self._index: dict[str, int] = {}

    def name(self, index: int) -> str:
        self._extend(index + 1)
        return self._names[index]

    def _extend(self, count: int) -> None:
        for k in range(len(self._names), count):
            name = trial_name(self._experiment, self._seed, k)
            self._names.append(name)
            self._index.setdefault(name, k)

    def lookup(self, names: Iterable[str], horizon: int) -> dict[str, int]:
        """Indexes of those ``names`` generated within the first ``horizon`` indexes."""
        wanted = set(names)
        prefix = self._experiment + "-"
        if any(n.startswith(prefix) and n not in self._index for n in wanted):
            self._extend(horizon)
        return {n: self._index[n] for n in wanted if n in self._index and self._index[n] < horizon}
