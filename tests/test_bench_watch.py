"""The load harness of benchmarks/bench_watch.py: its objects are what a cluster serves, and its API stand-in
lists, watches, expires and drops slow watchers the way the API server does (benchmarks/watchload/feed.py)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from benchmarks.bench_watch import check_objects
from benchmarks.watchload.feed import chan_size, history_capacity
from benchmarks.watchload.katib_objects import trial
from benchmarks.watchload.objects import UpdateEncoder, dumps, fleet, rfc3339

ROOT = Path(__file__).resolve().parents[1]
TRAINER = ("trainer.kubeflow.org", "v1alpha1")


def test_sample_trainjob_is_accepted_by_the_real_crd() -> None:
    assert "valid against the CRD" in check_objects()


def test_update_bytes_are_the_serialised_object() -> None:
    _, jobs = fleet(250, trials_per_experiment=100)
    encoder = UpdateEncoder(jobs, rfc3339(1_780_000_000))
    for i in (0, 137, 249):
        obj = json.loads(encoder.encode(i, 2_000_000 + i, 12, 1_780_000_123))
        assert obj == encoder.full(i, 2_000_000 + i, 12, 1_780_000_123)
        assert obj["metadata"]["resourceVersion"] == str(2_000_000 + i)
        assert obj["metadata"]["managedFields"][-1]["manager"] == "trainer-status"
        assert obj["status"]["trainerStatus"]["lastUpdatedTime"] == rfc3339(1_780_000_123)
        owner = obj["metadata"]["ownerReferences"][0]
        assert (owner["kind"], owner["name"], owner["uid"]) == ("Trial", jobs[i].name, jobs[i].trial_uid)
    assert {j.experiment.name for j in jobs} == {"sweep-000", "sweep-001", "sweep-002"}
    assert len({j.name for j in jobs}) == 250
    labels = trial(jobs[0], "1", "2026-01-01T00:00:00Z")["metadata"]["labels"]
    assert labels == {"katib.kubeflow.org/experiment": "sweep-000"}


def test_history_and_channel_sizes_follow_the_watch_cache() -> None:
    assert history_capacity(0.1) == 100
    assert history_capacity(200) == 25_600  # 75 s of events, by doubling from 100
    assert history_capacity(2_000) == 102_400  # the upper bound
    assert chan_size(100) == 10
    assert chan_size(102_400) == 100


@contextmanager
def standin(jobs: int, period: float) -> Iterator[tuple[client.CustomObjectsApi, str]]:
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "benchmarks.watchload.apiserver",
            "--jobs",
            str(jobs),
            "--period",
            str(period),
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
    )
    try:
        assert proc.stdout is not None
        url = "http://" + proc.stdout.readline().decode().rsplit(" ", 1)[1].strip()
        configuration = client.Configuration()
        configuration.host = url
        yield client.CustomObjectsApi(client.ApiClient(configuration)), url
    finally:
        proc.terminate()
        proc.wait(10)


def control(url: str, path: str, method: str = "GET") -> Any:
    with urllib.request.urlopen(urllib.request.Request(url + path, method=method), timeout=30) as response:
        return json.loads(response.read())


def events(response: Any) -> list[dict[str, Any]]:
    data = b"".join(response.stream(amt=None, decode_content=False))
    return [json.loads(line) for line in data.splitlines() if line.strip()]


def test_lists_are_snapshots_and_watches_resume_from_a_resource_version() -> None:
    with standin(40, period=0.5) as (api, url):
        assert api.list_cluster_custom_object(*TRAINER, "trainjobs")["items"] == []
        control(url, "/_bench/activate?start_in=0", "POST")
        first = api.list_cluster_custom_object(*TRAINER, "trainjobs", limit=15)
        list_rv = int(first["metadata"]["resourceVersion"])
        time.sleep(0.6)  # every job is updated meanwhile
        rest = api.list_cluster_custom_object(
            *TRAINER, "trainjobs", limit=15, _continue=first["metadata"]["continue"]
        )
        assert rest["metadata"]["resourceVersion"] == str(list_rv)
        items = first["items"] + rest["items"]
        while rest["metadata"].get("continue"):
            rest = api.list_cluster_custom_object(
                *TRAINER, "trainjobs", _continue=rest["metadata"]["continue"]
            )
            items += rest["items"]
        assert len(items) == 40
        assert all(int(i["metadata"]["resourceVersion"]) <= list_rv for i in items)
        keys = [(i["metadata"]["namespace"], i["metadata"]["name"]) for i in items]
        assert keys == sorted(keys)

        stream = api.list_cluster_custom_object(
            *TRAINER,
            "trainjobs",
            watch=True,
            resource_version=str(list_rv),
            timeout_seconds=1,
            _preload_content=False,
        )
        seen = events(stream)
        rvs = [int(e["object"]["metadata"]["resourceVersion"]) for e in seen if e["type"] == "MODIFIED"]
        assert len(rvs) > 40
        assert rvs == list(range(list_rv + 1, list_rv + 1 + len(rvs)))  # every later event, in order

        expired = events(
            api.list_cluster_custom_object(
                *TRAINER, "trainjobs", watch=True, resource_version="5", _preload_content=False
            )
        )
        assert [(e["type"], e["object"]["code"], e["object"]["reason"]) for e in expired] == [
            ("ERROR", 410, "Expired")
        ]
        trial_obj = api.get_namespaced_custom_object(
            "kubeflow.org",
            "v1beta1",
            items[0]["metadata"]["namespace"],
            "trials",
            items[0]["metadata"]["name"],
        )
        assert trial_obj["metadata"]["uid"] == items[0]["metadata"]["ownerReferences"][0]["uid"]
        trials = api.list_cluster_custom_object("kubeflow.org", "v1beta1", "trials", limit=25)
        assert len(trials["items"]) == 25
        more = api.list_cluster_custom_object(
            "kubeflow.org", "v1beta1", "trials", _continue=trials["metadata"]["continue"]
        )
        names = {t["metadata"]["name"] for t in trials["items"] + more["items"]}
        assert names == {i["metadata"]["name"] for i in items}
        with pytest.raises(client.ApiException) as missing:
            api.get_namespaced_custom_object("kubeflow.org", "v1beta1", "team-00", "trials", "nope")
        assert missing.value.status == 404


def test_a_watcher_that_does_not_read_is_terminated() -> None:
    with standin(4000, period=0.5) as (api, url):  # 8,000 events/s of about 3.4 KiB
        control(url, "/_bench/activate?start_in=0", "POST")
        rv = api.list_cluster_custom_object(*TRAINER, "trainjobs", limit=1)["metadata"]["resourceVersion"]
        stream = api.list_cluster_custom_object(
            *TRAINER, "trainjobs", watch=True, resource_version=rv, timeout_seconds=60, _preload_content=False
        )
        deadline = time.monotonic() + 20
        while control(url, "/_bench/stats")["terminated"] == 0:
            assert time.monotonic() < deadline, "the unread watch was never terminated"
            time.sleep(0.2)
        started = time.monotonic()
        received = events(stream)  # what the socket buffers held, then the end of the response
        assert time.monotonic() - started < 30
        assert received and all(e["type"] in ("ADDED", "MODIFIED") for e in received)
        assert control(url, "/_bench/stats")["watchers"] == 0


def test_bookmarks_and_timeout_end_a_watch_cleanly() -> None:
    with standin(10, period=60.0) as (api, _url):
        rv = api.list_cluster_custom_object(*TRAINER, "trainjobs")["metadata"]["resourceVersion"]
        started = time.monotonic()
        seen = events(
            api.list_cluster_custom_object(
                *TRAINER,
                "trainjobs",
                watch=True,
                resource_version=rv,
                allow_watch_bookmarks=True,
                timeout_seconds=3,
                _preload_content=False,
            )
        )
        assert 2.5 < time.monotonic() - started < 6
        assert [e["type"] for e in seen] == ["BOOKMARK"]  # 2 s before the deadline
        assert seen[0]["object"]["metadata"]["resourceVersion"] == rv


def test_object_json_is_compact_with_sorted_keys() -> None:
    assert dumps({"b": 1, "a": {"d": [1], "c": "x"}}) == '{"a":{"c":"x","d":[1]},"b":1}'


@pytest.mark.slow
def test_benchmark_end_to_end_stores_every_snapshot_once(tmp_path: Path) -> None:
    args = ["--jobs", "60", "--seconds", "5", "--grace", "10", "--json", "--no-pin", "--keep", str(tmp_path)]
    out = subprocess.run(
        [sys.executable, "benchmarks/bench_watch.py", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        check=True,
    )
    (result,) = json.loads(out.stdout)
    assert result["published"] >= 50
    assert result["delivered"] == result["published"]
    assert result["lost"] == 0
    assert result["duplicates"] == 0
    assert result["tracked"] == 60
    assert result["api_stats"]["requests"]["watch trainjobs"] >= 2  # before and after the restart
    assert result["first_watch_restart_s"] == result["first_watch_restart_s"]  # measured (not NaN)
    assert result["catch_up_s"] == result["catch_up_s"]  # caught up before the window (not NaN)


def test_bench_sink_request_is_katibs_report_with_the_snapshot_shape() -> None:
    """benchmarks/bench_sink.py's ghz request is a ReportObservationLogRequest of one snapshot: 10 metric
    logs at one stamp with distinct names (ghz fills in the request number)."""
    from google.protobuf import json_format
    from kubeflow.katib import katib_api_pb2

    from benchmarks.bench_sink import ROWS, request_template

    body = json.loads(json.dumps(request_template(2)).replace("{{.RequestNumber}}", "17"))
    request = json_format.ParseDict(body, katib_api_pb2.ReportObservationLogRequest())  # type: ignore[attr-defined]
    logs = request.observation_log.metric_logs
    assert request.trial_name == "bench-2-17"
    assert len(logs) == ROWS == 10
    assert len({log.metric.name for log in logs}) == 10
    assert {log.time_stamp for log in logs} == {"2026-12-04T06:00:00Z"}


def test_a_terminated_benchmark_leaves_no_process_behind(tmp_path: Path) -> None:
    """SIGTERM to the driver (``kill``, a closed terminal) stops the stand-in, the store and the collector
    it started, as Ctrl-C does."""
    args = ["--jobs", "60", "--seconds", "60", "--json", "--no-pin", "--keep", str(tmp_path)]
    driver = subprocess.Popen(
        [sys.executable, "benchmarks/bench_watch.py", *args],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )

    def children() -> list[int]:
        path = Path(f"/proc/{driver.pid}/task/{driver.pid}/children")
        return [int(pid) for pid in path.read_text().split()] if path.exists() else []

    started: list[int] = []
    try:
        deadline = time.monotonic() + 120
        while len(children()) < 3:  # stand-in, store, collector
            assert driver.poll() is None, "the benchmark ended before it started its processes"
            assert time.monotonic() < deadline, f"children: {children()}"
            time.sleep(0.2)
        started = children()
        driver.send_signal(signal.SIGTERM)
        driver.wait(timeout=120)
        left = [pid for pid in started if Path(f"/proc/{pid}").exists() and _alive(pid)]
        assert left == [], f"left running: {left}"
    finally:
        if driver.poll() is None:
            driver.kill()
        for pid in started:  # a failed run must not leave them either
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"
