"""TrainJobWatcher against the API server stand-in, through the real kubernetes client."""

from __future__ import annotations

import random
import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import urllib3
from kubernetes import client

from katib_progress.collector.backoff import Backoff, BackoffSettings
from katib_progress.collector.counters import Counters
from katib_progress.collector.kube import (
    JobEvent,
    TrainJobWatcher,
    WatchSettings,
    classify,
    load_api_client,
)
from katib_progress.collector.kube import watcher as w
from katib_progress.core.errors import ConfigError, PermanentError, TemporaryError
from tests.kubestandin import KubeStandin, Request
from tests.kubestandin.objects import Objects, trainer_status
from tests.kubestandin.waiting import running, wait_until

FAST = BackoffSettings(initial_s=0.01, max_s=0.05)
T0 = datetime(2026, 5, 1, 12, 0, 0, tzinfo=UTC)


class Recorder:
    def __init__(self) -> None:
        self.events: list[JobEvent] = []
        self.lock = threading.Lock()
        self.fail: list[BaseException] = []

    def __call__(self, event: JobEvent) -> None:
        with self.lock:
            if self.fail:
                raise self.fail.pop()
            self.events.append(event)

    def progress(self, name: str) -> list[int | None]:
        with self.lock:
            return [
                (e.trainer_status or {}).get("progressPercentage")
                for e in self.events
                if e.name == name and e.kind == "upsert"
            ]

    def kinds(self, name: str) -> list[str]:
        with self.lock:
            return [e.kind for e in self.events if e.name == name]


def _watcher(kube: KubeStandin, rec: Recorder, **settings: object) -> TrainJobWatcher:
    opts: dict[str, object] = {"backoff": FAST, "watch_timeout_s": 30}
    opts.update(settings)
    return TrainJobWatcher(kube.api_client(), rec, settings=WatchSettings(**opts), counters=Counters())  # type: ignore[arg-type]


def _count(kube: KubeStandin, verb: str, resource: str = "trainjobs") -> int:
    return sum(1 for r in kube.requests if r.verb == verb and r.resource == resource)


@pytest.fixture
def objs(kube: KubeStandin) -> Objects:
    return Objects(kube.api_client())


def test_delivers_trial_owned_jobs_only_with_experiment(kube: KubeStandin, objs: Objects) -> None:
    objs.trial_job("t-1", "exp-a")
    objs.trainjob("plain")  # no owner
    objs.trainjob("unlabelled", owner=objs.trial("unlabelled", None))
    rec = Recorder()
    watcher = _watcher(kube, rec)
    with running(watcher.run, watcher.stop):
        wait_until(lambda: rec.kinds("t-1"))
        objs.trial_job("t-2", "exp-a")
        wait_until(lambda: rec.kinds("t-2"))
    names = {e.name for e in rec.events}
    assert names == {"t-1", "t-2"}
    event = rec.events[0]
    assert (event.trial.name, event.trial.experiment, event.namespace) == ("t-1", "exp-a", "default")
    assert event.created is not None and event.uid
    assert watcher.counters.get(w.IGNORED, reason="not_trial_owned") >= 1
    assert watcher.counters.get(w.IGNORED, reason="trial_unresolved") >= 1


def test_status_updates_in_order_and_deletion(kube: KubeStandin, objs: Objects) -> None:
    objs.trial_job("t")
    rec = Recorder()
    watcher = _watcher(kube, rec)
    with running(watcher.run, watcher.stop):
        wait_until(lambda: rec.kinds("t"))
        for i in range(1, 6):
            objs.set_status("t", trainer_status(T0 + timedelta(seconds=i), progress=i * 10))
        wait_until(lambda: rec.progress("t")[-1:] == [50])
        objs.delete_trainjob("t")
        wait_until(lambda: rec.kinds("t")[-1:] == ["delete"])
    assert rec.progress("t") == [None, 10, 20, 30, 40, 50]
    assert _count(kube, "list") == 1
    # The Trial came with one LIST of Trials before the TrainJob list; no event reads it again.
    assert _count(kube, "list", "trials") == 1
    assert _count(kube, "get", "trials") == 0


