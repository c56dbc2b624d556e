"""Leader election on a coordination.k8s.io/v1 Lease in the API stand-in."""

from __future__ import annotations

import json
import threading

import pytest
from kubernetes import client

from katib_progress.collector.leader import LeaderElector, LeaderSettings
from tests.kubestandin import KubeStandin
from tests.kubestandin.waiting import wait_until

NS = "katib-progress"


def _settings(identity: str, **kw: float) -> LeaderSettings:
    values: dict[str, object] = {"lease_duration_s": 1.0, "renew_deadline_s": 0.6, "retry_period_s": 0.05}
    return LeaderSettings.model_validate({"namespace": NS, "identity": identity, **values, **kw})


def _lease(kube: KubeStandin) -> dict[str, object]:
    response = client.CoordinationV1Api(kube.api_client()).read_namespaced_lease(
        "katib-progress-collector", NS, _preload_content=False
    )
    return dict(json.loads(response.data)["spec"])


class _Fake:
    """A clock the test moves."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_acquire_renew_and_takeover_only_after_expiry(kube: KubeStandin) -> None:
    clock_a, clock_b = _Fake(), _Fake()
    a = LeaderElector(kube.api_client(), _settings("a"), clock=clock_a)
    b = LeaderElector(kube.api_client(), _settings("b"), clock=clock_b)
    assert a.try_acquire_or_renew()  # creates the Lease
    spec = _lease(kube)
    assert spec["holderIdentity"] == "a" and spec["leaseTransitions"] == 0
    assert not b.try_acquire_or_renew()  # held, first seen now
    clock_b.now += 0.9
    assert a.try_acquire_or_renew()  # renewed: b sees a changed record
    assert not b.try_acquire_or_renew()
    clock_b.now += 0.9
    assert not b.try_acquire_or_renew()  # 0.9 s since the record changed: not expired
    clock_b.now += 0.2
    assert b.try_acquire_or_renew()  # a stopped renewing 1.1 s ago (by b's clock)
    spec = _lease(kube)
    assert spec["holderIdentity"] == "b" and spec["leaseTransitions"] == 1
    clock_a.now += 0.1
    assert not a.try_acquire_or_renew()  # a sees b holding now


def test_release_hands_over_at_once(kube: KubeStandin) -> None:
    a = LeaderElector(kube.api_client(), _settings("a", lease_duration_s=30, renew_deadline_s=20))
    b = LeaderElector(kube.api_client(), _settings("b", lease_duration_s=30, renew_deadline_s=20))
    assert a.try_acquire_or_renew()
    assert not b.try_acquire_or_renew()
    a.release()
    assert b.try_acquire_or_renew()
    assert _lease(kube)["holderIdentity"] == "b"


def test_racing_candidates_get_one_leader(kube: KubeStandin) -> None:
    electors = [LeaderElector(kube.api_client(), _settings(f"c{i}")) for i in range(4)]
    results: list[bool] = []
    barrier = threading.Barrier(len(electors))

    def attempt(e: LeaderElector) -> None:
        barrier.wait()
        results.append(e.try_acquire_or_renew())

    threads = [threading.Thread(target=attempt, args=(e,)) for e in electors]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert results.count(True) == 1


def test_run_loses_leadership_when_renewals_fail(kube: KubeStandin) -> None:
    events: list[str] = []
    a = LeaderElector(kube.api_client(retries=0), _settings("a", request_timeout_s=0.3))
    outcome: list[bool] = []
    thread = threading.Thread(
        target=lambda: outcome.append(a.run(lambda: events.append("start"), lambda: events.append("stop")))
    )
    thread.start()
    wait_until(lambda: a.is_leader)
    kube.fail_next(1000, 503, path="/leases/")
    thread.join(10)
    kube.clear_faults()
    assert outcome == [False] and events == ["start", "stop"] and not a.is_leader


def test_run_stop_releases(kube: KubeStandin) -> None:
    a = LeaderElector(kube.api_client(), _settings("a"))
    thread = threading.Thread(target=a.run, args=(lambda: None, lambda: None))
    thread.start()
    wait_until(lambda: a.is_leader)
    a.stop()
    thread.join(10)
    assert _lease(kube)["holderIdentity"] == ""


def test_settings_must_be_ordered() -> None:
    with pytest.raises(ValueError, match="renew_deadline_s"):
        LeaderSettings(namespace=NS, identity="a", lease_duration_s=5, renew_deadline_s=5)
    with pytest.raises(ValueError, match="retry_period_s"):
        LeaderSettings(namespace=NS, identity="a", renew_deadline_s=2, retry_period_s=2)
