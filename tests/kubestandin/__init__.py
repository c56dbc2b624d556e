"""A stand-in for the Kubernetes API server, spoken to over real HTTP by the official client.

``KubeStandin`` serves the resources in ``default_resources()`` (the reference CRDs in ``crds/``
with their schemas, core and events.k8s.io events, leases, configmaps) with list, watch, get,
create, update, patch, delete and the ``/status`` subresource, and lets tests inject faults.
See docs/kubestandin.md for what it models and what it does not.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import yaml
from kubernetes import client

from tests.kubestandin._resources import ResourceType, default_resources, load_crd
from tests.kubestandin._routes import FailRule, Request
from tests.kubestandin._server import ServerOptions, StandinHTTPServer
from tests.kubestandin._store import Store

__all__ = ["KubeStandin", "Request", "ResourceType", "load_crd"]


class KubeStandin:
    """An in-process Kubernetes API server stand-in on 127.0.0.1 (port chosen by the OS)."""

    def __init__(
        self,
        resources: list[ResourceType] | None = None,
        *,
        bookmark_interval: float = 1.0,
    ) -> None:
        self.store = Store(default_resources() if resources is None else resources)
        self._options = ServerOptions(bookmark_interval=bookmark_interval)
        self._server: StandinHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle -------------------------------------------------------------------------------

    def start(self) -> KubeStandin:
        self._server = StandinHTTPServer(self.store, self._options)
        self._thread = threading.Thread(
            target=self._server.serve_forever, args=(0.05,), name="kubestandin", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is None:
            return
        self.store.close_watches(abrupt=True)
        self._server.shutdown()
        self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._server = None

    def __enter__(self) -> KubeStandin:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def _srv(self) -> StandinHTTPServer:
        if self._server is None:
            raise RuntimeError("KubeStandin is not started")
        return self._server

    @property
    def url(self) -> str:
        host, port = self._srv.server_address[:2]
        return f"http://{host!s}:{port}"

    # -- clients ---------------------------------------------------------------------------------

    def configuration(self, *, retries: int | None = None) -> client.Configuration:
        """Client configuration for this server; ``retries`` sets urllib3's retries (None: its default)."""
        config = client.Configuration()
        config.host = self.url
        config.api_key = {"authorization": "Bearer kubestandin"}
        config.retries = retries
        return config

    def api_client(self, *, retries: int | None = None) -> client.ApiClient:
        """A real ``kubernetes.client.ApiClient`` pointed at this server."""
        return client.ApiClient(self.configuration(retries=retries))

    def write_kubeconfig(self, path: Path, *, namespace: str = "default") -> Path:
        doc: dict[str, Any] = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "standin", "cluster": {"server": self.url}}],
            "users": [{"name": "standin", "user": {"token": "kubestandin"}}],
            "contexts": [
                {
                    "name": "standin",
                    "context": {"cluster": "standin", "user": "standin", "namespace": namespace},
                }
            ],
            "current-context": "standin",
        }
        path.write_text(yaml.safe_dump(doc))
        return path

    def register(self, rtype: ResourceType) -> None:
        self.store.register(rtype)

    # -- observation -----------------------------------------------------------------------------

    @property
    def requests(self) -> list[Request]:
        """Every API request so far as (verb, group, resource, subresource, namespace)."""
        return list(self._srv.requests)

    def clear_requests(self) -> None:
        self._srv.requests.clear()

    @property
    def resource_version(self) -> int:
        return self.store.resource_version

    # -- fault injection -------------------------------------------------------------------------

    def close_watches(self, *, abrupt: bool = False) -> None:
        """End every open watch now: cleanly (terminating chunk) or abruptly (socket shut down)."""
        self.store.close_watches(abrupt=abrupt)

    def expire(self, older_than: int | None = None) -> int:
        """Make resourceVersions older than ``older_than`` (default: the current one) expired.

        A watch from an expired resourceVersion gets a 410 ``Expired`` ERROR event; lists still work.
        """
        return self.store.expire(older_than)

    def fail_next(
        self,
        count: int,
        status: int = 503,
        *,
        path: str | None = None,
        hang: float = 0.0,
        retry_after: int | None = None,
    ) -> None:
        """Fail the next ``count`` requests whose path contains ``path`` with ``status``.

        ``hang`` sleeps that long before answering (a client with a shorter read timeout times out).
        """
        self._srv.rules.append(FailRule(count, status, path, hang, retry_after))

    def clear_faults(self) -> None:
        with self._srv.lock:
            self._srv.rules.clear()

    def pending_faults(self) -> int:
        return sum(rule.remaining for rule in self._srv.rules)
