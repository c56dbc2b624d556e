"""A lean Kubernetes API stand-in for load: LIST/WATCH/GET of TrainJobs, GET and LIST of Trials, GET of
Experiments.

Run as its own process (``python -m benchmarks.watchload.apiserver --jobs N``); it prints
``listening on 127.0.0.1:PORT`` and serves until SIGTERM. One asyncio loop, HTTP/1.1 keep-alive, watch
responses chunked with one JSON event per line (k8s.io/apiserver pkg/endpoints/handlers/watch.go,
``serveWatch``: one frame per event, flushed; k8s.io/apimachinery runtime/serializer/json: a JSON object
followed by a newline). Errors are ``metav1.Status`` objects (404 NotFound for anything not served, as a
cluster without the resource answers). Semantics of the state: ``feed.py``.

Benchmark control (not Kubernetes): ``POST /_bench/activate`` makes every TrainJob appear and starts the
status updates; ``POST /_bench/stop`` stops them; ``GET /_bench/stats`` and ``GET /_bench/published?from=K``
report what was served and when each update was published (``time.monotonic()``, comparable across
processes on Linux).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
import sys
import time
from email.utils import formatdate
from typing import Any
from urllib.parse import parse_qs, urlsplit

from benchmarks.watchload.feed import Feed, WatchStream, chunk
from benchmarks.watchload.katib_objects import experiment, trial
from benchmarks.watchload.objects import TRAINER_API, dumps, fleet, rfc3339

TRAINER_PREFIX = "/apis/trainer.kubeflow.org/v1alpha1/"
KATIB_PREFIX = "/apis/kubeflow.org/v1beta1/"
DEFAULT_WATCH_TIMEOUT_S = 1800.0  # --min-request-timeout; upstream adds up to the same again at random


def flag(value: str | None) -> bool:
    """Query booleans are parsed with Go's strconv.ParseBool."""
    return value in ("1", "t", "T", "TRUE", "true", "True")


def status(code: int, reason: str, message: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "code": code,
        "details": {},
        "kind": "Status",
        "message": message,
        "metadata": {},
        "reason": reason,
        "status": "Failure",
    }


