"""Enforce a PRUNE decision on the cluster, idempotently (retries, restarts, two leaders in a row).

``Enforcer.prune(job, decision)``:

1. reads the Trial; a Trial that is already finished (Succeeded/Failed/Killed, or Succeeded=False
   i.e. MetricsUnavailable) is left alone; one already ``EarlyStopped`` skips to step 3;
2. adds Katib's ``EarlyStopped`` condition to ``status.conditions`` exactly as Katib's own early
   stopping writes it (type ``EarlyStopped``, status ``"True"``, reason ``TrialEarlyStopped``, a
   message, ``lastUpdateTime``/``lastTransitionTime`` at one-second precision): a JSON merge patch
   on ``trials/status`` carrying the read ``resourceVersion`` as precondition (409 -> read again);
3. suspends the TrainJob (merge patch ``spec.suspend: true``) unless it is already suspended or
   finished, or is not the TrainJob the point came from (uid), so its GPUs are freed even with
   ``retain: true``;
4. records an Event (events.k8s.io/v1) on the Trial and on the TrainJob with the policy, reason and
   evidence, only when something changed (deterministic names: a TrainJob suspended again, e.g.
   after someone resumed a pruned job, updates its Event's ``series`` instead of duplicating it).

API failures raise ``TemporaryError``/``PermanentError`` after the steps already done; calling
``prune`` again resumes where it stopped.
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any

from kubernetes import client

from katib_progress.collector.counters import Counters
from katib_progress.collector.events import EventRecorder, ObjectRef
from katib_progress.collector.kube._client import call_or_none, classify
from katib_progress.collector.pipeline import JobRef
from katib_progress.core.types import Decision

_log = logging.getLogger(__name__)

KATIB = ("kubeflow.org", "v1beta1")
TRAINER = ("trainer.kubeflow.org", "v1alpha1")
EARLY_STOPPED = "EarlyStopped"
EARLY_STOPPED_REASON = "TrialEarlyStopped"
EVENT_REASON = "TrialPruned"
ENFORCED = "collector_prune_enforced_total"  # label result=<EnforceResult>
_TERMINAL = ("Succeeded", "Failed", "Killed")
_CONFLICT_RETRIES = 5


class EnforceResult(enum.StrEnum):
    PRUNED = "pruned"  # the condition was added by this call
    ALREADY_STOPPED = "already_stopped"  # EarlyStopped before this call (suspend/Events ensured)
    TRIAL_FINISHED = "trial_finished"  # nothing to do: the trial ended otherwise
    GONE = "gone"  # the Trial no longer exists


def condition_true(obj: Mapping[str, Any], kind: str) -> bool:
    return any(
        c.get("type") == kind and c.get("status") == "True"
        for c in (obj.get("status") or {}).get("conditions") or ()
        if isinstance(c, Mapping)
    )


def trial_finished(trial: Mapping[str, Any]) -> bool:
    """Katib's IsCompleted() minus EarlyStopped, plus MetricsUnavailable (Succeeded=False)."""
    conditions = [c for c in (trial.get("status") or {}).get("conditions") or () if isinstance(c, Mapping)]
    if any(c.get("type") in _TERMINAL and c.get("status") == "True" for c in conditions):
        return True
    return any(c.get("type") == "Succeeded" and c.get("status") == "False" for c in conditions)


