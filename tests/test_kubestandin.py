"""The Kubernetes API server stand-in, driven through the official client over real HTTP."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest
import urllib3
from kubernetes import client, config

from tests.kubestandin import KubeStandin, Request
from tests.kubestandin.objects import TRAINER, Objects, trainer_status, trainjob_body

NS = "team-a"


@pytest.fixture
def objs(kube: KubeStandin) -> Objects:
    return Objects(kube.api_client())


@pytest.fixture
def api(kube: KubeStandin) -> client.CustomObjectsApi:
    return client.CustomObjectsApi(kube.api_client())


def _status_error(exc: client.ApiException) -> dict[str, Any]:
    body: dict[str, Any] = json.loads(exc.body)
    assert body["kind"] == "Status"
    assert body["code"] == exc.status
    return body


def _fields(exc: client.ApiException) -> list[str]:
    return [cause["field"] for cause in _status_error(exc)["details"]["causes"]]


def _watch_lines(kube: KubeStandin, query: str) -> list[dict[str, Any]]:
    http = urllib3.PoolManager()
    resp = http.request(
        "GET", f"{kube.url}/apis/trainer.kubeflow.org/v1alpha1/namespaces/{NS}/trainjobs?watch=true&{query}"
    )
    return [json.loads(line) for line in resp.data.decode().splitlines() if line]


def test_create_get_list_delete_with_metadata(api: client.CustomObjectsApi, kube: KubeStandin) -> None:
    created = api.create_namespaced_custom_object(
        *TRAINER, NS, "trainjobs", trainjob_body("j1", namespace=NS)
    )
    meta = created["metadata"]
    assert meta["uid"] and meta["creationTimestamp"].endswith("Z") and meta["generation"] == 1
    # Defaults from the CRD schema are applied like the real API server does.
    assert created["spec"]["suspend"] is False
    assert created["spec"]["runtimeRef"]["kind"] == "ClusterTrainingRuntime"
    got = api.get_namespaced_custom_object(*TRAINER, NS, "trainjobs", "j1")
    assert got == created
    api.create_namespaced_custom_object(
        *TRAINER, "other", "trainjobs", trainjob_body("j2", namespace="other")
    )
    listed = api.list_cluster_custom_object(*TRAINER, "trainjobs")
    assert [i["metadata"]["name"] for i in listed["items"]] == ["j2", "j1"]  # sorted by namespace/name
    assert int(listed["metadata"]["resourceVersion"]) == kube.resource_version == 2
    assert len(api.list_namespaced_custom_object(*TRAINER, NS, "trainjobs")["items"]) == 1
    with pytest.raises(client.ApiException) as dup:
        api.create_namespaced_custom_object(*TRAINER, NS, "trainjobs", trainjob_body("j1", namespace=NS))
    assert dup.value.status == 409 and _status_error(dup.value)["reason"] == "AlreadyExists"
    api.delete_namespaced_custom_object(*TRAINER, NS, "trainjobs", "j1")
    with pytest.raises(client.ApiException) as gone:
        api.get_namespaced_custom_object(*TRAINER, NS, "trainjobs", "j1")
    assert gone.value.status == 404
    assert _status_error(gone.value)["message"] == 'trainjobs.trainer.kubeflow.org "j1" not found'


def test_unknown_resource_is_404(api: client.CustomObjectsApi) -> None:
    with pytest.raises(client.ApiException) as exc:
        api.list_cluster_custom_object("example.com", "v1", "widgets")
    assert exc.value.status == 404


def test_status_subresource_semantics(api: client.CustomObjectsApi, objs: Objects) -> None:
    job = objs.trainjob("j", namespace=NS)
    when = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)
    # Status written on create or through the main resource is ignored.
    body = {**job, "status": {"trainerStatus": trainer_status(when, progress=10)}}
    body["spec"] = {**job["spec"], "suspend": True}
    updated = api.replace_namespaced_custom_object(*TRAINER, NS, "trainjobs", "j", body)
    assert "status" not in updated
    assert updated["metadata"]["generation"] == 2  # spec changed
    # The status subresource changes only status, and does not bump generation.
    body = {
        **updated,
        "spec": {"runtimeRef": {"name": "changed"}},
        "status": {"trainerStatus": trainer_status(when)},
    }
    after = api.replace_namespaced_custom_object_status(*TRAINER, NS, "trainjobs", "j", body)
    assert after["spec"] == updated["spec"]
    assert after["status"]["trainerStatus"]["lastUpdatedTime"] == "2026-01-01T12:00:00Z"
    assert after["metadata"]["generation"] == 2
    assert int(after["metadata"]["resourceVersion"]) > int(updated["metadata"]["resourceVersion"])


def test_put_with_stale_resource_version_conflicts(api: client.CustomObjectsApi, objs: Objects) -> None:
    job = objs.trainjob("j", namespace=NS)
    objs.set_status("j", trainer_status(datetime.now(UTC), progress=1), namespace=NS)
    with pytest.raises(client.ApiException) as exc:
        api.replace_namespaced_custom_object_status(*TRAINER, NS, "trainjobs", "j", job)
    assert exc.value.status == 409 and _status_error(exc.value)["reason"] == "Conflict"


def test_noop_write_keeps_resource_version(
    api: client.CustomObjectsApi, objs: Objects, kube: KubeStandin
) -> None:
    when = datetime(2026, 1, 1, tzinfo=UTC)
    objs.trainjob("j", namespace=NS)
    first = objs.set_status("j", trainer_status(when, progress=5), namespace=NS)
    again = objs.set_status("j", trainer_status(when, progress=5), namespace=NS)
    assert again["metadata"]["resourceVersion"] == first["metadata"]["resourceVersion"]
    assert kube.resource_version == int(first["metadata"]["resourceVersion"])


def test_last_updated_time_is_kept_at_one_second_precision(objs: Objects) -> None:
    objs.trainjob("j", namespace=NS)
    out = objs.set_status("j", {"lastUpdatedTime": "2026-03-04T05:06:07.987654321+02:00"}, namespace=NS)
    assert out["status"]["trainerStatus"]["lastUpdatedTime"] == "2026-03-04T03:06:07Z"


@pytest.mark.parametrize(
    ("status", "field"),
    [
        ({"progressPercentage": 101}, "status.trainerStatus.progressPercentage"),
        ({"progressPercentage": "50"}, "status.trainerStatus.progressPercentage"),
        ({"estimatedRemainingSeconds": -1}, "status.trainerStatus.estimatedRemainingSeconds"),
        ({"estimatedRemainingSeconds": 2**31}, "status.trainerStatus.estimatedRemainingSeconds"),
        ({"metrics": [{"name": "x" * 65, "value": "1"}]}, "status.trainerStatus.metrics[0].name"),
        ({"metrics": [{"name": "loss", "value": ""}]}, "status.trainerStatus.metrics[0].value"),
        ({"metrics": [{"name": "loss"}]}, "status.trainerStatus.metrics[0].value"),
        ({"metrics": [{"name": f"m{i}", "value": "1"} for i in range(257)]}, "status.trainerStatus.metrics"),
        ({"lastUpdatedTime": "yesterday"}, "status.trainerStatus.lastUpdatedTime"),
    ],
)
def test_trainer_status_validated_against_crd(objs: Objects, status: dict[str, Any], field: str) -> None:
    objs.trainjob("j", namespace=NS)
    body = {"lastUpdatedTime": "2026-01-01T00:00:00Z", **status}
    with pytest.raises(client.ApiException) as exc:
        objs.set_status("j", body, namespace=NS)
    assert exc.value.status == 422
    assert _status_error(exc.value)["reason"] == "Invalid"
    assert field in _fields(exc.value)


def test_cel_rule_requires_last_updated_time(objs: Objects) -> None:
    objs.trainjob("j", namespace=NS)
    with pytest.raises(client.ApiException) as exc:
        objs.set_status("j", {"progressPercentage": 3}, namespace=NS)
    assert exc.value.status == 422
    assert "lastUpdatedTime is required when trainerStatus is present" in _status_error(exc.value)["message"]
    assert "status.trainerStatus" in _fields(exc.value)


def test_spec_validation_and_immutability(api: client.CustomObjectsApi) -> None:
    body = trainjob_body("j", namespace=NS)
    del body["spec"]["runtimeRef"]
    with pytest.raises(client.ApiException) as exc:
        api.create_namespaced_custom_object(*TRAINER, NS, "trainjobs", body)
    assert "spec.runtimeRef" in _fields(exc.value)
    body = trainjob_body("Bad_Name", namespace=NS)
    with pytest.raises(client.ApiException) as exc:
        api.create_namespaced_custom_object(*TRAINER, NS, "trainjobs", body)
    assert "metadata.name" in _fields(exc.value)
    body = trainjob_body("j", namespace=NS)
    body["spec"]["trainer"]["numProcPerNode"] = 0  # CEL: self >= 1
    with pytest.raises(client.ApiException) as exc:
        api.create_namespaced_custom_object(*TRAINER, NS, "trainjobs", body)
    assert "spec.trainer.numProcPerNode" in _fields(exc.value)
    created = api.create_namespaced_custom_object(*TRAINER, NS, "trainjobs", trainjob_body("j", namespace=NS))
    with pytest.raises(client.ApiException) as exc:  # CEL transition rule: runtimeRef is immutable
        api.patch_namespaced_custom_object(
            *TRAINER, NS, "trainjobs", "j", {"spec": {"runtimeRef": {"name": "x"}}}
        )
    assert "spec.runtimeRef" in _fields(exc.value)
    assert created["metadata"]["generation"] == 1


def test_unknown_fields_are_pruned_or_rejected_when_strict(
    api: client.CustomObjectsApi, kube: KubeStandin
) -> None:
    body = trainjob_body("j", namespace=NS)
    body["spec"]["bogus"] = 1
    created = api.create_namespaced_custom_object(*TRAINER, NS, "trainjobs", body)
    assert "bogus" not in created["spec"]
    http = urllib3.PoolManager()
    body["metadata"]["name"] = "k"
    resp = http.request(
        "POST",
        f"{kube.url}/apis/trainer.kubeflow.org/v1alpha1/namespaces/{NS}/trainjobs?fieldValidation=Strict",
        body=json.dumps(body),
        headers={"Content-Type": "application/json"},
    )
    assert resp.status == 422
    assert [c["field"] for c in json.loads(resp.data)["details"]["causes"]] == ["spec.bogus"]


def test_patch_types(kube: KubeStandin) -> None:
    core = client.CoreV1Api(kube.api_client())
    cm = client.V1ConfigMap(metadata=client.V1ObjectMeta(name="c"), data={"a": "1", "b": "2"})
    core.create_namespaced_config_map(NS, cm)
    # dict body -> strategic merge (treated as merge): null removes a key
    out = core.patch_namespaced_config_map("c", NS, {"data": {"a": None, "c": "3"}})
    assert out.data == {"b": "2", "c": "3"}
    # list body -> JSON patch
    out = core.patch_namespaced_config_map("c", NS, [{"op": "replace", "path": "/data/b", "value": "9"}])
    assert out.data == {"b": "9", "c": "3"}
    with pytest.raises(client.ApiException) as exc:
        core.patch_namespaced_config_map("c", NS, [{"op": "test", "path": "/data/b", "value": "0"}])
    assert exc.value.status == 422


def test_other_served_resources(kube: KubeStandin) -> None:
    api_client = kube.api_client()
    core = client.CoreV1Api(api_client)
    core.create_namespaced_event(
        NS,
        client.CoreV1Event(
            metadata=client.V1ObjectMeta(name="e1"),
            involved_object=client.V1ObjectReference(kind="Trial", name="t", namespace=NS),
            reason="Pruned",
            message="hopeless",
        ),
    )
    assert [e.reason for e in core.list_namespaced_event(NS).items] == ["Pruned"]
    events = client.EventsV1Api(api_client)
    events.create_namespaced_event(
        NS,
        client.EventsV1Event(
            metadata=client.V1ObjectMeta(name="e2"), event_time=datetime.now(UTC), reason="X"
        ),
    )
    assert len(events.list_namespaced_event(NS).items) == 1
    leases = client.CoordinationV1Api(api_client)
    lease = leases.create_namespaced_lease(
        NS,
        client.V1Lease(metadata=client.V1ObjectMeta(name="l"), spec=client.V1LeaseSpec(holder_identity="a")),
    )
    lease.spec.holder_identity = "b"
    assert leases.replace_namespaced_lease("l", NS, lease).spec.holder_identity == "b"
    lease.spec.holder_identity = "c"  # stale resourceVersion now
    with pytest.raises(client.ApiException) as exc:
        leases.replace_namespaced_lease("l", NS, lease)
    assert exc.value.status == 409


def test_watch_from_resource_version_with_bookmarks_and_timeout(
    kube: KubeStandin, api: client.CustomObjectsApi, objs: Objects
) -> None:
    objs.trainjob("a", namespace=NS)
    start = api.list_namespaced_custom_object(*TRAINER, NS, "trainjobs")["metadata"]["resourceVersion"]
    objs.trainjob("b", namespace=NS)
    objs.set_status("b", trainer_status(datetime.now(UTC), progress=3), namespace=NS)
    objs.delete_trainjob("a", namespace=NS)
    events = _watch_lines(kube, f"resourceVersion={start}&allowWatchBookmarks=true&timeoutSeconds=1")
    kinds = [(e["type"], e["object"]["metadata"].get("name")) for e in events]
    assert kinds[:3] == [("ADDED", "b"), ("MODIFIED", "b"), ("DELETED", "a")]
    assert kinds[-1][0] == "BOOKMARK"
    rvs = [int(e["object"]["metadata"]["resourceVersion"]) for e in events]
    assert rvs == sorted(rvs) and rvs[-1] == 4


def test_watch_without_resource_version_replays_current_state(kube: KubeStandin, objs: Objects) -> None:
    objs.trainjob("a", namespace=NS)
    objs.trainjob("b", namespace=NS)
    events = _watch_lines(kube, "timeoutSeconds=1")
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in events] == [("ADDED", "a"), ("ADDED", "b")]


def test_expired_resource_version_gets_410_error_event_list_still_works(
    kube: KubeStandin, api: client.CustomObjectsApi, objs: Objects
) -> None:
    objs.trainjob("a", namespace=NS)
    objs.trainjob("b", namespace=NS)
    assert kube.expire() == 2
    events = _watch_lines(kube, "resourceVersion=1&timeoutSeconds=5")
    assert len(events) == 1 and events[0]["type"] == "ERROR"
    assert events[0]["object"]["code"] == 410 and events[0]["object"]["reason"] == "Expired"
    assert len(api.list_namespaced_custom_object(*TRAINER, NS, "trainjobs")["items"]) == 2
    assert _watch_lines(kube, "resourceVersion=2&timeoutSeconds=1") == []


@pytest.mark.parametrize("abrupt", [False, True])
def test_close_watches(kube: KubeStandin, api: client.CustomObjectsApi, abrupt: bool) -> None:
    resp = api.list_namespaced_custom_object(
        *TRAINER,
        NS,
        "trainjobs",
        watch=True,
        resource_version="0",
        timeout_seconds=30,
        _preload_content=False,
    )
    kube.close_watches(abrupt=abrupt)
    if abrupt:
        with pytest.raises(urllib3.exceptions.HTTPError):
            list(resp.stream(amt=None))
    else:
        assert b"".join(resp.stream(amt=None)) == b""


def test_fail_next_and_hang(kube: KubeStandin) -> None:
    # urllib3's default Retry would itself retry 503 + Retry-After and read timeouts: turn that off.
    api = client.CustomObjectsApi(kube.api_client(retries=0))
    kube.fail_next(2, 503, path="/trainjobs", retry_after=3)
    for _ in range(2):
        with pytest.raises(client.ApiException) as exc:
            api.list_cluster_custom_object(*TRAINER, "trainjobs")
        assert exc.value.status == 503 and exc.value.headers["Retry-After"] == "3"
    api.list_cluster_custom_object(*TRAINER, "trainjobs")
    kube.fail_next(1, 429, path="/trials")
    api.list_cluster_custom_object(*TRAINER, "trainjobs")  # path does not match
    with pytest.raises(client.ApiException) as exc:
        api.list_cluster_custom_object("kubeflow.org", "v1beta1", "trials")
    assert exc.value.status == 429
    kube.fail_next(1, 500, hang=1.0)
    with pytest.raises(urllib3.exceptions.HTTPError):  # read timeout, retries exhausted
        api.list_cluster_custom_object(*TRAINER, "trainjobs", _request_timeout=(1, 0.2))
    assert kube.pending_faults() == 0


def test_requests_log_uses_rbac_verbs(kube: KubeStandin, api: client.CustomObjectsApi, objs: Objects) -> None:
    kube.clear_requests()
    objs.trainjob("j", namespace=NS)
    api.get_namespaced_custom_object(*TRAINER, NS, "trainjobs", "j")
    api.list_cluster_custom_object(*TRAINER, "trainjobs")
    api.list_cluster_custom_object(
        *TRAINER, "trainjobs", watch=True, timeout_seconds=1, _preload_content=False
    ).read()
    api.patch_namespaced_custom_object_status(
        *TRAINER,
        NS,
        "trainjobs",
        "j",
        {"status": {"trainerStatus": {"lastUpdatedTime": "2026-01-01T00:00:00Z"}}},
    )
    api.delete_namespaced_custom_object(*TRAINER, NS, "trainjobs", "j")
    g = "trainer.kubeflow.org"
    assert kube.requests == [
        Request("create", g, "trainjobs", "", NS),
        Request("get", g, "trainjobs", "", NS),
        Request("list", g, "trainjobs", "", ""),
        Request("watch", g, "trainjobs", "", ""),
        Request("patch", g, "trainjobs", "status", NS),
        Request("delete", g, "trainjobs", "", NS),
    ]


def test_label_selector(api: client.CustomObjectsApi, objs: Objects) -> None:
    objs.trial("t1", "exp-a", namespace=NS)
    objs.trial("t2", "exp-b", namespace=NS)
    objs.trial("t3", None, namespace=NS)
    names = lambda sel: [  # noqa: E731
        i["metadata"]["name"]
        for i in api.list_namespaced_custom_object(
            "kubeflow.org", "v1beta1", NS, "trials", label_selector=sel
        )["items"]
    ]
    assert names("katib.kubeflow.org/experiment=exp-a") == ["t1"]
    assert names("katib.kubeflow.org/experiment in (exp-a,exp-b)") == ["t1", "t2"]
    assert names("!katib.kubeflow.org/experiment") == ["t3"]


def test_kubeconfig_round_trip(kube: KubeStandin, tmp_path: Any) -> None:
    path = kube.write_kubeconfig(tmp_path / "kubeconfig")
    api_client = config.new_client_from_config(config_file=str(path))
    assert (
        client.CustomObjectsApi(api_client).list_cluster_custom_object(*TRAINER, "trainjobs")["items"] == []
    )


def test_list_pages_with_limit_and_continue(
    kube: KubeStandin, api: client.CustomObjectsApi, objs: Objects
) -> None:
    for i in range(5):
        objs.trainjob(f"j{i}", namespace=NS)
    first = api.list_namespaced_custom_object(*TRAINER, NS, "trainjobs", limit=2)
    assert [i["metadata"]["name"] for i in first["items"]] == ["j0", "j1"]
    assert first["metadata"]["remainingItemCount"] == 3
    rest = api.list_namespaced_custom_object(
        *TRAINER, NS, "trainjobs", limit=10, _continue=first["metadata"]["continue"]
    )
    assert [i["metadata"]["name"] for i in rest["items"]] == ["j2", "j3", "j4"]
    assert "continue" not in rest["metadata"]
    objs.trainjob("j9", namespace=NS)
    kube.expire()
    with pytest.raises(client.ApiException) as exc:
        api.list_namespaced_custom_object(*TRAINER, NS, "trainjobs", _continue=first["metadata"]["continue"])
    assert exc.value.status == 410


def test_finalizers_generate_name_and_discovery(kube: KubeStandin, api: client.CustomObjectsApi) -> None:
    body = trainjob_body("ignored", namespace=NS)
    body["metadata"] = {"generateName": "job-", "finalizers": ["example.com/keep"]}
    created = api.create_namespaced_custom_object(*TRAINER, NS, "trainjobs", body)
    name = created["metadata"]["name"]
    assert name.startswith("job-") and len(name) == len("job-") + 5
    terminating = api.delete_namespaced_custom_object(*TRAINER, NS, "trainjobs", name)
    assert terminating["metadata"]["deletionTimestamp"]
    assert api.get_namespaced_custom_object(*TRAINER, NS, "trainjobs", name)  # still there
    api.patch_namespaced_custom_object(*TRAINER, NS, "trainjobs", name, {"metadata": {"finalizers": None}})
    with pytest.raises(client.ApiException) as exc:
        api.get_namespaced_custom_object(*TRAINER, NS, "trainjobs", name)
    assert exc.value.status == 404
    resources = client.CustomObjectsApi(kube.api_client()).api_client.call_api(
        "/apis/trainer.kubeflow.org/v1alpha1", "GET", response_type="object", _return_http_data_only=True
    )
    assert {r["name"] for r in resources["resources"]} == {"trainjobs", "trainjobs/status"}
