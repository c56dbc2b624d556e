from __future__ import annotations

import json
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest

from katib_progress.local.endpoint import PATH_TEMPLATE, StatusEndpoint


class _Got:
    def __init__(self) -> None:
        self.items: list[tuple[str, str, dict[str, Any]]] = []
        self.lock = threading.Lock()

    def __call__(self, ns: str, name: str, status: dict[str, Any]) -> None:
        with self.lock:
            self.items.append((ns, name, status))


@pytest.fixture
def endpoint() -> Iterator[tuple[StatusEndpoint, _Got]]:
    got = _Got()
    ep = StatusEndpoint(got, max_body=4096).start()
    ep.register("ns", "t1", "token-one")
    ep.register("ns", "t2", "token-two")
    yield ep, got
    ep.stop()


def _post(
    url: str, body: bytes, token: str | None, ctype: str = "application/json"
) -> tuple[int, dict[str, Any]]:
    headers = {"Content-Type": ctype}
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    request = urllib.request.Request(url, data=body, method="POST", headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=5) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def _status(**extra: Any) -> bytes:
    status = {"lastUpdatedTime": "2026-01-02T03:04:05.678901Z", "progressPercentage": 10, **extra}
    return json.dumps({"trainerStatus": status}).encode()


def test_accepts_and_truncates_last_updated_to_seconds(endpoint: tuple[StatusEndpoint, _Got]) -> None:
    ep, got = endpoint
    code, body = _post(
        ep.url_for("ns", "t1"), _status(metrics=[{"name": "loss", "value": "0.5"}]), "token-one"
    )
    assert code == 200
    assert body["status"]["trainerStatus"]["lastUpdatedTime"] == "2026-01-02T03:04:05Z"
    assert got.items == [
        (
            "ns",
            "t1",
            {
                "lastUpdatedTime": "2026-01-02T03:04:05Z",
                "progressPercentage": 10,
                "metrics": [{"name": "loss", "value": "0.5"}],
            },
        )
    ]
    assert ep.latest("ns", "t1") == got.items[0][2]


def test_zone_offsets_are_normalised_to_utc(endpoint: tuple[StatusEndpoint, _Got]) -> None:
    ep, got = endpoint
    body = json.dumps({"trainerStatus": {"lastUpdatedTime": "2026-01-02T05:04:05.9+02:00"}}).encode()
    assert _post(ep.url_for("ns", "t1"), body, "token-one")[0] == 200
    assert got.items[0][2]["lastUpdatedTime"] == "2026-01-02T03:04:05Z"


@pytest.mark.parametrize(
    ("token", "code", "reason"),
    [(None, 401, "Unauthorized"), ("forged", 401, "Unauthorized"), ("token-two", 403, "Forbidden")],
)
def test_wrong_token_is_rejected(
    endpoint: tuple[StatusEndpoint, _Got], token: str | None, code: int, reason: str
) -> None:
    ep, got = endpoint
    status, body = _post(ep.url_for("ns", "t1"), _status(), token)
    assert (status, body["reason"], body["kind"], body["code"]) == (code, reason, "Status", code)
    assert got.items == []
    assert ep.rejections[reason] == 1


def test_oversized_body_is_rejected(endpoint: tuple[StatusEndpoint, _Got]) -> None:
    ep, got = endpoint
    metrics = [{"name": f"m{i}", "value": "1" * 60} for i in range(100)]
    code, body = _post(ep.url_for("ns", "t1"), _status(metrics=metrics), "token-one")
    assert (code, body["reason"]) == (413, "RequestEntityTooLarge")
    assert got.items == []


@pytest.mark.parametrize(
    ("status", "field"),
    [
        (
            {"lastUpdatedTime": "2026-01-02T03:04:05Z", "progressPercentage": 101},
            "trainerStatus.progressPercentage",
        ),
        (
            {"lastUpdatedTime": "2026-01-02T03:04:05Z", "estimatedRemainingSeconds": -1},
            "trainerStatus.estimatedRemainingSeconds",
        ),
        (
            {"lastUpdatedTime": "2026-01-02T03:04:05Z", "metrics": [{"name": "loss", "value": 0.5}]},
            "trainerStatus.metrics.0.value",
        ),
        (
            {"lastUpdatedTime": "2026-01-02T03:04:05Z", "metrics": [{"name": "x" * 65, "value": "1"}]},
            "trainerStatus.metrics.0.name",
        ),
        ({"progressPercentage": 5}, "trainerStatus.lastUpdatedTime"),
        ({"lastUpdatedTime": "yesterday"}, "trainerStatus.lastUpdatedTime"),
    ],
)
def test_body_the_crd_would_reject_gets_422_naming_the_field(
    endpoint: tuple[StatusEndpoint, _Got], status: dict[str, Any], field: str
) -> None:
    ep, got = endpoint
    code, body = _post(ep.url_for("ns", "t1"), json.dumps({"trainerStatus": status}).encode(), "token-one")
    assert (code, body["reason"]) == (422, "Invalid")
    assert field in [c["field"] for c in body["details"]["causes"]]
    assert got.items == []


@pytest.mark.parametrize(
    ("raw", "ctype", "code"),
    [
        (b"not json", "application/json", 400),
        (b"[1, 2]", "application/json", 400),
        (
            b'{"trainerStatus": {"lastUpdatedTime": "2026-01-02T03:04:05Z"}, "spec": {}}',
            "application/json",
            400,
        ),
        (b'{"trainerStatus": {}}', "text/plain", 415),
    ],
)
def test_malformed_requests(endpoint: tuple[StatusEndpoint, _Got], raw: bytes, ctype: str, code: int) -> None:
    ep, _ = endpoint
    assert _post(ep.url_for("ns", "t1"), raw, "token-one", ctype)[0] == code


def test_unknown_path_and_finished_trial(endpoint: tuple[StatusEndpoint, _Got]) -> None:
    ep, _ = endpoint
    assert _post(ep.base_url + "/apis/other", _status(), "token-one")[0] == 404
    url = ep.base_url + PATH_TEMPLATE.format(namespace="ns", name="t1")
    ep.unregister("ns", "t1")
    # the token died with its trial
    assert _post(url, _status(), "token-one")[0] == 401