def test_a_trial_created_later_is_read_once_for_all_its_events(kube: KubeStandin, objs: Objects) -> None:
    rec = Recorder()
    watcher = _watcher(kube, rec)
    with running(watcher.run, watcher.stop):
        wait_until(watcher.has_synced)
        objs.trial_job("late")
        for i in range(1, 4):
            objs.set_status("late", trainer_status(T0 + timedelta(seconds=i), progress=i * 10))
        wait_until(lambda: rec.progress("late")[-1:] == [30])
    assert rec.progress("late") == [None, 10, 20, 30]
    assert _count(kube, "get", "trials") == 1
    assert all(e.obj.keys() == {"metadata", "status"} for e in rec.events)  # no spec, no managedFields
    assert "managedFields" not in rec.events[-1].obj["metadata"]


@pytest.mark.parametrize("abrupt", [False, True])
def test_dropped_watch_resumes_from_last_resource_version(
    kube: KubeStandin, objs: Objects, abrupt: bool
) -> None:
    objs.trial_job("t")
    rec = Recorder()
    watcher = _watcher(kube, rec)
    with running(watcher.run, watcher.stop):
        wait_until(lambda: rec.kinds("t"))
        objs.set_status("t", trainer_status(T0, progress=1))
        wait_until(lambda: rec.progress("t")[-1:] == [1])
        watches = _count(kube, "watch")
        kube.close_watches(abrupt=abrupt)
        objs.set_status("t", trainer_status(T0 + timedelta(seconds=1), progress=2))
        wait_until(lambda: rec.progress("t")[-1:] == [2])
        assert _count(kube, "watch") > watches
    assert rec.progress("t") == [None, 1, 2]  # nothing replayed, nothing missed
    assert _count(kube, "list") == 1


def test_gone_relists_and_reports_deletions_missed_meanwhile(kube: KubeStandin, objs: Objects) -> None:
    objs.trial_job("a")
    objs.trial_job("b")
    rec = Recorder()
    watcher = _watcher(kube, rec)
    with running(watcher.run, watcher.stop):
        wait_until(lambda: rec.kinds("a") and rec.kinds("b"))
        # While no watch is open, b goes away and a changes; the history is then compacted.
        kube.fail_next(1000, 503, path="v1alpha1/trainjobs")  # the cluster-wide collection only
        kube.close_watches()
        wait_until(lambda: watcher.counters.get(w.ERRORS, kind="temporary", scope="*") >= 1)
        objs.delete_trainjob("b")
        objs.set_status("a", trainer_status(T0, progress=7))
        kube.expire()
        kube.clear_faults()
        wait_until(lambda: rec.kinds("b")[-1:] == ["delete"])
        wait_until(lambda: rec.progress("a")[-1:] == [7])
    assert watcher.counters.get(w.EXPIRED, scope="*") == 1
    assert _count(kube, "list") == 2
    assert rec.kinds("b") == ["upsert", "delete"]


def test_server_errors_are_survived_with_backoff(kube: KubeStandin, objs: Objects) -> None:
    objs.trial_job("t")
    kube.fail_next(4, 500, path="v1alpha1/trainjobs")
    kube.fail_next(2, 503, path="/trials")
    rec = Recorder()
    watcher = _watcher(kube, rec)
    with running(watcher.run, watcher.stop):
        wait_until(lambda: rec.kinds("t"))
        kube.fail_next(3, 500, path="v1alpha1/trainjobs")
        kube.close_watches()
        objs.set_status("t", trainer_status(T0, progress=3))
        wait_until(lambda: rec.progress("t")[-1:] == [3])
    assert kube.pending_faults() == 0
    assert watcher.counters.get(w.ERRORS, kind="temporary", scope="*") >= 7


