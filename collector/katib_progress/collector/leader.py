"""Leader election on a ``coordination.k8s.io/v1`` Lease (client-go's leaderelection semantics).

- ``try_acquire_or_renew()``: GET the Lease (create it when absent). The holder renews by writing
  ``renewTime``; another identity takes it over only when the record has not changed for
  ``lease_duration_s`` *by our own clock* (the time we last saw it change, not the remote
  ``renewTime``, so clock skew between pods does not matter). Writes are ``update`` with the read
  resourceVersion: two candidates racing get one 409.
- ``run(on_started, on_stopped)``: retry every ``retry_period_s`` until leader, call ``on_started``;
  renew every ``retry_period_s``; when renewals fail for ``renew_deadline_s`` (less than the lease
  duration, so we stop before anyone else may start) call ``on_stopped`` and return False.
  ``stop()`` releases the Lease (holder cleared, duration 1 s) so a standby takes over at once.

Verbs used: get, create, update on leases (the Role in manifests/base/rbac.yaml).
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from kubernetes import client
from pydantic import BaseModel, ConfigDict, Field, model_validator

from katib_progress.collector.events import micro_time
from katib_progress.collector.kube._client import classify
from katib_progress.core.errors import KatibProgressError

_log = logging.getLogger(__name__)


class LeaderSettings(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    namespace: str = Field(min_length=1)
    name: str = Field(default="katib-progress-collector", min_length=1)
    identity: str = Field(min_length=1)
    lease_duration_s: float = Field(default=15.0, gt=0)
    renew_deadline_s: float = Field(default=10.0, gt=0)
    retry_period_s: float = Field(default=2.0, gt=0)
    request_timeout_s: float = Field(default=5.0, gt=0)

    @model_validator(mode="after")
    def _ordered(self) -> LeaderSettings:
        if self.renew_deadline_s >= self.lease_duration_s:
            raise ValueError(
                f"renew_deadline_s: must be < lease_duration_s ({self.lease_duration_s}), "
                f"got {self.renew_deadline_s}"
            )
        if self.retry_period_s >= self.renew_deadline_s:
            raise ValueError(
                f"retry_period_s: must be < renew_deadline_s ({self.renew_deadline_s}), "
                f"got {self.retry_period_s}"
            )
        return self


class LeaderElector:
    def __init__(
        self,
        api_client: client.ApiClient,
        settings: LeaderSettings,
        *,
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self.settings = settings
        self._api = client.CoordinationV1Api(api_client)
        self._clock, self._wall = clock, wall
        self._observed: dict[str, Any] | None = None  # last seen spec
        self._observed_at = 0.0
        self._leader = threading.Event()
        self._stopping = threading.Event()
        self.last_api_success = 0.0  # monotonic time of the last answered Lease call (readiness)
        self._release_disabled = False

    @property
    def is_leader(self) -> bool:
        return self._leader.is_set()

    @property
    def holder(self) -> str:
        return str((self._observed or {}).get("holderIdentity") or "")

    # -- one attempt ---------------------------------------------------------------------------------

    def _read(self) -> dict[str, Any] | None:
        s = self.settings
        try:
            response = self._api.read_namespaced_lease(
                s.name, s.namespace, _preload_content=False, _request_timeout=s.request_timeout_s
            )
        except client.ApiException as exc:
            if exc.status == 404:
                self.last_api_success = self._clock()
                return None
            raise
        self.last_api_success = self._clock()
        return dict(json.loads(response.data))

    def _spec(self, *, acquire: str | None, transitions: int) -> dict[str, Any]:
        s = self.settings
        now = micro_time(self._wall())
        spec: dict[str, Any] = {
            "holderIdentity": s.identity,
            "leaseDurationSeconds": max(1, round(s.lease_duration_s)),
            "renewTime": now,
            "acquireTime": acquire or now,
            "leaseTransitions": transitions,
        }
        return spec

    def try_acquire_or_renew(self) -> bool:
        """One attempt; True when we hold the Lease afterwards. Raises on API failures."""
        s = self.settings
        lease = self._read()
        if lease is None:
            new_spec = self._spec(acquire=None, transitions=0)
            body = {
                "apiVersion": "coordination.k8s.io/v1",
                "kind": "Lease",
                "metadata": {"name": s.name, "namespace": s.namespace},
                "spec": new_spec,
            }
            try:
                self._api.create_namespaced_lease(s.namespace, body, _request_timeout=s.request_timeout_s)
            except client.ApiException as exc:
                if exc.status == 409:
                    return False  # someone else created it first
                raise
            self.last_api_success = self._clock()
            self._observed, self._observed_at = new_spec, self._clock()
            return True
        spec = lease.get("spec") or {}
        if spec != self._observed:
            self._observed, self._observed_at = spec, self._clock()
        holder = str(spec.get("holderIdentity") or "")
        ours = holder == s.identity
        duration = float(spec.get("leaseDurationSeconds") or s.lease_duration_s)
        if not ours and holder and self._clock() < self._observed_at + duration:
            return False  # held by someone else and not expired
        transitions = int(spec.get("leaseTransitions") or 0) + (0 if ours else 1)
        new_spec = self._spec(acquire=spec.get("acquireTime") if ours else None, transitions=transitions)
        body = {**lease, "spec": new_spec}
        try:
            self._api.replace_namespaced_lease(
                s.name, s.namespace, body, _request_timeout=s.request_timeout_s
            )
        except client.ApiException as exc:
            if exc.status == 409:
                return False
            raise
        self.last_api_success = self._clock()
        self._observed, self._observed_at = new_spec, self._clock()
        if not ours:
            _log.info(
                "acquired Lease %s/%s (was %r)",
                s.namespace,
                s.name,
                holder,
                extra={"event": "leader_acquired", "identity": s.identity},
            )
        return True

    def _attempt(self) -> bool:
        try:
            return self.try_acquire_or_renew()
        except (client.ApiException, OSError, KatibProgressError) as exc:
            _log.warning("Lease %s/%s: %s", self.settings.namespace, self.settings.name, classify(exc))
            return False

    def release(self) -> None:
        """Give the Lease up if we hold it (holder cleared, so a standby takes over at once)."""
        s = self.settings
        try:
            lease = self._read()
            if lease is None or (lease.get("spec") or {}).get("holderIdentity") != s.identity:
                return
            spec = {
                **lease["spec"],
                "holderIdentity": "",
                "leaseDurationSeconds": 1,
                "renewTime": micro_time(self._wall()),
            }
            self._api.replace_namespaced_lease(
                s.name, s.namespace, {**lease, "spec": spec}, _request_timeout=s.request_timeout_s
            )
            _log.info("released Lease %s/%s", s.namespace, s.name, extra={"event": "leader_released"})
        except (client.ApiException, OSError) as exc:
            _log.warning("Lease %s/%s not released: %s", s.namespace, s.name, classify(exc))

    # -- loop ----------------------------------------------------------------------------------------

    def run(self, on_started: Callable[[], None], on_stopped: Callable[[], None]) -> bool:
        """Block: stand by, lead, and return True after ``stop()`` or False when leadership was lost."""
        s = self.settings
        while not self._stopping.is_set():
            if self._attempt():
                break
            self._stopping.wait(s.retry_period_s)
        else:
            return True
        self._leader.set()
        on_started()
        last_renew = self._clock()
        lost = False
        while not self._stopping.wait(s.retry_period_s):
            if self._attempt():
                last_renew = self._clock()
            elif self._clock() - last_renew >= s.renew_deadline_s:
                lost = True
                _log.error(
                    "lost Lease %s/%s: not renewed within %.1fs",
                    s.namespace,
                    s.name,
                    s.renew_deadline_s,
                    extra={"event": "leader_lost"},
                )
                break
            elif self.holder and self.holder != s.identity:
                lost = True
                _log.error(
                    "Lease %s/%s taken by %s",
                    s.namespace,
                    s.name,
                    self.holder,
                    extra={"event": "leader_lost"},
                )
                break
        self._leader.clear()
        on_stopped()
        if not lost and not self._release_disabled:
            self.release()
        return not lost

    def stop(self) -> None:
        self._stopping.set()

    def crash(self) -> None:
        """Tests: stop without releasing (as a killed pod would)."""
        self._release_disabled = True
        self._stopping.set()
