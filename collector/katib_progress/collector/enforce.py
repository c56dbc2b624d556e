"""Enforce a PRUNE decision on the cluster, idempotently (retries, restarts, two leaders in a row).

``Enforcer.prune(job, decision, seq=)``:

1. reads the Trial; a Trial that is already finished is left alone: ``Succeeded``/``Failed``/
   ``Killed``/``MetricsUnavailable`` True (Katib's ``IsCompleted`` minus ``EarlyStopped``,
   pkg/apis/controller/trials/v1beta1/util.go); one already ``EarlyStopped`` *with* an available
   observation skips to step 3;
2. with an observation reader (the cluster collector always has one): waits until the DB manager
   has stored the rows of snapshot ``seq`` (the point the decision was made on; ``TemporaryError``
   until then, so the caller retries), reads the Trial's observation log back exactly as Katib's
   trial controller does and computes ``status.observation`` with Katib's ``getMetrics``
   (collector/katib/observation.py). A Trial whose stored log has no objective value is not
   early-stopped (``NO_OBSERVATION``): Katib would keep such a Trial as an EarlyStopped trial
   without observation, which it skips in GetSuggestions and subtracts from the suggestion requests
   for good (experiment_controller.go ``ReconcileSuggestions``; kubeflow/katib#1377);
3. adds Katib's ``EarlyStopped`` condition as Katib's medianstop ``SetTrialStatus`` writes it
   (pkg/earlystopping/v1beta1/medianstop/service.py: type ``EarlyStopped``, status ``"True"``,
   reason ``TrialEarlyStopped``, ``lastUpdateTime``/``lastTransitionTime`` at one-second precision)
   and the observation in ONE JSON merge patch on ``trials/status`` carrying the read
   ``resourceVersion`` as precondition (409 -> read again). With ``retain: false`` Katib deletes the
   job at the next reconcile without reading any observation, and with ``retain: true`` a suspended
   TrainJob never completes (trial_controller.go ``reconcileTrial``), so the observation must be
   there already;
4. suspends the TrainJob (merge patch ``spec.suspend: true``) unless it is already suspended or
   finished, or is not the TrainJob the point came from (uid), so its GPUs are freed even with
   ``retain: true``;
5. records an Event (events.k8s.io/v1) on the Trial and on the TrainJob with the policy, reason and
   evidence, only when something changed.

API failures raise ``TemporaryError``/``PermanentError`` after the steps already done; calling
``prune`` again resumes where it stopped.
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, Protocol

from kubernetes import client

from katib_progress.collector.counters import Counters, CounterSpec
from katib_progress.collector.events import EventRecorder, ObjectRef
from katib_progress.collector.katib.observation import get_metrics, metric_names, observation_available
from katib_progress.collector.kube._client import TRANSPORT_ERRORS, call_or_none, classify
from katib_progress.collector.pipeline import JobRef
from katib_progress.collector.rows import MetricRow
from katib_progress.core.errors import PermanentError, TemporaryError
from katib_progress.core.types import Decision

_log = logging.getLogger(__name__)

KATIB = ("kubeflow.org", "v1beta1")
TRAINER = ("trainer.kubeflow.org", "v1alpha1")
EARLY_STOPPED = "EarlyStopped"
EARLY_STOPPED_REASON = "TrialEarlyStopped"
EVENT_REASON = "TrialPruned"
ENFORCED = CounterSpec("collector_prune_enforced_total", "PRUNE decisions enforced, by result", ("result",))
_TERMINAL = ("Succeeded", "Failed", "Killed", "MetricsUnavailable")
_CONFLICT_RETRIES = 5


class EnforceResult(enum.StrEnum):
    PRUNED = "pruned"  # the condition was added by this call
    ALREADY_STOPPED = "already_stopped"  # EarlyStopped before this call (suspend/Events ensured)
    TRIAL_FINISHED = "trial_finished"  # nothing to do: the trial ended otherwise
    GONE = "gone"  # the Trial no longer exists
    NO_OBSERVATION = "no_observation"  # no objective value stored: not early-stopped (see step 2)


class ObservationReader(Protocol):
    """What the enforcer reads back from Katib's DB manager (``katib.readback.StoredRowsReader``)."""

    def trial_metric_logs(self, trial: str, metrics: Sequence[str]) -> list[MetricRow]: ...

    def stored_seq(self, trial: str) -> int | None: ...


def condition_true(obj: Mapping[str, Any], kind: str) -> bool:
    return any(
        c.get("type") == kind and c.get("status") == "True"
        for c in (obj.get("status") or {}).get("conditions") or ()
        if isinstance(c, Mapping)
    )


