"""The model reproduces Katib's behaviour (its self-tests): stock-only Experiments where the training
code pushes its metrics to the DB manager itself (kubeflow-katib's report_metrics), and a test
double of an early stopper, with and without the observation Katib needs."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from kubernetes import client

from tests.katibmodel import rules, scenarios
from tests.katibmodel._kube import DEPLOYMENTS, PODS, SUGGESTIONS, TRAINJOBS, TRIALS, has_condition, now
from tests.katibmodel.conftest import ModelFactory
from tests.katibmodel.harness import KatibModel
from tests.katibmodel.scenarios import NS, STOCK_SUCCESS
from tests.katibmodel.trainer import Curve, Point
from tests.kubestandin.waiting import wait_until


class EarlyStopper:
    """Test double of an early stopper: once a diverging run has posted ``after`` points, add Katib's
    EarlyStopped condition to its Trial (with the observation Katib's getMetrics computes from the DB
    when ``observation``) and suspend its TrainJob."""

    def __init__(self, model: KatibModel, *, observation: bool, after: int = 3) -> None:
        self.model, self.observation, self.after = model, observation, after
        self.stopped: list[str] = []
        self._halt = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def _loop(self) -> None:
        while not self._halt.wait(0.05):
            with self.model.trainer._lock:
                due = [
                    key
                    for key, js in self.model.trainer.jobsets.items()
                    if js.run is not None and js.run.curve.tag == "diverging" and js.run.posted >= self.after
                ]
            for key in due:
                if key[1] not in self.stopped:
                    self._stop(key)

    def _stop(self, key: tuple[str, str]) -> None:
        kube = self.model.kube
        trial = kube.get(TRIALS, *key)
        if trial is None or rules.is_completed(trial):
            return
        status: dict[str, Any] = {
            "conditions": [
                *trial["status"]["conditions"],
                {
                    "type": "EarlyStopped",
                    "status": "True",
                    "reason": "TrialEarlyStopped",
                    "message": "Trial is early stopped",
                    "lastUpdateTime": now(),
                    "lastTransitionTime": now(),
                },
            ]
        }
        if self.observation:
            objective = trial["spec"]["objective"]
            rows = [
                r
                for m in [objective["objectiveMetricName"], *objective["additionalMetricNames"]]
                for r in self.model.rows(key[1], m)
            ]
            status["observation"] = rules.get_metrics(rows, rules.strategies_of(trial))
        body = {"metadata": {"resourceVersion": trial["metadata"]["resourceVersion"]}, "status": status}
        try:
            kube.patch(TRIALS, *key, body, status=True)
        except client.ApiException as exc:
            if exc.status == 409:
                return  # retried on the next tick
            raise
        self.stopped.append(key[1])
        try:
            kube.patch(TRAINJOBS, *key, {"spec": {"suspend": True}})
        except client.ApiException as exc:
            if exc.status != 404:  # retain: false -- Katib may delete the job of a completed trial first
                raise

    @contextmanager
    def running(self) -> Iterator[EarlyStopper]:
        self._thread.start()
        try:
            yield self
        finally:
            self._halt.set()
            self._thread.join(5)


def _stock(name: str, **kwargs: Any) -> dict[str, Any]:
    kwargs.setdefault("algorithm", "random")
    kwargs.setdefault("early_stopping", None)
    return scenarios.experiment(name, success_condition=STOCK_SUCCESS, **kwargs)


def _reason(exp: dict[str, Any]) -> tuple[str, str, str]:
    last = exp["status"]["conditions"][-1]
    return last["type"], last["status"], last["reason"]


def test_stock_experiment_runs_to_max_trials_and_cleans_up(make_model: ModelFactory) -> None:
    model = make_model(
        scenarios.always(lambda: scenarios.converging(4)), push_to_db=True, train_interval_s=0.05
    )
    model.submit(_stock("stock", max_trials=4, parallel=2))
    exp = model.wait_finished(NS, "stock", timeout=60)
    assert _reason(exp) == ("Succeeded", "True", "ExperimentMaxTrialsReached")
    trials = model.trial_list(NS, "stock")
    assert len(trials) == 4 and all(rules.classify(t) == "Succeeded" for t in trials)
    for t in trials:  # the observation is getMetrics over the DB rows, read once at success
        rows = model.rows(t["metadata"]["name"], "loss") + model.rows(t["metadata"]["name"], "accuracy")
        assert t["status"]["observation"] == rules.get_metrics(rows, rules.strategies_of(t))
        assert model.trials.observation_reads[t["metadata"]["name"]] == 1
    assert exp["status"]["currentOptimalTrial"]["bestTrialName"] in {t["metadata"]["name"] for t in trials}
    # ResumePolicy Never: the Suggestion is Succeeded, its Deployment (and pod processes) deleted
    wait_until(lambda: not model.kube.list(DEPLOYMENTS, NS) and not model.kube.list(PODS, NS), timeout=10)
    suggestion = model.kube.get(SUGGESTIONS, NS, "stock")
    assert suggestion is not None and has_condition(suggestion, "Succeeded")
    assert not model.kube.list(TRAINJOBS, NS)  # retain: false


def test_issue_1377_early_stopped_without_observation_costs_a_slot_for_good(make_model: ModelFactory) -> None:
    script = scenarios.every(3, scenarios.diverging, lambda: scenarios.converging(4))
    model = make_model(script, push_to_db=True, train_interval_s=0.05)
    with EarlyStopper(model, observation=False).running() as stopper:
        model.submit(_stock("stall", max_trials=12, parallel=3))
        with pytest.raises(AssertionError, match="stalled with no active trial"):
            model.wait_finished(NS, "stall", timeout=60, stall_s=3)
    exp = model.experiment(NS, "stall")
    assert _reason(exp)[0] == "Running"
    assert exp["status"]["trialsEarlyStopped"] == 3 == len(stopper.stopped)  # parallelTrialCount prunes
    suggestion = model.kube.get(SUGGESTIONS, NS, "stall")
    assert suggestion is not None
    trials = exp["status"]["trials"]
    assert trials < 12 and suggestion["spec"]["requests"] == suggestion["status"]["suggestionCount"] == trials
    for name in stopper.stopped:  # Katib never reads a pruned trial's log itself
        assert name not in model.trials.observation_reads


@pytest.mark.slow
@pytest.mark.parametrize("retain", [False, True], ids=["retain-false", "retain-true"])
def test_early_stopped_with_observation_runs_to_max_trials(make_model: ModelFactory, retain: bool) -> None:
    script = scenarios.every(3, scenarios.diverging, lambda: scenarios.converging(4))
    model = make_model(script, push_to_db=True, train_interval_s=0.05)
    with EarlyStopper(model, observation=True).running() as stopper:
        model.submit(_stock("fixed", max_trials=12, parallel=3, retain=retain))
        exp = model.wait_finished(NS, "fixed", timeout=90)
    assert _reason(exp) == ("Succeeded", "True", "ExperimentMaxTrialsReached")
    assert exp["status"]["trialsEarlyStopped"] == len(stopper.stopped) >= 6
    jobs = {j["metadata"]["name"]: j for j in model.kube.list(TRAINJOBS, NS)}
    for name in stopper.stopped:
        trial = model.kube.get(TRIALS, NS, name)
        assert trial is not None and rules.is_observation_available(trial)
        if retain:  # kept, suspended, never completed; Katib does not read it either
            assert jobs[name]["spec"]["suspend"] is True and not has_condition(jobs[name], "Complete")
            assert name not in model.trials.observation_reads
    assert bool(jobs) is retain


@pytest.mark.slow
def test_metrics_unavailable_counts_as_failed(make_model: ModelFactory) -> None:
    def no_objective(_i: int, _p: Any) -> Curve:
        curve = scenarios.converging(3)
        return Curve(tuple(Point(p.progress, {"accuracy": p.metrics["accuracy"]}) for p in curve.points))

    model = make_model(no_objective, push_to_db=True, train_interval_s=0.05)
    model.submit(_stock("nometric", max_trials=4, parallel=2, max_failed=2))
    exp = model.wait_finished(NS, "nometric", timeout=60)
    assert _reason(exp) == ("Failed", "True", "ExperimentFailed")
    assert exp["status"]["trialMetricsUnavailable"] >= 2
    unavailable = [t for t in model.trial_list(NS, "nometric") if has_condition(t, "MetricsUnavailable")]
    name = unavailable[0]["metadata"]["name"]
    assert ("loss", "unavailable", "0001-01-01T00:00:00Z") in model.rows(
        name, "loss"
    )  # reportUnavailableMetrics


@pytest.mark.slow
def test_goal_reached(make_model: ModelFactory) -> None:
    model = make_model(
        scenarios.always(lambda: scenarios.converging(4, final=0.1, rate=2.0)),
        push_to_db=True,
        train_interval_s=0.05,
    )
    model.submit(_stock("goal", max_trials=6, parallel=2, goal=0.2))
    exp = model.wait_finished(NS, "goal", timeout=60)
    assert _reason(exp) == ("Succeeded", "True", "ExperimentGoalReached")
    assert exp["status"].get("trialsSucceeded", 0) < 6


@pytest.mark.slow
@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (
            {"algorithm_settings": {"random_state": "-1"}},
            "ValidateAlgorithmSettings Error: random_state should be great or equal than zero",
        ),
        (
            {"early_stopping": "medianstop", "settings": {"start_step": "0"}},
            "ValidateEarlyStoppingSettings Error: start_step must be greater or equal than one (>=1)",
        ),
    ],
    ids=["algorithm", "early-stopping"],
)
def test_invalid_settings_fail_the_experiment(
    make_model: ModelFactory, kwargs: dict[str, Any], message: str
) -> None:
    model = make_model(scenarios.always(scenarios.converging))
    model.submit(_stock("invalid", **kwargs))
    exp = model.wait_finished(NS, "invalid", timeout=60)
    last = exp["status"]["conditions"][-1]
    assert (last["type"], last["reason"], last["message"]) == (
        "Failed",
        "ExperimentFailed",
        "Suggestion has failed",
    )
    suggestion = model.kube.get(SUGGESTIONS, NS, "invalid")
    assert suggestion is not None and has_condition(suggestion, "Failed")
    failed = next(c for c in suggestion["status"]["conditions"] if c["type"] == "Failed")
    assert failed["message"] == f"Validation failed: {message}"
    assert not model.trial_list(NS, "invalid")


def test_suspended_trainjob_never_completes_and_resumes_from_scratch(make_model: ModelFactory) -> None:
    model = make_model(scenarios.always(lambda: scenarios.converging(6)), train_interval_s=0.1)
    job = {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": "lone", "namespace": NS},
        "spec": {"runtimeRef": {"name": "torch-distributed"}, "trainer": {"image": "x", "numNodes": 1}},
    }
    model.kube.create(TRAINJOBS, NS, job)
    wait_until(
        lambda: (model.kube.get(TRAINJOBS, NS, "lone") or {}).get("status", {}).get("trainerStatus"),
        timeout=10,
    )
    model.kube.patch(TRAINJOBS, NS, "lone", {"spec": {"suspend": True}})

    def suspended() -> bool:
        got = model.kube.get(TRAINJOBS, NS, "lone") or {}
        return has_condition(got, "Suspended") and got["status"]["jobsStatus"][0]["active"] == 0

    wait_until(suspended, timeout=10)
    frozen = model.kube.get(TRAINJOBS, NS, "lone")
    assert frozen is not None and model.trainer.running() == 0
    time.sleep(1.0)  # six points at 0.1 s would have finished by now
    after = model.kube.get(TRAINJOBS, NS, "lone")
    assert after is not None and after["status"]["trainerStatus"] == frozen["status"]["trainerStatus"]
    assert not has_condition(after, "Complete")
    model.kube.patch(TRAINJOBS, NS, "lone", {"spec": {"suspend": False}})
    wait_until(lambda: has_condition(model.kube.get(TRAINJOBS, NS, "lone") or {}, "Complete"), timeout=15)
    done = model.kube.get(TRAINJOBS, NS, "lone")
    assert done is not None
    resumed = next(c for c in done["status"]["conditions"] if c["type"] == "Suspended")
    assert (resumed["status"], resumed["reason"], resumed["message"]) == (
        "False",
        "Resumed",
        "TrainJob is resumed",
    )
    complete = next(c for c in done["status"]["conditions"] if c["type"] == "Complete")
    assert (complete["reason"], complete["message"]) == ("AllJobsCompleted", "jobset completed successfully")
    assert done["status"]["trainerStatus"]["progressPercentage"] == 100


def _pod_state(model: KatibModel) -> list[dict[str, Any]]:
    pods = model.kube.list(PODS, NS)
    return [cs for p in pods for cs in (p.get("status") or {}).get("containerStatuses") or []]


@pytest.mark.slow
def test_two_containers_binding_one_port_share_it_only_with_the_same_uid(make_model: ModelFactory) -> None:
    config = """
