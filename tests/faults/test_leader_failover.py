"""Leader failover between two ``katib-progress collector run --leader-elect`` replicas (docs/cluster.md).

The leader is SIGKILLed mid-stream (no release: the standby takes over after the lease expires),
then the new leader is stopped gracefully (SIGTERM: it flushes and releases the Lease, the restarted
replica takes over within one retry period). Snapshots published while nobody leads are receivable
only as each trial's latest (the new leader's list); everything else must be stored exactly once,
in order (``check_store``).
"""

from __future__ import annotations

import time
from datetime import UTC, datetime
from pathlib import Path

from kubernetes import client

from tests.faults._harness import (
    Ledger,
    Proc,
    StoreProc,
    Writer,
    check_store,
    collector_proc,
    stored_steps,
    wait_stored,
    wait_synced,
    watch_count,
)
from tests.kubestandin import KubeStandin
from tests.kubestandin.objects import Objects
from tests.kubestandin.waiting import wait_until

LEASE = "kp-faults"


def _replica(kubeconfig: Path, address: str, tmp_path: Path, identity: str) -> Proc:
    return collector_proc(
        kubeconfig,
        address,
        tmp_path / f"collector-{identity}.log",
        "--leader-elect",
        "--leader-election-namespace",
        "default",
        "--leader-election-id",
        LEASE,
        "--leader-election-identity",
        identity,
        "--lease-duration",
        "3",
        "--renew-deadline",
        "2",
        "--retry-period",
        "0.5",
    )


def _holder(kube: KubeStandin) -> str:
    api = client.CoordinationV1Api(kube.api_client())
    try:
        lease = api.read_namespaced_lease(LEASE, "default")
    except client.ApiException:
        return ""
    return str(lease.spec.holder_identity or "")


def test_leader_failover_crash_then_graceful(
    kube: KubeStandin, objs: Objects, store: StoreProc, kubeconfig: Path, tmp_path: Path
) -> None:
    ledger = Ledger()
    writer = Writer(objs, ledger, datetime.now(UTC).replace(microsecond=0), total=40)
    for i in range(3):
        writer.add(f"ha-{i}")
    replicas = {name: _replica(kubeconfig, store.address, tmp_path, name) for name in ("a", "b")}
    try:
        replicas["a"].start()
        wait_until(lambda: _holder(kube) == "a", timeout=30)
        replicas["b"].start()
        wait_synced(kube, 0, replicas["a"])
        for _ in range(10):
            writer.round(gap=0.03)
        wait_stored(store.address, ledger, procs=list(replicas.values()))

        # 1. The leader crashes: no release; b takes over once the lease (3 s) has expired.
        watches = watch_count(kube)
        assert replicas["a"].kill() == -9
        time.sleep(0.3)
        for trial in writer.next_step:
            ledger.demote_after(trial, set(stored_steps(store.address, trial)))
        for _ in range(3):
            writer.round(required=False, gap=0.2)
        wait_until(lambda: _holder(kube) == "b", timeout=30)
        wait_synced(kube, watches, replicas["b"])
        ledger.promote_current()
        replicas["a"].start()  # the crashed pod restarts as the standby
        for _ in range(10):
            writer.round(gap=0.03)
        wait_stored(store.address, ledger, procs=list(replicas.values()))

        # 2. Graceful handover: b flushes, releases the Lease, a takes over within a retry period.
        watches = watch_count(kube)
        assert replicas["b"].terminate() == 0
        for _ in range(2):
            writer.round(required=False)
        wait_until(lambda: _holder(kube) == "a", timeout=30)
        wait_synced(kube, watches, replicas["a"])
        ledger.promote_current()
        while not writer.finished():
            writer.round(gap=0.03)
        wait_stored(store.address, ledger, timeout=60, procs=[replicas["a"]])
        result = check_store(store.address, ledger)
        assert result.stored >= result.required
        assert replicas["a"].terminate() == 0
    finally:
        for proc in replicas.values():
            proc.stop_quietly()
    assert '"event": "leader_acquired"' in replicas["b"].log(500_000)
