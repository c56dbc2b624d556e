"""The pruning forwarder: never blocks collection, keeps only the latest point per job, breaks the
circuit to failing services, retries enforcement."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from datetime import UTC, datetime
from types import MappingProxyType

import pytest

from katib_progress.collector.backoff import BackoffSettings
from katib_progress.collector.counters import Counters
from katib_progress.collector.experiments import ExperimentInfo
from katib_progress.collector.forwarder import ForwarderSettings, PruningForwarder
from katib_progress.collector.pipeline import JobRef
from katib_progress.core.errors import TemporaryError
from katib_progress.core.pruning import PruningSpec, RemotePruner
from katib_progress.core.types import Decision, ProgressPoint, Verdict
from katib_progress.suggestion.pruning.backend import BACKEND
from tests.kubestandin.waiting import wait_until

# a stock algorithm with our early stopping: one route (the pruning engine)
INFO = ExperimentInfo("ns", "exp", "tpe", "katib-progress", "loss", "minimize")


class _Experiments:
    def __init__(self, info: ExperimentInfo = INFO) -> None:
        self.info = info

    def config(self, namespace: str, name: str) -> tuple[ExperimentInfo | None, PruningSpec | None]:
        return self.info, self.info.pruning_spec()


class _Client:
    """A decision client that can block, fail, or prune; records what it was asked."""

    def __init__(self) -> None:
        self.gate = threading.Event()
        self.gate.set()
        self.seen: list[tuple[str, int]] = []
        self.fail = False
        self.fail_delay: float | None = None  # TemporaryError.delay of a failure
        self.prune_seq: int | None = None
        self.finals: list[tuple[str, str, str]] = []
        self.specs: list[PruningSpec | None] = []

    def decide(self, point: ProgressPoint, spec: PruningSpec | None = None) -> Decision:
        self.gate.wait(10)
        self.seen.append((point.trial, point.seq))
        self.specs.append(spec)
        if self.fail:
            raise TemporaryError("unavailable", delay=self.fail_delay)
        if self.prune_seq is not None and point.seq >= self.prune_seq:
            return Decision(Verdict.PRUNE, "bad", "divergence")
        return Decision.cont()

    def report_final(self, experiment: str, trial: str, state: str) -> None:
        self.finals.append((experiment, trial, state))

    def close(self) -> None:
        return None


def _job(trial: str) -> JobRef:
    return JobRef("ns", trial, f"uid-{trial}", "exp", trial)


def _point(trial: str, seq: int) -> ProgressPoint:
    return ProgressPoint("exp", trial, seq, datetime(2026, 1, 1, tzinfo=UTC), progress=float(seq))


@pytest.fixture
def fake() -> _Client:
    return _Client()


def _forwarder(
    client: RemotePruner, pruned: list[tuple[str, str]] | None = None, **settings: object
) -> PruningForwarder:
    def on_prune(job: JobRef, decision: Decision, point: ProgressPoint) -> None:
        if pruned is not None:
            pruned.append((job.trial, decision.policy))

    return PruningForwarder(
        _Experiments(),
        on_prune,
        settings=ForwarderSettings(**settings),  # type: ignore[arg-type]
        counters=Counters(),
        client_factory=lambda address, timeout: client,
    )


@pytest.fixture
def started(fake: _Client) -> Iterator[tuple[PruningForwarder, list[tuple[str, str]]]]:
    pruned: list[tuple[str, str]] = []
    fwd = _forwarder(
        fake,
        pruned,
        workers=1,
        max_pending=3,
        breaker_failures=2,
        breaker_backoff=BackoffSettings(initial_s=60.0, max_s=60.0),
    )
    fwd.start()
    try:
        yield fwd, pruned
    finally:
        fake.gate.set()
        fwd.stop(2)


def test_blocked_service_never_blocks_submit_and_keeps_latest_point(
    fake: _Client, started: tuple[PruningForwarder, list[tuple[str, str]]]
) -> None:
    fwd, _ = started
    fake.gate.clear()  # the service hangs
    fwd.submit(_job("t0"), _point("t0", 0))
    wait_until(lambda: fwd.pending == 1 and not fwd._queue)  # t0 is in flight, stuck
    for seq in range(1, 50):  # returns at once although the worker is stuck
        fwd.submit(_job("t1"), _point("t1", seq))
    for trial in ("t2", "t3", "t4"):
        fwd.submit(_job(trial), _point(trial, 0))
    assert fwd.counters.get("collector_pruning_points_total", result="superseded") == 48
    # max_pending=3: t1 (oldest waiting) was dropped when t4 arrived
    assert fwd.counters.get("collector_pruning_points_total", result="dropped_overflow") == 1
    fake.gate.set()
    assert fwd.idle(5)
    assert fake.seen == [("t0", 0), ("t2", 0), ("t3", 0), ("t4", 0)]


def test_latest_point_of_a_busy_job_is_decided_after_the_current_one(
    fake: _Client, started: tuple[PruningForwarder, list[tuple[str, str]]]
) -> None:
    fwd, _ = started
    fake.gate.clear()
    fwd.submit(_job("t"), _point("t", 0))
    wait_until(lambda: not fwd._queue)
    fwd.submit(_job("t"), _point("t", 1))
    fwd.submit(_job("t"), _point("t", 2))
    fake.gate.set()
    assert fwd.idle(5)
    assert fake.seen == [("t", 0), ("t", 2)]


def test_circuit_opens_after_consecutive_failures(
    fake: _Client, started: tuple[PruningForwarder, list[tuple[str, str]]]
) -> None:
    fwd, _ = started
    fake.fail = True
    for seq in range(5):
        fwd.submit(_job("t"), _point("t", seq))
        assert fwd.idle(5)
    assert len(fake.seen) == 2  # breaker_failures=2, then open for 60 s
    assert fwd.counters.get("collector_pruning_points_total", result="dropped_breaker_open") == 3
    assert fwd.counters.get("collector_pruning_breaker_opened_total") == 1


def test_open_breaker_pauses_as_long_as_the_service_asked(fake: _Client) -> None:
    now = [0.0]
    fake.fail, fake.fail_delay = True, 30.0
    fwd = PruningForwarder(
        _Experiments(),
        lambda job, decision, point: None,
        settings=ForwarderSettings(
            workers=1, breaker_failures=1, breaker_backoff=BackoffSettings(initial_s=0.01, max_s=60.0)
        ),
        counters=Counters(),
        client_factory=lambda address, timeout: fake,
        clock=lambda: now[0],
    ).start()
    try:
        fwd.submit(_job("t"), _point("t", 0))
        assert fwd.idle(5)
        now[0] = 1.0  # past the backoff's own pause, before the 30 s the service asked for
        fwd.submit(_job("t"), _point("t", 1))
        assert fwd.idle(5)
        assert len(fake.seen) == 1
        assert fwd.counters.get("collector_pruning_points_total", result="dropped_breaker_open") == 1
        now[0] = 31.0
        fwd.submit(_job("t"), _point("t", 2))
        assert fwd.idle(5)
        assert fake.seen == [("t", 0), ("t", 2)]
    finally:
        fwd.stop()


def test_prune_is_enforced_and_retried_on_temporary_errors(fake: _Client) -> None:
    calls: list[str] = []

    def on_prune(job: JobRef, decision: Decision, point: ProgressPoint) -> None:
        calls.append(job.trial)
        if len(calls) < 3:
            raise TemporaryError("API server busy")

    fwd = PruningForwarder(
        _Experiments(),
        on_prune,
        settings=ForwarderSettings(
            enforce_backoff=BackoffSettings(initial_s=0.01, max_s=0.2), enforce_attempts=5
        ),
        client_factory=lambda address, timeout: fake,
    ).start()
    try:
        fake.prune_seq = 1
        fwd.submit(_job("t"), _point("t", 0))
        assert fwd.idle(5)
        fwd.submit(_job("t"), _point("t", 1))
        assert fwd.idle(5)
    finally:
        fwd.stop(2)
    assert calls == ["t", "t", "t"]
    assert fwd.counters.get("collector_prune_decisions_total", verdict="prune") == 1
    assert fwd.counters.get("collector_pruning_errors_total", kind="enforce") == 2


def test_unreachable_service_over_real_grpc_times_out_and_breaks() -> None:
    # A TCP listener that never speaks HTTP/2: each Decide hits its deadline.
    silent = socket.create_server(("127.0.0.1", 0))
    port = silent.getsockname()[1]
    fwd = PruningForwarder(
        _Experiments(),
        lambda job, decision, point: None,
        settings=ForwarderSettings(
            address_template=f"127.0.0.1:{port}",
            timeout_s=0.2,
            breaker_failures=1,
            breaker_backoff=BackoffSettings(initial_s=60.0, max_s=60.0),
        ),
        client_factory=BACKEND.connect,
    ).start()
    try:
        for seq in range(3):
            fwd.submit(_job("t"), _point("t", seq))
            assert fwd.idle(10)
    finally:
        fwd.stop(2)
        silent.close()
    assert fwd.counters.get("collector_pruning_errors_total", kind="temporary") == 1
    assert fwd.counters.get("collector_pruning_points_total", result="dropped_breaker_open") == 2


def test_address_template_and_settings_validation() -> None:
    settings = ForwarderSettings()
    assert settings.address(experiment="e", algorithm="kp-tpe", namespace="ns") == "e-kp-tpe.ns:6788"
    assert (
        settings.suggestion_address(experiment="e", algorithm="kp-tpe", namespace="ns") == "e-kp-tpe.ns:6789"
    )
    with pytest.raises(ValueError, match="workers"):
        ForwarderSettings(workers=0)


@pytest.mark.parametrize(
    ("algorithm", "early", "routes", "notices"),
    [
        ("kp-tpe", "katib-progress", {"es": "median", "sugg": "nop"}, 0),
        ("kp-tpe", "medianstop", {"sugg": "nop"}, 1),  # 6788 is Katib's medianstop: never called
        ("kp-tpe", "", {"sugg": "nop"}, 1),
        ("random", "katib-progress", {"es": "median"}, 0),
        ("random", "medianstop", {}, 0),
        # Katib's medianstop served by our early-stopping image (issue 25): Katib's rule, live
        ("kp-tpe", "kp-medianstop", {"es": "medianstop", "sugg": "nop"}, 0),
        ("random", "kp-medianstop", {"es": "medianstop"}, 0),
        ("random", "", {}, 0),
    ],
)
def test_routes_of_every_pairing_and_trial_ends(
    algorithm: str, early: str, routes: dict[str, str], notices: int
) -> None:
    info = ExperimentInfo(
        "ns", "exp", algorithm, early, "loss", "minimize", MappingProxyType({"policy": "median"})
    )
    clients: dict[str, _Client] = {}
    noticed: list[str] = []
    prunes: list[str] = []

    def factory(address: str, timeout: float) -> _Client:
        return clients.setdefault(address, _Client())

    fwd = PruningForwarder(
        _Experiments(info),
        lambda job, decision, point: prunes.append(job.trial),
        settings=ForwarderSettings(address_template="es", suggestion_address_template="sugg"),
        client_factory=factory,
        on_notice=lambda i, message: noticed.append(message),
    ).start()
    try:
        for seq in range(3):
            fwd.submit(_job("t"), _point("t", seq))
            assert fwd.idle(5)
        fwd.submit_final(_job("t"), "complete")
        fwd.submit_final(_job("t"), "complete")  # reported once
        assert fwd.idle(5)
    finally:
        fwd.stop(2)
    assert {a: c.specs[0].settings["policy"] for a, c in clients.items() if c.specs} == routes
    assert {a: len(c.seen) for a, c in clients.items()} == {a: 3 for a in routes}
    assert {a: c.finals for a, c in clients.items()} == {a: [("exp", "t", "complete")] for a in routes}
    assert len(noticed) == notices and all("live pruning" in m for m in noticed)
    assert not prunes


def test_points_of_an_experiment_that_routes_nowhere_skip_the_queue_until_the_cache_ttl() -> None:
    """A stock algorithm without our early stopping: the first point looks the Experiment up; later
    ones are counted not_pruned without queueing or a lookup until the TTL has passed."""
    now = [0.0]
    lookups: list[str] = []
    stock = ExperimentInfo("ns", "exp", "random", "", "loss", "minimize")

    class Experiments:
        def config(self, namespace: str, name: str) -> tuple[ExperimentInfo | None, PruningSpec | None]:
            lookups.append(name)
            return stock, None

    fwd = PruningForwarder(
        Experiments(),
        lambda job, decision, point: None,
        counters=Counters(),
        client_factory=lambda address, timeout: _Client(),
        clock=lambda: now[0],
        unrouted_ttl_s=30.0,
    ).start()
    try:
        fwd.submit(_job("t0"), _point("t0", 0))
        assert fwd.idle(5)
        assert lookups == ["exp"]
        for seq in range(1, 20):
            fwd.submit(_job("t1"), _point("t1", seq))
            assert fwd.pending == 0  # never queued
        assert lookups == ["exp"]
        assert fwd.counters.get("collector_pruning_points_total", result="not_pruned") == 20
        now[0] = 30.0  # the Experiment cache would have expired: look again
        fwd.submit(_job("t1"), _point("t1", 20))
        assert fwd.idle(5)
        assert lookups == ["exp", "exp"]
        assert fwd.counters.get("collector_pruning_points_total", result="not_pruned") == 21
    finally:
        fwd.stop(2)
