"""Scenario c: ``metricStrategies`` ``latest`` and ``max`` on real Katib.

Curves that overfit (loss falls, then rises): a trial's best and latest values differ. Katib computes
each trial's observation from the rows in its DB manager (pkg/controller.v1beta1/trial/trial_controller.go
``UpdateTrialStatusObservation`` with the objective's ``metricStrategies``), and the Experiment's optimal
trial by the objective's strategy. The rows are what the collector stored from the trainer statuses.
"""

from __future__ import annotations

from collections.abc import Mapping

import pytest

from tests.e2e.cluster import RealKatib
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


@pytest.mark.timeout(600)
def test_observation_follows_metric_strategies(katib: RealKatib) -> None:
    katib.script.script = overfitting
    body = experiment("strat", early_stopping=None, max_trials=6, parallel=3)
    body["spec"]["objective"]["metricStrategies"] = [
        {"name": "loss", "value": "latest"},
        {"name": "accuracy", "value": "max"},
    ]
    katib.submit(body)
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
