"""A local stand-in for Kubeflow Trainer's TrainJob status endpoint (plain HTTP on loopback).

Same URL path and body as the cluster: training code POSTs ``{"trainerStatus": {...}}`` to
``/apis/trainer.kubeflow.org/v1alpha1/namespaces/{ns}/trainjobs/{name}/status`` with
``Authorization: Bearer <token>``. Each trial has its own token, so a trial cannot write another
trial's status. Rejections answer with a Kubernetes ``Status``-like JSON body:

- 401 Unauthorized: no token, or a token no running trial holds;
- 403 Forbidden: the token of a different trial;
- 404 NotFound: any other path, or a TrainJob that is not running;
- 411/413: no Content-Length / a body over ``max_body`` bytes;
- 415: Content-Type is not ``application/json``;
- 400 BadRequest: not JSON, or no ``trainerStatus`` object;
- 422 Invalid: a body the real CRD would reject (checked with ``TrainerStatus``), ``causes`` name the field.

Accepted snapshots keep ``lastUpdatedTime`` at one-second precision, as the API server does (metav1.Time).
"""

from __future__ import annotations

import hmac
import json
import logging
import re
import threading
from collections.abc import Callable, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from pydantic import ValidationError

from katib_progress.core.timefmt import floor_second, format_rfc3339nano, parse_rfc3339

_log = logging.getLogger(__name__)

PATH_TEMPLATE = "/apis/trainer.kubeflow.org/v1alpha1/namespaces/{namespace}/trainjobs/{name}/status"
_PATH = re.compile(r"^/apis/trainer\.kubeflow\.org/v1alpha1/namespaces/([^/]+)/trainjobs/([^/]+)/status/?$")
DEFAULT_MAX_BODY = 256 * 1024
_DRAIN_LIMIT = 8 * 1024 * 1024

StatusCallback = Callable[[str, str, dict[str, Any]], None]


class _Reject(Exception):
    def __init__(
        self, code: int, reason: str, message: str, causes: tuple[tuple[str, str], ...] = ()
    ) -> None:
        super().__init__(message)
        self.code = code
        self.reason = reason
        self.message = message
        self.causes = causes


class StatusEndpoint:
    """Threaded HTTP server on loopback; ``on_status(namespace, name, trainer_status)`` gets each
    accepted snapshot (called before the 200 answer, so it must only enqueue)."""

    def __init__(
        self, on_status: StatusCallback, *, host: str = "127.0.0.1", max_body: int = DEFAULT_MAX_BODY
    ) -> None:
        self._on_status = on_status
        self._max_body = max_body
        self._lock = threading.Lock()
        self._tokens: dict[tuple[str, str], str] = {}
        self._latest: dict[tuple[str, str], dict[str, Any]] = {}
        self.rejections: dict[str, int] = {}
        self._server = ThreadingHTTPServer((host, 0), _Handler)
        self._server.daemon_threads = True
        self._server.endpoint = self  # type: ignore[attr-defined]
        self._thread: threading.Thread | None = None

    @property
    def base_url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def url_for(self, namespace: str, name: str) -> str:
        return self.base_url + PATH_TEMPLATE.format(namespace=namespace, name=name)

    def start(self) -> StatusEndpoint:
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="status-endpoint", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def register(self, namespace: str, name: str, token: str) -> None:
        with self._lock:
            self._tokens[(namespace, name)] = token
            self._latest.pop((namespace, name), None)

    def unregister(self, namespace: str, name: str) -> None:
        with self._lock:
            self._tokens.pop((namespace, name), None)

    def latest(self, namespace: str, name: str) -> dict[str, Any] | None:
        with self._lock:
            value = self._latest.get((namespace, name))
            return json.loads(json.dumps(value)) if value is not None else None

    # -- request handling (called from handler threads) ------------------------------------------

    def _authorize(self, header: str | None, key: tuple[str, str] | None) -> None:
        token = header[7:].strip() if header and header[:7].lower() == "bearer " else ""
        if not token:
            raise _Reject(401, "Unauthorized", "missing bearer token")
        with self._lock:
            holders = [k for k, v in self._tokens.items() if hmac.compare_digest(v, token)]
        if not holders:
            raise _Reject(401, "Unauthorized", "token is not valid for any running trial")
        if key is not None and key not in holders:
            ns, name = holders[0]
            raise _Reject(
                403, "Forbidden", f"this token belongs to trainjob {ns}/{name}, not {key[0]}/{key[1]}"
            )

    def _accept(self, key: tuple[str, str], body: bytes) -> dict[str, Any]:
        try:
            payload = json.loads(body)
        except (ValueError, UnicodeDecodeError) as exc:
            raise _Reject(400, "BadRequest", f"body is not JSON: {exc}") from None
        if not isinstance(payload, dict) or not isinstance(payload.get("trainerStatus"), dict):
            raise _Reject(400, "BadRequest", 'body must be {"trainerStatus": {...}}')
        extra = sorted(set(payload) - {"trainerStatus"})
        if extra:
            raise _Reject(
                400, "BadRequest", f"unknown field(s) {extra}", tuple((f, "unknown field") for f in extra)
            )
        status = _validated(payload["trainerStatus"])
        with self._lock:
            if key not in self._tokens:
                raise _Reject(404, "NotFound", f"trainjob {key[0]}/{key[1]} is not running")
            self._latest[key] = status
        self._on_status(key[0], key[1], json.loads(json.dumps(status)))
        return status

    def _count(self, reason: str) -> None:
        with self._lock:
            self.rejections[reason] = self.rejections.get(reason, 0) + 1


