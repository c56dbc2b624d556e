"""Whole Experiments through the Katib model with our real processes (issue 11, part 5):
``katib-progress collector run``, the suggestion/early-stopping images of the shipped katib-config
and ``katib-progress db serve`` as Katib's DB manager.
"""

from __future__ import annotations

import itertools
import time
from typing import Any

import pytest

from tests.katibmodel import rules, scenarios
from tests.katibmodel._kube import SUGGESTIONS, TRAINJOBS, TRIALS, has_condition
from tests.katibmodel.conftest import ModelFactory
from tests.katibmodel.harness import KatibModel
from tests.katibmodel.scenarios import NS
from tests.kubestandin.waiting import wait_until


def observation_matches_stored_rows(model: KatibModel, trial: dict[str, Any]) -> bool:
    """The trial's observation is Katib's getMetrics over rows stored for it (objective and additional
    metrics, by metricStrategies): each metric's log up to some row (rows stored after the observation
    was computed, e.g. a snapshot in flight when the trial was pruned, do not count)."""
    objective = trial["spec"]["objective"]
    name = trial["metadata"]["name"]
    logs = [
        model.rows(name, m)
        for m in [objective["objectiveMetricName"], *objective.get("additionalMetricNames", [])]
    ]
    strategies = rules.strategies_of(trial)
    observed = trial["status"].get("observation")
    for cut in itertools.product(*(range(len(log) + 1) for log in logs)):
        rows = [row for log, n in zip(logs, cut, strict=True) for row in log[:n]]
        if rows and observed == rules.get_metrics(rows, strategies):
            return True
    return False


def run_experiment(
    make_model: ModelFactory, experiment: dict[str, Any], script: scenarios.Script, **kw: Any
) -> tuple[KatibModel, dict[str, Any]]:
    model = make_model(script, train_interval_s=kw.pop("interval", 0.25))
    model.start_collector(experiment)
    model.submit(experiment)
    return model, model.wait_finished(NS, experiment["metadata"]["name"], **kw)


@pytest.mark.slow
@pytest.mark.parametrize("retain", [False, True], ids=["retain-false", "retain-true"])
def test_half_pruned_experiment_runs_to_max_trials(make_model: ModelFactory, retain: bool) -> None:
    """maxTrialCount 12, parallelTrialCount 3, two trials in three diverge and are pruned live."""
    experiment = scenarios.experiment("half", settings={"policy": "divergence"}, retain=retain)
    script = scenarios.every(3, scenarios.diverging, scenarios.converging)
    model, exp = run_experiment(make_model, experiment, script, timeout=240)
    last = exp["status"]["conditions"][-1]
    assert (last["type"], last["reason"]) == ("Succeeded", "ExperimentMaxTrialsReached"), model.describe(
        NS, "half"
    )
    trials = model.trial_list(NS, "half")
    pruned = [t for t in trials if has_condition(t, "EarlyStopped")]
    assert len(pruned) >= 6 and exp["status"]["trialsEarlyStopped"] == len(pruned)
    assert not any(has_condition(t, "MetricsUnavailable") or has_condition(t, "Failed") for t in trials)
    for trial in trials:
        assert rules.is_observation_available(trial), trial["metadata"]["name"]
        assert observation_matches_stored_rows(model, trial), trial["status"].get("observation")
    jobs = {j["metadata"]["name"]: j for j in model.kube.list(TRAINJOBS, NS)}
    if retain:
        for trial in pruned:
            job = jobs[trial["metadata"]["name"]]
            assert job["spec"].get("suspend") is True and has_condition(job, "Suspended")
            assert not has_condition(job, "Complete")
    else:
        assert not jobs


PAIRINGS = [
    pytest.param("kp-tpe", "katib-progress", id="kp-tpe+katib-progress"),
    pytest.param("kp-tpe", "medianstop", id="kp-tpe+medianstop", marks=pytest.mark.slow),
    pytest.param("kp-tpe", None, id="kp-tpe+none", marks=pytest.mark.slow),
    pytest.param("random", "katib-progress", id="random+katib-progress", marks=pytest.mark.slow),
    pytest.param("random", "medianstop", id="random+medianstop", marks=pytest.mark.slow),
    pytest.param("random", None, id="random+none", marks=pytest.mark.slow),
]


