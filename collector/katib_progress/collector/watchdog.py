"""Watchdog for TrainJobs no Katib Trial owns: suspend a lone job that stopped learning or diverged.

Opt-in per TrainJob with annotations (see docs/cluster.md):

- ``katib-progress.kubeflow.org/watchdog: "true"``
- ``katib-progress.kubeflow.org/watchdog-objective`` (default ``loss``),
  ``katib-progress.kubeflow.org/watchdog-direction`` (``minimize`` default / ``maximize``),
- ``katib-progress.kubeflow.org/watchdog-settings``: pruning settings as ``k=v,k=v`` (docs/pruning.md;
  default ``policy=divergence,stall``; ``;`` also separates pairs so ``policy=a,b`` stays whole when
  written ``policy=divergence,stall;stall_window=20``).

Each ``scan()`` lists TrainJobs (the leader only), turns each new trainerStatus snapshot of an
annotated, running, non-Trial-owned job into a ProgressPoint for that job's own in-process
pruner (built by the injected ``engine_factory``, normally the suggestion service's
``PruningEngine``; no peers: divergence, stall, threshold and budget policies make sense) and, on
PRUNE, suspends it (``spec.suspend: true``) and records an Event with the evidence.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from kubernetes import client

from katib_progress.collector.counters import Counters, CounterSpec
from katib_progress.collector.enforce import TRAINER, Enforcer, condition_true, describe
from katib_progress.collector.events import ObjectRef
from katib_progress.collector.kube._client import classify
from katib_progress.collector.kube._owners import trial_owner
from katib_progress.collector.pipeline import JobRef
from katib_progress.core.errors import ConfigError, KatibProgressError
from katib_progress.core.pruning import Pruner, PruningSpec
from katib_progress.core.status import StatusError, parse_trainer_status
from katib_progress.core.timefmt import parse_rfc3339
from katib_progress.core.types import Decision, ProgressPoint

_log = logging.getLogger(__name__)

PREFIX = "katib-progress.kubeflow.org/"
ENABLED = PREFIX + "watchdog"
OBJECTIVE = PREFIX + "watchdog-objective"
DIRECTION = PREFIX + "watchdog-direction"
SETTINGS = PREFIX + "watchdog-settings"
DEFAULT_SETTINGS = {"policy": "divergence,stall"}
SUSPENDED = CounterSpec("collector_watchdog_suspended_total", "lone TrainJobs suspended by the watchdog")
SKIPPED = CounterSpec(
    "collector_watchdog_skipped_total", "watched TrainJobs the watchdog could not judge", ("reason",)
)


def parse_settings(text: str) -> dict[str, str]:
    """``"policy=divergence,stall;stall_window=20"`` -> dict; a pair without ``=`` continues the
    previous value (``policy=divergence,stall``). Raises ConfigError."""
    out: dict[str, str] = {}
    last: str | None = None
    for chunk in text.replace(";", "\n").splitlines():
        for raw in chunk.split(","):
            part = raw.strip()
            if not part:
                continue
            if "=" in part:
                key, value = (p.strip() for p in part.split("=", 1))
                if not key:
                    raise ConfigError(SETTINGS, f"empty setting name in {text!r}")
                out[key], last = value, key
            elif last is not None:
                out[last] = f"{out[last]},{part}"
            else:
                raise ConfigError(SETTINGS, f"expected name=value, got {part!r}")
    return out


def watchdog_spec(annotations: Mapping[str, str]) -> PruningSpec:
    """The pruning spec a TrainJob's annotations ask for (validated when its engine is built)."""
    settings = {**DEFAULT_SETTINGS, **parse_settings(annotations.get(SETTINGS, ""))}
    return PruningSpec(annotations.get(OBJECTIVE, "loss"), annotations.get(DIRECTION, "minimize"), settings)


@dataclass
class _Job:
    spec: PruningSpec
    engine: Pruner
    last: tuple[Any, str] | None = None
    seq: int = -1
    done: bool = False