def test_permanent_error_is_retried_at_max_delay(kube: KubeStandin, objs: Objects) -> None:
    objs.trial_job("t")
    kube.fail_next(1, 403, path="v1alpha1/trainjobs")
    rec = Recorder()
    watcher = _watcher(kube, rec)
    with running(watcher.run, watcher.stop):
        wait_until(lambda: rec.kinds("t"))
    assert watcher.counters.get(w.ERRORS, kind="permanent", scope="*") == 1


def test_handler_temporary_error_redelivers_event(kube: KubeStandin, objs: Objects) -> None:
    objs.trial_job("t")
    rec = Recorder()
    watcher = _watcher(kube, rec)
    with running(watcher.run, watcher.stop):
        wait_until(lambda: rec.kinds("t"))
        rec.fail.append(TemporaryError("sink full"))
        objs.set_status("t", trainer_status(T0, progress=4))
        wait_until(lambda: rec.progress("t")[-1:] == [4])
    assert rec.progress("t") == [None, 4]
    assert _count(kube, "list") == 1


def test_one_watch_per_listed_namespace(kube: KubeStandin, objs: Objects) -> None:
    for ns in ("a", "b", "c"):
        objs.trial_job("t", namespace=ns)
    rec = Recorder()
    watcher = _watcher(kube, rec, namespaces=("a", "b"))
    assert not watcher.has_synced()
    with running(watcher.run, watcher.stop):
        wait_until(watcher.has_synced)
        wait_until(lambda: len(rec.events) == 2)
        wait_until(lambda: {r.namespace for r in kube.requests if r.verb == "watch"} == {"a", "b"})
        objs.set_status("t", trainer_status(T0, progress=9), namespace="c")
        objs.set_status("t", trainer_status(T0, progress=8), namespace="b")
        wait_until(lambda: len(rec.events) == 3)
    assert sorted(e.namespace for e in rec.events) == ["a", "b", "b"]
    assert all(r.namespace for r in kube.requests if r.resource == "trainjobs")  # never cluster-wide
    assert set(watcher.resource_versions) == {"a", "b"}


def test_bookmarks_advance_resource_version(kube: KubeStandin, objs: Objects) -> None:
    objs.trial_job("t", namespace="mine")
    rec = Recorder()
    watcher = _watcher(kube, rec, namespaces=("mine",))
    with running(watcher.run, watcher.stop):
        wait_until(lambda: rec.kinds("t"))
        objs.trial_job("other", namespace="elsewhere")  # moves the global resourceVersion only
        target = str(kube.resource_version)
        wait_until(lambda: watcher.resource_versions["mine"] == target)
    assert watcher.counters.get(w.EVENTS, type="BOOKMARK") >= 1


def test_stop_interrupts_an_idle_watch(kube: KubeStandin) -> None:
    rec = Recorder()
    watcher = _watcher(kube, rec, watch_timeout_s=3600)
    with running(watcher.run, watcher.stop, join_timeout=5):
        wait_until(lambda: _count(kube, "watch") == 1)


def test_iterations_seam_bounds_the_loop(kube: KubeStandin, objs: Objects) -> None:
    objs.trial_job("t")
    rec = Recorder()
    watcher = _watcher(kube, rec, watch_timeout_s=1)
    watcher.run(_iterations=2)  # one list, one (1 s) watch
    assert rec.kinds("t") == ["upsert"]
    assert (_count(kube, "list"), _count(kube, "watch")) == (1, 1)


def test_classify() -> None:
    err = classify(client.ApiException(status=503, reason="Unavailable"))
    assert isinstance(err, TemporaryError)
    exc = client.ApiException(status=429)
    exc.headers = {"Retry-After": "7"}
    assert classify(exc).delay == 7.0  # type: ignore[union-attr]
    assert isinstance(classify(client.ApiException(status=410)), TemporaryError)
    assert isinstance(classify(client.ApiException(status=403)), PermanentError)
    assert isinstance(classify(client.ApiException(status=404)), PermanentError)
    assert isinstance(classify(urllib3.exceptions.ProtocolError("reset")), TemporaryError)
    assert isinstance(classify(ConnectionRefusedError()), TemporaryError)
    with pytest.raises(TypeError):
        classify(KeyError("x"))