@pytest.mark.parametrize(("algorithm", "early_stopping"), PAIRINGS)
def test_pairing_runs_to_completion(
    make_model: ModelFactory, algorithm: str, early_stopping: str | None
) -> None:
    """{kp-* algorithm, stock algorithm} x {katib-progress early stopping, medianstop, none}: a Ready
    suggestion Deployment, and an Experiment that runs to maxTrialCount with every trial's objective."""
    name = "pair"
    experiment = scenarios.experiment(
        name, algorithm=algorithm, early_stopping=early_stopping, max_trials=4, parallel=2
    )
    model, exp = run_experiment(
        make_model, experiment, scenarios.always(lambda: scenarios.converging(5)), timeout=150, interval=0.15
    )
    last = exp["status"]["conditions"][-1]
    assert (last["type"], last["reason"]) == ("Succeeded", "ExperimentMaxTrialsReached"), model.describe(
        NS, name
    )
    trials = model.trial_list(NS, name)
    assert len(trials) == 4 and all(has_condition(t, "Succeeded") for t in trials)
    for trial in trials:
        assert observation_matches_stored_rows(model, trial)
    suggestion = model.kube.get(SUGGESTIONS, NS, name)
    assert suggestion is not None
    ready = next(c for c in suggestion["status"]["conditions"] if c["type"] == "DeploymentReady")
    assert ready["reason"] in ("DeploymentReady", "Suggestion is succeeded")  # was Ready, then cleaned up
    calls = {method for method, _ in model.client.calls}
    assert ("GetEarlyStoppingRules" in calls) is (early_stopping is not None)


@pytest.mark.slow
def test_pruned_trials_trainjob_is_suspended(make_model: ModelFactory) -> None:
    """retain: true keeps the TrainJob: pruning must suspend it (the JobSet is suspended, its pods and
    GPUs released), and a suspended TrainJob never completes."""
    experiment = scenarios.experiment(
        "susp", settings={"policy": "divergence"}, retain=True, max_trials=6, parallel=3
    )
    model = make_model(scenarios.every(3, scenarios.diverging, scenarios.converging), train_interval_s=0.25)
    model.start_collector(experiment)
    model.submit(experiment)

    def first_pruned() -> str | None:
        return next(
            (t["metadata"]["name"] for t in model.trial_list(NS, "susp") if has_condition(t, "EarlyStopped")),
            None,
        )

    name = wait_until(first_pruned, timeout=120)

    def suspended() -> dict[str, Any] | None:
        job = model.kube.get(TRAINJOBS, NS, name)
        return job if job and has_condition(job, "Suspended") else None

    job = wait_until(suspended, timeout=30)
    assert job["spec"]["suspend"] is True
    assert job["status"]["jobsStatus"][0]["active"] == 0 and job["status"]["jobsStatus"][0]["suspended"] == 1
    with model.trainer._lock:
        assert model.trainer.jobsets[(NS, name)].run is None  # no trainer pod: its GPUs are free
    progress = job["status"]["trainerStatus"]["progressPercentage"]
    assert progress < 100
    time.sleep(10 * 0.25)  # ten more points' time: a running trainer would have reached 100%
    later = model.kube.get(TRAINJOBS, NS, name)
    assert later is not None and not has_condition(later, "Complete")
    assert later["status"]["trainerStatus"]["progressPercentage"] == progress
    trial = model.kube.get(TRIALS, NS, name)
    assert trial is not None and has_condition(trial, "EarlyStopped")


