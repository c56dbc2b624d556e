"""Scenario c: ``metricStrategies`` ``latest`` and ``max`` on real Katib.

Curves that overfit (loss falls, then rises): a trial's best and latest values differ. Katib computes
each trial's observation from the rows in its DB manager (pkg/controller.v1beta1/trial/trial_controller.go
``UpdateTrialStatusObservation`` with the objective's ``metricStrategies``), and the Experiment's optimal
trial by the objective's strategy. The rows are what the collector stored from the trainer statuses.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from tests.e2e.cluster import RealKatib
from tests.e2e.launch import Launch, register
from tests.katibmodel._kube import has_condition
from tests.katibmodel.scenarios import NS, experiment
from tests.katibmodel.trainer import Curve, Point


def overfitting(index: int, _params: Mapping[str, str]) -> Curve:
    """Loss falls to a minimum at a point that depends on the trial, then rises; accuracy mirrors it."""
    turn = 2 + index % 4
    points = []
    for i in range(8):
        loss = 1.0 - 0.15 * min(i, turn) + 0.1 * max(0, i - turn)
        points.append(
            Point(round(100 * (i + 1) / 8), {"loss": f"{loss:.4f}", "accuracy": f"{1 - loss / 2:.4f}"})
        )
    return Curve(tuple(points))


def _observed() -> dict[str, Any]:
    body = experiment("strat", early_stopping=None, max_trials=6, parallel=3)
    body["spec"]["objective"]["metricStrategies"] = [
        {"name": "loss", "value": "latest"},
        {"name": "accuracy", "value": "max"},
    ]
    return body


def _pruned() -> dict[str, Any]:
    body = experiment("strat-es", max_trials=4, parallel=2)
    body["spec"]["objective"]["metricStrategies"] = [{"name": "loss", "value": "latest"}]
    return body


for body in (_observed, _pruned):
    register(Launch(body, lambda: overfitting))


@pytest.mark.timeout(600)
@pytest.mark.usefixtures("launched")
def test_observation_follows_metric_strategies(katib: RealKatib) -> None:
    exp = katib.wait_finished(NS, "strat", timeout=300)
    assert has_condition(exp, "Succeeded"), katib.describe(NS, "strat")
    latest: dict[str, float] = {}
    for t in katib.trial_list(NS, "strat"):
        name = t["metadata"]["name"]
        stored = [float(v) for _, v, _ in katib.rows(name, "loss")]
        sent = [float(v) for v in katib.sent.values(name, "loss")]
        assert stored == sent, name
        metrics = {m["name"]: m for m in t["status"]["observation"]["metrics"]}
        assert float(metrics["loss"]["latest"]) == sent[-1]
        assert float(metrics["loss"]["min"]) == min(sent)
        accuracy = [float(v) for v in katib.sent.values(name, "accuracy")]
        assert float(metrics["accuracy"]["max"]) == max(accuracy)
        latest[name] = sent[-1]
    optimal = exp["status"]["currentOptimalTrial"]
    best = min(latest.values())
    assert optimal["bestTrialName"] in {n for n, v in latest.items() if v == best}, (optimal, latest)


@pytest.mark.timeout(600)
@pytest.mark.usefixtures("launched")
def test_pruning_follows_the_experiments_strategy_unrepeated(katib: RealKatib) -> None:
    """``metricStrategies`` ``latest`` and early stopping ``katib-progress`` with no ``metric_strategy``
    setting: Katib's EarlyStopping API cannot carry the strategy, the collector reads it from the
    Experiment and sends it through our Pruning API, and the engine in our early-stopping container
    judges by it (its log says so). Katib's GetEarlyStoppingRules comes first, without the strategy; the
    collector's first point completes it and the engine is rebuilt under it once, never restarted on
    a config change."""
    exp = katib.wait_finished(NS, "strat-es", timeout=300)
    assert has_condition(exp, "Succeeded"), katib.describe(NS, "strat-es")
    # the played kubelet's container logs outlive the pods (Katib deletes the suggestion at the end)
    logs = sorted(katib.kubelet.workdir.glob("strat-es-*early-stopping.log"))
    text = "".join(p.read_text(errors="replace") for p in logs)
    assert "experiment strat-es: pruning engine:" in text, text[-2000:]
    assert "metric strategy latest (the Experiment's metricStrategies)" in text, text[-2000:]
    assert "pruning config changed" not in text
    assert text.count("metric strategy latest (the Experiment's metricStrategies)") == 1, text[-2000:]