def trial_finished(trial: Mapping[str, Any]) -> bool:
    """Katib's ``Trial.IsCompleted()`` minus EarlyStopped: a Succeeded, Failed, Killed or
    MetricsUnavailable condition with status True (pkg/apis/controller/trials/v1beta1/util.go)."""
    return any(condition_true(trial, kind) for kind in _TERMINAL)


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
        observations: ObservationReader | None = None,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        request_timeout_s: float = 10.0,
    ) -> None:
        """Without ``observations`` no observation is written (watchdog-only use, tests)."""
        self._api = client.CustomObjectsApi(api_client)
        self._observations = observations
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

    def _observation(self, job: JobRef, trial: Mapping[str, Any], seq: int | None) -> dict[str, Any] | None:
        """The observation Katib would compute from the stored rows; None without an objective value."""
        assert self._observations is not None
        if seq is not None:
            stored = self._observations.stored_seq(job.trial)
            if stored is None or stored < seq:
                raise TemporaryError(
                    f"trial {job.trial}: rows of snapshot {seq} not stored yet (stored: {stored})"
                )
        objective, names, strategies = metric_names(trial)
        try:
            metrics = get_metrics(self._observations.trial_metric_logs(job.trial, names), strategies)
        except ValueError as exc:  # getMetrics fails the same way: Katib could not read it either
            raise PermanentError(f"trial {job.trial}: observation log unreadable: {exc}") from None
        observation = {"metrics": metrics} if metrics is not None else None
        return observation if observation_available(observation, objective) else None

    def _mark_trial(
        self, job: JobRef, message: str, seq: int | None
    ) -> tuple[EnforceResult, dict[str, Any] | None]:
        for _ in range(_CONFLICT_RETRIES):
            trial = self._get(KATIB, "trials", job.namespace, job.trial)
            if trial is None:
                return EnforceResult.GONE, None
            if trial_finished(trial):
                return EnforceResult.TRIAL_FINISHED, trial
            stopped = condition_true(trial, EARLY_STOPPED)
            status = trial.get("status") or {}
            objective = str(
                ((trial.get("spec") or {}).get("objective") or {}).get("objectiveMetricName") or ""
            )
            if stopped and (
                self._observations is None or observation_available(status.get("observation"), objective)
            ):
                return EnforceResult.ALREADY_STOPPED, trial
            body: dict[str, Any] = {"metadata": {"resourceVersion": trial["metadata"]["resourceVersion"]}}
            patch: dict[str, Any] = {}
            if self._observations is not None:
                observation = self._observation(job, trial, seq)
                if observation is None:
                    return EnforceResult.NO_OBSERVATION, trial
                patch["observation"] = observation
            if not stopped:
                conditions = [
                    c
                    for c in status.get("conditions") or ()
                    if isinstance(c, Mapping) and c.get("type") != EARLY_STOPPED
                ]
                patch["conditions"] = [*conditions, self._condition(message)]
            body["status"] = patch
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
            except TRANSPORT_ERRORS as exc:
                raise classify(exc) from exc
            return (EnforceResult.ALREADY_STOPPED if stopped else EnforceResult.PRUNED), dict(updated)
        raise classify(client.ApiException(status=409, reason=f"Trial {job.trial} kept changing"))

    def mark_stopped(
        self, namespace: str, trial: str, message: str = "Trial is early stopped"
    ) -> EnforceResult:
        """Katib's medianstop ``SetTrialStatus`` (pkg/earlystopping/v1beta1/medianstop/service.py):
        add the EarlyStopped condition to the named Trial, nothing else (no observation: Katib's
        stock collectors have stored the rows before they call it, and Katib's trial controller
        reads them for an EarlyStopped Trial whose job ended; no suspend: the stock collector stops
        the training process itself). Raises ``TemporaryError``/``PermanentError``."""
        job = JobRef(namespace, trial, "", "", trial)
        result, _ = self._mark_trial(job, message, None)
        _log.info("SetTrialStatus %s/%s: %s", namespace, trial, result.value)
        return result

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

    def prune(self, job: JobRef, decision: Decision, *, seq: int | None = None) -> EnforceResult:
        """``seq``: the snapshot the decision was made on; its rows must be stored first."""
        message = f"Trial is early stopped: {describe(decision)}"
        result, trial = self._mark_trial(job, message, seq)
        if result is EnforceResult.NO_OBSERVATION:
            self.counters.inc(ENFORCED, result=result.value)
            _log.warning(
                "trial %s/%s not early-stopped: no objective value stored, so Katib could never count "
                "its observation (it keeps running)",
                job.namespace,
                job.trial,
            )
            return result
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
