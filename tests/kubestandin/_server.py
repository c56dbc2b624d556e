"""The HTTP side: routing Kubernetes REST paths onto the store, watch streaming, fault injection."""

from __future__ import annotations

import json
import logging
import socket
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

import yaml

from tests.kubestandin._patch import PatchError, json_patch, merge_patch
from tests.kubestandin._resources import ApiError, ResourceType
from tests.kubestandin._routes import FailRule, Request, Route, flag, paginate, parse_route
from tests.kubestandin._selectors import Selector
from tests.kubestandin._store import Store

_log = logging.getLogger(__name__)

_MERGE_TYPES = ("application/merge-patch+json", "application/strategic-merge-patch+json")
_APPLY_TYPE = "application/apply-patch+yaml"
_JSON_PATCH_TYPE = "application/json-patch+json"


class StandinHTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False

    def __init__(self, store: Store, options: ServerOptions) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.store = store
        self.options = options
        self.requests: list[Request] = []
        self.rules: list[FailRule] = []
        self.lock = threading.Lock()

    def take_fault(self, path: str) -> FailRule | None:
        with self.lock:
            for rule in self.rules:
                if rule.remaining > 0 and (rule.path is None or rule.path in path):
                    rule.remaining -= 1
                    return rule
            return None


@dataclass
class ServerOptions:
    bookmark_interval: float = 1.0
    default_watch_timeout: float = 1800.0


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # headers and body go out as separate writes
    server: StandinHTTPServer

    def log_message(self, format: str, *args: Any) -> None:
        _log.debug("kubestandin: " + format, *args)

    def do_GET(self) -> None:
        self._dispatch("GET")

    def do_POST(self) -> None:
        self._dispatch("POST")

    def do_PUT(self) -> None:
        self._dispatch("PUT")

    def do_PATCH(self) -> None:
        self._dispatch("PATCH")

    def do_DELETE(self) -> None:
        self._dispatch("DELETE")

    # -- plumbing --------------------------------------------------------------------------------

    def _send_json(self, code: int, body: Any, headers: dict[str, str] | None = None) -> None:
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(data)

    def _send_error(self, err: ApiError) -> None:
        self._send_json(err.code, err.status(), err.headers)

    def _body(self) -> bytes:
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def _json_body(self, raw: bytes, content_type: str = "") -> Any:
        try:
            if content_type.startswith(_APPLY_TYPE):
                return yaml.safe_load(raw.decode() or "{}")
            return json.loads(raw.decode() or "null")
        except (ValueError, yaml.YAMLError) as exc:
            raise ApiError(400, "BadRequest", f"the request body is not valid: {exc}") from None

    # -- dispatch --------------------------------------------------------------------------------

    def _dispatch(self, method: str) -> None:
        try:
            self._handle(method)
        except (BrokenPipeError, ConnectionResetError):
            _log.debug("kubestandin: client went away")
        except Exception as exc:  # a bug in the stand-in: answer 500 like an apiserver panic would
            _log.exception("kubestandin: internal error")
            self._send_error(ApiError(500, "InternalError", f"kubestandin internal error: {exc!r}"))

    def _handle(self, method: str) -> None:
        url = urlsplit(self.path)
        query = {k: v[-1] for k, v in parse_qs(url.query).items()}
        raw = self._body()
        route = parse_route(url.path)
        if route is None:
            self._special(url.path)
            return
        watch = method == "GET" and flag(query.get("watch"))
        verb = self._verb(method, route, watch)
        self.server.requests.append(
            Request(verb, route.group, route.plural, route.subresource, route.namespace or "")
        )
        rule = self.server.take_fault(url.path)
        if rule is not None:
            if rule.hang:
                time.sleep(rule.hang)
            headers = {"Retry-After": str(rule.retry_after)} if rule.retry_after is not None else {}
            reason = {429: "TooManyRequests", 500: "InternalError", 503: "ServiceUnavailable"}.get(
                rule.status, "Timeout"
            )
            self._send_error(
                ApiError(rule.status, reason, f"injected fault ({rule.status})", headers=headers)
            )
            return
        try:
            rtype = self.server.store.resolve(route.group, route.version, route.plural)
            if route.subresource not in ("", "status") or (
                route.subresource == "status" and not rtype.status_subresource
            ):
                raise ApiError(404, "NotFound", "the server could not find the requested resource")
            if watch:
                self._watch(rtype, route, query)
                return
            code, body = self._serve(method, rtype, route, query, raw)
        except ApiError as err:
            self._send_error(err)
            return
        self._send_json(code, body)

    @staticmethod
    def _verb(method: str, route: Route, watch: bool) -> str:
        if watch:
            return "watch"
        if method == "GET":
            return "get" if route.name else "list"
        if method == "DELETE":
            return "delete" if route.name else "deletecollection"
        return {"POST": "create", "PUT": "update", "PATCH": "patch"}[method]

    def _special(self, path: str) -> None:
        store = self.server.store
        if path in ("/healthz", "/readyz", "/livez"):
            data = b"ok"
            self.send_response(200)
            self.send_header("Content-Type", "text/plain")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
        elif path == "/version":
            self._send_json(200, {"major": "1", "minor": "33", "gitVersion": "v1.33.0-kubestandin"})
        elif path.rstrip("/") in ("/api/v1", *{f"/apis/{g}/{v}" for g, v, _ in store.served()}):
            parts = [p for p in path.split("/") if p]
            group, version = ("", parts[1]) if parts[0] == "api" else (parts[1], parts[2])
            self._send_json(200, store.discovery(group, version))
        else:
            self._send_error(ApiError(404, "NotFound", "the server could not find the requested resource"))

    def _serve(
        self, method: str, rtype: ResourceType, route: Route, query: dict[str, str], raw: bytes
    ) -> tuple[int, Any]:
        store = self.server.store
        namespace = route.namespace if rtype.namespaced else ""
        strict = query.get("fieldValidation") == "Strict"
        sub = route.subresource or None
        if rtype.namespaced and namespace is None and method != "GET":
            raise ApiError(405, "MethodNotAllowed", "a namespace is required")
        if method == "GET" and route.name:
            return 200, store.get(rtype, namespace or "", route.name)
        if method == "GET":
            items, rv = store.list_objects(
                rtype, namespace, Selector.parse(query.get("labelSelector"), query.get("fieldSelector"))
            )
            meta, items = paginate(items, rv, query, store.compacted_rv)
            return 200, {
                "apiVersion": rtype.api_version,
                "kind": f"{rtype.kind}List",
                "metadata": meta,
                "items": items,
            }
        if method == "POST" and not route.name:
            body = self._json_body(raw)
            if not isinstance(body, dict):
                raise ApiError(400, "BadRequest", "the request body must be an object")
            return 201, store.create(rtype, namespace or "", body, strict=strict)
        if route.name is None:
            if method == "DELETE":
                items, _ = store.list_objects(
                    rtype, namespace, Selector.parse(query.get("labelSelector"), None)
                )
                for item in items:
                    store.delete(
                        rtype, namespace or item["metadata"].get("namespace", ""), item["metadata"]["name"]
                    )
                return 200, {
                    "apiVersion": rtype.api_version,
                    "kind": f"{rtype.kind}List",
                    "metadata": {},
                    "items": items,
                }
            raise ApiError(405, "MethodNotAllowed", f"{method} is not supported on a collection")
        name = route.name
        if method == "PUT":
            body = self._json_body(raw)
            if not isinstance(body, dict):
                raise ApiError(400, "BadRequest", "the request body must be an object")
            return 200, store.update(rtype, namespace or "", name, body, subresource=sub, strict=strict)
        if method == "DELETE":
            return 200, store.delete(rtype, namespace or "", name)
        return self._patch(rtype, namespace or "", name, sub, raw, strict)

    def _patch(
        self, rtype: ResourceType, namespace: str, name: str, sub: str | None, raw: bytes, strict: bool
    ) -> tuple[int, Any]:
        store = self.server.store
        content_type = (self.headers.get("Content-Type") or "").split(";")[0].strip()
        patch = self._json_body(raw, content_type)
        if content_type == _JSON_PATCH_TYPE:

            def apply(current: dict[str, Any]) -> dict[str, Any]:
                try:
                    return json_patch(current, patch)
                except PatchError as exc:
                    raise ApiError(422, "Invalid", f"the JSON patch could not be applied: {exc}") from None

            precondition = None
        elif content_type in (*_MERGE_TYPES, _APPLY_TYPE):
            if not isinstance(patch, dict):
                raise ApiError(400, "BadRequest", "a merge patch must be an object")

            def apply(current: dict[str, Any]) -> dict[str, Any]:
                return merge_patch(current, patch)

            precondition = (patch.get("metadata") or {}).get("resourceVersion")
            if content_type == _APPLY_TYPE:
                try:
                    store.get(rtype, namespace, name)
                except ApiError as err:
                    if err.code != 404:
                        raise
                    return 201, store.create(rtype, namespace, patch, strict=strict)
        else:
            raise ApiError(
                415,
                "UnsupportedMediaType",
                f"the body of the request was in an unknown format: {content_type}",
            )
        return 200, store.patch(
            rtype, namespace, name, apply, subresource=sub, strict=strict, precondition_rv=precondition
        )

    # -- watch -----------------------------------------------------------------------------------

    def _start_stream(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()

    def _chunk(self, event: dict[str, Any]) -> None:
        data = json.dumps(event).encode() + b"\n"
        self.wfile.write(f"{len(data):X}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()

    def _end_stream(self) -> None:
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    def _watch(self, rtype: ResourceType, route: Route, query: dict[str, str]) -> None:
        store = self.server.store
        options = self.server.options
        namespace = route.namespace if rtype.namespaced else None
        selector = Selector.parse(query.get("labelSelector"), query.get("fieldSelector"))
        bookmarks = flag(query.get("allowWatchBookmarks"))
        timeout = float(query.get("timeoutSeconds") or options.default_watch_timeout)
        # A watch that ends cleanly (terminating chunk) leaves the connection open for the next
        # request, as Go's net/http does for a finished chunked response (the kube-apiserver); closing
        # it without "Connection: close" would let a client's pool reuse a dead connection.
        try:
            cursor = store.open_watch(rtype, namespace, selector, query.get("resourceVersion"))
        except ApiError as err:
            if err.code != 410:
                raise
            # The real server answers 200 and sends the expiry as an ERROR event.
            self._start_stream()
            self._chunk({"type": "ERROR", "object": err.status()})
            self._end_stream()
            return
        self._start_stream()
        deadline = time.monotonic() + timeout
        next_bookmark = time.monotonic() + options.bookmark_interval
        try:
            for obj in cursor.initial:
                self._chunk({"type": "ADDED", "object": obj})
            while True:
                now = time.monotonic()
                if now >= deadline:
                    if bookmarks:
                        self._bookmark(rtype, cursor.rv)
                    break
                wait = min(deadline, next_bookmark if bookmarks else deadline) - now
                events = store.next_events(cursor, max(wait, 0.0))
                if events is None:
                    if store.closed_abruptly(cursor):
                        self.close_connection = True
                        self.connection.shutdown(socket.SHUT_RDWR)
                        return
                    break
                for event in events:
                    self._chunk({"type": event.type, "object": event.obj})
                if bookmarks and time.monotonic() >= next_bookmark:
                    self._bookmark(rtype, cursor.rv)
                    next_bookmark = time.monotonic() + options.bookmark_interval
            self._end_stream()
        except (BrokenPipeError, ConnectionResetError, OSError):
            self.close_connection = True
            _log.debug("kubestandin: watch client went away")

    def _bookmark(self, rtype: ResourceType, rv: int) -> None:
        self._chunk(
            {
                "type": "BOOKMARK",
                "object": {
                    "apiVersion": rtype.api_version,
                    "kind": rtype.kind,
                    "metadata": {"resourceVersion": str(rv)},
                },
            }
        )
