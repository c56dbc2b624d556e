"""A Kubernetes call that cannot reach the API server raises urllib3's own errors (MaxRetryError,
ProtocolError), which are not OSError: they must be temporary errors like a socket error, everywhere
the collector calls the API (found against a real kube-apiserver killed and restarted: the
final-metrics thread died of an uncaught MaxRetryError and no trial could end)."""

from __future__ import annotations

import socket
from typing import Any

import pytest
import urllib3
from kubernetes import client

from katib_progress.collector.counters import Counters
from katib_progress.collector.final_metrics import PASS_FAILURES, FinalMetricsMarker
from katib_progress.collector.kube._client import call_or_none
from katib_progress.core.errors import TemporaryError


def _closed_api() -> client.CustomObjectsApi:
    """A client pointed at a loopback port where nothing listens (connection refused)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    config = client.Configuration()
    config.host = f"http://127.0.0.1:{port}"
    config.retries = 0
    return client.CustomObjectsApi(client.ApiClient(config))


@pytest.mark.parametrize(
    "error",
    [
        urllib3.exceptions.MaxRetryError(None, "/x", reason=ConnectionRefusedError()),  # type: ignore[arg-type]
        urllib3.exceptions.ProtocolError("Response ended prematurely"),
        ConnectionResetError(),
    ],
)
def test_unreachable_api_is_a_temporary_error(error: Exception) -> None:
    def call() -> Any:
        raise error

    with pytest.raises(TemporaryError, match="Kubernetes API unreachable"):
        call_or_none(call)


def test_a_real_refused_connection_is_a_temporary_error() -> None:
    api = _closed_api()
    with pytest.raises(TemporaryError):
        call_or_none(api.get_namespaced_custom_object, "g", "v1", "ns", "things", "x", _request_timeout=2)


class _Failing(FinalMetricsMarker):
    """A marker whose passes raise something unexpected, three times."""

    calls = 0

    def check_pending(self) -> int:
        self.calls += 1
        if self.calls >= 3:
            self.stop()
        raise RuntimeError("boom")


def test_the_final_metrics_loop_survives_an_unexpected_error() -> None:
    counters = Counters()
    marker = _Failing(_closed_api().api_client, reader=None, counters=counters)  # type: ignore[arg-type]
    marker.run(0.001)  # returns: the loop went on after each failure until stop()
    assert marker.calls == 3
    assert counters.total(PASS_FAILURES) == 3
