"""Forward ProgressPoints (and trial ends) to each experiment's pruning services, off the collection path.

Where points go (docs/cluster.md, "Which container serves what"): Katib runs the suggestion container
(Service port 6789) and, when ``spec.earlyStopping`` is set, the early-stopping container (port
6788) in one pod behind one Service (suggestion/composer/composer.go ``DesiredService``):

- ``earlyStopping.algorithmName: katib-progress`` or ``kp-medianstop`` (Katib's medianstop served by our
  image): our pruning engine runs in the early-stopping container: points go to ``address_template``
  (default ``...:6788``) with the Experiment's settings and PRUNE decisions are enforced;
- a ``kp-*`` algorithm: our suggestion container learns the curves: points go to
  ``suggestion_address_template`` (default ``...:6789``) with ``policy=nop`` (never prunes). With any
  other early stopping (e.g. Katib's own ``medianstop`` image) or none, 6788 is not ours (or absent) and
  nothing is sent there; ``on_notice`` is told once per Experiment that live pruning is unavailable;
- anything else: nothing is forwarded.

``submit_final(job, state)`` reports a trial's end (``complete``/``failed``/``pruned``) once to the
same services (``RemotePruner.report_final``).

``PruningForwarder.submit(job, point)`` never blocks and never raises. A point of an Experiment found
to route nowhere (stock algorithm, no ``katib-progress`` early stopping, or absent) is counted
``not_pruned`` at once, without queueing or waking a worker, until ``unrouted_ttl_s`` (the Experiment
cache's TTL) has passed and it is looked up again: Katib lets only the trial counts of an Experiment
change (katib pkg/webhook/v1beta1/experiment/validator/validator.go, ``ValidateExperiment``), so the
routes of a name change only when the Experiment is recreated. Otherwise it replaces any point of the
same TrainJob still waiting (only the latest matters: the engines are idempotent per (trial, seq)
and see every point they need through the curve's latest values), and when ``max_pending`` jobs
wait it drops the oldest one. Worker threads take points in arrival order (never two of one job at
once), look up the Experiment (TTL cache), call ``Decide`` on
``address_template.format(experiment=, algorithm=, namespace=)`` with a deadline, and hand PRUNE
decisions to ``on_prune(job, decision, point)``. A per-address circuit breaker stops calling a service after
``breaker_failures`` consecutive failures for an exponentially growing pause (then one trial call).
Everything that is not forwarded is counted (``collector_pruning_points_total{result=...}``).
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from pydantic import BaseModel, ConfigDict, Field

from katib_progress.collector.backoff import Backoff, BackoffSettings, retry_hint
from katib_progress.collector.counters import Counters, CounterSpec
from katib_progress.collector.experiments import ExperimentInfo
from katib_progress.collector.pipeline import JobRef
from katib_progress.core.errors import KatibProgressError, PermanentError, TemporaryError
from katib_progress.core.pruning import PruningSpec, RemotePruner
from katib_progress.core.types import Decision, ProgressPoint

_log = logging.getLogger(__name__)

POINTS = CounterSpec("collector_pruning_points_total", "progress points by what became of them", ("result",))
DECISIONS = CounterSpec("collector_prune_decisions_total", "pruning decisions received", ("verdict",))
ERRORS = CounterSpec(
    "collector_pruning_errors_total", "failed pruning calls, Experiment reads and enforcements", ("kind",)
)
BREAKER_OPENED = CounterSpec(
    "collector_pruning_breaker_opened_total", "times a pruning service's circuit breaker opened"
)

DEFAULT_TEMPLATE = "{experiment}-{algorithm}.{namespace}:6788"  # Katib's early-stopping port
SUGGESTION_TEMPLATE = "{experiment}-{algorithm}.{namespace}:6789"  # Katib's suggestion port
FINALS = CounterSpec(
    "collector_pruning_finals_total", "trial ends reported to the pruning services", ("result",)
)
_FINAL = "\x00final"


class ForwarderSettings(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    address_template: str = Field(default=DEFAULT_TEMPLATE, min_length=1, description="pruning engine")
    suggestion_address_template: str = Field(default=SUGGESTION_TEMPLATE, min_length=1)
    workers: int = Field(default=2, ge=1, le=64)
    timeout_s: float = Field(default=2.0, gt=0, description="deadline of each Decide call")
    max_pending: int = Field(default=10_000, ge=1, description="jobs whose latest point waits")
    breaker_failures: int = Field(default=3, ge=1)
    breaker_backoff: BackoffSettings = Field(
        default=BackoffSettings(initial_s=1.0, max_s=60.0), description="pause of an open breaker"
    )
    enforce_attempts: int = Field(default=5, ge=1)
    enforce_backoff: BackoffSettings = Field(default=BackoffSettings(initial_s=0.5, max_s=8.0))

    def address(self, *, experiment: str, algorithm: str, namespace: str) -> str:
        return self.address_template.format(experiment=experiment, algorithm=algorithm, namespace=namespace)

    def suggestion_address(self, *, experiment: str, algorithm: str, namespace: str) -> str:
        return self.suggestion_address_template.format(
            experiment=experiment, algorithm=algorithm, namespace=namespace
        )


@dataclass(frozen=True, slots=True)
class Route:
    address: str
    spec: PruningSpec
    enforce: bool  # PRUNE decisions from here are enforced (the pruning engine, not the curve feed)


def _decide(point: ProgressPoint, spec: PruningSpec) -> Callable[[RemotePruner], Decision]:
    return lambda pruner: pruner.decide(point, spec)


class ExperimentSource(Protocol):
    """What the forwarder needs from the Experiment cache (``ExperimentCache``)."""

    def config(self, namespace: str, name: str) -> tuple[ExperimentInfo | None, PruningSpec | None]: ...


@dataclass
class _Breaker:
    failures: int = 0
    open_until: float = 0.0
    pause: float = 0.0


class PruningForwarder:
    def __init__(
        self,
        experiments: ExperimentSource,
        on_prune: Callable[[JobRef, Decision, ProgressPoint], object],
        *,
        settings: ForwarderSettings | None = None,
        counters: Counters | None = None,
        client_factory: Callable[[str, float], RemotePruner],
        clock: Callable[[], float] = time.monotonic,
        on_notice: Callable[[ExperimentInfo, str], object] | None = None,
        unrouted_ttl_s: float = 30.0,
    ) -> None:
        self.settings = settings or ForwarderSettings()
        self._unrouted_ttl_s = unrouted_ttl_s
        self._unrouted: dict[tuple[str, str], float] = {}  # (namespace, experiment) -> look again at
        self._on_notice = on_notice
        self._noticed: set[tuple[str, str]] = set()
        self._reported: set[str] = set()
        self.counters = counters if counters is not None else Counters()
        self._experiments = experiments
        self._on_prune = on_prune
        self._factory = client_factory
        self._clock = clock
        self._rng = random.Random()
        self._cond = threading.Condition()
        self._queue: OrderedDict[str, tuple[JobRef, ProgressPoint | str]] = OrderedDict()
        self._busy: set[str] = set()
        self._clients: dict[str, RemotePruner] = {}
        self._breakers: dict[str, _Breaker] = {}
        self._stopping = threading.Event()
        self._threads: list[threading.Thread] = []

    # -- producer side (collection path) ------------------------------------------------------------

    def submit(self, job: JobRef, point: ProgressPoint) -> None:
        with self._cond:
            experiment = (job.namespace, job.experiment)
            until = self._unrouted.get(experiment)
            if until is not None:
                if self._clock() < until:
                    self.counters.inc(POINTS, result="not_pruned")
                    return
                del self._unrouted[experiment]
            if self._queue.pop(job.key, None) is not None:
                self.counters.inc(POINTS, result="superseded")
            elif len(self._queue) >= self.settings.max_pending:
                self._queue.popitem(last=False)
                self.counters.inc(POINTS, result="dropped_overflow")
            self._queue[job.key] = (job, point)
            self._cond.notify()

    def submit_final(self, job: JobRef, state: str) -> None:
        """Report the trial's end (``complete``/``failed``/``pruned``) once, after its queued point."""
        with self._cond:
            if job.key in self._reported:
                return
            self._reported.add(job.key)
            self._queue[job.key + _FINAL] = (job, state)
            self._cond.notify()

    @property
    def pending(self) -> int:
        with self._cond:
            return len(self._queue) + len(self._busy)

    def idle(self, timeout: float) -> bool:
        """Wait until nothing is queued or in flight (tests, shutdown)."""
        with self._cond:
            return self._cond.wait_for(lambda: not self._queue and not self._busy, timeout=timeout)

    # -- lifecycle ---------------------------------------------------------------------------------

    def start(self) -> PruningForwarder:
        for i in range(self.settings.workers):
            thread = threading.Thread(target=self._work, name=f"pruning-forwarder-{i}", daemon=True)
            thread.start()
            self._threads.append(thread)
        return self

    def stop(self, timeout: float = 5.0) -> None:
        self._stopping.set()
        with self._cond:
            self._cond.notify_all()
        for thread in self._threads:
            thread.join(timeout)
        self._threads.clear()
        for c in self._clients.values():
            c.close()
        self._clients.clear()

    # -- workers -----------------------------------------------------------------------------------

    def _ready(self, key: str) -> bool:
        if key in self._busy:
            return False
        point_key = key.removesuffix(_FINAL)
        return point_key == key or (point_key not in self._busy and point_key not in self._queue)

    def _take(self) -> tuple[JobRef, ProgressPoint | str] | None:
        with self._cond:
            while not self._stopping.is_set():
                key = next((k for k in self._queue if self._ready(k)), None)
                if key is not None:
                    self._busy.add(key)
                    job, item = self._queue.pop(key)
                    return job, item
                self._cond.wait(0.5)
            return None

    def _work(self) -> None:
        while (taken := self._take()) is not None:
            job, item = taken
            key = job.key if isinstance(item, ProgressPoint) else job.key + _FINAL
            try:
                if isinstance(item, ProgressPoint):
                    self._forward(job, item)
                else:
                    self._final(job, item)
            except Exception:  # noqa: BLE001 - outermost loop of a worker thread: log, count, carry on
                _log.exception("forwarding for trial %s failed unexpectedly", job.trial)
                self.counters.inc(ERRORS, kind="unexpected")
            finally:
                with self._cond:
                    self._busy.discard(key)
                    self._cond.notify_all()

    def _breaker_allows(self, address: str) -> bool:
        breaker = self._breakers.setdefault(address, _Breaker())
        return breaker.failures < self.settings.breaker_failures or self._clock() >= breaker.open_until

    def _failed(self, address: str, error: KatibProgressError) -> None:
        s = self.settings
        breaker = self._breakers.setdefault(address, _Breaker())
        breaker.failures += 1
        if breaker.failures >= s.breaker_failures:
            breaker.pause = s.breaker_backoff.delay(
                breaker.failures - s.breaker_failures, self._rng, at_least=retry_hint(error)
            )
            breaker.open_until = self._clock() + breaker.pause
            self.counters.inc(BREAKER_OPENED)
            _log.warning("pruning service %s failing; pausing calls for %.1fs", address, breaker.pause)

    def _client(self, address: str) -> RemotePruner:
        with self._cond:
            found = self._clients.get(address)
            if found is None:
                found = self._clients[address] = self._factory(address, self.settings.timeout_s)
            return found

    def _routes(self, job: JobRef) -> list[Route] | None:
        """Where this job's experiment wants points; None when the Experiment is unreadable."""
        try:
            info, spec = self._experiments.config(job.namespace, job.experiment)
        except KatibProgressError as exc:
            self.counters.inc(ERRORS, kind="experiment")
            _log.warning("Experiment %s/%s unreadable: %s", job.namespace, job.experiment, exc)
            return None
        if info is None:
            return []
        names = {"experiment": info.name, "algorithm": info.algorithm, "namespace": job.namespace}
        routes = []
        if spec is not None and info.prunes:
            routes.append(Route(self.settings.address(**names), spec, enforce=True))
        curve = info.curve_spec()
        if curve is not None:
            routes.append(Route(self.settings.suggestion_address(**names), curve, enforce=False))
        if info.ours and not info.prunes:
            self._notice(info)
        return routes

    def _notice(self, info: ExperimentInfo) -> None:
        key = (info.namespace, info.name)
        with self._cond:
            if key in self._noticed:
                return
            self._noticed.add(key)
        what = f"early stopping {info.early_stopping!r}" if info.early_stopping else "no early stopping"
        message = (
            f"Experiment {info.namespace}/{info.name} uses {what}: live pruning by katib-progress is "
            f"unavailable (nothing is sent to port 6788); progress is still collected and the "
            f"{info.algorithm} suggestion service still learns the curves"
        )
        _log.warning(message, extra={"event": "live_pruning_unavailable", "experiment": info.name})
        if self._on_notice is not None:
            self._on_notice(info, message)

    def _call(self, route: Route, job: JobRef, call: Callable[[RemotePruner], object]) -> object | None:
        """One call through the breaker; None when skipped or failed (counted)."""
        with self._cond:
            allowed = self._breaker_allows(route.address)
        if not allowed:
            self.counters.inc(POINTS, result="dropped_breaker_open")
            return None
        try:
            result = call(self._client(route.address))
        except TemporaryError as exc:
            self.counters.inc(ERRORS, kind="temporary")
            with self._cond:
                self._failed(route.address, exc)
            _log.info("pruning service %s: %s", route.address, exc)
            return None
        except PermanentError as exc:
            # e.g. UNIMPLEMENTED: not our image behind the address; back off like a failure
            self.counters.inc(ERRORS, kind="permanent")
            with self._cond:
                self._failed(route.address, exc)
            _log.error("pruning service %s rejected trial %s: %s", route.address, job.trial, exc)
            return None
        with self._cond:
            self._breakers[route.address] = _Breaker()
        return result

    def _forward(self, job: JobRef, point: ProgressPoint) -> None:
        routes = self._routes(job)
        if routes is None:
            return
        if not routes:
            self.counters.inc(POINTS, result="not_pruned")
            with self._cond:
                self._unrouted[(job.namespace, job.experiment)] = self._clock() + self._unrouted_ttl_s
            return
        for route in routes:
            decision = self._call(route, job, _decide(point, route.spec))
            if not isinstance(decision, Decision):
                continue
            self.counters.inc(POINTS, result="decided")
            self.counters.inc(DECISIONS, verdict="prune" if decision.prune else "continue")
            if decision.prune and route.enforce:
                self._enforce(job, decision, point)

    def _final(self, job: JobRef, state: str) -> None:
        def report(c: RemotePruner) -> bool:
            c.report_final(job.experiment, job.trial, state)
            return True

        for route in self._routes(job) or ():
            done = self._call(route, job, report)
            self.counters.inc(FINALS, result="reported" if done else "failed")

    def _enforce(self, job: JobRef, decision: Decision, point: ProgressPoint) -> None:
        backoff = Backoff(self.settings.enforce_backoff, self._rng)
        for attempt in range(1, self.settings.enforce_attempts + 1):
            try:
                self._on_prune(job, decision, point)
            except TemporaryError as exc:
                self.counters.inc(ERRORS, kind="enforce")
                _log.warning("pruning trial %s (attempt %d): %s", job.trial, attempt, exc)
                if self._stopping.wait(backoff.next_delay(exc.delay)):
                    return
                continue
            except PermanentError as exc:
                self.counters.inc(ERRORS, kind="enforce")
                _log.error("pruning trial %s failed: %s", job.trial, exc)
                return
            return
        _log.error(
            "trial %s not pruned after %d attempts; the next PRUNE decision retries",
            job.trial,
            self.settings.enforce_attempts,
        )

    def forget(self, job: JobRef) -> None:
        with self._cond:
            self._queue.pop(job.key, None)
            self._queue.pop(job.key + _FINAL, None)
            self._reported.discard(job.key)
