"""Katib's suggestion controller (pkg/controller.v1beta1/suggestion/suggestion_controller.go,
suggestion_controller_util.go, suggestion_controller_status.go, apis/.../suggestions/v1beta1/util.go)."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from kubernetes import client

from tests.katibmodel import composer
from tests.katibmodel._controller import Cache, Controller, Key, Timing, Watch, for_object, for_owner
from tests.katibmodel._kube import (
    DEPLOYMENTS,
    EXPERIMENTS,
    OK,
    SERVICES,
    SUGGESTIONS,
    TRIALS,
    Kube,
    Result,
    get_condition,
    has_condition,
    now,
    remove_condition,
    set_condition,
)
from tests.katibmodel.katibconfig import InitConfig
from tests.katibmodel.suggestionclient import Client, ValidationFailed

CREATED_REASON = "SuggestionCreated"
DEPLOYMENT_READY = "DeploymentReady"
DEPLOYMENT_NOT_READY = "DeploymentNotReady"
RUNNING_REASON = "SuggestionRunning"
FAILED_REASON = "SuggestionFailed"


def mark_failed(suggestion: dict[str, Any], reason: str, message: str) -> None:
    """suggestions/v1beta1/util.go: MarkSuggestionStatusFailed."""
    running = get_condition(suggestion, "Running")
    if running is not None:
        set_condition(suggestion, "Running", "False", running.get("reason", ""), running.get("message", ""))
    set_condition(suggestion, "Failed", "True", reason, message)


def mark_succeeded(suggestion: dict[str, Any], reason: str, message: str) -> None:
    """suggestions/v1beta1/util.go: MarkSuggestionStatusSucceeded (Running, DeploymentReady -> False)."""
    if get_condition(suggestion, "Running") is not None:
        set_condition(suggestion, "Running", "False", "Suggestion is succeeded", "Suggestion is not running")
    if get_condition(suggestion, "DeploymentReady") is not None:
        set_condition(
            suggestion, "DeploymentReady", "False", "Suggestion is succeeded", "Deployment is not ready"
        )
    set_condition(suggestion, "Succeeded", "True", reason, message)


def deployment_ready(deployment: Mapping[str, Any] | None) -> bool:
    """suggestion_controller.go: checkDeploymentReady -- condition Available is True."""
    if deployment is None:
        return False
    return any(
        c.get("type") == "Available" and c.get("status") == "True"
        for c in (deployment.get("status") or {}).get("conditions") or ()
    )


class SuggestionController(Controller):
    name = "suggestion"

    def __init__(self, kube: Kube, timing: Timing, client_: Client, init: InitConfig) -> None:
        super().__init__(kube, timing)
        self.client = client_
        self.init = init

    def watches(self) -> list[Watch]:
        return [
            Watch(SUGGESTIONS, for_object),
            Watch(DEPLOYMENTS, for_owner("Suggestion")),
            Watch(SERVICES, for_owner("Suggestion")),
        ]

    def reconcile(self, key: Key, cache: Cache) -> Result:
        """suggestion_controller.go: Reconcile."""
        old = cache.get(SUGGESTIONS, key)
        if old is None:
            return OK
        suggestion = copy.deepcopy(old)
        suggestion.setdefault("status", {})
        if has_condition(suggestion, "Succeeded"):  # ResumePolicy Never/FromVolume after the Experiment
            name = composer.deployment_name(suggestion)
            self.kube.delete(DEPLOYMENTS, key[0], name)
            self.kube.delete(SERVICES, key[0], name)
            return OK
        error: Exception | None = None
        if not has_condition(suggestion, "Created"):
            suggestion["status"].setdefault("startTime", now())
            set_condition(suggestion, "Created", "True", CREATED_REASON, "Suggestion is created")
        else:
            try:
                self.reconcile_suggestion(suggestion, cache)
            except Exception as exc:  # updateStatusCondition: keep only the new conditions, requeue
                error = exc
                kept = copy.deepcopy(old)
                kept.setdefault("status", {})["conditions"] = suggestion["status"].get("conditions") or []
                suggestion = kept
        if suggestion["status"] != (old.get("status") or {}):
            try:
                self.kube.update_status(SUGGESTIONS, suggestion)
            except client.ApiException as exc:
                if exc.status == 409 and error is None:
                    return Result(requeue=True)
                if error is None:
                    raise
        return Result(error=error) if error is not None else OK

    def reconcile_suggestion(self, suggestion: dict[str, Any], cache: Cache) -> None:
        """suggestion_controller.go: ReconcileSuggestion (no volumes, no RBAC objects)."""
        namespace = suggestion["metadata"]["namespace"]
        service = composer.desired_service(suggestion)
        if cache.get(SERVICES, (namespace, service["metadata"]["name"])) is None:
            self.kube.create(SERVICES, namespace, service)
        deployment = composer.desired_deployment(
            self.kube, suggestion, grpc_probes=self.init.grpc_probe_in_suggestion, timing=self.timing
        )
        found = cache.get(DEPLOYMENTS, (namespace, deployment["metadata"]["name"]))
        if found is None:
            self.kube.create(DEPLOYMENTS, namespace, deployment)
        if not deployment_ready(found):
            set_condition(
                suggestion, "DeploymentReady", "False", DEPLOYMENT_NOT_READY, "Deployment is not ready"
            )
            return
        set_condition(suggestion, "DeploymentReady", "True", DEPLOYMENT_READY, "Deployment is ready")
        experiment = self.kube.get(EXPERIMENTS, namespace, suggestion["metadata"]["name"])
        if experiment is None:
            raise LookupError(f"experiment {suggestion['metadata']['name']} not found")
        # r.List(trials, MatchingLabels(TrialLabels(experiment))): no namespace filter upstream
        labels = {
            **(experiment["metadata"].get("labels") or {}),
            composer.LABEL_EXPERIMENT: experiment["metadata"]["name"],
        }
        trials = self.kube.list(TRIALS, labels=labels)
        if not has_condition(suggestion, "Running"):
            # suggestion_controller.go ReconcileSuggestion: ValidateAlgorithmSettings, then
            # ValidateEarlyStoppingSettings when spec.earlyStopping is set (the Experiment webhook only
            # checked the early-stopping name); an error marks the Suggestion Failed with
            # "Validation failed: %v" and returns nil: terminal, no Event, no retry
            try:
                self.client.validate_algorithm(suggestion, experiment)
                if suggestion["spec"].get("earlyStopping") is not None:
                    self.client.validate_early_stopping(suggestion, experiment)
            except ValidationFailed as exc:
                mark_failed(suggestion, FAILED_REASON, f"Validation failed: {exc}")
                return  # terminal: no error
            remove_condition(suggestion, "Succeeded")  # MarkSuggestionStatusRunning
            set_condition(suggestion, "Running", "True", RUNNING_REASON, "Suggestion is running")
        self.client.sync_assignments(suggestion, experiment, trials)
