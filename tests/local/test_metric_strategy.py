"""Local mode hands the Experiment's metric strategy to the pruning engine (issue 24 item 1): the
sweep's pruner reads ``spec.objective.metricStrategies`` and sends it through our Pruning API to a
real service over loopback gRPC; a ``metric_strategy`` setting overrides it."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from katib_progress.core.types import ProgressPoint
from katib_progress.local._services import Pruner
from katib_progress.local.experiment import parse_experiment
from katib_progress.suggestion.server import SuggestionServer, create_server

from .conftest import experiment_doc


@pytest.fixture
def server() -> Iterator[SuggestionServer]:
    srv = create_server(["127.0.0.1:0"], early_stopping=True)
    srv.start()
    try:
        yield srv
    finally:
        srv.stop(0)


@pytest.mark.parametrize(
    ("strategy", "settings", "expected"),
    [
        ("latest", [], "latest"),
        (None, [], "min"),
        ("latest", [{"name": "metric_strategy", "value": "min"}], "min"),
        ("max", [{"name": "policy", "value": "median"}], "max"),
    ],
)
def test_sweep_pruner_sends_the_objective_strategy(
    server: SuggestionServer,
    tmp_path: Path,
    strategy: str | None,
    settings: list[dict[str, str]],
    expected: str,
) -> None:
    doc = experiment_doc(
        ["--x=${trialParameters.x}"],
        early_stopping={"algorithmName": "katib-progress", "algorithmSettings": settings},
    )
    if strategy is not None:
        doc["spec"]["objective"]["metricStrategies"] = [{"name": "loss", "value": strategy}]
    exp = parse_experiment(doc, source=tmp_path / "exp.yaml")
    pruner = Pruner.create(exp, server.bound_addresses[0])
    assert pruner.config.strategy == expected
    point = ProgressPoint(
        exp.name, "t0", 0, datetime(2026, 1, 1, tzinfo=UTC), progress=5.0, metrics={"loss": 1.0}
    )
    pruner.decide(point)
    engine = server.hub.engine(exp.name)
    assert engine is not None and engine.config.strategy == expected
    assert engine.state.strategy == expected
