"""The model's rules, one by one, on hand-built objects (the expectations are read off the upstream
functions each rule names)."""

from __future__ import annotations

import math
from typing import Any

import pytest

from tests.katibmodel import expstatus, rules
from tests.katibmodel.experiment import suggestion_requests, trials_to_add
from tests.katibmodel.suggestionclient import convert_trials, pb
from tests.katibmodel.trial import update_condition
from tests.test_examples_gjson import FAILURE_CONDITION, MARKER_ANNOTATION, SUCCESS_CONDITION

T1, T2, T3 = "2026-01-05T12:00:01Z", "2026-01-05T12:00:02Z", "2026-01-05T12:00:03.5Z"
STRATEGIES = [{"name": "loss", "value": "min"}, {"name": "accuracy", "value": "max"}]


def cond(kind: str, status: str = "True", reason: str = "") -> dict[str, str]:
    return {"type": kind, "status": status, "reason": reason or kind, "message": ""}


def trial(
    name: str = "t", *conditions: dict[str, str], observation: list[dict[str, str]] | None = None
) -> dict[str, Any]:
    status: dict[str, Any] = {"conditions": list(conditions)}
    if observation is not None:
        status["observation"] = {"metrics": observation}
    return {
        "metadata": {"name": name},
        "spec": {
            "objective": {
                "type": "minimize",
                "objectiveMetricName": "loss",
                "additionalMetricNames": ["accuracy"],
                "metricStrategies": STRATEGIES,
            },
            "parameterAssignments": [{"name": "lr", "value": "0.1"}],
            "metricsCollector": {"collector": {"kind": "Push"}},
            "successCondition": SUCCESS_CONDITION,
            "failureCondition": FAILURE_CONDITION,
        },
        "status": status,
    }


def metric(name: str, lo: str, hi: str, latest: str) -> dict[str, str]:
    return {"name": name, "min": lo, "max": hi, "latest": latest}


# ---- getMetrics (trial_controller_util.go) --------------------------------------------------------


def test_get_metrics_min_max_latest_per_strategy_metric() -> None:
    logs = [
        ("loss", "0.5", T1), ("loss", "0.3", T2), ("loss", "0.4", T3),
        ("accuracy", "0.7", T1), ("other", "9", T1),
    ]  # fmt: skip
    assert rules.get_metrics(logs, STRATEGIES) == {
        "metrics": [metric("loss", "0.3", "0.5", "0.4"), metric("accuracy", "0.7", "0.7", "0.7")]
    }


def test_get_metrics_latest_is_by_timestamp_and_ties_go_to_the_later_row() -> None:
    logs = [("loss", "0.2", T3), ("loss", "0.9", T1), ("loss", "0.8", T3)]
    assert rules.get_metrics(logs, STRATEGIES)["metrics"][0] == metric("loss", "0.2", "0.9", "0.8")


def test_get_metrics_keeps_value_strings_and_skips_non_numbers_for_min_max() -> None:
    logs = [("loss", "1e-3", T1), ("loss", rules.UNAVAILABLE, T2)]
    loss, accuracy = rules.get_metrics(logs, STRATEGIES)["metrics"]
    assert loss == metric("loss", "1e-3", "1e-3", rules.UNAVAILABLE)
    assert accuracy == metric("accuracy", rules.UNAVAILABLE, rules.UNAVAILABLE, rules.UNAVAILABLE)
    assert not rules.is_observation_available(trial(observation=[loss]))


def test_get_metrics_fails_on_an_unparsable_timestamp() -> None:
    with pytest.raises(ValueError, match="failed to parse timestamps"):
        rules.get_metrics([("loss", "1", "2026-01-05 12:00:00")], STRATEGIES)


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("1.5", 1.5),
        ("-2e3", -2000.0),
        ("Inf", math.inf),
        ("0x1p-2", 0.25),
        (" 1", None),
        ("1_0", None),
        ("", None),
    ],
)
def test_parse_float_is_go_strconv(text: str, value: float | None) -> None:
    assert rules.parse_float(text) == value


def test_parse_float_nan() -> None:
    parsed = rules.parse_float("NaN")
    assert parsed is not None and math.isnan(parsed)


def test_parse_time_orders_fractions_and_offsets() -> None:
    assert rules.parse_time("2026-01-05T12:00:01.5Z") > rules.parse_time("2026-01-05T12:00:01Z")
    assert rules.parse_time("2026-01-05T13:00:00+01:00") == rules.parse_time("2026-01-05T12:00:00Z")


