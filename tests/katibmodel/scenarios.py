"""Experiments and learning curves the Katib-model tests run."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

from tests.katibmodel.trainer import Curve, Point, Script
from tests.test_examples_gjson import FAILURE_CONDITION, SUCCESS_CONDITION

NS = "team-a"
STOCK_SUCCESS = 'status.conditions.#(type=="Complete")#|#(status=="True")#'


def converging(steps: int = 8, *, start: float = 1.0, final: float = 0.2, rate: float = 0.5) -> Curve:
    """A healthy run: loss decays from ``start`` towards ``final``; accuracy mirrors it."""
    points = []
    for i in range(steps):
        loss = final + (start - final) * math.exp(-rate * i)
        points.append(
            Point(
                progress=round(100 * (i + 1) / steps),
                metrics={"loss": f"{loss:.4f}", "accuracy": f"{1 - loss / 2:.4f}"},
                eta=steps - i - 1,
            )
        )
    return Curve(tuple(points), tag="converging")


def diverging(steps: int = 8, *, start: float = 1.0, growth: float = 1.6) -> Curve:
    """A run whose loss explodes (x1.6 per step: past 3x its start at the fourth point)."""
    points = [
        Point(
            progress=round(100 * (i + 1) / steps),
            metrics={"loss": f"{start * growth**i:.4f}", "accuracy": "0.1000"},
            eta=steps - i - 1,
        )
        for i in range(steps)
    ]
    return Curve(tuple(points), tag="diverging")


def every(n: int, bad: Callable[[], Curve], good: Callable[[], Curve]) -> Script:
    """TrainJobs in start order: every ``n``-th (0, n, 2n...) is healthy, the others ``bad``."""

    def script(index: int, _params: Mapping[str, str]) -> Curve:
        return good() if index % n == 0 else bad()

    return script


def always(curve: Callable[[], Curve]) -> Script:
    return lambda _index, _params: curve()


def experiment(
    name: str,
    *,
    algorithm: str = "kp-tpe",
    early_stopping: str | None = "katib-progress",
    settings: Mapping[str, str] | None = None,
    max_trials: int = 12,
    parallel: int = 3,
    retain: bool = False,
    success_condition: str = SUCCESS_CONDITION,
    goal: float | None = None,
    max_failed: int | None = None,
    algorithm_settings: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """Katib's own TrainJob example (shared/reference katib-experiment-trainjob.example.yaml) with the
    Push collector, our successCondition and the given algorithm / early stopping."""
    spec: dict[str, Any] = {
        "parallelTrialCount": parallel,
        "maxTrialCount": max_trials,
        "objective": {
            "type": "minimize",
            "objectiveMetricName": "loss",
            "additionalMetricNames": ["accuracy"],
        },
        "algorithm": {
            "algorithmName": algorithm,
            "algorithmSettings": [{"name": k, "value": v} for k, v in (algorithm_settings or {}).items()],
        },
        "metricsCollectorSpec": {"collector": {"kind": "Push"}},
        "parameters": [
            {"name": "lr", "parameterType": "double", "feasibleSpace": {"min": "0.01", "max": "0.05"}},
            {"name": "momentum", "parameterType": "double", "feasibleSpace": {"min": "0.5", "max": "0.9"}},
        ],
        "trialTemplate": {
            "retain": retain,
            "primaryContainerName": "node",
            "successCondition": success_condition,
            "failureCondition": FAILURE_CONDITION,
            "trialParameters": [
                {"name": "learningRate", "reference": "lr"},
                {"name": "momentum", "reference": "momentum"},
            ],
            "trialSpec": {
                "apiVersion": "trainer.kubeflow.org/v1alpha1",
                "kind": "TrainJob",
                "spec": {
                    "runtimeRef": {"name": "torch-distributed"},
                    "trainer": {
                        "numNodes": 1,
                        "image": "docker.io/kubeflowkatib/pytorch-mnist:v1beta1-45c5727",
                        "command": [
                            "python3",
                            "/opt/pytorch-mnist/mnist.py",
                            "--lr=${trialParameters.learningRate}",
                            "--momentum=${trialParameters.momentum}",
                        ],
                    },
                },
            },
        },
    }
    if goal is not None:
        spec["objective"]["goal"] = goal
    if max_failed is not None:
        spec["maxFailedTrialCount"] = max_failed
    if early_stopping is not None:
        spec["earlyStopping"] = {
            "algorithmName": early_stopping,
            "algorithmSettings": [{"name": k, "value": v} for k, v in (settings or {}).items()],
        }
    return {
        "apiVersion": "kubeflow.org/v1beta1",
        "kind": "Experiment",
        "metadata": {"name": name, "namespace": NS},
        "spec": spec,
    }
