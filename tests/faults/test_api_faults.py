"""API-server faults against a real ``katib-progress collector run`` process (fast profile).

Watch streams closed every ~1.5 s (cleanly and abruptly), 5xx bursts (with and without a hang),
429 with Retry-After, 5xx on Trial lookups, and a 410 Gone window; the DB manager is a real
``katib-progress db serve`` process. Invariants: docs/reliability.md (checked by ``check_store``).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path

from tests.faults._harness import (
    COLLECTOR_PATH,
    Ledger,
    StoreProc,
    Writer,
    check_store,
    collector_proc,
    list_count,
    wait_stored,
    wait_synced,
    watch_count,
)
from tests.kubestandin import KubeStandin
from tests.kubestandin.objects import Objects
from tests.kubestandin.waiting import wait_until

# Resident memory may grow this much (KiB) over a run: caches warm up, the allocator keeps arenas.
RSS_SLACK_KB = 40 * 1024


@contextmanager
def closing_watches(kube: KubeStandin, every: float) -> Iterator[list[int]]:
    """Close every open watch every ``every`` seconds, alternating clean and abrupt closes."""
    stop = threading.Event()
    closed = [0]

    def loop() -> None:
        while not stop.wait(every):
            kube.close_watches(abrupt=closed[0] % 2 == 1)
            closed[0] += 1

    thread = threading.Thread(target=loop, name="watch-closer", daemon=True)
    thread.start()
    try:
        yield closed
    finally:
        stop.set()
        thread.join(5)


def blackout(kube: KubeStandin, writer: Writer, rounds: int) -> None:
    """The collector is disconnected (its list/watch requests fail), ``rounds`` snapshots land, and
    the history is compacted (410 Gone on its next watch). The window ends when the collector
    re-lists: only each trial's last snapshot of the window is receivable (the list shows it)."""
    kube.fail_next(100_000, 503, path=COLLECTOR_PATH)
    kube.close_watches()
    wait_until(lambda: kube.pending_faults() < 100_000, timeout=40)  # a reconnect has failed
    for _ in range(rounds):
        writer.round(required=False)
    lists = list_count(kube)
    kube.expire()
    kube.clear_faults()
    # The window lasts until the collector re-lists: writes from then on reach it (list or watch).
    wait_until(lambda: list_count(kube) > lists, timeout=40)
    writer.ledger.promote_current()


def test_api_faults_lose_nothing(
    kube: KubeStandin, objs: Objects, store: StoreProc, kubeconfig: Path, tmp_path: Path
) -> None:
    ledger = Ledger()
    writer = Writer(objs, ledger, datetime.now(UTC).replace(microsecond=0), total=40)
    for i in range(4):
        writer.add(f"api-{i}")
    collector = collector_proc(kubeconfig, store.address, tmp_path / "collector.log").start()
    try:
        wait_synced(kube, 0, collector)
        writer.round(gap=0.05)
        wait_stored(store.address, ledger, procs=[collector])  # warm: first snapshots stored
        rss_before = collector.rss_kb()
        with closing_watches(kube, every=1.5) as closed:
            step = 1
            while not writer.finished():
                if step % 6 == 0 and step <= 30:
                    # Let the collector recover from the previous fault first, so backoffs don't pile up.
                    wait_until(lambda: kube.pending_faults() == 0, timeout=40)
                    wait_stored(store.address, ledger, timeout=40, procs=[collector])
                if step == 6:  # a burst of 503s on reconnect: the watch resumes from its resourceVersion
                    kube.fail_next(3, 503, path=COLLECTOR_PATH)
                    kube.close_watches()
                elif step == 12:  # slow 5xx: each failure hangs 0.5 s first
                    kube.fail_next(2, 500, path=COLLECTOR_PATH, hang=0.5)
                    kube.close_watches(abrupt=True)
                elif step == 18:  # throttled
                    kube.fail_next(1, 429, path=COLLECTOR_PATH, retry_after=1)
                    kube.close_watches()
                elif step == 24:  # a new trial whose Trial lookups fail first
                    kube.fail_next(2, 503, path="/trials/api-late")
                    writer.add("api-late")
                elif step == 30:
                    blackout(kube, writer, rounds=3)
                writer.round(gap=0.03)
                collector.assert_running()
                step += 1
            while writer.next_step["api-late"] < writer.total:
                writer.round(["api-late"], gap=0.01)
        wait_stored(store.address, ledger, timeout=90, procs=[collector])
        rss_after = collector.rss_kb()
        result = check_store(store.address, ledger)
        assert closed[0] >= 3
        assert result.stored >= result.required
        assert rss_after - rss_before < RSS_SLACK_KB, (rss_before, rss_after)
        assert collector.terminate() == 0, collector.log()
    finally:
        collector.stop_quietly()
    log = collector.log(200_000)
    assert '"drained": true' in log
    assert "watch_expired" in log  # the 410 window really forced a re-list
    assert watch_count(kube) >= 5


