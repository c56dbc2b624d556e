"""Experiment status from its Trials (pkg/controller.v1beta1/experiment/util/status_util.go,
apis/controller/experiments/v1beta1/util.go)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from tests.katibmodel import rules
from tests.katibmodel._kube import get_condition, has_condition, now, set_condition

CREATED_REASON = "ExperimentCreated"
RUNNING_REASON = "ExperimentRunning"
GOAL_REACHED_REASON = "ExperimentGoalReached"
MAX_TRIALS_REACHED_REASON = "ExperimentMaxTrialsReached"
SUGGESTION_END_REASON = "ExperimentSuggestionEndReached"
FAILED_REASON = "ExperimentFailed"

_LISTS = {
    "Killed": ("killedTrialList", "trialsKilled"),
    "Failed": ("failedTrialList", "trialsFailed"),
    "Succeeded": ("succeededTrialList", "trialsSucceeded"),
    "EarlyStopped": ("earlyStoppedTrialList", "trialsEarlyStopped"),
    "Running": ("runningTrialList", "trialsRunning"),
    "MetricsUnavailable": ("metricsUnavailableTrialList", "trialMetricsUnavailable"),
    "Pending": ("pendingTrialList", "trialsPending"),
}


def is_completed(experiment: Mapping[str, Any]) -> bool:
    """experiments/v1beta1/util.go: IsCompleted = Succeeded or Failed."""
    return has_condition(experiment, "Succeeded") or has_condition(experiment, "Failed")


def count(experiment: Mapping[str, Any], field: str) -> int:
    return int((experiment.get("status") or {}).get(field) or 0)


def mark_ended(experiment: dict[str, Any], kind: str, reason: str, message: str) -> None:
    """util.go: MarkExperimentStatus{Succeeded,Failed} -- Running to False, then the condition."""
    running = get_condition(experiment, "Running")
    if running is not None:
        set_condition(experiment, "Running", "False", running.get("reason", ""), running.get("message", ""))
    set_condition(experiment, kind, "True", reason, message)


def update_trials_summary(experiment: dict[str, Any], trials: Sequence[Mapping[str, Any]]) -> bool:
    """status_util.go: updateTrialsSummary -- buckets, counts, best trial; True when the goal is reached."""
    status = experiment.setdefault("status", {})
    lists: dict[str, list[str]] = {kind: [] for kind in _LISTS}
    objective = experiment["spec"]["objective"]
    goal = objective.get("goal")
    best_index, best_value, goal_reached = -1, 0.0, False
    for index, trial in enumerate(trials):
        lists[rules.classify(trial)].append(trial["metadata"]["name"])
        text = rules.objective_value(trial)
        if text == rules.UNAVAILABLE:
            continue
        value = rules.parse_float(text)
        if value is None:
            best_index = index  # "For string metrics values best trial is the latest"
            continue
        if best_index == -1:
            best_value, best_index = value, index
        if objective.get("type") == "minimize":
            if value < best_value:
                best_value, best_index = value, index
            if goal is not None and best_value <= float(goal):
                goal_reached = True
        elif objective.get("type") == "maximize":
            if value > best_value:
                best_value, best_index = value, index
            if goal is not None and best_value >= float(goal):
                goal_reached = True
    status["trials"] = len(trials)
    for kind, (list_field, count_field) in _LISTS.items():
        status[list_field] = lists[kind] or None
        status[count_field] = len(lists[kind])
    if best_index != -1:
        best = trials[best_index]
        status["currentOptimalTrial"] = {
            "bestTrialName": best["metadata"]["name"],
            "parameterAssignments": list(best["spec"].get("parameterAssignments") or []),
            "observation": {
                "metrics": list(((best.get("status") or {}).get("observation") or {}).get("metrics") or [])
            },
        }
    _omit_empty(status)
    return goal_reached


def _omit_empty(status: dict[str, Any]) -> None:
    """Go's ``omitempty``: zero counts and nil lists are not serialized."""
    for key in [k for k, v in status.items() if v is None or v == 0]:
        del status[key]


def update_condition(experiment: dict[str, Any], goal_reached: bool, suggestion_done: bool = False) -> None:
    """status_util.go: UpdateExperimentStatusCondition -- goal, then max failed (Failed + MetricsUnavailable),
    then max trials (all completed incl. EarlyStopped and MetricsUnavailable), then suggestion end."""
    spec = experiment["spec"]
    completed = sum(
        count(experiment, f)
        for f in (
            "trialsSucceeded",
            "trialsFailed",
            "trialsKilled",
            "trialsEarlyStopped",
            "trialMetricsUnavailable",
        )
    )
    failed = count(experiment, "trialsFailed") + count(experiment, "trialMetricsUnavailable")
    active = count(experiment, "trialsPending") + count(experiment, "trialsRunning")
    status = experiment["status"]
    if goal_reached:
        mark_ended(
            experiment,
            "Succeeded",
            GOAL_REACHED_REASON,
            "Experiment has succeeded because Objective goal has reached",
        )
        status["completionTime"] = now()
        return
    max_failed = spec.get("maxFailedTrialCount")
    if max_failed is not None and failed != 0 and failed >= max_failed:
        mark_ended(
            experiment, "Failed", FAILED_REASON, "Experiment has failed because max failed count has reached"
        )
        status["completionTime"] = now()
        return
    max_trials = spec.get("maxTrialCount")
    if max_trials is not None and completed >= max_trials:
        mark_ended(
            experiment,
            "Succeeded",
            MAX_TRIALS_REACHED_REASON,
            "Experiment has succeeded because max trial count has reached",
        )
        status["completionTime"] = now()
        return
    if suggestion_done and active == 0:
        mark_ended(
            experiment,
            "Succeeded",
            SUGGESTION_END_REASON,
            "Experiment has succeeded because suggestion service has reached the end",
        )
        status["completionTime"] = now()
        return
    set_condition(experiment, "Running", "True", RUNNING_REASON, "Experiment is running")
