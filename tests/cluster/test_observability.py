"""/metrics, /healthz, /readyz over real HTTP."""

from __future__ import annotations

import urllib.error
import urllib.request

import pytest
from prometheus_client.parser import text_string_to_metric_families

from katib_progress.collector.counters import Counters
from katib_progress.collector.observability import ObservabilityServer
from katib_progress.collector.pipeline import REJECTED, ROWS, SNAPSHOTS


def _get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def test_metrics_health_and_readiness() -> None:
    counters = Counters()
    counters.inc(SNAPSHOTS, 3, outcome="written")
    counters.inc(SNAPSHOTS, outcome="repeat")
    counters.inc(REJECTED, 2, reason="non_finite")
    counters.inc(ROWS, 12)
    ready = [False]
    server = ObservabilityServer(
        "127.0.0.1:0", counters, gauges={"collector_buffered_rows": lambda: 7.0}, ready=lambda: ready[0]
    ).start()
    base = f"http://{server.address}"
    try:
        status, text = _get(base + "/metrics")
        assert status == 200
        samples = {
            (s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text)
            for s in family.samples
        }
        assert samples[("katib_progress_collector_snapshots_total", (("outcome", "written"),))] == 3
        assert samples[("katib_progress_collector_snapshots_total", (("outcome", "repeat"),))] == 1
        assert samples[("katib_progress_collector_metrics_rejected_total", (("reason", "non_finite"),))] == 2
        assert samples[("katib_progress_collector_rows_written_total", ())] == 12
        assert samples[("katib_progress_collector_buffered_rows", ())] == 7
        assert _get(base + "/healthz")[0] == 200
        assert _get(base + "/readyz")[0] == 503
        ready[0] = True
        assert _get(base + "/readyz")[0] == 200
        assert _get(base + "/nope")[0] == 404
        counters.inc(ROWS, 1)  # scraped live
        assert "katib_progress_collector_rows_written_total 13.0" in _get(base + "/metrics")[1]
    finally:
        server.stop()


def test_bad_address_is_rejected() -> None:
    try:
        ObservabilityServer("8080", Counters())
    except ValueError as exc:
        assert "metrics_address" in str(exc)
    else:
        raise AssertionError("expected ValueError")


def test_counters_keep_their_declared_label_names() -> None:
    counters = Counters()
    assert counters.get(SNAPSHOTS, outcome="written") == 0
    counters.inc(SNAPSHOTS, 2, outcome="written")
    counters.inc(SNAPSHOTS, outcome="stale")
    assert counters.total(SNAPSHOTS) == counters.total("collector_snapshots_total") == 3
    assert counters.snapshot() == {
        "collector_snapshots_total{outcome=stale}": 1,
        "collector_snapshots_total{outcome=written}": 2,
    }
    with pytest.raises(ValueError):
        counters.inc(SNAPSHOTS, reason="written")  # not its label
    with pytest.raises(ValueError):
        counters.inc(ROWS, outcome="written")  # ROWS has no labels
    with pytest.raises(ValueError):
        counters.inc(SNAPSHOTS, -1, outcome="written")
