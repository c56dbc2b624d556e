"""Katib's experiment controller (pkg/controller.v1beta1/experiment/experiment_controller.go,
experiment_controller_util.go, experiment/suggestion/suggestion.go)."""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any

from kubernetes import client

from tests.katibmodel import expstatus, rules, webhook
from tests.katibmodel._controller import Cache, Controller, Key, Watch, for_object, for_owner
from tests.katibmodel._kube import (
    EXPERIMENTS,
    OK,
    SUGGESTIONS,
    TRIALS,
    Result,
    get_condition,
    has_condition,
    now,
    owner_reference,
    remove_condition,
    set_condition,
)
from tests.katibmodel.composer import LABEL_EXPERIMENT
from tests.katibmodel.suggestion import mark_succeeded


def trial_labels(experiment: Mapping[str, Any]) -> dict[str, str]:
    """util/labels.go: TrialLabels."""
    return {**(experiment["metadata"].get("labels") or {}), LABEL_EXPERIMENT: experiment["metadata"]["name"]}


def suggestion_requests(trials: Sequence[Mapping[str, Any]], add: int) -> int:
    """experiment_controller.go: ReconcileSuggestions -- current trials + addCount, minus EarlyStopped
    trials without an observation ("no new trials will be requested from suggestion service until
    observations are ready for early stopped trials")."""
    incomplete = sum(
        1 for t in trials if not rules.is_observation_available(t) and has_condition(t, "EarlyStopped")
    )
    return len(trials) + add - incomplete


def trials_to_add(experiment: Mapping[str, Any]) -> int:
    """experiment_controller.go: ReconcileTrials -- how many trials to create (0 when at capacity).
    ``completed`` here leaves MetricsUnavailable out, unlike UpdateExperimentStatusCondition."""
    spec = experiment["spec"]
    parallel = int(spec["parallelTrialCount"])
    active = expstatus.count(experiment, "trialsPending") + expstatus.count(experiment, "trialsRunning")
    completed = sum(
        expstatus.count(experiment, f)
        for f in ("trialsSucceeded", "trialsFailed", "trialsKilled", "trialsEarlyStopped")
    )
    if active >= parallel:
        return 0
    if spec.get("maxTrialCount") is None:
        required = parallel
    else:
        required = min(int(spec["maxTrialCount"]) - completed, parallel)
    return max(0, required - active)


def trial_instance(experiment: Mapping[str, Any], assignment: Mapping[str, Any]) -> dict[str, Any]:
    """experiment_controller_util.go: getTrialInstance."""
    spec = experiment["spec"]
    namespace = experiment["metadata"]["namespace"]
    labels = {**trial_labels(experiment), **(assignment.get("labels") or {})}
    trial_spec: dict[str, Any] = {
        "objective": copy.deepcopy(spec["objective"]),
        "parameterAssignments": copy.deepcopy(assignment.get("parameterAssignments") or []),
        "runSpec": webhook.run_spec(
            experiment, assignment["name"], namespace, assignment.get("parameterAssignments") or []
        ),
    }
    if spec.get("earlyStopping") is not None:
        trial_spec["earlyStoppingRules"] = copy.deepcopy(assignment.get("earlyStoppingRules") or [])
    template = spec.get("trialTemplate") or {}
    if template.get("retain"):
        trial_spec["retainRun"] = True
    trial_spec["metricsCollector"] = copy.deepcopy(spec.get("metricsCollectorSpec") or {})
    for field in ("primaryPodLabels", "primaryContainerName"):
        if template.get(field):
            trial_spec[field] = copy.deepcopy(template[field])
    if template.get("successCondition") and template.get("failureCondition"):
        trial_spec["successCondition"] = template["successCondition"]
        trial_spec["failureCondition"] = template["failureCondition"]
    return {
        "apiVersion": "kubeflow.org/v1beta1",
        "kind": "Trial",
        "metadata": {
            "name": assignment["name"],
            "namespace": namespace,
            "labels": labels,
            "ownerReferences": [owner_reference(experiment)],
        },
        "spec": trial_spec,
    }


