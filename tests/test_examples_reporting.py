"""The custom-loop example's reporting helpers against a real HTTP status endpoint.

``kubeflow.trainer.update_trainjob_status`` (Kubeflow SDK 0.5.0) drops any update sent within 5 s
of the previous one. The final snapshot is the one Katib's objective comes from, so the example's
``report_final`` retries past the throttle. Here the SDK posts, over real HTTP, to a loopback
server playing the Trainer status endpoint; the throttle window is shortened to keep the test fast.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from kubeflow.trainer.backends.kubernetes import utils as sdk_status

from tests.kubestandin import load_crd
from tests.test_examples import EXAMPLES, TRAINJOB_CRD, load_module

STATUS_PATH = "/apis/trainer.kubeflow.org/v1alpha1/namespaces/team-a/trainjobs/custom-loop-x7k2m9pq/status"


class _Endpoint:
    def __init__(self) -> None:
        self.posts: list[tuple[str, str, dict[str, Any]]] = []
        self.status = 200
        endpoint = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                endpoint.posts.append((self.path, self.headers.get("Authorization", ""), body))
                self.send_response(endpoint.status)
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"{}")

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host!s}:{port}{STATUS_PATH}"


@pytest.fixture
def endpoint(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[_Endpoint]:
    ep = _Endpoint()
    ep.thread.start()
    token = tmp_path / "token"
    token.write_text("trainer-token\n")
    monkeypatch.setenv("KUBEFLOW_TRAINER_SERVER_URL", ep.url)
    monkeypatch.setenv("KUBEFLOW_TRAINER_SERVER_TOKEN", str(token))
    monkeypatch.delenv("KUBEFLOW_TRAINER_SERVER_CA_CERT", raising=False)
    # Fresh SDK state per test; a 0.3 s throttle window instead of 5 s.
    monkeypatch.setattr(sdk_status, "_last_update_time", 0.0)
    monkeypatch.setattr(sdk_status, "_cached_token", None)
    monkeypatch.setattr(sdk_status, "_MIN_UPDATE_INTERVAL_SECONDS", 0.3)
    try:
        yield ep
    finally:
        ep.server.shutdown()
        ep.server.server_close()


@pytest.fixture(scope="module")
def train_module() -> Any:
    return load_module(EXAMPLES / "custom-loop" / "train.py", "example_custom_loop_train")


def _valid_trainer_status(trainer_status: dict[str, Any]) -> list[Any]:
    (rtype,) = load_crd(TRAINJOB_CRD)
    assert rtype.schema is not None
    job = {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": "custom-loop-x7k2m9pq"},
        "spec": {"runtimeRef": {"name": "torch-distributed"}},
        "status": {"trainerStatus": trainer_status},
    }
    causes: list[Any] = rtype.schema.validate(job, None)
    return causes


def test_final_snapshot_lands_despite_the_throttle(endpoint: _Endpoint, train_module: Any) -> None:
    metrics = {"loss": 0.41, "val_loss": 0.39, "val_accuracy": 0.83}
    assert train_module.report_progress(50, 100, started=0.0, metrics=metrics, now=10.0)
    slept: list[float] = []

    def sleep(seconds: float) -> None:
        slept.append(seconds)
        threading.Event().wait(seconds)

    final = {"loss": 0.2, "val_loss": 0.25, "val_accuracy": 0.91}
    assert train_module.report_final(final, wait_s=0.35, sleep=sleep)
    assert slept, "the first final attempt falls inside the throttle window and must be retried"
    assert len(endpoint.posts) == 2
    (path0, auth0, first), (_path1, _auth1, last) = endpoint.posts
    assert (path0, auth0) == (STATUS_PATH, "Bearer trainer-token")
    assert first["trainerStatus"]["progressPercentage"] == 50
    assert first["trainerStatus"]["estimatedRemainingSeconds"] == 10
    status = last["trainerStatus"]
    assert (status["progressPercentage"], status["estimatedRemainingSeconds"]) == (100, 0)
    assert {m["name"]: m["value"] for m in status["metrics"]} == {k: str(v) for k, v in final.items()}
    assert _valid_trainer_status(status) == []


def test_final_report_gives_up_after_attempts(endpoint: _Endpoint, train_module: Any) -> None:
    endpoint.status = 500
    slept: list[float] = []
    assert not train_module.report_final({"val_loss": 1.0}, attempts=3, wait_s=0.0, sleep=slept.append)
    assert len(endpoint.posts) == 3
    assert slept == [0.0, 0.0]


def test_outside_a_trainjob_nothing_is_sent(
    endpoint: _Endpoint, train_module: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("KUBEFLOW_TRAINER_SERVER_URL")
    slept: list[float] = []
    assert not train_module.report_final({"val_loss": 1.0}, sleep=slept.append)
    assert not train_module.report_progress(1, 10, started=0.0, metrics={"loss": 1.0}, now=1.0)
    assert endpoint.posts == [] and slept == []
