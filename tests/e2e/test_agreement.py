"""The Katib model and real Katib must agree: the same scenario, run through both, ends the same way.

Each case runs once on a fresh Katib model (tests/katibmodel on the API stand-in) and once on the
session's real Katib, with the same Experiment and the same scripted training, and compares what does
not depend on timing: how the Experiment ended (condition and reason), how many trials it ran, which
end states occurred, that every trial has an observation (EarlyStopped ones included) and that it is
exactly what Katib computes from the rows sent, and the optimal trial by the objective's strategy.
Where they differed, the model was changed to follow Katib (docs/katib-model.md lists each change).
Both sides read the same katib-config (Katib's, with ours merged) and run Katib's goptuna binary
for ``random``. On real Katib the cases' Experiments are launched side by side with the session's others
(tests/e2e/launch.py), each with its own scripted training; the models run one after another.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import pytest

from tests.e2e.cluster import RealKatib, Scripted, Sent, resolve_image
from tests.e2e.curves import every
from tests.e2e.katib import config_data
from tests.e2e.launch import Launch, register
from tests.e2e.test_strategies import overfitting
from tests.katibmodel._kube import conditions, has_condition
from tests.katibmodel.harness import KatibModel
from tests.katibmodel.scenarios import NS, always, converging, diverging, experiment
from tests.katibmodel.trainer import Script
from tests.kubestandin import KubeStandin

ENDS = ("Succeeded", "EarlyStopped", "MetricsUnavailable", "Failed", "Killed")
STRATEGY = {"min": min, "max": max, "latest": lambda values: values[-1]}


class Backend(Protocol):
    def trial_list(self, namespace: str, experiment: str) -> list[dict[str, Any]]: ...
    def rows(self, trial: str, metric: str) -> list[tuple[str, str, str]]: ...


@dataclass(frozen=True)
class Outcome:
    ended: tuple[str, str]  # the Experiment's last True condition and its reason
    trials: int
    ends: frozenset[str]  # the end states its trials reached
    observed: bool  # every trial has an observation, equal to Katib's computation from the rows
    optimal_by_strategy: bool  # currentOptimalTrial is a best trial by the objective's strategy


def outcome(backend: Backend, sent: Sent, exp: Mapping[str, Any]) -> Outcome:
    name = exp["metadata"]["name"]
    last = [c for c in conditions(exp) if c.get("status") == "True"][-1]
    trials = backend.trial_list(NS, name)
    objective = exp["spec"]["objective"]
    strategies = {s["name"]: s["value"] for s in objective["metricStrategies"]}
    metric = objective["objectiveMetricName"]
    observed, values = True, {}
    for t in trials:
        trial = t["metadata"]["name"]
        stored = [v for _, v, _ in backend.rows(trial, metric)]
        obs = {m["name"]: m for m in ((t.get("status") or {}).get("observation") or {}).get("metrics") or []}
        if metric not in obs or not stored:
            observed = False
            continue
        expected = STRATEGY[strategies[metric]]([float(v) for v in stored])
        observed &= float(obs[metric][strategies[metric]]) == expected
        values[trial] = expected
    best = (min if objective["type"] == "minimize" else max)(values.values()) if values else None
    optimal = (exp.get("status") or {}).get("currentOptimalTrial", {}).get("bestTrialName")
    return Outcome(
        ended=(last["type"], last.get("reason", "")),
        trials=len(trials),
        ends=frozenset(k for t in trials for k in ENDS if has_condition(t, k)),
        observed=observed,
        optimal_by_strategy=optimal in {t for t, v in values.items() if v == best},
    )


@dataclass(frozen=True)
class Case:
    body: Callable[[], dict[str, Any]]
    script: Callable[[], Script]
    interval_s: float = 0.2


def _latest_body() -> dict[str, Any]:
    body = experiment("agree-latest", early_stopping=None, max_trials=6, parallel=3)
    body["spec"]["objective"]["metricStrategies"] = [{"name": "loss", "value": "latest"}]
    return body


CASES = {
    # the README's cluster example's shape: kp-tpe, live pruning, two of three trials diverge
    "readme": Case(
        lambda: experiment("agree-readme", max_trials=9, parallel=3), lambda: every(3, diverging, converging)
    ),
    # a trial posts its final metrics and completes at once (our successCondition waits for the marker)
    "race": Case(
        lambda: experiment("agree-race", early_stopping=None, max_trials=6, parallel=3),
        lambda: always(lambda: converging(steps=4)),
        interval_s=0.0,
    ),
    # metricStrategies latest on overfitting curves
    "latest": Case(_latest_body, lambda: overfitting),
    # a pairing of b: Katib's goptuna ``random`` (the Go binary in both) with our early stopping
    "goptuna": Case(
        lambda: experiment("agree-goptuna", algorithm="random", max_trials=6, parallel=3),
        lambda: every(2, diverging, converging),
    ),
}


def run_model(case: Case, workdir: Path, katib_config: str) -> Outcome:
    """``case`` on a fresh Katib model with real Katib's katib-config (ours merged into Katib's, ``random``
    on Katib's goptuna binary, which the model's kubelet runs as real Katib's does)."""
    sent, scripted = Sent(), Scripted()
    scripted.script = case.script()
    standin = KubeStandin(bookmark_interval=0.2).start()
    try:
        with KatibModel(
            standin,
            workdir,
            scripted,
            train_interval_s=case.interval_s,
            katib_config=katib_config,
            resolve_image=resolve_image,
        ) as model:
            model.trainer.reporter = sent
            body = case.body()
            model.submit(body)
            model.start_collector(body)
            exp = model.wait_finished(NS, body["metadata"]["name"], timeout=300)
            return outcome(model, sent, exp)
    finally:
        standin.stop()


Runs = dict[str, tuple[Future[Outcome], Future[Outcome]]]


REAL = {key: register(Launch(case.body, case.script, case.interval_s)) for key, case in CASES.items()}


@pytest.fixture(scope="module")
def runs(katib: RealKatib, launched: list[str], tmp_path_factory: pytest.TempPathFactory) -> Iterator[Runs]:
    """Each case on a fresh Katib model (one after another: separate processes), while the cases'
    Experiments run on real Katib, launched with the session's others (tests/e2e/launch.py)."""

    config = config_data(katib.kube)

    def real(name: str) -> Outcome:
        return outcome(katib, katib.sent, katib.wait_finished(NS, name, timeout=300))

    with ThreadPoolExecutor(1) as models, ThreadPoolExecutor(len(CASES)) as waits:
        yield {
            key: (
                models.submit(run_model, CASES[key], tmp_path_factory.mktemp(f"agree-{key}"), config),
                waits.submit(real, REAL[key]),
            )
            for key in sorted(CASES)
        }


@pytest.mark.timeout(900)
@pytest.mark.parametrize("case", sorted(CASES))
def test_model_and_real_katib_agree(case: str, runs: Runs) -> None:
    model_run, real_run = runs[case]
    real, model = real_run.result(), model_run.result()
    assert real.observed and real.optimal_by_strategy, real
    assert model == real
