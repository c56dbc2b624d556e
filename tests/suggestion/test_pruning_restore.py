"""A restarted engine rebuilt from stored observations decides exactly as one that never stopped."""

from __future__ import annotations

import gzip
import json
import math
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from katib_progress.bench import Objective, RandomOrder, parse_bank, replay
from katib_progress.bench._engine import pruning_config
from katib_progress.core.status import ELAPSED_METRIC, ETA_METRIC, PROGRESS_METRIC, SEQ_METRIC
from katib_progress.core.timefmt import format_rfc3339nano
from katib_progress.core.types import Decision, ProgressPoint
from katib_progress.suggestion.pruning import PruningEngine
from katib_progress.suggestion.pruning.restore import points_from_rows
from katib_progress.suggestion.pruning.service import PruningHub

BANK = Path(__file__).resolve().parents[2] / "benchmarks" / "data" / "digits-mlp.json.gz"
Event = tuple[str, Any, Any]  # ("point", ProgressPoint, None) or ("end", trial, state)


class Recorder:
    """A bench decider around a live engine that records every event it is given, in order."""

    name = "recorder"

    def __init__(self, engine: PruningEngine) -> None:
        self.engine = engine
        self.events: list[Event] = []

    def start(self, trial: str) -> None:
        return None

    def decide(self, point: ProgressPoint) -> Decision:
        self.events.append(("point", point, None))
        return self.engine.decide(point)

    def finish(self, trial: str, state: str, observation: float | None) -> None:
        self.events.append(("end", trial, state))
        self.engine.finish(trial, state)

    def close(self) -> None:
        return None


@cache
def _bank() -> Any:
    doc = json.loads(gzip.decompress(BANK.read_bytes()))
    doc["trials"] = doc["trials"][:120]
    return parse_bank(doc)


def _sweep(policy: str) -> tuple[Any, list[Event]]:
    bank = _bank()
    name, *pairs = policy.split("|")
    settings = dict(pair.split("=", 1) for pair in pairs)
    config = pruning_config(Objective(bank.metric, bank.direction, bank.strategy), name, settings)
    recorder = Recorder(PruningEngine(config))
    replay(bank, recorder, RandomOrder(bank, 3, 40), workers=4)
    return config, recorder.events


def _feed(engine: PruningEngine, events: list[Event]) -> list[tuple[str, int, bool, str]]:
    out = []
    for kind, a, b in events:
        if kind == "point":
            d = engine.decide(a)
            out.append((a.trial, a.seq, d.prune, d.reason))
        else:
            engine.finish(a, b)
    return out


@pytest.mark.parametrize(
    "policy",
    [
        "default",
        "median",
        "hyperband,divergence",
        "divergence,adaptive",
        "divergence,trend_halving",
        "divergence,trend_halving|trend_rejudge=true",
        "divergence,trend_halving|trend_rejudge=true|trend_rungs=5,10,20,40,80|trend_keep=33,50,33,25,25"
        "|trend_gate_below=10|trend_gate_min=3|trend_gate_top=1",
    ],
)
def test_half_a_sweep_then_restart_gives_every_decision_unchanged(policy: str) -> None:
    config, events = _sweep(policy)
    whole = _feed(PruningEngine(config), events)
    assert any(prune for *_, prune, _ in whole)
    half = len(events) // 2
    stored_points = [a for kind, a, _ in events[:half] if kind == "point"]
    ends = {a: b for kind, a, b in events[:half] if kind == "end"}
    restarted = PruningEngine(config)
    assert restarted.rebuild(reversed(stored_points), ends) == len(stored_points)
    later = _feed(restarted, events[half:])
    assert later == whole[len(stored_points) :]
    # The points it had already seen get the decisions they got live (idempotent replays).
    again = [restarted.decide(p) for p in stored_points]
    assert [(d.prune, d.reason) for d in again] == [
        (prune, why) for *_, prune, why in whole[: len(stored_points)]
    ]


def _rows(point: ProgressPoint) -> list[tuple[str, str, str]]:
    """What the collector writes for a snapshot: reserved rows plus finite metrics, one timestamp."""
    stamp = format_rfc3339nano(point.timestamp)
    rows = [(stamp, SEQ_METRIC, str(point.seq))]
    for name, value in (
        (PROGRESS_METRIC, point.progress),
        (ETA_METRIC, point.eta_s),
        (ELAPSED_METRIC, point.elapsed_s),
    ):
        if value is not None:
            rows.append((stamp, name, repr(value)))
    rows += [(stamp, k, repr(v)) for k, v in point.metrics.items() if math.isfinite(v)]
    return rows


def test_the_hub_rebuilds_an_experiment_from_observation_rows_on_first_contact() -> None:
    config, events = _sweep("default")
    whole = _feed(PruningEngine(config), events)
    half = len(events) // 2
    rows: dict[str, list[tuple[str, str, str]]] = {}
    for kind, a, _ in events[:half]:
        if kind == "point" and all(math.isfinite(v) for v in a.metrics.values()):
            rows.setdefault(a.trial, []).extend(_rows(a))
    ends = {a: b for kind, a, b in events[:half] if kind == "end"}
    # A trial pruned live but not yet ended in the stored states is still stored as pruned.
    ends |= {
        t: "pruned" for (t, _, prune, _) in whole[: sum(k == "point" for k, *_ in events[:half])] if prune
    }

    def history(experiment: str) -> tuple[list[ProgressPoint], dict[str, str]]:
        points = [p for trial, r in rows.items() for p in points_from_rows(experiment, trial, r)]
        return points, ends

    hub = PruningHub(history)
    engine = hub.configure("bench", config)
    assert engine.points == sum(len(points_from_rows("bench", t, r)) for t, r in rows.items())
    later = _feed(engine, events[half:])
    assert later == whole[len(whole) - len(later) :]
    # Without the stored history a restarted engine decides differently (it forgot every curve).
    assert _feed(PruningEngine(config), events[half:]) != later


def test_rebuild_needs_a_fresh_engine() -> None:
    config, events = _sweep("default")
    engine = PruningEngine(config)
    _feed(engine, events[:5])
    with pytest.raises(RuntimeError, match="fresh engine"):
        engine.rebuild([], {})