class Server:
    def __init__(
        self, feed: Feed, experiments: dict[tuple[str, str], Any], trials_per_experiment: int
    ) -> None:
        self.feed = feed
        self.experiments = experiments
        self.trials_per_experiment = trials_per_experiment

    def count(self, key: str) -> None:
        requests = self.feed.stats.requests
        requests[key] = requests.get(key, 0) + 1

    def route(self, conn: Conn, method: str, target: str) -> None:
        url = urlsplit(target)
        query = {k: v[-1] for k, v in parse_qs(url.query).items()}
        path = url.path.rstrip("/")
        if path.startswith("/_bench/"):
            self.control(conn, method, path, query)
        elif path.startswith(TRAINER_PREFIX):
            self.trainjobs(conn, method, path[len(TRAINER_PREFIX) :].split("/"), query)
        elif path.startswith(KATIB_PREFIX) and method == "GET":
            self.katib(conn, path[len(KATIB_PREFIX) :].split("/"), query)
        else:
            self.count(f"{method} other")
            conn.send_json(404, status(404, "NotFound", "the server could not find the requested resource"))

    def trainjobs(self, conn: Conn, method: str, parts: list[str], query: dict[str, str]) -> None:
        namespace = None
        if len(parts) >= 3 and parts[0] == "namespaces":
            namespace, parts = parts[1], parts[2:]
        if method != "GET" or not parts or parts[0] != "trainjobs" or len(parts) > 2:
            self.count(f"{method} trainjobs other")
            conn.send_json(405 if method != "GET" else 404, status(404, "NotFound", "not served here"))
            return
        if len(parts) == 2:
            self.count("get trainjobs")
            index = self.feed.by_name.get((namespace or "", parts[1]))
            if index is None or not self.feed.present:
                conn.send_json(
                    404, status(404, "NotFound", f'trainjobs.trainer.kubeflow.org "{parts[1]}" not found')
                )
                return
            f = self.feed
            conn.send_raw(200, f.object_json(index, f.obj_rv[index], f.step[index], f.sec[index]).encode())
            return
        if namespace is not None:  # every job of the fleet is listed cluster-wide only
            self.count("namespaced trainjobs")
            conn.send_json(
                400, status(400, "BadRequest", "the benchmark stand-in serves cluster-wide lists only")
            )
            return
        if flag(query.get("watch")):
            self.watch(conn, query)
        else:
            self.list(conn, query)

    def list(self, conn: Conn, query: dict[str, str]) -> None:
        self.count("list trainjobs")
        self.feed.stats.list_starts.append(time.monotonic())
        token = query.get("continue")
        try:
            snapshot, start = (int(x) for x in token.split(":")) if token else (None, 0)
            items, meta = self.feed.list_page(snapshot, start, int(query.get("limit") or 0))
        except (ValueError, KeyError):
            conn.send_json(
                410,
                status(
                    410,
                    "Expired",
                    "The provided continue parameter is too old to display a consistent list result.",
                ),
            )
            return
        body = (
            f'{{"apiVersion":"{TRAINER_API}","items":['
            + ",".join(items)
            + '],"kind":"TrainJobList","metadata":'
            + dumps(meta)
            + "}"
        )
        conn.send_raw(200, body.encode())

    def watch(self, conn: Conn, query: dict[str, str]) -> None:
        self.count("watch trainjobs")
        feed = self.feed
        feed.stats.watch_starts.append(time.monotonic())
        rv_text = query.get("resourceVersion") or ""
        replay = feed.current() if rv_text in ("", "0") else feed.since(int(rv_text))
        conn.start_chunked()
        if replay is None:
            feed.stats.expired += 1
            oldest = feed.history[0][0] - 1 if feed.history else feed.rv
            err = status(410, "Expired", f"too old resource version: {rv_text} ({oldest})")
            conn.write(chunk(f'{{"type":"ERROR","object":{dumps(err)}}}\n'.encode()) + b"0\r\n\r\n")
            conn.finish_response()
            return
        timeout = float(query.get("timeoutSeconds") or DEFAULT_WATCH_TIMEOUT_S)
        stream = WatchStream(
            feed,
            conn.write,
            conn.is_paused,
            replay=replay,
            timeout_s=timeout,
            bookmarks=flag(query.get("allowWatchBookmarks")),
        )

        def done() -> None:
            if stream in feed.watchers:
                feed.watchers.remove(stream)
            conn.watch = None
            conn.finish_response()

        stream.on_done = done
        conn.watch = stream
        feed.watchers.append(stream)
        stream.flush()

    def katib(self, conn: Conn, parts: list[str], query: dict[str, str]) -> None:
        namespace = None
        if len(parts) >= 3 and parts[0] == "namespaces":
            namespace, parts = parts[1], parts[2:]
        if parts == ["trials"]:
            self.list_trials(conn, namespace, query)
            return
        if namespace is None or len(parts) != 2 or parts[0] not in ("trials", "experiments"):
            self.count("GET katib other")
            conn.send_json(404, status(404, "NotFound", "the server could not find the requested resource"))
            return
        plural, name = parts
        self.count(f"get {plural}")
        created = self.feed.created
        if plural == "trials":
            index = self.feed.by_name.get((namespace, name))
            if index is not None:
                conn.send_raw(
                    200, dumps(trial(self.feed.jobs[index], str(500_000 + index), created)).encode()
                )
                return
        else:
            exp = self.experiments.get((namespace, name))
            if exp is not None:
                body = experiment(exp, "1000", created, self.trials_per_experiment)
                conn.send_raw(200, dumps(body).encode())
                return
        conn.send_json(404, status(404, "NotFound", f'{plural}.kubeflow.org "{name}" not found'))

    def list_trials(self, conn: Conn, namespace: str | None, query: dict[str, str]) -> None:
        """Trials exist from the start (Katib created them before their TrainJobs) and never change here,
        so every page is the same snapshot; pages follow namespace/name order like TrainJob lists."""
        self.count("list trials")
        feed = self.feed
        order = [i for i in feed.order if namespace is None or feed.jobs[i].namespace == namespace]
        try:
            start = int(query.get("continue") or 0)
        except ValueError:
            conn.send_json(400, status(400, "BadRequest", "invalid continue token"))
            return
        limit = int(query.get("limit") or 0)
        end = len(order) if limit <= 0 else min(len(order), start + limit)
        items = [dumps(trial(feed.jobs[i], str(500_000 + i), feed.created)) for i in order[start:end]]
        meta: dict[str, Any] = {"resourceVersion": str(feed.rv)}
        if end < len(order):
            meta["continue"] = str(end)
            meta["remainingItemCount"] = len(order) - end
        body = (
            '{"apiVersion":"kubeflow.org/v1beta1","items":['
            + ",".join(items)
            + '],"kind":"TrialList","metadata":'
        )
        conn.send_raw(200, (body + dumps(meta) + "}").encode())

    def control(self, conn: Conn, method: str, path: str, query: dict[str, str]) -> None:
        feed = self.feed
        if path == "/_bench/activate" and method == "POST":
            feed.activate(float(query.get("start_in") or 1.0))
            conn.send_json(200, {"rv": feed.rv})
        elif path == "/_bench/stop" and method == "POST":
            feed.updating = False
            conn.send_json(200, {"rv": feed.rv})
        elif path == "/_bench/stats":
            s = feed.stats
            conn.send_json(
                200,
                {
                    "rv": feed.rv,
                    "published": s.published,
                    "terminated": s.terminated,
                    "expired": s.expired,
                    "bookmarks": s.bookmarks,
                    "max_slip_s": s.max_slip_s,
                    "requests": s.requests,
                    "watch_starts": s.watch_starts,
                    "list_starts": s.list_starts,
                    "watchers": len(feed.watchers),
                    "history": len(feed.history),
                    "history_capacity": feed.capacity,
                    "chan_size": feed.chan,
                },
            )
        elif path == "/_bench/published":
            conn.send_json(200, feed.published_since(int(query.get("from") or 0)))
        else:
            conn.send_json(404, status(404, "NotFound", path))