def test_backoff_grows_caps_and_resets() -> None:
    backoff = Backoff(BackoffSettings(initial_s=1, max_s=8, factor=2, jitter=0.1), random.Random(1))
    delays = [backoff.next_delay() for _ in range(6)]
    for got, base in zip(delays, [1, 2, 4, 8, 8, 8], strict=True):
        assert base * 0.9 <= got <= base * 1.1
    assert backoff.next_delay(at_least=100) >= 8  # Retry-After honoured up to the cap
    backoff.reset()
    assert backoff.next_delay() <= 1.1
    with pytest.raises(ValueError, match="max_s"):
        BackoffSettings(initial_s=5, max_s=1)


def test_backoff_stays_at_the_cap_after_thousands_of_failures() -> None:
    """A DB manager down for hours: the sender's delay must not overflow (it once raised
    OverflowError at attempt 1024 and killed the thread)."""
    settings = BackoffSettings(initial_s=0.1, max_s=5.0, jitter=0.0)
    assert settings.delay(5000, random.Random(0)) == 5.0
    backoff = Backoff(BackoffSettings(initial_s=1, max_s=8, factor=1.0), random.Random(0))
    assert all(0.8 <= backoff.next_delay() <= 1.2 for _ in range(3000))  # factor 1: never grows


def test_load_api_client_from_kubeconfig(kube: KubeStandin, tmp_path: Path) -> None:
    path = kube.write_kubeconfig(tmp_path / "config")
    api = client.CustomObjectsApi(load_api_client(str(path)))
    assert api.list_cluster_custom_object("trainer.kubeflow.org", "v1alpha1", "trainjobs")["items"] == []
    with pytest.raises(ConfigError) as exc:
        load_api_client(str(tmp_path / "missing"))
    assert exc.value.field == "kubeconfig"


def test_requests_are_read_only_rbac(kube: KubeStandin, objs: Objects) -> None:
    objs.trial_job("t")
    kube.clear_requests()
    rec = Recorder()
    watcher = _watcher(kube, rec)
    with running(watcher.run, watcher.stop):
        wait_until(lambda: rec.kinds("t"))
    assert set(kube.requests) == {
        Request("list", "trainer.kubeflow.org", "trainjobs", "", ""),
        Request("watch", "trainer.kubeflow.org", "trainjobs", "", ""),
        Request("list", "kubeflow.org", "trials", "", ""),
    }


def test_paged_list(kube: KubeStandin, objs: Objects) -> None:
    for i in range(5):
        objs.trial_job(f"t{i}")
    rec = Recorder()
    watcher = _watcher(kube, rec, list_page_size=2, watch_timeout_s=1)
    watcher.run(_iterations=1)
    assert sorted(e.name for e in rec.events) == [f"t{i}" for i in range(5)]
    assert _count(kube, "list") == 3
    assert _count(kube, "list", "trials") == 3


def test_load_api_client_in_cluster(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from kubernetes.config import incluster_config

    token, ca = tmp_path / "token", tmp_path / "ca.crt"
    token.write_text("sa-token")
    ca.write_text("-----BEGIN CERTIFICATE-----\n-----END CERTIFICATE-----\n")
    monkeypatch.setattr(incluster_config, "SERVICE_TOKEN_FILENAME", str(token))
    monkeypatch.setattr(incluster_config, "SERVICE_CERT_FILENAME", str(ca))
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", "443")
    configuration = load_api_client().configuration
    assert configuration.host == "https://10.96.0.1:443"
    assert configuration.api_key["authorization"].lower() == "bearer sa-token"
    assert configuration.ssl_ca_cert == str(ca)
    monkeypatch.setattr(incluster_config, "SERVICE_TOKEN_FILENAME", str(tmp_path / "absent"))
    with pytest.raises(ConfigError):
        load_api_client()