# ---- values sent to the services, experiment status -----------------------------------------------


def test_objective_value_falls_back_to_latest() -> None:
    t = trial(observation=[metric("loss", rules.UNAVAILABLE, rules.UNAVAILABLE, "0.4")])
    assert rules.objective_value(t) == "0.4"
    assert rules.objective_value(trial()) == rules.UNAVAILABLE


def test_convert_trials_skips_metrics_unavailable_and_early_stopped_without_observation() -> None:
    obs = [metric("loss", "0.3", "0.5", "0.4"), metric("accuracy", "0.6", "0.8", "0.7")]
    sent = convert_trials(
        [
            trial("ok", cond("Created"), cond("Succeeded"), observation=obs),
            trial("pruned-with", cond("Created"), cond("Running"), cond("EarlyStopped"), observation=obs),
            trial("pruned-without", cond("Created"), cond("Running"), cond("EarlyStopped")),
            trial("unavailable", cond("Created"), cond("Running", "False"), cond("MetricsUnavailable")),
            trial("running", cond("Created"), cond("Running")),
        ]
    )
    assert [t.name for t in sent] == ["ok", "pruned-with", "running"]
    assert [t.status.condition for t in sent] == [
        pb.TrialStatus.SUCCEEDED,
        pb.TrialStatus.EARLYSTOPPED,
        pb.TrialStatus.RUNNING,
    ]
    assert [(m.name, m.value) for m in sent[0].status.observation.metrics] == [
        ("loss", "0.3"),
        ("accuracy", "0.8"),
    ]


def test_convert_trials_sends_the_last_condition_even_when_false() -> None:
    (sent,) = convert_trials([trial("t", cond("Created"), cond("Running", "False"))])
    assert sent.status.condition == pb.TrialStatus.RUNNING


def test_requests_subtract_early_stopped_trials_without_observation() -> None:
    obs = [metric("loss", "0.3", "0.5", "0.4")]
    trials = [
        trial("a", cond("EarlyStopped")),
        trial("b", cond("EarlyStopped")),
        trial("c", cond("EarlyStopped"), observation=obs),
        trial("d", cond("Succeeded"), observation=obs),
        trial("e", cond("Running")),
    ]
    assert suggestion_requests(trials, 2) == 5 + 2 - 2


def _experiment(
    status: dict[str, int], *, max_trials: int = 12, parallel: int = 3, **spec: Any
) -> dict[str, Any]:
    return {
        "spec": {
            "maxTrialCount": max_trials,
            "parallelTrialCount": parallel,
            "objective": {"type": "minimize"},
            **spec,
        },
        "status": dict(status),
    }


@pytest.mark.parametrize(
    ("status", "add"),
    [
        ({}, 3),
        ({"trialsRunning": 3}, 0),
        ({"trialsRunning": 1, "trialsEarlyStopped": 3}, 2),
        ({"trialsSucceeded": 10, "trialsRunning": 1}, 1),
        ({"trialsSucceeded": 9, "trialMetricsUnavailable": 3}, 3),  # ReconcileTrials leaves MU out
    ],
)
def test_trials_to_add(status: dict[str, int], add: int) -> None:
    assert trials_to_add(_experiment(status)) == add


def test_classify_order() -> None:
    assert rules.classify(trial("t", cond("Running"), cond("EarlyStopped"))) == "EarlyStopped"
    assert (
        rules.classify(trial("t", cond("Running", "False"), cond("MetricsUnavailable")))
        == "MetricsUnavailable"
    )
    assert rules.classify(trial("t", cond("Created"))) == "Pending"


@pytest.mark.parametrize(
    ("status", "kind", "reason"),
    [
        (
            {"trialsSucceeded": 6, "trialsEarlyStopped": 5, "trialMetricsUnavailable": 1},
            "Succeeded",
            "ExperimentMaxTrialsReached",
        ),
        ({"trialsFailed": 1, "trialMetricsUnavailable": 1, "trialsRunning": 1}, "Failed", "ExperimentFailed"),
        ({"trialsSucceeded": 6, "trialsRunning": 3}, "Running", "ExperimentRunning"),
    ],
)
def test_experiment_condition(status: dict[str, int], kind: str, reason: str) -> None:
    exp = _experiment(status, maxFailedTrialCount=2)
    expstatus.update_condition(exp, goal_reached=False)
    last = exp["status"]["conditions"][-1]
    assert (last["type"], last["status"], last["reason"]) == (kind, "True", reason)