class ExperimentController(Controller):
    name = "experiment"

    def watches(self) -> list[Watch]:
        return [
            Watch(EXPERIMENTS, for_object),
            Watch(TRIALS, for_owner("Experiment")),
            Watch(SUGGESTIONS, for_owner("Experiment")),
        ]

    def reconcile(self, key: Key, cache: Cache) -> Result:
        """experiment_controller.go: Reconcile (no finalizer, no restart from a volume)."""
        original = cache.get(EXPERIMENTS, key)
        if original is None:
            return OK
        experiment = copy.deepcopy(original)
        experiment.setdefault("status", {})
        if expstatus.is_completed(experiment):
            if experiment["spec"].get("resumePolicy") in ("Never", "FromVolume"):
                self.cleanup_suggestion(experiment, cache)
            if self._restarting(experiment):
                remove_condition(experiment, "Succeeded")  # MarkExperimentStatusRestarting
                remove_condition(experiment, "Failed")
                set_condition(
                    experiment, "Restarting", "True", "ExperimentRestarting", "Experiment is restarted"
                )
            elif not expstatus.count(experiment, "trialsRunning"):  # HasRunningTrials
                return OK
        error: Exception | None = None
        if not has_condition(experiment, "Created"):
            experiment["status"].setdefault("startTime", now())
            set_condition(experiment, "Created", "True", expstatus.CREATED_REASON, "Experiment is created")
        else:
            try:
                self.reconcile_experiment(experiment, cache)
            except Exception as exc:  # "Reconcile experiment error": returned before any status update
                return Result(error=exc)
        if experiment["status"] != (original.get("status") or {}):
            try:
                self.kube.update_status(EXPERIMENTS, experiment)
            except client.ApiException:
                return Result(requeue=True)  # "Update experiment instance status failed, reconciler requeued"
        return Result(error=error) if error else OK

    @staticmethod
    def _restarting(experiment: Mapping[str, Any]) -> bool:
        """Reconcile's restart test (util.IsCompletedExperimentRestartable and maxTrialCount)."""
        spec, trials = experiment["spec"], expstatus.count(experiment, "trials")
        succeeded = get_condition(experiment, "Succeeded") or {}
        restartable = (
            has_condition(experiment, "Succeeded")
            and succeeded.get("reason") == expstatus.MAX_TRIALS_REACHED_REASON
            and spec.get("resumePolicy") in ("LongRunning", "FromVolume")
        )
        max_trials = spec.get("maxTrialCount")
        return bool(
            (restartable and max_trials is not None and max_trials > trials)
            or (max_trials is None and trials)
        )

    def reconcile_experiment(self, experiment: dict[str, Any], cache: Cache) -> None:
        """ReconcileExperiment: trials by the experiment-name label only, in the namespace
        (experiment_controller.go ``ReconcileExperiment``: ``labels := map[string]string{
        consts.LabelExperimentName: instance.Name}``; the suggestion controller lists by all the
        Experiment's labels, ``util.TrialLabels``); status; then ReconcileTrials."""
        namespace = experiment["metadata"]["namespace"]
        name = experiment["metadata"]["name"]
        trials = [
            t
            for t in cache.list(TRIALS, namespace)
            if (t["metadata"].get("labels") or {}).get(LABEL_EXPERIMENT) == name
        ]
        if trials:
            goal = expstatus.update_trials_summary(experiment, trials)
            if not expstatus.is_completed(experiment):
                expstatus.update_condition(experiment, goal)
        if not expstatus.is_completed(experiment):
            add = trials_to_add(experiment)
            if add > 0:
                self.create_trials(experiment, trials, add, cache)

    def create_trials(
        self, experiment: dict[str, Any], trials: Sequence[Mapping[str, Any]], add: int, cache: Cache
    ) -> None:
        """createTrials: assignments from ReconcileSuggestions; a Trial create error is skipped."""
        for assignment in self.reconcile_suggestions(experiment, trials, add, cache):
            try:
                self.kube.create(
                    TRIALS, experiment["metadata"]["namespace"], trial_instance(experiment, assignment)
                )
            except client.ApiException:
                continue

    def reconcile_suggestions(
        self, experiment: dict[str, Any], trials: Sequence[Mapping[str, Any]], add: int, cache: Cache
    ) -> list[dict[str, Any]]:
        """ReconcileSuggestions + GetOrCreateSuggestion."""
        requests = suggestion_requests(trials, add)
        namespace, name = experiment["metadata"]["namespace"], experiment["metadata"]["name"]
        suggestion = cache.get(SUGGESTIONS, (namespace, name))
        if suggestion is None:
            self.kube.create(SUGGESTIONS, namespace, self.desired_suggestion(experiment, requests))
            return []
        if has_condition(suggestion, "Failed"):
            # experiment_controller.go ReconcileSuggestions: a fixed message; the reason why (e.g. the
            # validation error) stays in the Suggestion's Failed condition
            expstatus.mark_ended(experiment, "Failed", expstatus.FAILED_REASON, "Suggestion has failed")
            return []
        names = {t["metadata"]["name"] for t in trials}
        given = (suggestion.get("status") or {}).get("suggestions") or []
        assignments = [dict(a) for a in given if a["name"] not in names] if len(given) > len(trials) else []
        if int(suggestion["spec"].get("requests") or 0) != requests:
            updated = copy.deepcopy(suggestion)
            updated["spec"]["requests"] = requests
            self.kube.update(SUGGESTIONS, updated)
        return assignments

    @staticmethod
    def desired_suggestion(experiment: Mapping[str, Any], requests: int) -> dict[str, Any]:
        """suggestion.go: createSuggestion."""
        meta, spec = experiment["metadata"], experiment["spec"]
        body: dict[str, Any] = {
            "apiVersion": "kubeflow.org/v1beta1",
            "kind": "Suggestion",
            "metadata": {
                "name": meta["name"],
                "namespace": meta["namespace"],
                "labels": dict(meta.get("labels") or {}),
                "annotations": dict(meta.get("annotations") or {}),
                "ownerReferences": [owner_reference(experiment)],
            },
            "spec": {
                "algorithm": copy.deepcopy(spec["algorithm"]),
                "requests": requests,
                "resumePolicy": spec.get("resumePolicy"),
            },
        }
        if spec.get("earlyStopping") is not None:
            body["spec"]["earlyStopping"] = copy.deepcopy(spec["earlyStopping"])
        return body

    def cleanup_suggestion(self, experiment: Mapping[str, Any], cache: Cache) -> None:
        """experiment_controller_util.go: cleanupSuggestionResources -- mark the Suggestion Succeeded
        (its controller then deletes the Deployment and Service)."""
        key = (experiment["metadata"]["namespace"], experiment["metadata"]["name"])
        suggestion = cache.get(SUGGESTIONS, key)
        if (
            suggestion is None
            or has_condition(suggestion, "Succeeded")
            or has_condition(suggestion, "Failed")
        ):
            return
        running = get_condition(suggestion, "Running")
        if (
            running is not None
            and running.get("status") == "False"
            and running.get("reason") == "SuggestionRestart"
        ):
            return  # IsRestarting
        updated = copy.deepcopy(suggestion)
        never = experiment["spec"].get("resumePolicy") == "Never"
        message = (
            "Suggestion is succeeded, can't be restarted"
            if never
            else "Suggestion is succeeded, suggestion volume is not deleted, can be restarted"
        )
        mark_succeeded(updated, "Experiment is succeeded", message)
        self.kube.update_status(SUGGESTIONS, updated)