class Watchdog:
    def __init__(
        self,
        api_client: client.ApiClient,
        enforcer: Enforcer,
        *,
        engine_factory: Callable[[PruningSpec], Pruner],
        counters: Counters | None = None,
        namespaces: tuple[str, ...] = (),
        interval_s: float = 30.0,
        request_timeout_s: float = 30.0,
    ) -> None:
        self._api = client.CustomObjectsApi(api_client)
        self._enforcer = enforcer
        self._engine_factory = engine_factory
        self.counters = counters if counters is not None else Counters()
        self._namespaces = namespaces
        self._interval = interval_s
        self._timeout = request_timeout_s
        self._jobs: dict[str, _Job] = {}
        self._stopping = threading.Event()

    def _items(self) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = []
        for ns in self._namespaces or (None,):
            if ns is None:
                page = self._api.list_cluster_custom_object(
                    *TRAINER, "trainjobs", _request_timeout=self._timeout
                )
            else:
                page = self._api.list_namespaced_custom_object(
                    *TRAINER, ns, "trainjobs", _request_timeout=self._timeout
                )
            items += page.get("items") or []
        return items

    def scan(self) -> int:
        """One pass; returns how many TrainJobs were suspended."""
        suspended = 0
        seen: set[str] = set()
        for obj in self._items():
            meta = obj.get("metadata") or {}
            annotations = meta.get("annotations") or {}
            if annotations.get(ENABLED, "").lower() != "true" or trial_owner(obj) is not None:
                continue
            uid = str(meta.get("uid") or "")
            seen.add(uid)
            try:
                if self._check(uid, obj, annotations):
                    suspended += 1
            except ConfigError as exc:
                self.counters.inc(SKIPPED, reason="invalid_settings")
                _log.warning(
                    "watchdog of TrainJob %s/%s disabled: %s", meta.get("namespace"), meta.get("name"), exc
                )
        for uid in set(self._jobs) - seen:
            del self._jobs[uid]
        return suspended

    def _check(self, uid: str, obj: Mapping[str, Any], annotations: Mapping[str, str]) -> bool:
        """Feed the TrainJob's new snapshot (if any) to its engine; True when it was suspended."""
        meta = obj.get("metadata") or {}
        ns, name = str(meta.get("namespace") or ""), str(meta.get("name") or "")
        if (
            (obj.get("spec") or {}).get("suspend") is True
            or condition_true(obj, "Complete")
            or condition_true(obj, "Failed")
        ):
            return False
        spec = watchdog_spec(annotations)
        state = self._jobs.get(uid)
        if state is None or state.spec != spec:
            state = self._jobs[uid] = _Job(spec, self._engine_factory(spec))
        point = None if state.done else self._new_point(state, obj)
        if point is None:
            return False
        decision = state.engine.decide(point)
        if not decision.prune or not self._enforcer.suspend(JobRef(ns, name, uid, f"watchdog/{ns}", name)):
            return False
        state.done = True
        self._suspended(ns, name, uid, decision)
        return True

    @staticmethod
    def _new_point(state: _Job, obj: Mapping[str, Any]) -> ProgressPoint | None:
        """The point of the TrainJob's trainerStatus when it is usable and new for ``state``."""
        raw = (obj.get("status") or {}).get("trainerStatus")
        if not isinstance(raw, Mapping):
            return None
        try:
            parsed = parse_trainer_status(raw)
        except StatusError:
            return None
        marker = (parsed.last_updated, parsed.fingerprint)
        if marker == state.last:
            return None
        state.last, state.seq = marker, state.seq + 1
        meta = obj.get("metadata") or {}
        created = meta.get("creationTimestamp")
        elapsed = None
        if created:
            delta = (
                parsed.last_updated - parse_rfc3339(created, field="metadata.creationTimestamp")
            ).total_seconds()
            elapsed = delta if delta >= 0 else None
        return ProgressPoint(
            experiment=f"watchdog/{meta.get('namespace') or ''}",
            trial=str(meta.get("name") or ""),
            seq=state.seq,
            timestamp=parsed.last_updated,
            progress=float(parsed.progress) if parsed.progress is not None else None,
            elapsed_s=elapsed,
            eta_s=float(parsed.eta_s) if parsed.eta_s is not None else None,
            metrics={**parsed.values, **parsed.non_finite},
        )

    def _suspended(self, ns: str, name: str, uid: str, decision: Decision) -> None:
        """Count, record an Event and log a suspension."""
        self.counters.inc(SUSPENDED)
        note = f"watchdog: {describe(decision)}; TrainJob suspended (spec.suspend=true)"
        self._enforcer.events.record(
            ObjectRef("trainer.kubeflow.org/v1alpha1", "TrainJob", ns, name, uid),
            reason="WatchdogSuspended",
            action="Suspend",
            note=note,
            type_="Warning",
        )
        _log.warning(
            "TrainJob %s/%s suspended by the watchdog: %s",
            ns,
            name,
            note,
            extra={"event": "watchdog_suspended", "namespace": ns, "trainjob": name},
        )

    def run(self) -> None:
        while not self._stopping.is_set():
            try:
                self.scan()
            except (client.ApiException, OSError, KatibProgressError) as exc:
                _log.warning(
                    "watchdog scan failed: %s",
                    classify(exc) if not isinstance(exc, KatibProgressError) else exc,
                )
            self._stopping.wait(self._interval)

    def stop(self) -> None:
        self._stopping.set()
