"""The Experiment's metric strategy reaches the pruning engine on the cluster path (issue 24 item 1).

The collector reads ``spec.objective.metricStrategies`` from the Experiment object, sends it with each
point through our Pruning API (``ExperimentConfig.metric_strategy``) to a real suggestion service over
loopback gRPC, and the engine there compares trials by it; a ``metric_strategy`` setting overrides it.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest

from katib_progress.collector.counters import Counters
from katib_progress.collector.experiments import ExperimentInfo
from katib_progress.collector.forwarder import ForwarderSettings, PruningForwarder
from katib_progress.collector.pipeline import JobRef
from katib_progress.core.pruning import PruningSpec
from katib_progress.core.types import ProgressPoint
from katib_progress.suggestion.pruning.backend import BACKEND
from katib_progress.suggestion.server import SuggestionServer, create_server


def _experiment(
    strategies: list[dict[str, str]] | None, settings: dict[str, str] | None = None
) -> dict[str, Any]:
    objective: dict[str, Any] = {
        "type": "minimize",
        "objectiveMetricName": "eval_loss",
        "additionalMetricNames": ["accuracy"],
    }
    if strategies is not None:
        objective["metricStrategies"] = strategies
    early = [{"name": k, "value": v} for k, v in (settings or {}).items()]
    return {
        "metadata": {"namespace": "ns", "name": "exp", "uid": "u1"},
        "spec": {
            "objective": objective,
            "algorithm": {"algorithmName": "random"},
            "earlyStopping": {"algorithmName": "katib-progress", "algorithmSettings": early},
        },
    }


@pytest.fixture
def server() -> Iterator[SuggestionServer]:
    srv = create_server(["127.0.0.1:0"])
    srv.start()
    try:
        yield srv
    finally:
        srv.stop(0)


def test_objective_strategy_is_read_from_metric_strategies() -> None:
    obj = _experiment([{"name": "accuracy", "value": "max"}, {"name": "eval_loss", "value": "latest"}])
    info = ExperimentInfo.from_object(obj)
    assert info.metric_strategy == "latest"
    spec = info.pruning_spec()
    assert spec is not None and spec.metric_strategy == "latest"
    # only the objective's own entry counts; none given -> empty (Katib's default applies)
    assert (
        ExperimentInfo.from_object(_experiment([{"name": "accuracy", "value": "latest"}])).metric_strategy
        == ""
    )
    assert ExperimentInfo.from_object(_experiment(None)).metric_strategy == ""


def _forward(server: SuggestionServer, info: ExperimentInfo) -> str:
    class _Experiments:
        def config(self, namespace: str, name: str) -> tuple[ExperimentInfo | None, PruningSpec | None]:
            return info, info.pruning_spec()

    fwd = PruningForwarder(
        _Experiments(),
        lambda job, decision, point: None,
        settings=ForwarderSettings(address_template=server.bound_addresses[0]),
        counters=Counters(),
        client_factory=BACKEND.connect,
    ).start()
    try:
        point = ProgressPoint(
            "exp", "t0", 0, datetime(2026, 1, 1, tzinfo=UTC), progress=10.0, metrics={"eval_loss": 1.0}
        )
        fwd.submit(JobRef("ns", "t0", "uid-t0", "exp", "t0"), point)
        assert fwd.idle(10)
    finally:
        fwd.stop(2)
    assert fwd.counters.get("collector_pruning_errors_total", kind="temporary") == 0
    engine = server.hub.engine("exp")
    assert engine is not None
    return engine.config.strategy


@pytest.mark.parametrize(
    ("strategies", "settings", "expected"),
    [
        ([{"name": "eval_loss", "value": "latest"}], {}, "latest"),  # the Experiment's strategy
        (None, {}, "min"),  # Katib's default for minimize
        ([{"name": "eval_loss", "value": "latest"}], {"metric_strategy": "min"}, "min"),  # setting overrides
        ([{"name": "eval_loss", "value": "max"}], {}, "max"),
    ],
)
def test_collector_forwards_the_strategy_to_the_engine_over_grpc(
    server: SuggestionServer, strategies: list[dict[str, str]] | None, settings: dict[str, str], expected: str
) -> None:
    info = ExperimentInfo.from_object(_experiment(strategies, settings))
    assert _forward(server, info) == expected


def test_strategy_changes_which_trial_leads(server: SuggestionServer) -> None:
    """Behaviour, not only config: under ``latest`` a trial whose loss rose back is no longer the
    leader, under ``min`` its best value still leads."""
    for strategy, leader in (("latest", "b"), ("min", "a")):
        spec = PruningSpec("eval_loss", "minimize", {"policy": "nop"}, strategy)
        with BACKEND.connect(server.bound_addresses[0], 5.0) as client:
            name = f"exp-{strategy}"
            curves = {"a": [1.0, 0.2, 0.9], "b": [1.0, 0.5, 0.4]}
            for trial, values in curves.items():
                for seq, v in enumerate(values):
                    t = datetime(2026, 1, 1, 0, seq, tzinfo=UTC)
                    point = ProgressPoint(
                        name, trial, seq, t, progress=10.0 * (seq + 1), metrics={"eval_loss": v}
                    )
                    client.decide(point, spec)
        engine = server.hub.engine(name)
        assert engine is not None
        leads = {t: engine.state.leads(engine.state.trials[t]) for t in ("a", "b")}
        assert leads == {"a": leader == "a", "b": leader == "b"}


def test_strategy_from_points_completes_katibs_settings(server: SuggestionServer) -> None:
    """Katib's EarlyStopping API carries no metric strategy: the collector's completes the settings
    Katib sent (authoritative), and survives Katib sending them again; other differences do not."""
    from katib_progress.suggestion.pruning.config import PruningConfig

    hub = server.hub
    katib = PruningConfig.from_settings("eval_loss", "minimize", {"policy": "median"})
    hub.configure("e", katib)
    assert hub.engine("e").config.strategy == "min"  # type: ignore[union-attr]
    from_point = PruningConfig.from_settings(
        "eval_loss", "minimize", {"policy": "median"}, objective_strategy="latest"
    )
    engine = hub.configure("e", from_point, authoritative=False)
    assert engine.config.strategy == "latest"
    assert hub.configure("e", katib) is engine  # Katib again: same engine, strategy kept
    other = PruningConfig.from_settings("eval_loss", "minimize", {"policy": "nop"}, objective_strategy="max")
    assert hub.configure("e", other, authoritative=False) is engine  # the Experiment's settings win
    assert engine.config.strategy == "latest"
