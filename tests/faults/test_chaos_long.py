"""Long fault profile (``make test-slow`` / ``pytest -m slow tests/faults``): minutes of mixed faults.

30 TrainJobs report continuously while a fault schedule cycles through: watch streams closed (clean
and abrupt), 5xx bursts (some hanging), 429, 410 Gone windows, the DB manager SIGKILLed for several
seconds, the collector SIGKILLed and restarted, TrainJobs deleted and re-created, new trials
arriving. Between two faults the collector is given time to catch up, so the ledger knows exactly
which snapshots were receivable. ``KP_FAULTS_SECONDS`` sets the duration (default 150).
"""

from __future__ import annotations

import itertools
import os
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest
from kubernetes import client

from tests.faults._harness import (
    COLLECTOR_PATH,
    Ledger,
    StoreProc,
    Writer,
    check_store,
    collector_proc,
    list_count,
    stored_steps,
    wait_stored,
    wait_synced,
    watch_count,
)
from tests.kubestandin import KubeStandin
from tests.kubestandin.objects import KATIB, TRAINER, Objects, trainjob_body
from tests.kubestandin.waiting import wait_until

RSS_SLACK_KB = 60 * 1024

pytestmark = pytest.mark.slow


@pytest.mark.timeout(1800)
def test_chaos_long(
    kube: KubeStandin, objs: Objects, store: StoreProc, kubeconfig: Path, tmp_path: Path
) -> None:
    seconds = float(os.environ.get("KP_FAULTS_SECONDS", "150"))
    ledger = Ledger()
    writer = Writer(objs, ledger, datetime.now(UTC).replace(microsecond=0), total=100_000)
    for i in range(30):
        writer.add(f"chaos-{i:02d}")
    api = client.CustomObjectsApi(kube.api_client())
    collector = collector_proc(kubeconfig, store.address, tmp_path / "collector.log").start()
    wait_synced(kube, 0, collector)
    faults = itertools.cycle(
        ["close", "abrupt", "5xx", "db_kill", "hang", "collector_kill", "gone", "429", "churn", "new_trial"]
    )
    counts: dict[str, int] = {}
    rss: list[tuple[int, int]] = []
    lifetime_start_rss = 0
    deadline = time.monotonic() + seconds
    try:
        for _ in range(3):
            writer.round(gap=0.05)
        wait_stored(store.address, ledger, timeout=60, procs=[collector])
        lifetime_start_rss = collector.rss_kb()
        while time.monotonic() < deadline:
            fault = next(faults)
            counts[fault] = counts.get(fault, 0) + 1
            if fault == "close":
                kube.close_watches()
            elif fault == "abrupt":
                kube.close_watches(abrupt=True)
            elif fault == "5xx":
                kube.fail_next(4, 503, path=COLLECTOR_PATH)
                kube.close_watches()
            elif fault == "hang":
                kube.fail_next(2, 500, path=COLLECTOR_PATH, hang=1.0)
                kube.close_watches(abrupt=True)
            elif fault == "429":
                kube.fail_next(2, 429, path=COLLECTOR_PATH, retry_after=1)
                kube.close_watches()
            elif fault == "db_kill":
                store.kill()
                for _ in range(15):
                    writer.round(gap=0.2)
                store.start()
            elif fault == "collector_kill":
                rss.append((lifetime_start_rss, collector.rss_kb()))
                collector.kill()
                time.sleep(0.5)
                for trial in writer.next_step:
                    ledger.demote_after(trial, set(stored_steps(store.address, trial)))
                for _ in range(3):
                    writer.round(required=False, gap=0.1)
                watches = watch_count(kube)
                collector.start()
                wait_synced(kube, watches, collector, timeout=60)
                ledger.promote_current()
                lifetime_start_rss = 0
            elif fault == "gone":
                kube.fail_next(100_000, 503, path=COLLECTOR_PATH)
                kube.close_watches()
                wait_until(lambda: kube.pending_faults() < 100_000, timeout=60)
                for _ in range(4):
                    writer.round(required=False)
                lists = list_count(kube)
                kube.expire()
                kube.clear_faults()
                wait_until(lambda lists=lists: list_count(kube) > lists, timeout=60)  # type: ignore[misc]
                ledger.promote_current()
            elif fault == "churn":  # delete a TrainJob and create it again (same Trial, new uid)
                name = f"chaos-{counts[fault] % 30:02d}"
                trial = api.get_namespaced_custom_object(*KATIB, "default", "trials", name)
                objs.delete_trainjob(name)
                time.sleep(0.3)
                api.create_namespaced_custom_object(
                    *TRAINER, "default", "trainjobs", trainjob_body(name, owner=trial)
                )
            elif fault == "new_trial":
                writer.add(f"chaos-new-{counts[fault]:02d}")
            for _ in range(10):  # traffic while the fault plays out
                writer.round(gap=0.05)
                collector.assert_running()
                store.assert_running()
            # Recover before the next fault so the ledger stays exact.
            wait_until(lambda: kube.pending_faults() == 0, timeout=120)
            wait_stored(store.address, ledger, timeout=120, procs=[collector, store])
            if lifetime_start_rss == 0:
                lifetime_start_rss = collector.rss_kb()
        rss.append((lifetime_start_rss, collector.rss_kb()))
        result = check_store(store.address, ledger)
        assert collector.terminate() == 0
    finally:
        collector.stop_quietly()
    assert counts.get("collector_kill", 0) >= 1 and counts.get("db_kill", 0) >= 1, counts
    assert result.stored >= result.required > 0
    for start, end in rss:
        assert end - start < RSS_SLACK_KB, rss
    print(f"chaos: {counts} {result} rss(KiB)={rss}")
