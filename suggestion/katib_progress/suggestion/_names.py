"""Katib-style trial names derived from a seed, so a restarted service regenerates them.

Katib names trials ``<suggestion name>-<8 random characters>`` from Kubernetes' random-string
alphabet (no vowels); the suggestion is named after the experiment. Name ``k`` here is a pure
function of (experiment, incarnation, seed, k), which lets a restarted service recover each
trial's index.

The *incarnation* tells one creation of an Experiment from another of the same name: Katib keys
observation logs by trial name alone, so an Experiment deleted and applied again must never reuse a
trial name of the one it replaces. The service cannot see the Experiment's uid (the gRPC request
carries its name and spec only), so it draws a random incarnation for a request that carries none
and returns it as an algorithm setting (``INCARNATION_SETTING``); Katib keeps the reply's settings
in the Suggestion's ``status.algorithmSettings`` and sends them back in every later request
(suggestionclient.go ``updateAlgorithmSettings``, algorithm_settings.go
``appendAlgorithmSettingsFromSuggestion``). The Suggestion is owned by the Experiment, so it dies
with it, and a re-created Experiment starts with none: a new incarnation, new names. A restarted
service reads the same incarnation back and regenerates the same names. Parameters depend on the
seed and the index only, so ``random_state`` still gives the same suggestions.
"""

from __future__ import annotations

import hashlib
import random
import secrets
from collections.abc import Iterable

# Kubernetes' utilrand alphabet (no vowels, no confusable characters).
_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
_SUFFIX = 8


#: the algorithm setting carrying the incarnation (never a setting of any algorithm)
INCARNATION_SETTING = "katib_progress_incarnation"


def new_incarnation() -> str:
    """A fresh random incarnation (64 bits, hex)."""
    return secrets.token_hex(8)


def trial_name(experiment: str, seed: int, index: int, incarnation: str = "") -> str:
    key = f"katib-progress/{experiment}/{seed}/{index}"
    if incarnation:
        key = f"katib-progress/{experiment}/{incarnation}/{seed}/{index}"
    rng = random.Random(key)
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

    def __init__(self, experiment: str, seed: int, incarnation: str = "") -> None:
        self._experiment = experiment
        self._seed = seed
        self._incarnation = incarnation
        self._names: list[str] = []
        self._index: dict[str, int] = {}

    def name(self, index: int) -> str:
        self._extend(index + 1)
        return self._names[index]

    def _extend(self, count: int) -> None:
        for k in range(len(self._names), count):
            name = trial_name(self._experiment, self._seed, k, self._incarnation)
            self._names.append(name)
            self._index.setdefault(name, k)

    def lookup(self, names: Iterable[str], horizon: int) -> dict[str, int]:
        """Indexes of those ``names`` generated within the first ``horizon`` indexes."""
        wanted = set(names)
        prefix = self._experiment + "-"
        if any(n.startswith(prefix) and n not in self._index for n in wanted):
            self._extend(horizon)
        return {n: self._index[n] for n in wanted if n in self._index and self._index[n] < horizon}
