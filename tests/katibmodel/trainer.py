"""Kubeflow Trainer's TrainJob controller (with its JobSet) and a scripted training run.

Modelled from kubeflow/trainer (commit 8c0f505):

- pkg/controller/trainjob_controller.go Reconcile: while the TrainJob is not finished
  (util/trainjob: IsTrainJobFinished = Complete or Failed True) its JobSet is applied;
  setSuspendedCondition (``Suspended`` True/"Suspended"/"TrainJob is suspended" while
  ``spec.suspend``; False/"Resumed"/"TrainJob is resumed" after); setTrainJobStatus copies the
  JobSet's ``Completed``/``Failed`` conditions as ``Complete``/``Failed`` and its replicated-job
  counts into ``jobsStatus``; the status is written as a merge patch (trainerStatus untouched).
- runtime/framework/plugins/jobset/jobset.go Build: a JobSet that exists and is not suspended is
  left alone unless the TrainJob is suspended; ``Suspend(trainJob.Spec.Suspend)`` is propagated, and
  a suspended JobSet deletes its Jobs and pods (JobSet controller): the trainer stops, its GPUs are
  freed, and a suspended TrainJob never becomes Complete or Failed. Resuming recreates the pods,
  which start the script again from its first step.
- JobSet's conditions: Completed / reason ``AllJobsCompleted`` / "jobset completed successfully",
  Failed / ``FailedJobs`` / "jobset failed due to one or more job failures"
  (kubernetes-sigs/jobset pkg/constants).

The training itself is a script: ``Script(index, hyperparameters) -> Curve``; the run posts each
point as the TrainJob's ``status.trainerStatus`` (replacing it whole, as the status server's
server-side apply with field owner ``trainer-status`` does), through the API stand-in and so
validated against the real CRD, then completes (or fails) the JobSet.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import urllib3
from kubernetes import client

from tests.katibmodel._controller import Cache, Controller, Key, Timing, Watch, for_object
from tests.katibmodel._kube import OK, TRAINJOBS, Kube, Result, now


@dataclass(frozen=True)
class Point:
    progress: int | None
    metrics: Mapping[str, str]
    eta: int | None = None


@dataclass(frozen=True)
class Curve:
    points: tuple[Point, ...]
    fails: bool = False  # the JobSet fails after the last point instead of completing
    tag: str = ""  # a label tests can read back (e.g. "diverging")


Script = Callable[[int, Mapping[str, str]], Curve]
#: called with (TrainJob key, point) after each posted point: what training code that also pushes
#: to Katib itself (kubeflow-katib's report_metrics) would do
Reporter = Callable[[tuple[str, str], "Point"], None]


class Sidecar(Protocol):
    """A container next to the training process that reads what it prints (Katib's file metrics
    collector, tests/katibmodel/metricscollector.py)."""

    def point(self, key: tuple[str, str], point: Point) -> bool:
        """True: the sidecar terminated the training process (early stopped)."""
        ...

    def end(self, key: tuple[str, str]) -> None:
        """The training process ended by itself."""
        ...


def hyperparameters(job: Mapping[str, Any]) -> dict[str, str]:
    """``--name=value`` tokens of the trainer's command and args (after Katib's substitution)."""
    trainer = (job.get("spec") or {}).get("trainer") or {}
    found = {}
    for token in [*(trainer.get("command") or ()), *(trainer.get("args") or ())]:
        if isinstance(token, str) and token.startswith("--") and "=" in token:
            name, value = token[2:].split("=", 1)
            found[name] = value
    return found


@dataclass
class JobSet:
    suspended: bool
    completed: bool = False
    failed: bool = False
    run: Run | None = None
    index: int = 0


class Run(threading.Thread):
    """The trainer pods of one JobSet: post the curve, then report how the job ended."""

    def __init__(
        self,
        kube: Kube,
        key: Key,
        curve: Curve,
        interval_s: float,
        done: Callable[[Run, bool], None],
        reporter: Reporter | None = None,
        sidecar: Sidecar | None = None,
    ) -> None:
        super().__init__(name=f"train-{key[1]}", daemon=True)
        self.kube, self.key, self.curve, self.interval_s, self.done = kube, key, curve, interval_s, done
        self.reporter, self.sidecar = reporter, sidecar
        self.stopped = threading.Event()
        self.posted = 0

    def run(self) -> None:
        for point in self.curve.points:
            if self.stopped.wait(self.interval_s):
                return  # pods deleted (suspended or TrainJob gone)
            if not self._post(point):
                return
            self.posted += 1
            if self.reporter is not None:
                self.reporter(self.key, point)
            if self.sidecar is not None and self.sidecar.point(self.key, point):
                # Katib's command wrapper exits 0 for a training process its collector early-stopped
                # (pkg/webhook/v1beta1/pod/utils.go wrapWorkerContainer): the pod, so the job, succeeds
                self.done(self, True)
                return
        if not self.stopped.wait(self.interval_s):
            if self.sidecar is not None:
                self.sidecar.end(self.key)
            self.done(self, not self.curve.fails)

    def _post(self, point: Point) -> bool:
        status: dict[str, Any] = {"lastUpdatedTime": now()}
        if point.progress is not None:
            status["progressPercentage"] = point.progress
        if point.eta is not None:
            status["estimatedRemainingSeconds"] = point.eta
        if point.metrics:
            status["metrics"] = [{"name": k, "value": v} for k, v in point.metrics.items()]
        conflicts = 0
        while conflicts < 20 and not self.stopped.is_set():
            try:
                job = self.kube.get(TRAINJOBS, *self.key)
                if job is None:
                    return False
                body = {**job, "status": {**(job.get("status") or {}), "trainerStatus": status}}
                self.kube.update_status(TRAINJOBS, body)
                return True
            except client.ApiException as exc:
                if exc.status == 404:
                    return False  # deleted between the read and the write: gone, as ``job is None``
                if exc.status == 409:
                    conflicts += 1
                elif exc.status < 500:
                    raise
                else:
                    self.stopped.wait(0.2)  # the API server is failing: the pod's update waits
            except (urllib3.exceptions.HTTPError, OSError):
                # the API server is unreachable: the training goes on and its update is retried
                # (the status server's client retries; a point that never lands was never sent)
                self.stopped.wait(0.2)
        return False


def set_status_condition(
    conds: list[dict[str, Any]], kind: str, status: str, reason: str, message: str
) -> None:
    """apimachinery meta.SetStatusCondition: lastTransitionTime changes only with the status."""
    for c in conds:
        if c["type"] == kind:
            if c["status"] != status:
                c["status"], c["lastTransitionTime"] = status, now()
            c["reason"], c["message"] = reason, message
            return
    conds.append(
        {"type": kind, "status": status, "reason": reason, "message": message, "lastTransitionTime": now()}
    )


def _true(job: Mapping[str, Any], kind: str) -> bool:
    return any(
        c.get("type") == kind and c.get("status") == "True"
        for c in (job.get("status") or {}).get("conditions") or ()
    )


class TrainerController(Controller):
    name = "trainer"

    def __init__(
        self,
        kube: Kube,
        timing: Timing,
        script: Script,
        interval_s: float = 0.2,
        reporter: Reporter | None = None,
        sidecar: Sidecar | None = None,
    ) -> None:
        super().__init__(kube, timing)
        self.script = script
        self.reporter, self.sidecar = reporter, sidecar
        self.interval_s = interval_s
        self.jobsets: dict[Key, JobSet] = {}
        self.started: list[Key] = []  # TrainJobs in the order their pods first started
        self._lock = threading.Lock()

    def watches(self) -> list[Watch]:
        return [Watch(TRAINJOBS, for_object)]

    def _finished(self, run: Run, ok: bool) -> None:
        with self._lock:
            js = self.jobsets.get(run.key)
            if js is not None and js.run is run:
                js.completed, js.failed, js.run = ok, not ok, None
        self.poke(run.key)

    def _apply_jobset(self, key: Key, job: Mapping[str, Any]) -> JobSet:
        suspend = bool((job.get("spec") or {}).get("suspend"))
        with self._lock:
            js = self.jobsets.get(key)
            if js is None:
                js = self.jobsets[key] = JobSet(suspended=suspend)
            elif suspend or js.suspended:
                js.suspended = suspend  # jobset.go Build: only a suspended side is re-applied
            if js.suspended and js.run is not None:
                js.run.stopped.set()  # JobSet suspended: Jobs and pods deleted
                js.run = None
            elif not js.suspended and js.run is None and not (js.completed or js.failed):
                if key not in self.started:
                    self.started.append(key)
                js.index = self.started.index(key)
                curve, interval_s = self.training(key, js.index, job)
                js.run = Run(self.kube, key, curve, interval_s, self._finished, self.reporter, self.sidecar)
                js.run.start()
            return js

    def training(self, key: Key, index: int, job: Mapping[str, Any]) -> tuple[Curve, float]:
        """The scripted curve of the ``index``-th TrainJob started, and the pause between its points."""
        return self.script(index, hyperparameters(job)), self.interval_s

    def reconcile(self, key: Key, cache: Cache) -> Result:
        job = cache.get(TRAINJOBS, key)
        if job is None:
            with self._lock:
                js = self.jobsets.pop(key, None)
            if js is not None and js.run is not None:
                js.run.stopped.set()
            return OK
        finished = _true(job, "Complete") or _true(job, "Failed")
        js = self.jobsets.get(key) if finished else self._apply_jobset(key, job)
        status = job.get("status") or {}
        conds = [dict(c) for c in status.get("conditions") or ()]
        if (job.get("spec") or {}).get("suspend"):
            set_status_condition(conds, "Suspended", "True", "Suspended", "TrainJob is suspended")
        elif _true(job, "Suspended"):
            set_status_condition(conds, "Suspended", "False", "Resumed", "TrainJob is resumed")
        jobs_status = status.get("jobsStatus")
        if js is not None:
            if js.completed:
                set_status_condition(
                    conds, "Complete", "True", "AllJobsCompleted", "jobset completed successfully"
                )
            if js.failed:
                set_status_condition(
                    conds, "Failed", "True", "FailedJobs", "jobset failed due to one or more job failures"
                )
            active = 1 if js.run is not None else 0
            jobs_status = [
                {
                    "name": "node",
                    "ready": active,
                    "active": active,
                    "succeeded": 1 if js.completed else 0,
                    "failed": 1 if js.failed else 0,
                    "suspended": 1 if js.suspended else 0,
                }
            ]
        patch: dict[str, Any] = {}
        if conds != (status.get("conditions") or []):
            patch["conditions"] = conds
        if jobs_status != status.get("jobsStatus"):
            patch["jobsStatus"] = jobs_status
        if patch:
            self.kube.patch(TRAINJOBS, key[0], key[1], {"status": patch}, status=True)
        return OK

    def running(self) -> int:
        """Trainer pods running now (a suspended or finished TrainJob has none)."""
        with self._lock:
            return sum(1 for js in self.jobsets.values() if js.run is not None)

    def stop(self, timeout: float = 10.0) -> None:
        super().stop(timeout)
        with self._lock:
            for js in self.jobsets.values():
                if js.run is not None:
                    js.run.stopped.set()