def test_watch_and_list_timeouts_in_process(kube: KubeStandin, objs: Objects, store: StoreProc) -> None:
    """Requests that hang past the client's read timeout (a stuck connection): the watcher times out,
    backs off and resumes; nothing is lost. In process, to set second-scale timeouts."""
    from katib_progress.collector.backoff import BackoffSettings
    from katib_progress.collector.controller import Collector, CollectorSettings
    from katib_progress.collector.katib.dbmanager import DBManagerSettings, DBManagerSink
    from katib_progress.collector.kube import WatchSettings
    from katib_progress.collector.kube import watcher as w
    from tests.kubestandin.waiting import running

    settings = CollectorSettings(
        watch=WatchSettings(
            watch_timeout_s=1,
            request_timeout_s=1,
            connect_timeout_s=1,
            backoff=BackoffSettings(initial_s=0.05, max_s=0.5),
        ),
        retry_interval_s=0.05,
    )
    ledger = Ledger()
    writer = Writer(objs, ledger, datetime.now(UTC).replace(microsecond=0), total=20)
    for i in range(2):
        writer.add(f"slow-{i}")
    sink = DBManagerSink(
        store.address, settings=DBManagerSettings(backoff=BackoffSettings(initial_s=0.02, max_s=0.2))
    )
    collector = Collector(settings, sink, kube.api_client(retries=0))
    with running(collector.run, collector.stop, join_timeout=15):
        wait_until(collector.has_synced)
        for step in range(writer.total):
            if step == 5:  # the reconnect hangs past the read timeout (watch: 1 + 1 s), twice
                kube.fail_next(2, 504, path=COLLECTOR_PATH, hang=3.0)
                kube.close_watches()
            if step == 12:  # 410 Gone while reconnects hang: writes pause until the re-list is served
                # (first the collector catches up after the previous fault: snapshots it had not seen
                # yet would be compacted away by the expiry, i.e. not receivable)
                wait_until(lambda: kube.pending_faults() == 0, timeout=30)
                wait_stored(store.address, ledger, timeout=30)
                lists = list_count(kube)
                kube.fail_next(2, 504, path=COLLECTOR_PATH, hang=3.0)
                kube.close_watches()
                writer.round(required=False)  # overwritten before the collector can see them
                writer.round(required=False)
                kube.expire()
                wait_until(
                    lambda lists=lists: list_count(kube) > lists and kube.pending_faults() == 0,  # type: ignore[misc]
                    timeout=30,
                )
                ledger.promote_current()  # what the re-list showed
            writer.round(gap=0.05)
        wait_stored(store.address, ledger, timeout=60)
    assert sink.flush(5)
    sink.close()
    check_store(store.address, ledger)
    assert collector.counters.get(w.ERRORS, kind="temporary", scope="*") >= 2
    assert len(collector.processor) == 2
