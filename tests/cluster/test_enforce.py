"""Enforcing PRUNE: Katib's EarlyStopped condition, suspend, Events; idempotent under retries and
restarts; finished trials untouched."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from katib_progress.collector.enforce import EARLY_STOPPED, Enforcer, EnforceResult, trial_finished
from katib_progress.collector.pipeline import JobRef
from katib_progress.core.types import Decision, Verdict
from tests.kubestandin import KubeStandin
from tests.kubestandin.objects import KATIB, TRAINER, Objects

DECISION = Decision(Verdict.PRUNE, "loss is nan", "divergence", {"loss": "nan", "progress": 30.0})
NOW = datetime(2026, 2, 3, 4, 5, 6, 789000, tzinfo=UTC)


def _setup(kube: KubeStandin, name: str = "t") -> tuple[Objects, JobRef]:
    objects = Objects(kube.api_client())
    job = objects.trial_job(name)
    trial = objects.api.get_namespaced_custom_object(*KATIB, "default", "trials", name)
    objects.api.patch_namespaced_custom_object_status(
        *KATIB,
        "default",
        "trials",
        name,
        {
            "status": {
                "conditions": [
                    {"type": "Created", "status": "True", "reason": "TrialCreated"},
                    {"type": "Running", "status": "True", "reason": "TrialRunning"},
                ]
            }
        },
    )
    assert trial["metadata"]["uid"]
    return objects, JobRef("default", name, job["metadata"]["uid"], "exp", name)


def _conditions(objects: Objects, name: str) -> list[dict[str, Any]]:
    trial = objects.api.get_namespaced_custom_object(*KATIB, "default", "trials", name)
    return list(trial["status"]["conditions"])


def test_prune_marks_suspends_and_is_idempotent(kube: KubeStandin) -> None:
    objects, job = _setup(kube)
    enforcer = Enforcer(kube.api_client(), clock=lambda: NOW)
    kube.fail_next(1, 409, path="/trials/t/status")  # Katib wrote the Trial meanwhile: read again
    assert enforcer.prune(job, DECISION) is EnforceResult.PRUNED
    conditions = _conditions(objects, "t")
    assert [c["type"] for c in conditions] == ["Created", "Running", EARLY_STOPPED]
    assert conditions[-1] == {
        "type": "EarlyStopped",
        "status": "True",
        "reason": "TrialEarlyStopped",
        "message": "Trial is early stopped: pruned by katib-progress (divergence): loss is nan "
        "[loss=nan, progress=30.0]",
        "lastUpdateTime": "2026-02-03T04:05:06Z",
        "lastTransitionTime": "2026-02-03T04:05:06Z",
    }
    assert objects.api.get_namespaced_custom_object(*TRAINER, "default", "trainjobs", "t")["spec"]["suspend"]
    # A retry, and a restarted collector, change nothing.
    assert enforcer.prune(job, DECISION) is EnforceResult.ALREADY_STOPPED
    assert Enforcer(kube.api_client()).prune(job, DECISION) is EnforceResult.ALREADY_STOPPED
    assert [c["type"] for c in _conditions(objects, "t")].count(EARLY_STOPPED) == 1
    assert enforcer.counters.get("collector_events_total", reason="TrialPruned", result="created") == 2


def test_finished_trial_is_left_alone(kube: KubeStandin) -> None:
    objects, job = _setup(kube)
    objects.api.patch_namespaced_custom_object_status(
        *KATIB,
        "default",
        "trials",
        "t",
        {
            "status": {
                # MarkTrialStatusMetricsUnavailable (pkg/apis/controller/trials/v1beta1/util.go)
                "conditions": [
                    {"type": "Running", "status": "False", "reason": "TrialRunning"},
                    {"type": "MetricsUnavailable", "status": "True", "reason": "MetricsUnavailable"},
                ]
            }
        },
    )
    assert trial_finished(objects.api.get_namespaced_custom_object(*KATIB, "default", "trials", "t"))
    assert Enforcer(kube.api_client()).prune(job, DECISION) is EnforceResult.TRIAL_FINISHED
    assert (
        objects.api.get_namespaced_custom_object(*TRAINER, "default", "trainjobs", "t")["spec"].get("suspend")
        is not True
    )


def test_replaced_trainjob_is_not_suspended(kube: KubeStandin) -> None:
    _, job = _setup(kube)
    stale = JobRef(job.namespace, job.name, "some-older-uid", job.experiment, job.trial)
    assert not Enforcer(kube.api_client()).suspend(stale)
    assert Enforcer(kube.api_client()).prune(JobRef("default", "gone", "", "exp", "gone"), DECISION) is (
        EnforceResult.GONE
    )
