"""The collector as deployed on a cluster: the watcher/pipeline ``Collector`` plus pruning,
enforcement, the final-metrics marker, the watchdog, leader election and ``/metrics``.

``ClusterCollector.run()`` stands by until it holds the Lease (or at once without leader election)
and then runs one *term*: a fresh observation sink, the watcher/pipeline
(``katib_progress.collector.controller``), the pruning forwarder, the final-metrics marker loop and
the optional watchdog. When the term ends (``stop()``, or the Lease is lost) everything is stopped
and the sink flushed; the next leader recovers exactly-once from the DB (the pipeline's restart
rule: ``sink.latest()``).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from typing import Protocol

from kubernetes import client
from pydantic import BaseModel, ConfigDict, Field

from katib_progress.collector.backoff import BackoffSettings
from katib_progress.collector.controller import Collector, CollectorSettings, job_ref
from katib_progress.collector.counters import Counters, CounterSpec
from katib_progress.collector.enforce import Enforcer, EnforceResult, ObservationReader, condition_true
from katib_progress.collector.events import EventRecorder, ObjectRef
from katib_progress.collector.experiments import ExperimentCache, ExperimentInfo
from katib_progress.collector.final_metrics import DEFAULT_POLL, FinalMetricsMarker, StoredReader
from katib_progress.collector.forwarder import ForwarderSettings, PruningForwarder
from katib_progress.collector.kube import JobEvent
from katib_progress.collector.leader import LeaderElector, LeaderSettings
from katib_progress.collector.pipeline import JobRef
from katib_progress.collector.sinks import ObservationSink
from katib_progress.collector.watchdog import Watchdog
from katib_progress.core.pruning import PruningBackend
from katib_progress.core.types import Decision, ProgressPoint

_log = logging.getLogger(__name__)

TERMS = CounterSpec("collector_leader_terms_total", "terms led by this process")


class Reader(StoredReader, ObservationReader, Protocol):
    """Reads what the DB manager stored (``katib.readback.StoredRowsReader``)."""


class ClusterOptions(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    collector: CollectorSettings = CollectorSettings()
    forwarder: ForwarderSettings = ForwarderSettings()
    leader: LeaderSettings | None = None
    identity: str = "katib-progress-collector"
    experiment_ttl_s: float = Field(default=30.0, ge=0)
    final_poll: BackoffSettings = DEFAULT_POLL
    final_interval_s: float = Field(default=0.1, gt=0)
    watchdog: bool = False
    watchdog_interval_s: float = Field(default=30.0, gt=0)
    flush_timeout_s: float = Field(default=10.0, ge=0)


class _Term:
    """One leadership term: everything that only the leader runs."""

    def __init__(self, cc: ClusterCollector) -> None:
        self.cc = cc
        o = cc.options
        self.sink = cc.sink_factory()
        self.jobs: dict[tuple[str, str], JobRef] = {}
        self._lock = threading.Lock()
        self.forwarder = PruningForwarder(
            cc.experiments,
            self.enforce,
            settings=o.forwarder,
            counters=cc.counters,
            client_factory=cc.pruning.connect,
            on_notice=self.notice,
            unrouted_ttl_s=o.experiment_ttl_s,
        )
        self.final = FinalMetricsMarker(
            cc.api_client,
            cc.reader,
            events=cc.events,
            counters=cc.counters,
            poll=o.final_poll,
        )
        self.collector = Collector(
            o.collector,
            self.sink,
            cc.api_client,
            on_point=self.on_point,
            counters=cc.counters,
            on_event=self.on_event,
        )
        self.watchdog = (
            Watchdog(
                cc.api_client,
                cc.enforcer,
                engine_factory=cc.pruning.engine,
                counters=cc.counters,
                namespaces=o.collector.watch.namespaces,
                interval_s=o.watchdog_interval_s,
            )
            if o.watchdog
            else None
        )
        self._threads: list[threading.Thread] = []

    def on_event(self, event: JobEvent) -> None:
        """Before the snapshot is processed: remember the job (its points need the namespace) and
        hand it to the final-metrics marker (its check is asynchronous and reads the DB)."""
        job = job_ref(event)
        with self._lock:
            if event.kind == "delete":
                self.jobs.pop((job.experiment, job.trial), None)
            else:
                self.jobs[(job.experiment, job.trial)] = job
        if event.kind == "delete":
            self.final.forget(job)
            self.forwarder.forget(job)
        else:
            self.final.observe(job, event.obj)
            # a trial's end as the TrainJob shows it, told to the pruning engine (ReportFinal)
            if condition_true(event.obj, "Failed"):
                self.forwarder.submit_final(job, "failed")
            elif condition_true(event.obj, "Complete"):
                self.forwarder.submit_final(job, "complete")

    def enforce(self, job: JobRef, decision: Decision, point: ProgressPoint) -> None:
        result = self.cc.enforcer.prune(job, decision, seq=point.seq)
        if result in (EnforceResult.PRUNED, EnforceResult.ALREADY_STOPPED):
            self.forwarder.submit_final(job, "pruned")

    def notice(self, info: ExperimentInfo, message: str) -> None:
        ref = ObjectRef("kubeflow.org/v1beta1", "Experiment", info.namespace, info.name, info.uid)
        self.cc.events.record(
            ref, reason="LivePruningUnavailable", action="Collect", note=message, type_="Warning"
        )

    def on_point(self, point: ProgressPoint) -> None:
        with self._lock:
            job = self.jobs.get((point.experiment, point.trial))
        if job is not None:
            self.forwarder.submit(job, point)

    def _thread(self, target: Callable[[], object], name: str) -> None:
        thread = threading.Thread(target=target, name=name, daemon=True)
        thread.start()
        self._threads.append(thread)

    def start(self) -> None:
        self.forwarder.start()
        self._thread(lambda: self.final.run(self.cc.options.final_interval_s), "final-metrics")
        if self.watchdog is not None:
            self._thread(self.watchdog.run, "watchdog")
        self._thread(self.collector.run, "collector")

    def alive(self) -> bool:
        return all(thread.is_alive() for thread in self._threads)

    def stop(self) -> bool:
        self.collector.stop()
        self.final.stop()
        if self.watchdog is not None:
            self.watchdog.stop()
        for thread in self._threads:
            thread.join(30)
        self.forwarder.stop()
        drained = self.sink.flush(self.cc.options.flush_timeout_s)
        self.sink.close()
        return drained


class ClusterCollector:
    def __init__(
        self,
        options: ClusterOptions,
        api_client: client.ApiClient,
        *,
        sink_factory: Callable[[], ObservationSink],
        reader: Reader,
        pruning: PruningBackend,
        counters: Counters | None = None,
    ) -> None:
        self.options = options
        self.api_client = api_client
        self.sink_factory = sink_factory
        self.reader = reader
        self.counters = counters if counters is not None else Counters()
        self.pruning = pruning
        self.events = EventRecorder(api_client, instance=options.identity, counters=self.counters)
        self.enforcer = Enforcer(api_client, events=self.events, counters=self.counters, observations=reader)
        self.experiments = ExperimentCache(
            api_client, ttl_s=options.experiment_ttl_s, validate=pruning.validate
        )
        self.elector = LeaderElector(api_client, options.leader) if options.leader is not None else None
        self.term: _Term | None = None
        self.drained = True
        self._crashed = False
        self._stopping = threading.Event()

    # -- probes and gauges -------------------------------------------------------------------------

    @property
    def is_leader(self) -> bool:
        return self.elector.is_leader if self.elector is not None else self.term is not None

    def healthy(self) -> bool:
        """False when a thread of the current term died (the loop is wedged: restart the pod)."""
        term = self.term
        return term is None or term.alive()

    def ready(self) -> bool:
        if self.elector is None:
            return True
        period = self.options.leader.retry_period_s if self.options.leader else 2.0
        return time.monotonic() - self.elector.last_api_success < max(10.0, 5 * period)

    def gauges(self) -> Mapping[str, Callable[[], float]]:
        def buffered() -> float:
            term = self.term
            return float(getattr(term.sink, "buffered_rows", 0)) if term is not None else 0.0

        return {
            "collector_leader": lambda: 1.0 if self.is_leader else 0.0,
            "collector_buffered_rows": buffered,
            "collector_pruning_pending": lambda: float(self.term.forwarder.pending) if self.term else 0.0,
            "collector_final_metrics_waiting": lambda: float(self.term.final.waiting) if self.term else 0.0,
        }

    # -- lifecycle ---------------------------------------------------------------------------------

    def _start_term(self) -> None:
        self.counters.inc(TERMS)
        term = _Term(self)
        self.term = term
        term.start()
        _log.info("leading: collecting", extra={"event": "term_started", "identity": self.options.identity})

    def _stop_term(self) -> None:
        term, self.term = self.term, None
        if term is not None and self._crashed:
            return  # a killed pod flushes nothing
        if term is not None:
            self.drained = term.stop()
            _log.info("term ended (drained=%s)", self.drained, extra={"event": "term_ended"})

    def run(self) -> bool:
        """Block until ``stop()``; False when leadership was lost (the process should exit)."""
        if self.elector is None:
            self._start_term()
            self._stopping.wait()
            self._stop_term()
            return True
        return self.elector.run(self._start_term, self._stop_term)

    def stop(self) -> None:
        self._stopping.set()
        if self.elector is not None:
            self.elector.stop()

    def crash(self) -> None:
        """Tests: die like a killed pod (no Lease release, no sink flush)."""
        self._crashed = True
        self._stopping.set()
        if self.elector is not None:
            self.elector.crash()
        term = self.term
        if term is not None:
            term.collector.stop()
            term.forwarder.stop(0.1)
            term.final.stop()
