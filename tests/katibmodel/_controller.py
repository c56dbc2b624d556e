"""A controller of the model: a thread that, every tick, refreshes its cache, turns watch events
into queue keys, and reconciles the keys that are due (controller-runtime's loop, reduced).

Upstream durations (gRPC deadlines, probe periods, CrashLoopBackOff) are in ``Timing``; tests run
with ``Timing.fast()``: the same rules on a shorter clock.
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from tests.katibmodel._kube import GVR, OK, Backoff, Changes, Kube, Queue, Result, key_of

_log = logging.getLogger(__name__)

Key = tuple[str, str]


@dataclass(frozen=True)
class Timing:
    """Durations of the modelled components. Defaults are upstream's."""

    #: how often a controller refreshes its cache (upstream: watch events, i.e. at once)
    tick_s: float = 0.1
    #: suggestion/suggestionclient.go: ``timeout`` of every gRPC call (60 s)
    grpc_timeout_s: float = 60.0
    #: consts.DefaultGRPCRetryPeriod (3 s) x DefaultGRPCRetryAttempts (10), validators only
    grpc_retry_period_s: float = 3.0
    grpc_retry_attempts: int = 10
    #: composer.go: readiness probe initialDelaySeconds / periodSeconds (10, 10); liveness 10, 120, x12
    probe_initial_delay_s: float = 10.0
    probe_period_s: float = 10.0
    liveness_period_s: float = 120.0
    liveness_failure_threshold: int = 12
    #: kubelet's probe timeoutSeconds default (1 s) and readiness failureThreshold default (3)
    probe_timeout_s: float = 1.0
    readiness_failure_threshold: int = 3
    #: kubelet CrashLoopBackOff: 10 s doubling to 300 s
    crashloop_initial_s: float = 10.0
    crashloop_max_s: float = 300.0
    #: controller-runtime's per-item rate limiter: 5 ms doubling to 1000 s
    requeue_base_s: float = 0.005
    requeue_max_s: float = 1000.0
    #: trial_controller.go: RequeueAfter 1 s while metrics are not reported (non-Push collectors)
    trial_requeue_s: float = 1.0

    @classmethod
    def fast(cls) -> Timing:
        return cls(
            tick_s=0.05,
            grpc_timeout_s=15.0,
            grpc_retry_period_s=0.1,
            grpc_retry_attempts=10,
            probe_initial_delay_s=0.2,
            probe_period_s=0.2,
            liveness_period_s=10.0,
            liveness_failure_threshold=12,
            probe_timeout_s=1.0,
            readiness_failure_threshold=3,
            crashloop_initial_s=0.5,
            crashloop_max_s=4.0,
            requeue_base_s=0.005,
            requeue_max_s=1.0,
            trial_requeue_s=0.2,
        )


@dataclass(frozen=True)
class Watch:
    """``c.Watch(source, handler)``: objects of ``gvr`` enqueue ``to_key(obj)`` (None: ignored)."""

    gvr: GVR
    to_key: Callable[[Mapping[str, Any]], Key | None]
    namespace: str | None = None


def for_object(obj: Mapping[str, Any]) -> Key | None:
    """handler.EnqueueRequestForObject."""
    return key_of(obj)


def for_owner(kind: str) -> Callable[[Mapping[str, Any]], Key | None]:
    """handler.EnqueueRequestForOwner(..., OnlyControllerOwner()): the controlling owner of ``kind``."""

    def mapper(obj: Mapping[str, Any]) -> Key | None:
        for ref in (obj.get("metadata") or {}).get("ownerReferences") or ():
            if isinstance(ref, dict) and ref.get("controller") and ref.get("kind") == kind:
                return (str(obj["metadata"].get("namespace") or ""), str(ref.get("name")))
        return None

    return mapper


class Cache:
    """One tick's view of the watched resources (what an informer cache would hold)."""

    def __init__(self, objects: dict[GVR, list[dict[str, Any]]]) -> None:
        self._objects = objects

    def list(self, gvr: GVR, namespace: str | None = None) -> list[dict[str, Any]]:
        items = self._objects.get(gvr, [])
        return [o for o in items if namespace is None or o["metadata"].get("namespace") == namespace]

    def get(self, gvr: GVR, key: Key) -> dict[str, Any] | None:
        return next((o for o in self._objects.get(gvr, []) if key_of(o) == key), None)


class Controller:
    """Subclasses set ``name`` and ``watches`` and implement ``reconcile(key, cache)``."""

    name = "controller"

    def __init__(self, kube: Kube, timing: Timing) -> None:
        self.kube = kube
        self.timing = timing
        self.queue = Queue(Backoff(timing.requeue_base_s, timing.requeue_max_s))
        self.errors: deque[str] = deque(maxlen=50)
        self._changes: dict[GVR, Changes] = {}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._pokes: set[Key] = set()
        self._poke_lock = threading.Lock()

    def poke(self, key: Key) -> None:
        """Enqueue ``key`` from another thread (an event of a source the model keeps in memory)."""
        with self._poke_lock:
            self._pokes.add(key)

    def watches(self) -> list[Watch]:
        raise NotImplementedError

    def reconcile(self, key: Key, cache: Cache) -> Result:
        raise NotImplementedError

    def step(self) -> None:
        """One tick: refresh the cache, enqueue watch events, reconcile due keys."""
        objects: dict[GVR, list[dict[str, Any]]] = {}
        for watch in self.watches():
            if watch.gvr not in objects:
                objects[watch.gvr] = self.kube.list(watch.gvr, watch.namespace)
            changes = self._changes.setdefault(watch.gvr, Changes())
            for obj in changes.diff(objects[watch.gvr]):
                key = watch.to_key(obj)
                if key is not None:
                    self.queue.add(key)
        with self._poke_lock:
            pokes, self._pokes = self._pokes, set()
        for key in pokes:
            self.queue.add(key)
        cache = Cache(objects)
        for key in self.queue.take_due():
            try:
                result = self.reconcile(key, cache)
            except Exception as exc:  # controller-runtime logs a Reconcile error and requeues with backoff
                _log.info("%s: reconcile %s/%s: %s", self.name, *key, exc)
                self.errors.append(f"{key[0]}/{key[1]}: {exc}")
                result = Result(error=exc)
            self.queue.done(key, result or OK)

    # -- thread ------------------------------------------------------------------------------------

    def start(self) -> Controller:
        self._thread = threading.Thread(target=self._run, name=f"katibmodel-{self.name}", daemon=True)
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.step()
            except Exception as exc:  # the API stand-in going away at teardown, a transient list error
                _log.info("%s: tick failed: %s", self.name, exc)
                self.errors.append(f"tick: {exc}")
            self._stop.wait(self.timing.tick_s)

    def request_stop(self) -> None:
        """Ask the loop to end after its current step (``stop`` then waits for it)."""
        self._stop.set()

    def stop(self, timeout: float = 10.0) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)
            self._thread = None
