"""Process faults (fast profile): the DB manager and the collector killed and restarted mid-stream.

Real processes: ``katib-progress db serve`` (restarted on the same port and SQLite file) and
``katib-progress collector run`` (SIGKILLed and started again). Invariants: docs/reliability.md.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime
from pathlib import Path

from tests.faults._harness import (
    Ledger,
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

RSS_SLACK_KB = 40 * 1024


def test_db_manager_down_then_back_loses_nothing(
    kube: KubeStandin, objs: Objects, store: StoreProc, kubeconfig: Path, tmp_path: Path
) -> None:
    ledger = Ledger()
    writer = Writer(objs, ledger, datetime.now(UTC).replace(microsecond=0), total=36)
    for i in range(3):
        writer.add(f"db-{i}")
    collector = collector_proc(kubeconfig, store.address, tmp_path / "collector.log").start()
    try:
        wait_synced(kube, 0, collector)
        for _ in range(6):
            writer.round(gap=0.02)
        wait_stored(store.address, ledger, procs=[collector])
        rss_before = collector.rss_kb()

        # Outage 1: SIGKILL (no goodbye; a write may be cut mid-flight). Everything written meanwhile
        # reaches the running, synced collector, which must hold it and deliver it later, in order.
        assert store.kill() == -9
        for _ in range(10):
            writer.round(gap=0.05)
        writer.add("db-late")  # a new trial while the store is down: its restart read fails too
        for _ in range(4):
            writer.round(gap=0.05)
        time.sleep(1.0)
        collector.assert_running()
        store.start()
        wait_stored(store.address, ledger, timeout=60, procs=[collector])

        # Outage 2: a graceful stop (SIGTERM) while snapshots keep coming, then back.
        assert store.terminate() == 0
        for _ in range(8):
            writer.round(gap=0.05)
        collector.assert_running()
        store.start()
        while not writer.finished():
            writer.round(gap=0.02)
        wait_stored(store.address, ledger, timeout=60, procs=[collector])
        rss_after = collector.rss_kb()
        result = check_store(store.address, ledger)
        assert result.optional_missing == 0  # nothing here was allowed to be lost
        assert rss_after - rss_before < RSS_SLACK_KB, (rss_before, rss_after)
        assert collector.terminate() == 0
    finally:
        collector.stop_quietly()
    log = collector.log(500_000)
    assert '"drained": true' in log
    assert "reachable again" in log  # the outages were really seen by the sink


def test_collector_sigkill_and_restart_mid_stream(
    kube: KubeStandin, objs: Objects, store: StoreProc, kubeconfig: Path, tmp_path: Path
) -> None:
    ledger = Ledger()
    writer = Writer(objs, ledger, datetime.now(UTC).replace(microsecond=0), total=30)
    for i in range(3):
        writer.add(f"kill-{i}")
    collector = collector_proc(kubeconfig, store.address, tmp_path / "collector.log")
    try:
        for round_ in range(3):
            watches = watch_count(kube)
            collector.start()
            wait_synced(kube, watches, collector)
            ledger.promote_current()  # the new collector's list saw each trial's current snapshot
            for _ in range(8):
                writer.round(gap=0.02)
            if round_ == 2:
                break
            # SIGKILL right after a write: the last snapshots may sit in its memory, undelivered.
            assert collector.kill() == -9
            time.sleep(0.5)  # in-flight RPCs land (or not)
            for trial in writer.next_step:
                ledger.demote_after(trial, set(stored_steps(store.address, trial)))
            for _ in range(2):  # written while no collector runs: only the latest is receivable
                writer.round(required=False)
        while not writer.finished():
            writer.round(gap=0.02)
        wait_stored(store.address, ledger, timeout=60, procs=[collector])
        result = check_store(store.address, ledger)
        assert result.stored >= result.required
        assert collector.terminate() == 0
    finally:
        collector.stop_quietly()
    log = collector.log(500_000)
    assert log.count('"event": "started"') == 3
