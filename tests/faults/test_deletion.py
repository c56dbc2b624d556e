"""Objects deleted under a running collector process (fast profile).

- A TrainJob deleted while it is tracked, then created again for the same Trial (a new uid): the
  collector forgets the old job, recovers the trial's sequence from the store and continues it.
- A Trial deleted before its TrainJob (Katib deletes the Trial; garbage collection removes the
  TrainJob a moment later): once the TrainJob is gone no row of the deleted Trial is left, including
  snapshots written in between (docs/collector.md, "Deleted trials"); the process must not crash and
  other trials must be unaffected.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from kubernetes import client

from tests.faults._harness import (
    Ledger,
    StoreProc,
    Writer,
    check_store,
    collector_proc,
    stored_steps,
    wait_stored,
    wait_synced,
)
from tests.kubestandin import KubeStandin
from tests.kubestandin.objects import KATIB, TRAINER, Objects, trainjob_body
from tests.kubestandin.waiting import wait_until


def test_trainjob_and_trial_deleted_while_tracked(
    kube: KubeStandin, objs: Objects, store: StoreProc, kubeconfig: Path, tmp_path: Path
) -> None:
    ledger = Ledger()
    writer = Writer(objs, ledger, datetime.now(UTC).replace(microsecond=0), total=24)
    for name in ("del-job", "del-trial", "bystander"):
        writer.add(name)
    api = client.CustomObjectsApi(kube.api_client())
    collector = collector_proc(kubeconfig, store.address, tmp_path / "collector.log").start()
    try:
        wait_synced(kube, 0, collector)
        for _ in range(8):
            writer.round(gap=0.02)
        wait_stored(store.address, ledger, procs=[collector])

        # 1. The TrainJob goes away mid-stream and comes back (same Trial, new uid, same name).
        trial = api.get_namespaced_custom_object(*KATIB, "default", "trials", "del-job")
        objs.delete_trainjob("del-job")
        for _ in range(2):
            writer.round(["del-trial", "bystander"], gap=0.02)
        api.create_namespaced_custom_object(
            *TRAINER, "default", "trainjobs", trainjob_body("del-job", owner=trial)
        )
        # 2. The Trial is deleted first; its TrainJob keeps reporting until it is deleted too.
        api.delete_namespaced_custom_object(*KATIB, "default", "trials", "del-trial")
        for _ in range(4):
            writer.round(["del-job", "bystander"], gap=0.02)
            writer.round(["del-trial"], required=False)
        objs.delete_trainjob("del-trial")
        del writer.next_step["del-trial"]
        while not writer.finished():
            writer.round(gap=0.02)
        collector.assert_running()
        wait_stored(
            store.address,
            _without(ledger, "del-trial"),
            timeout=60,
            procs=[collector],
        )
        check_store(store.address, _without(ledger, "del-trial"))
        # del-trial: its Trial and TrainJob are gone, and so is every row of it
        wait_until(lambda: stored_steps(store.address, "del-trial") == [], timeout=30)
        assert collector.terminate() == 0
    finally:
        collector.stop_quietly()
    log = collector.log(500_000)
    assert "deleted" in log and '"drained": true' in log
    assert "Traceback" not in log


def _without(ledger: Ledger, trial: str) -> Ledger:
    out = Ledger()
    out.trials = {name: t for name, t in ledger.trials.items() if name != trial}
    return out