init: {controller: {trialResources: [TrainJob.v1alpha1.trainer.kubeflow.org]}}
runtime:
  suggestions:
  - {algorithmName: random, image: ghcr.io/kubeflow/katib/suggestion-hyperopt:latest}
  earlyStoppings:
  - {algorithmName: same-uid, image: ghcr.io/kubeflow/katib/suggestion-hyperopt:latest}
  - {algorithmName: other-uid, image: katib-progress/suggestion:0.1.0}
"""
    model = make_model(scenarios.always(scenarios.converging), katib_config=config)
    model.submit(_stock("same", early_stopping="same-uid", max_trials=3, parallel=3))
    model.submit(_stock("other", early_stopping="other-uid", max_trials=3, parallel=3))
    # same uid (both root): both bind 6789 with SO_REUSEPORT (connections are split), the pod is Ready
    wait_until(
        lambda: has_condition(model.kube.get(SUGGESTIONS, NS, "same") or {}, "DeploymentReady"), timeout=45
    )
    same = [cs for cs in _pod_state(model) if cs["image"].endswith("hyperopt:latest")]
    assert len(same) >= 2 and all(cs["ready"] and cs["restartCount"] == 0 for cs in same[:2])

    def crash_looping() -> bool:
        pods = model.kube.list(PODS, NS)
        states = [
            cs
            for p in pods
            if p["metadata"]["name"].startswith("other-")
            for cs in p["status"]["containerStatuses"]
        ]
        return any(cs["restartCount"] >= 1 for cs in states) and not all(cs["ready"] for cs in states)

    # different uids (root vs 65532): the later bind of 6789 fails, that container crash-loops
    wait_until(crash_looping, timeout=60)
    deployment = model.kube.get(DEPLOYMENTS, NS, "other-random")
    assert deployment is not None and deployment["status"]["conditions"][0]["status"] == "False"
    suggestion = model.kube.get(SUGGESTIONS, NS, "other")
    assert suggestion is not None and not has_condition(suggestion, "DeploymentReady")