def test_goal_wins_and_best_trial_is_tracked() -> None:
    exp = _experiment({}, max_trials=3)
    exp["spec"]["objective"] = {"type": "minimize", "objectiveMetricName": "loss", "goal": 0.35}
    exp["metadata"] = {"name": "e"}
    trials = [
        trial("a", cond("Succeeded"), observation=[metric("loss", "0.5", "0.9", "0.6")]),
        trial("b", cond("EarlyStopped"), observation=[metric("loss", "0.3", "0.9", "0.6")]),
    ]
    goal = expstatus.update_trials_summary(exp, trials)
    assert goal is True
    assert exp["status"]["currentOptimalTrial"]["bestTrialName"] == "b"
    assert exp["status"]["trialsEarlyStopped"] == 1 and exp["status"]["earlyStoppedTrialList"] == ["b"]


# ---- job conditions (job_util.go) and trial conditions (trial_controller_util.go) ------------------


def job(*conditions: dict[str, str], marker: bool = False) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "t", "annotations": {MARKER_ANNOTATION: "written"} if marker else {}}
    return {"metadata": meta, "status": {"conditions": list(conditions)}}


def test_job_status() -> None:
    complete = {
        "type": "Complete",
        "status": "True",
        "reason": "AllJobsCompleted",
        "message": "jobset completed successfully",
    }
    failed = {"type": "Failed", "status": "True", "reason": "FailedJobs", "message": "boom"}
    created = trial("t", cond("Created"))
    assert rules.deployed_job_status(created, job(failed, complete, marker=True)) == rules.JobStatus(
        "Failed", "FailedJobs", "boom"
    )
    assert rules.deployed_job_status(created, job(complete, marker=True)) == rules.JobStatus(
        "Succeeded", "AllJobsCompleted", "jobset completed successfully"
    )
    assert rules.deployed_job_status(created, job(complete)) == rules.JobStatus("Running")  # no marker yet
    running = trial("t", cond("Created"), cond("Running"), cond("EarlyStopped"))
    suspended = {
        "type": "Suspended",
        "status": "True",
        "reason": "Suspended",
        "message": "TrainJob is suspended",
    }
    assert rules.deployed_job_status(running, job(suspended)) is None  # a suspended job: nothing, ever


def test_job_status_unmarshal_error() -> None:
    t = trial("t", cond("Created"))
    t["spec"]["failureCondition"] = "status.conditions.#.type"  # a non-empty array of strings
    with pytest.raises(rules.JobStatusError):
        rules.deployed_job_status(t, job({"type": "Failed", "status": "True"}))


class _DB:
    def __init__(self) -> None:
        self.unavailable: list[str] = []

    def report_unavailable(self, t: dict[str, Any]) -> None:
        self.unavailable.append(t["metadata"]["name"])


def test_succeeded_job_with_observation_succeeds_the_trial() -> None:
    t = trial(
        "t",
        cond("Created"),
        cond("Running", reason="TrialRunning"),
        observation=[metric("loss", "1", "2", "1")],
    )
    update_condition(t, "t", rules.JobStatus("Succeeded", "AllJobsCompleted", "done"), _DB())  # type: ignore[arg-type]
    types = [(c["type"], c["status"]) for c in t["status"]["conditions"]]
    assert types == [("Created", "True"), ("Running", "False"), ("Succeeded", "True")]
    assert t["status"]["conditions"][-1]["reason"] == "TrialSucceeded. Job reason: AllJobsCompleted"


def test_succeeded_job_without_objective_is_metrics_unavailable_and_reported() -> None:
    db = _DB()
    t = trial("t", cond("Created"), cond("Running"))
    update_condition(t, "t", rules.JobStatus("Succeeded"), db)  # type: ignore[arg-type]
    assert rules.classify(t) == "MetricsUnavailable" and db.unavailable == ["t"]
    assert not any(c["type"] == "Succeeded" for c in t["status"]["conditions"])


def test_early_stopped_trial_is_never_succeeded_or_failed() -> None:
    obs = [metric("loss", "1", "2", "1")]
    for status in (rules.JobStatus("Succeeded"), rules.JobStatus("Failed"), rules.JobStatus("Running")):
        t = trial("t", cond("Created"), cond("Running"), cond("EarlyStopped"), observation=obs)
        update_condition(t, "t", status, _DB())  # type: ignore[arg-type]
        assert rules.classify(t) == "EarlyStopped"
        assert [c["type"] for c in t["status"]["conditions"]] == ["Created", "Running", "EarlyStopped"]