def _validated(raw: Mapping[str, Any]) -> dict[str, Any]:
    from katib_progress.core.status import TrainerStatus

    try:
        TrainerStatus.model_validate(raw)
    except ValidationError as exc:
        causes = tuple(
            ("trainerStatus." + ".".join(str(p) for p in err["loc"]), str(err["msg"])) for err in exc.errors()
        )
        first = causes[0] if causes else ("trainerStatus", "invalid")
        raise _Reject(422, "Invalid", f"TrainJob status is invalid: {first[0]}: {first[1]}", causes) from None
    status = dict(raw)
    try:
        moment = floor_second(
            parse_rfc3339(status.get("lastUpdatedTime"), field="trainerStatus.lastUpdatedTime")
        )
    except ValueError as exc:
        raise _Reject(
            422, "Invalid", str(exc), (("trainerStatus.lastUpdatedTime", "must be RFC 3339"),)
        ) from None
    # metav1.Time, one-second precision; keeps the 4-digit year (strftime("%Y") does not).
    status["lastUpdatedTime"] = format_rfc3339nano(moment)
    return status


class _Handler(BaseHTTPRequestHandler):
    server_version = "katib-progress-local"

    def log_message(self, format: str, *args: Any) -> None:
        _log.debug("status endpoint: " + format, *args)

    @property
    def _endpoint(self) -> StatusEndpoint:
        endpoint: StatusEndpoint = self.server.endpoint  # type: ignore[attr-defined]
        return endpoint

    def do_POST(self) -> None:
        endpoint = self._endpoint
        body: bytes | None = None
        length_text = self.headers.get("Content-Length")
        length = int(length_text) if length_text is not None and length_text.isdigit() else -1
        if length > endpoint._max_body:
            self._drain(length)
        elif length >= 0:
            body = self.rfile.read(length)
        try:
            match = _PATH.match(self.path.split("?", 1)[0])
            key = (match.group(1), match.group(2)) if match else None
            endpoint._authorize(self.headers.get("Authorization"), key)
            if key is None:
                raise _Reject(404, "NotFound", f"no such path {self.path}")
            if length < 0:
                raise _Reject(411, "LengthRequired", "Content-Length is required")
            if body is None:
                raise _Reject(
                    413, "RequestEntityTooLarge", f"body of {length} bytes exceeds {endpoint._max_body}"
                )
            ctype = (self.headers.get("Content-Type") or "").split(";", 1)[0].strip().lower()
            if ctype != "application/json":
                raise _Reject(
                    415, "UnsupportedMediaType", f"Content-Type must be application/json, got {ctype!r}"
                )
            status = endpoint._accept(key, body)
        except _Reject as rej:
            endpoint._count(rej.reason)
            _log.info("status endpoint rejected %s: %d %s: %s", self.path, rej.code, rej.reason, rej.message)
            self._send(rej.code, _status_body(rej))
            return
        doc = {
            "apiVersion": "trainer.kubeflow.org/v1alpha1",
            "kind": "TrainJob",
            "metadata": {"namespace": key[0], "name": key[1]},
            "status": {"trainerStatus": status},
        }
        self._send(200, doc)

    def do_GET(self) -> None:
        self._send(405, _status_body(_Reject(405, "MethodNotAllowed", "only POST is served")))

    do_PUT = do_PATCH = do_DELETE = do_GET

    def _drain(self, length: int) -> None:
        remaining = min(length, _DRAIN_LIMIT)
        while remaining > 0:
            chunk = self.rfile.read(min(remaining, 65536))
            if not chunk:
                break
            remaining -= len(chunk)
        if length > _DRAIN_LIMIT:
            self.close_connection = True

    def _send(self, code: int, doc: Mapping[str, Any]) -> None:
        data = json.dumps(doc).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


def _status_body(rej: _Reject) -> dict[str, Any]:
    body: dict[str, Any] = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": rej.message,
        "reason": rej.reason,
        "code": rej.code,
    }
    if rej.causes:
        body["details"] = {"causes": [{"field": f, "message": m} for f, m in rej.causes]}
    return body
