"""``/metrics`` (Prometheus text format), ``/healthz`` and ``/readyz`` on one HTTP port.

``/metrics`` exports the process's counters (``Counters.registry``, collector/counters.py: declared
``katib_progress_*_total`` counters with their label names) and gauges sampled at scrape time from
callables (a gauge whose callable fails is left out of that scrape). ``/healthz``: 200 while
``healthy()`` (the work loop is not wedged); ``/readyz``: 200 while ``ready()`` (the API server
answered recently) - true on a standby replica too, so both stay Service endpoints.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from katib_progress.collector.counters import NAMESPACE, Counters

_log = logging.getLogger(__name__)


class _Registered(Collector):
    """Everything registered in another registry (the counters')."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self._registry = registry

    def collect(self) -> Iterator[Metric]:
        yield from self._registry.collect()


class _Gauges(Collector):
    """Gauges sampled from callables at scrape time."""

    def __init__(self, gauges: Mapping[str, Callable[[], float]]) -> None:
        self._gauges = gauges

    def collect(self) -> Iterator[Metric]:
        for name, sample in sorted(self._gauges.items()):
            try:
                level = float(sample())
            except (ValueError, TypeError, ArithmeticError, RuntimeError) as exc:
                _log.debug("gauge %s unavailable: %s", name, exc)
                continue
            yield GaugeMetricFamily(f"{NAMESPACE}_{name}", f"collector gauge {name}", value=level)


def metrics_registry(counters: Counters, gauges: Mapping[str, Callable[[], float]]) -> CollectorRegistry:
    """What ``/metrics`` exports: ``counters`` and ``gauges``."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Registered(counters.registry))
    registry.register(_Gauges(gauges))
    return registry


class ObservabilityServer:
    """``ObservabilityServer("0.0.0.0:8080", counters, gauges=..., healthy=..., ready=...).start()``."""

    def __init__(
        self,
        address: str,
        counters: Counters,
        *,
        gauges: Mapping[str, Callable[[], float]] | None = None,
        healthy: Callable[[], bool] = lambda: True,
        ready: Callable[[], bool] = lambda: True,
    ) -> None:
        host, sep, port = address.rpartition(":")
        if not sep or not port.isdigit():
            raise ValueError(f"metrics_address: expected HOST:PORT, got {address!r}")
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: object) -> None:
                _log.debug("http: " + format, *args)

            def do_GET(self) -> None:
                path = self.path.split("?", 1)[0]
                if path == "/metrics":
                    self._send(200, generate_latest(owner.registry), "text/plain; version=0.0.4")
                elif path in ("/healthz", "/livez"):
                    ok = owner.healthy()
                    self._send(200 if ok else 503, b"ok\n" if ok else b"unhealthy\n")
                elif path == "/readyz":
                    ok = owner.ready()
                    self._send(200 if ok else 503, b"ok\n" if ok else b"not ready\n")
                else:
                    self._send(404, b"not found\n")

            def _send(self, code: int, body: bytes, ctype: str = "text/plain") -> None:
                self.send_response(code)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.counters = counters
        self.gauges = dict(gauges or {})
        self.registry = metrics_registry(counters, self.gauges)
        self.healthy = healthy
        self.ready = ready
        self._server = ThreadingHTTPServer((host or "0.0.0.0", int(port)), Handler)
        self._server.daemon_threads = True
        self._thread: threading.Thread | None = None

    @property
    def address(self) -> str:
        host, port = self._server.server_address[:2]
        return f"{host!s}:{port}"

    def start(self) -> ObservabilityServer:
        self._thread = threading.Thread(
            target=self._server.serve_forever, args=(0.2,), name="metrics-http", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        if self._thread is not None:
            self._thread.join(5)