REASONS = {200: "OK", 400: "Bad Request", 404: "Not Found", 405: "Method Not Allowed", 410: "Gone"}
_DATE = ["", 0.0]


def http_date() -> str:
    now = time.time()
    if now - _DATE[1] >= 1.0:
        _DATE[0], _DATE[1] = formatdate(now, usegmt=True), now
    return str(_DATE[0])


class Conn(asyncio.Protocol):
    """One client connection: keep-alive requests, at most one response in flight."""

    def __init__(self, server: Server) -> None:
        self.server = server
        self.buf = bytearray()
        self.transport: asyncio.Transport | None = None
        self.paused = False
        self.watch: WatchStream | None = None
        self.close_after = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        transport.set_write_buffer_limits(high=64 * 1024, low=16 * 1024)

    def connection_lost(self, exc: Exception | None) -> None:
        if self.watch is not None:
            self.watch.done = True
            if self.watch in self.server.feed.watchers:
                self.server.feed.watchers.remove(self.watch)
            self.watch = None
        self.transport = None

    def pause_writing(self) -> None:
        self.paused = True

    def resume_writing(self) -> None:
        self.paused = False
        if self.watch is not None:
            self.watch.flush()

    def is_paused(self) -> bool:
        return self.paused

    def write(self, data: bytes) -> None:
        if self.transport is not None and not self.transport.is_closing():
            self.transport.write(data)

    def data_received(self, data: bytes) -> None:
        self.buf += data
        self.process()

    def process(self) -> None:
        while self.watch is None and self.transport is not None:
            end = self.buf.find(b"\r\n\r\n")
            if end < 0:
                return
            lines = bytes(self.buf[:end]).decode("latin-1").split("\r\n")
            headers = {}
            for line in lines[1:]:
                key, _, value = line.partition(":")
                headers[key.strip().lower()] = value.strip()
            length = int(headers.get("content-length") or 0)
            if len(self.buf) < end + 4 + length:
                return
            del self.buf[: end + 4 + length]
            method, target, _ = lines[0].split(" ", 2)
            self.close_after = headers.get("connection", "").lower() == "close"
            self.server.route(self, method, target)

    def _head(self, code: int, extra: str) -> bytes:
        return (
            f"HTTP/1.1 {code} {REASONS.get(code, 'Error')}\r\nCache-Control: no-cache, private\r\n"
            f"Content-Type: application/json\r\nDate: {http_date()}\r\n{extra}\r\n"
        ).encode()

    def send_raw(self, code: int, body: bytes) -> None:
        self.write(self._head(code, f"Content-Length: {len(body)}\r\n") + body)
        self.finish_response()

    def send_json(self, code: int, body: Any) -> None:
        self.send_raw(code, json.dumps(body).encode())

    def start_chunked(self) -> None:
        self.write(self._head(200, "Transfer-Encoding: chunked\r\n"))

    def finish_response(self) -> None:
        if self.close_after and self.transport is not None:
            self.transport.close()
        elif self.buf and self.watch is None:
            asyncio.get_running_loop().call_soon(self.process)


async def serve(args: argparse.Namespace) -> None:
    experiments, jobs = fleet(args.jobs, trials_per_experiment=args.trials_per_experiment, seed=args.seed)
    created = rfc3339(time.time() - 3600)
    feed = Feed(jobs, created, period_s=args.period)
    feed.encoder.self_check()
    server = Server(feed, {(e.namespace, e.name): e for e in experiments}, args.trials_per_experiment)
    loop = asyncio.get_running_loop()
    listener = await loop.create_server(lambda: Conn(server), "127.0.0.1", args.port)
    port = listener.sockets[0].getsockname()[1]
    print(f"listening on 127.0.0.1:{port}", flush=True)
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    while not stop.is_set():
        feed.tick()
        await asyncio.sleep(args.tick)
    listener.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, required=True)
    parser.add_argument("--period", type=float, default=5.0, help="seconds between two updates of a job")
    parser.add_argument("--trials-per-experiment", type=int, default=100)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--tick", type=float, default=0.005, help="dispatch interval")
    asyncio.run(serve(parser.parse_args(argv)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