def _second(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def describe(decision: Decision) -> str:
    evidence = ", ".join(f"{k}={v}" for k, v in sorted(decision.evidence.items()))
    text = f"pruned by katib-progress ({decision.policy or 'policy'}): {decision.reason}"
    return f"{text} [{evidence}]" if evidence else text


class Enforcer:
    def __init__(
        self,
        api_client: client.ApiClient,
        *,
        events: EventRecorder | None = None,
        counters: Counters | None = None,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        request_timeout_s: float = 10.0,
    ) -> None:
        self._api = client.CustomObjectsApi(api_client)
        self.counters = counters if counters is not None else Counters()
        self.events = events or EventRecorder(api_client, counters=self.counters)
        self._clock = clock
        self._timeout = request_timeout_s

    # -- API helpers (each failure classified) ------------------------------------------------------

    def _get(self, gv: tuple[str, str], plural: str, namespace: str, name: str) -> dict[str, Any] | None:
        get = self._api.get_namespaced_custom_object
        obj = call_or_none(get, *gv, namespace, plural, name, _request_timeout=self._timeout)
        return None if obj is None else dict(obj)

    def _condition(self, message: str) -> dict[str, str]:
        now = _second(self._clock())
        return {
            "type": EARLY_STOPPED,
            "status": "True",
            "reason": EARLY_STOPPED_REASON,
            "message": message,
            "lastUpdateTime": now,
            "lastTransitionTime": now,
        }

    def _mark_trial(self, job: JobRef, message: str) -> tuple[EnforceResult, dict[str, Any] | None]:
        for _ in range(_CONFLICT_RETRIES):
            trial = self._get(KATIB, "trials", job.namespace, job.trial)
            if trial is None:
                return EnforceResult.GONE, None
            if condition_true(trial, EARLY_STOPPED):
                return EnforceResult.ALREADY_STOPPED, trial
            if trial_finished(trial):
                return EnforceResult.TRIAL_FINISHED, trial
            conditions = [
                c
                for c in (trial.get("status") or {}).get("conditions") or ()
                if isinstance(c, Mapping) and c.get("type") != EARLY_STOPPED
            ]
            body = {
                "metadata": {"resourceVersion": trial["metadata"]["resourceVersion"]},
                "status": {"conditions": [*conditions, self._condition(message)]},
            }
            try:
                updated = self._api.patch_namespaced_custom_object_status(
                    *KATIB, job.namespace, "trials", job.trial, body, _request_timeout=self._timeout
                )
            except client.ApiException as exc:
                if exc.status == 409:
                    continue  # someone (Katib) wrote the Trial meanwhile: read again
                if exc.status == 404:
                    return EnforceResult.GONE, None
                raise classify(exc) from exc
            except OSError as exc:
                raise classify(exc) from exc
            return EnforceResult.PRUNED, dict(updated)
        raise classify(client.ApiException(status=409, reason=f"Trial {job.trial} kept changing"))

    def suspend(self, job: JobRef) -> bool:
        """Merge-patch ``spec.suspend: true``; False when there was nothing to suspend."""
        obj = self._get(TRAINER, "trainjobs", job.namespace, job.name)
        if obj is None or (job.uid and (obj.get("metadata") or {}).get("uid") != job.uid):
            return False
        if (obj.get("spec") or {}).get("suspend") is True:
            return False
        if condition_true(obj, "Complete") or condition_true(obj, "Failed"):
            return False
        patched = call_or_none(
            self._api.patch_namespaced_custom_object,
            *TRAINER,
            job.namespace,
            "trainjobs",
            job.name,
            {"spec": {"suspend": True}},
            _request_timeout=self._timeout,
        )
        return patched is not None  # None: the TrainJob is gone

    def prune(self, job: JobRef, decision: Decision) -> EnforceResult:
        message = f"Trial is early stopped: {describe(decision)}"
        result, trial = self._mark_trial(job, message)
        if result in (EnforceResult.GONE, EnforceResult.TRIAL_FINISHED):
            self.counters.inc(ENFORCED, result=result.value)
            _log.info("trial %s/%s not pruned: %s", job.namespace, job.trial, result.value)
            return result
        suspended = self.suspend(job)
        if result is EnforceResult.ALREADY_STOPPED and not suspended:
            self.counters.inc(ENFORCED, result=result.value)
            return result  # nothing changed: no new Event
        note = f"{describe(decision)}; TrainJob {job.name} " + ("suspended" if suspended else "not running")
        if trial is not None and result is EnforceResult.PRUNED:
            meta = trial.get("metadata") or {}
            self.events.record(
                ObjectRef(
                    "kubeflow.org/v1beta1", "Trial", job.namespace, job.trial, str(meta.get("uid") or "")
                ),
                reason=EVENT_REASON,
                action="EarlyStop",
                note=note,
            )
        self.events.record(
            ObjectRef("trainer.kubeflow.org/v1alpha1", "TrainJob", job.namespace, job.name, job.uid),
            reason=EVENT_REASON,
            action="Suspend",
            note=note,
        )
        self.counters.inc(ENFORCED, result=result.value)
        _log.info(
            "trial %s/%s %s: %s",
            job.namespace,
            job.trial,
            result.value,
            note,
            extra={
                "event": "pruned",
                "trial": job.trial,
                "namespace": job.namespace,
                "policy": decision.policy,
            },
        )
        return result
