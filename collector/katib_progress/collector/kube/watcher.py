"""List-then-watch of TrainJobs (trainer.kubeflow.org/v1alpha1), one loop per namespace scope.

Each scope (all namespaces, or one listed namespace) runs this loop in its own thread:

1. LIST (paged) -> every Trial-owned TrainJob is delivered as an upsert; TrainJobs remembered from an
   earlier list but now absent are delivered as deletions; the list's resourceVersion is kept.
2. WATCH from that resourceVersion with bookmarks. Each event is delivered, then its resourceVersion
   kept; BOOKMARKs only move the resourceVersion. When the stream ends (server timeout, dropped
   connection) the watch resumes from the kept resourceVersion.
3. ``410 Gone`` (ERROR event or HTTP status) -> back to 1. A re-list replays current objects; the
   snapshot pipeline recognises repeats, so nothing is written twice.
4. Other failures are classified (``katib_progress.core.errors``): temporary ones back off exponentially
   with jitter (honouring Retry-After), permanent ones (403, 404...) are logged at ERROR and retried
   at the maximum delay. A handler raising ``TemporaryError`` is treated the same way: the event's
   resourceVersion is not kept, so the event is delivered again after the backoff.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Iterator, Mapping
from datetime import datetime
from typing import Any

import urllib3
from kubernetes import client

from katib_progress.collector.backoff import Backoff
from katib_progress.collector.counters import Counters, CounterSpec
from katib_progress.collector.kube._client import classify
from katib_progress.collector.kube._model import Handler, JobEvent, Known, WatchSettings, slim
from katib_progress.collector.kube._owners import TrialRef, TrialResolver, trial_owner
from katib_progress.collector.kube.finalizer import holds
from katib_progress.core.errors import PermanentError, TemporaryError
from katib_progress.core.timefmt import parse_rfc3339

_log = logging.getLogger(__name__)

GROUP = "trainer.kubeflow.org"
VERSION = "v1alpha1"
PLURAL = "trainjobs"

LISTS = CounterSpec("watch_lists_total", "TrainJob lists", ("scope",))
WATCHES = CounterSpec("watch_connections_total", "TrainJob watch connections", ("scope",))
EVENTS = CounterSpec("watch_events_total", "TrainJob watch events", ("type",))
EXPIRED = CounterSpec("watch_expired_total", "watches expired (410 Gone): re-lists", ("scope",))
ERRORS = CounterSpec("watch_errors_total", "failed lists and watches", ("kind", "scope"))
IGNORED = CounterSpec("watch_jobs_ignored_total", "TrainJobs not collected", ("reason",))


class _Expired(Exception):
    """The resourceVersion is too old (410): re-list."""


def _lines(response: Any) -> Iterator[str]:
    buffer = b""
    for chunk in response.stream(amt=None, decode_content=False):
        buffer += chunk if isinstance(chunk, bytes) else str(chunk).encode()
        while b"\n" in buffer:
            line, buffer = buffer.split(b"\n", 1)
            if line.strip():
                yield line.decode("utf-8", errors="replace")
    if buffer.strip():
        yield buffer.decode("utf-8", errors="replace")


def _created(obj: Mapping[str, Any]) -> datetime | None:
    stamp = (obj.get("metadata") or {}).get("creationTimestamp")
    try:
        return parse_rfc3339(stamp, field="metadata.creationTimestamp") if stamp else None
    except ValueError:
        return None


class _Scope:
    """The list-then-watch loop of one namespace (or of the whole cluster when ``namespace`` is None)."""

    def __init__(self, owner: TrainJobWatcher, namespace: str | None) -> None:
        self._owner = owner
        self.namespace = namespace
        self.resource_version: str | None = None
        self._known: dict[str, Known] = {}  # uid -> what a deletion of a delivered job needs
        self._backoff = Backoff(owner.settings.backoff)
        self._response: Any = None
        self._lock = threading.Lock()
        self.synced = threading.Event()  # set once the first list was delivered

    @property
    def label(self) -> str:
        return self.namespace or "*"

    def interrupt(self) -> None:
        with self._lock:
            response = self._response
        if response is not None:
            response.shutdown()

    def run(self, iterations: int | None) -> None:
        owner = self._owner
        done = 0
        while not owner.stopping.is_set() and (iterations is None or done < iterations):
            done += 1
            try:
                if self.resource_version is None:
                    self._list()
                    self._backoff.reset()
                elif self._watch():
                    self._backoff.reset()
                else:  # the stream ended without a single line: do not spin on a server doing that
                    owner.stopping.wait(self._backoff.next_delay())
            except _Expired:
                owner.counters.inc(EXPIRED, scope=self.label)
                _log.info(
                    "watch of TrainJobs in %s expired at rv %s; re-listing",
                    self.label,
                    self.resource_version,
                    extra={"event": "watch_expired", "scope": self.label, "rv": self.resource_version},
                )
                if self.resource_version is None:  # the re-list itself expired: back off before the next
                    owner.stopping.wait(self._backoff.next_delay())
                self.resource_version = None
            except (
                client.ApiException,
                urllib3.exceptions.HTTPError,
                OSError,
                TemporaryError,
                PermanentError,
            ) as exc:
                self._failed(classify(exc))
            except Exception:  # noqa: BLE001 - outermost loop of this thread: log with traceback, count, carry on
                _log.exception("unexpected failure watching TrainJobs in %s", self.label)
                owner.counters.inc(ERRORS, kind="unexpected", scope=self.label)
                owner.stopping.wait(self._backoff.next_delay())

    def _failed(self, error: TemporaryError | PermanentError) -> None:
        owner = self._owner
        if owner.stopping.is_set():
            return
        if isinstance(error, TemporaryError):
            delay = self._backoff.next_delay(error.delay)
            owner.counters.inc(ERRORS, kind="temporary", scope=self.label)
            _log.warning(
                "TrainJobs in %s: %s; retrying in %.2fs",
                self.label,
                error,
                delay,
                extra={"event": "watch_error", "scope": self.label, "kind": "temporary", "delay_s": delay},
            )
        else:
            delay = owner.settings.backoff.max_s
            owner.counters.inc(ERRORS, kind="permanent", scope=self.label)
            _log.error(
                "TrainJobs in %s: %s; retrying in %.2fs",
                self.label,
                error,
                delay,
                extra={"event": "watch_error", "scope": self.label, "kind": "permanent", "delay_s": delay},
            )
        owner.stopping.wait(delay)

    # -- list ------------------------------------------------------------------------------------

    def _list_page(self, token: str | None) -> dict[str, Any]:
        api, s = self._owner.api, self._owner.settings
        kwargs: dict[str, Any] = {
            "limit": s.list_page_size,
            "_request_timeout": (s.connect_timeout_s, s.request_timeout_s),
        }
        if token:
            kwargs["_continue"] = token
        if self.namespace is None:
            return api.list_cluster_custom_object(GROUP, VERSION, PLURAL, **kwargs)
        return api.list_namespaced_custom_object(GROUP, VERSION, self.namespace, PLURAL, **kwargs)

    def _list(self) -> None:
        """List page by page (each page is delivered, then dropped), after one LIST of the Trials."""
        owner = self._owner
        owner.counters.inc(LISTS, scope=self.label)
        owner.trials.prefetch(self.namespace, owner.settings.list_page_size)
        seen: set[str] = set()
        token: str | None = None
        try:
            while True:
                try:
                    page = self._list_page(token)
                except client.ApiException as exc:
                    if exc.status == 410:  # the continue token expired: start over
                        raise _Expired() from exc
                    raise
                for obj in page.get("items") or ():
                    seen.add(str((obj.get("metadata") or {}).get("uid") or ""))
                    self._deliver("ADDED", obj)
                meta = page.get("metadata") or {}
                token = meta.get("continue") or None
                if token is None:
                    break
        finally:
            owner.trials.drop_prefetched()
        for uid, known in list(self._known.items()):
            if uid not in seen:
                self._deliver_delete(known.tombstone(uid))
        rv = str(meta.get("resourceVersion") or "")
        if not rv:
            raise TemporaryError("the TrainJob list carried no resourceVersion")
        self.resource_version = rv
        self.synced.set()
        _log.info(
            "listed %d TrainJob(s) in %s at rv %s",
            len(seen),
            self.label,
            rv,
            extra={"event": "listed", "scope": self.label, "count": len(seen), "rv": rv},
        )

    # -- watch -----------------------------------------------------------------------------------

    def _watch(self) -> bool:
        """One watch connection; True when it delivered at least one line."""
        api, s = self._owner.api, self._owner.settings
        kwargs: dict[str, Any] = {
            "watch": True,
            "resource_version": self.resource_version,
            "allow_watch_bookmarks": True,
            "timeout_seconds": s.watch_timeout_s,
            "_preload_content": False,
            "_request_timeout": (s.connect_timeout_s, s.watch_timeout_s + s.request_timeout_s),
        }
        self._owner.counters.inc(WATCHES, scope=self.label)
        try:
            if self.namespace is None:
                response = api.list_cluster_custom_object(GROUP, VERSION, PLURAL, **kwargs)
            else:
                response = api.list_namespaced_custom_object(GROUP, VERSION, self.namespace, PLURAL, **kwargs)
        except client.ApiException as exc:
            if exc.status == 410:
                raise _Expired() from exc
            raise
        with self._lock:
            self._response = response
        lines = 0
        try:
            if self._owner.stopping.is_set():  # stop() ran before the response could be interrupted
                return True
            for line in _lines(response):
                if self._owner.stopping.is_set():
                    return True
                lines += 1
                self._event(line)
            return lines > 0
        finally:
            with self._lock:
                self._response = None
            response.release_conn()

    def _event(self, line: str) -> None:
        try:
            event = json.loads(line)
        except json.JSONDecodeError:
            _log.warning("undecodable watch line skipped: %.200s", line)
            return
        kind, obj = event.get("type"), event.get("object") or {}
        self._owner.counters.inc(EVENTS, type=str(kind))
        if kind == "ERROR":
            code = int(obj.get("code") or 0)
            if code == 410:
                raise _Expired()
            raise classify(
                client.ApiException(status=code, reason=f"{obj.get('reason')}: {obj.get('message')}")
            )
        rv = (obj.get("metadata") or {}).get("resourceVersion")
        if kind in ("ADDED", "MODIFIED"):
            self._deliver(kind, obj)
        elif kind == "DELETED":
            self._deliver_delete(obj)
        elif kind != "BOOKMARK":
            _log.warning("unknown watch event type %r skipped", kind)
        if rv:
            self.resource_version = str(rv)
            self._backoff.reset()

    # -- delivery --------------------------------------------------------------------------------

    def _deliver(self, kind: str, obj: Mapping[str, Any]) -> None:
        owner = self._owner
        meta = obj.get("metadata") or {}
        namespace, name, uid = (
            str(meta.get("namespace") or ""),
            str(meta.get("name") or ""),
            str(meta.get("uid") or ""),
        )
        trial_ref = trial_owner(obj)
        if trial_ref is None:
            owner.counters.inc(IGNORED, reason="not_trial_owned")
            return
        known = self._known.get(uid)
        if known is not None and known.trial.uid == trial_ref[1] and known.trial.name == trial_ref[0]:
            trial: TrialRef | None = known.trial  # the owner is immutable in practice: no API read
            created = known.created
        else:
            trial = owner.trials.resolve(namespace, *trial_ref)
            created = _created(obj)
        if trial is None and meta.get("deletionTimestamp") and holds(meta):
            # Being deleted and held by our finalizer, its Trial already gone (e.g. while no collector
            # ran): delivered all the same, so that the collector lets it go (controller.py).
            trial = TrialRef(trial_ref[0], trial_ref[1], "")
        if trial is None:
            owner.counters.inc(IGNORED, reason="trial_unresolved")
            return
        owner.handler(JobEvent("upsert", namespace, name, uid, trial, created, slim(obj)))
        if known is None or known.trial is not trial:
            self._known[uid] = Known(namespace, name, trial, created)

    def _deliver_delete(self, obj: Mapping[str, Any]) -> None:
        meta = obj.get("metadata") or {}
        uid = str(meta.get("uid") or "")
        known = self._known.get(uid)
        if known is None:
            trial_ref = trial_owner(obj)
            if trial_ref is None:
                return
            cached = self._owner.trials.cached(trial_ref[1])
            trial = cached or TrialRef(trial_ref[0], trial_ref[1], "")
        else:
            trial = known.trial
        namespace, name = str(meta.get("namespace") or ""), str(meta.get("name") or "")
        created = known.created if known is not None else _created(obj)
        self._owner.handler(JobEvent("delete", namespace, name, uid, trial, created, slim(obj)))
        self._known.pop(uid, None)


class TrainJobWatcher:
    """Delivers Trial-owned TrainJobs to ``handler`` (called from one thread per namespace scope)."""

    def __init__(
        self,
        api_client: client.ApiClient,
        handler: Handler,
        *,
        settings: WatchSettings | None = None,
        counters: Counters | None = None,
    ) -> None:
        self.settings = settings or WatchSettings()
        self.api = client.CustomObjectsApi(api_client)
        self.handler = handler
        self.counters = counters if counters is not None else Counters()
        self.trials = TrialResolver(
            api_client,
            max_entries=self.settings.trial_cache_size,
            request_timeout_s=self.settings.request_timeout_s,
        )
        self.stopping = threading.Event()
        names = self.settings.namespaces
        self._scopes = [_Scope(self, ns) for ns in dict.fromkeys(names)] if names else [_Scope(self, None)]

    @property
    def resource_versions(self) -> dict[str, str | None]:
        """The resourceVersion each scope would resume from ("*" for all namespaces)."""
        return {scope.label: scope.resource_version for scope in self._scopes}

    def has_synced(self) -> bool:
        """True once every scope has listed (and delivered) the existing TrainJobs at least once.

        Status writes made before that are seen only as their latest snapshot (the list)."""
        return all(scope.synced.is_set() for scope in self._scopes)

    def run(self, _iterations: int | None = None) -> None:
        """Block until ``stop()``; ``_iterations`` bounds each scope's list/watch rounds (tests)."""
        if len(self._scopes) == 1:
            self._scopes[0].run(_iterations)
            return
        threads = [
            threading.Thread(target=scope.run, args=(_iterations,), name=f"watch-{scope.label}", daemon=True)
            for scope in self._scopes
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()

    def stop(self) -> None:
        """Ask every scope to finish; an open watch stream is shut down at once."""
        self.stopping.set()
        for scope in self._scopes:
            scope.interrupt()