@pytest.mark.slow
@pytest.mark.parametrize("algorithm", ["kp-tpe", "random"])
def test_invalid_early_stopping_settings_fail_the_experiment(
    make_model: ModelFactory, algorithm: str
) -> None:
    """The webhook does not validate early-stopping settings; the suggestion controller does, once the
    suggestion pod is Ready: our message lands on the Suggestion, the Experiment fails."""
    experiment = scenarios.experiment("bad", algorithm=algorithm, settings={"policy": "bogus"}, max_trials=3)
    model = make_model(scenarios.always(scenarios.converging))
    model.submit(experiment)  # admitted: only the early-stopping algorithm's name is checked
    exp = model.wait_finished(NS, "bad", timeout=120)
    last = exp["status"]["conditions"][-1]
    assert (last["type"], last["reason"], last["message"]) == (
        "Failed",
        "ExperimentFailed",
        "Suggestion has failed",
    )
    suggestion = model.kube.get(SUGGESTIONS, NS, "bad")
    assert suggestion is not None
    failed = next(c for c in suggestion["status"]["conditions"] if c["type"] == "Failed")
    # suggestionclient.go ValidateEarlyStoppingSettings wraps our INVALID_ARGUMENT details, which name
    # the field, the setting and the value; suggestion_controller.go prefixes "Validation failed: "
    message = failed["message"]
    assert message.startswith(
        "Validation failed: ValidateEarlyStoppingSettings Error: "
        "earlyStopping.algorithmSettings policy: unknown policy bogus; allowed: default, "
    ), message
    assert message.endswith("(got 'bogus')"), message
    assert failed["reason"] == "SuggestionFailed"
    assert not model.trial_list(NS, "bad")


@pytest.mark.slow
@pytest.mark.parametrize("algorithm", ["kp-tpe", "random"])
def test_stock_file_collector_early_stops_through_set_trial_status(
    make_model: ModelFactory, algorithm: str
) -> None:
    """Stock ``StdOut`` collector + ``katib-progress`` early stopping, without our collector: Katib's
    sidecar applies our static rules (threshold), reports the log, and calls SetTrialStatus on our
    early-stopping process, which marks the Trial EarlyStopped the way medianstop does; Katib then
    reads the observation of the completed job and the Experiment runs to maxTrialCount.

    ``retain: true`` as in Katib's own early-stopping examples (examples/v1beta1/early-stopping): with
    ``retain: false`` the next trial reconcile deletes the job of an EarlyStopped Trial before it reads
    the observation (trial_controller.go ``reconcileJob``), whichever early-stopping service marked it
    (Katib #1377); our collector avoids that for its own prunes by writing the observation itself."""
    name = "stdout"
    experiment = scenarios.experiment(
        name,
        algorithm=algorithm,
        settings={"policy": "threshold", "threshold_upper": "1.2", "start_step": "2"},
        max_trials=4,
        parallel=2,
        retain=True,
        success_condition=scenarios.STOCK_SUCCESS,
    )
    experiment["spec"]["metricsCollectorSpec"] = {"collector": {"kind": "StdOut"}}
    # even trials converge (best loss <= 1.0), odd ones diverge from 1.5 (best loss 1.5 > 1.2)
    script = scenarios.every(2, lambda: scenarios.diverging(6, start=1.5), lambda: scenarios.converging(6))
    model = make_model(script, train_interval_s=0.2)
    model.submit(experiment)
    exp = model.wait_finished(NS, name, timeout=150)
    last = exp["status"]["conditions"][-1]
    assert (last["type"], last["reason"]) == ("Succeeded", "ExperimentMaxTrialsReached"), model.describe(
        NS, name
    )
    trials = model.trial_list(NS, name)
    assert len(trials) == 4
    stopped = {t["metadata"]["name"] for t in trials if has_condition(t, "EarlyStopped")}
    diverged = {
        t["metadata"]["name"] for t in trials if model.rows(t["metadata"]["name"], "loss")[0][1] == "1.5000"
    }
    assert stopped == diverged and len(stopped) == 2, (stopped, diverged)
    assert exp["status"]["trialsEarlyStopped"] == 2 and exp["status"]["trialsSucceeded"] == 2
    endpoint = f"{name}-{algorithm}.{NS}:6788"
    assert sorted(model.file_collector.set_trial_status_calls) == sorted((endpoint, t) for t in stopped)
    for trial in trials:
        assert rules.is_observation_available(trial), trial["metadata"]["name"]
        assert observation_matches_stored_rows(model, trial), trial["status"].get("observation")
        if trial["metadata"]["name"] in stopped:
            condition = next(c for c in trial["status"]["conditions"] if c["type"] == "EarlyStopped")
            # written by our early-stopping process's SetTrialStatus (no collector of ours runs here)
            assert (condition["status"], condition["reason"], condition["message"]) == (
                "True",
                "TrialEarlyStopped",
                "Trial is early stopped",
            )
            # two points printed, then the training was terminated
            assert len(model.rows(trial["metadata"]["name"], "loss")) == 2
        else:
            assert has_condition(trial, "Succeeded")
