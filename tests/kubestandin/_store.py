"""The object store: one global resourceVersion, an event history for watches, write semantics."""

from __future__ import annotations

import bisect
import copy
import secrets
import string
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from tests.kubestandin._resources import (
    ApiError,
    ResourceType,
    invalid,
    not_found,
    resource_name,
    validate_metadata,
)
from tests.kubestandin._schema import Cause, format_time
from tests.kubestandin._selectors import Selector

_SERVER_META = ("uid", "creationTimestamp", "resourceVersion", "generation", "deletionTimestamp")


@dataclass(frozen=True, slots=True)
class Event:
    rv: int
    type: str  # ADDED, MODIFIED, DELETED
    key: tuple[str, str]
    namespace: str
    obj: dict[str, Any]


@dataclass
class WatchCursor:
    rtype: ResourceType
    namespace: str | None
    selector: Selector
    position: int  # index into the history of the next event to look at
    epoch: int
    initial: list[dict[str, Any]] = field(default_factory=list)
    rv: int = 0  # the last resourceVersion this watch has delivered or skipped past

    def matches(self, event: Event) -> bool:
        return (
            event.key == self.rtype.key
            and (self.namespace is None or event.namespace == self.namespace)
            and self.selector.matches(event.obj)
        )


class Store:
    def __init__(self, types: list[ResourceType]) -> None:
        self._types = {(t.group, t.version, t.plural): t for t in types}
        self._cond = threading.Condition()
        self._objects: dict[tuple[str, str], dict[tuple[str, str], dict[str, Any]]] = {}
        self._rv = 0
        self._history: list[Event] = []
        self._history_rvs: list[int] = []
        self.compacted_rv = 0
        self._epoch = 0
        self._abrupt: dict[int, bool] = {}

    # -- lookup --------------------------------------------------------------------------------

    def register(self, rtype: ResourceType) -> None:
        with self._cond:
            self._types[(rtype.group, rtype.version, rtype.plural)] = rtype

    def resolve(self, group: str, version: str, plural: str) -> ResourceType:
        try:
            return self._types[(group, version, plural)]
        except KeyError:
            raise ApiError(404, "NotFound", "the server could not find the requested resource") from None

    def served(self) -> list[tuple[str, str, str]]:
        with self._cond:
            return list(self._types)

    def discovery(self, group: str, version: str) -> dict[str, Any]:
        """An APIResourceList for ``group/version``."""
        verbs = ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"]
        resources: list[dict[str, Any]] = []
        with self._cond:
            for (g, v, _), rtype in sorted(self._types.items()):
                if (g, v) != (group, version):
                    continue
                resources.append(
                    {
                        "name": rtype.plural,
                        "singularName": rtype.kind.lower(),
                        "namespaced": rtype.namespaced,
                        "kind": rtype.kind,
                        "verbs": verbs,
                    }
                )
                if rtype.status_subresource:
                    resources.append(
                        {
                            "name": f"{rtype.plural}/status",
                            "singularName": "",
                            "namespaced": rtype.namespaced,
                            "kind": rtype.kind,
                            "verbs": ["get", "patch", "update"],
                        }
                    )
        return {
            "kind": "APIResourceList",
            "apiVersion": "v1",
            "groupVersion": rtype_gv(group, version),
            "resources": resources,
        }

    @property
    def resource_version(self) -> int:
        with self._cond:
            return self._rv

    def _bucket(self, rtype: ResourceType) -> dict[tuple[str, str], dict[str, Any]]:
        return self._objects.setdefault(rtype.key, {})

    def _view(self, rtype: ResourceType, obj: dict[str, Any]) -> dict[str, Any]:
        result = copy.deepcopy(obj)
        result["apiVersion"] = rtype.api_version
        result["kind"] = rtype.kind
        return result

    # -- reads -----------------------------------------------------------------------------------

    def get(self, rtype: ResourceType, namespace: str, name: str) -> dict[str, Any]:
        with self._cond:
            obj = self._bucket(rtype).get((namespace, name))
            if obj is None:
                raise not_found(rtype, name)
            return self._view(rtype, obj)

    def list_objects(
        self, rtype: ResourceType, namespace: str | None, selector: Selector
    ) -> tuple[list[dict[str, Any]], int]:
        with self._cond:
            items = [
                self._view(rtype, obj)
                for (ns, _), obj in sorted(self._bucket(rtype).items())
                if (namespace is None or ns == namespace) and selector.matches(obj)
            ]
            return items, self._rv

    # -- writes ----------------------------------------------------------------------------------

    def create(
        self, rtype: ResourceType, namespace: str, body: dict[str, Any], *, strict: bool
    ) -> dict[str, Any]:
        obj = copy.deepcopy(body)
        meta = obj.setdefault("metadata", {})
        if not isinstance(meta, dict):
            raise ApiError(400, "BadRequest", "metadata must be an object")
        if rtype.namespaced:
            if meta.get("namespace") not in (None, "", namespace):
                raise ApiError(
                    400, "BadRequest", "the namespace of the provided object does not match the request"
                )
            meta["namespace"] = namespace
        if not meta.get("name") and meta.get("generateName"):
            alphabet = string.ascii_lowercase + string.digits
            meta["name"] = meta["generateName"] + "".join(secrets.choice(alphabet) for _ in range(5))
        for key in _SERVER_META:
            meta.pop(key, None)
        if rtype.status_subresource:
            obj.pop("status", None)
        with self._cond:
            name = meta.get("name") or ""
            if (namespace, name) in self._bucket(rtype):
                raise ApiError(
                    409,
                    "AlreadyExists",
                    f'{resource_name(rtype)} "{name}" already exists',
                    details={"name": name, "group": rtype.group, "kind": rtype.plural},
                )
            obj = self._admit(rtype, obj, None, strict=strict)
            meta = obj["metadata"]
            meta["uid"] = str(uuid.uuid4())
            meta["creationTimestamp"] = format_time(datetime.now(UTC))
            meta["generation"] = 1
            return self._commit(rtype, namespace, obj, "ADDED")

    def update(
        self,
        rtype: ResourceType,
        namespace: str,
        name: str,
        body: dict[str, Any],
        *,
        subresource: str | None,
        strict: bool,
        precondition_rv: str | None = None,
    ) -> dict[str, Any]:
        with self._cond:
            old = self._bucket(rtype).get((namespace, name))
            if old is None:
                raise not_found(rtype, name)
            wanted_rv = precondition_rv or (body.get("metadata") or {}).get("resourceVersion")
            if wanted_rv and str(wanted_rv) != old["metadata"]["resourceVersion"]:
                raise ApiError(
                    409,
                    "Conflict",
                    f'Operation cannot be fulfilled on {resource_name(rtype)} "{name}": the object has been '
                    "modified; please apply your changes to the latest version and try again",
                    details={"name": name, "group": rtype.group, "kind": rtype.plural},
                )
            body_meta = body.get("metadata") or {}
            if body_meta.get("name", name) != name or body_meta.get("namespace", namespace) not in (
                namespace,
                "",
            ):
                raise ApiError(400, "BadRequest", "the name of the object does not match the name on the URL")
            new = self._merge_for_write(rtype, old, body, subresource)
            new = self._admit(rtype, new, old, strict=strict)
            if _same(new, old):
                return self._view(rtype, old)
            if subresource is None and _spec_changed(new, old):
                new["metadata"]["generation"] = old["metadata"].get("generation", 1) + 1
            if new["metadata"].get("deletionTimestamp") and not new["metadata"].get("finalizers"):
                self._commit(rtype, namespace, new, "MODIFIED")
                return self._remove(rtype, namespace, name)
            return self._commit(rtype, namespace, new, "MODIFIED")

    def patch(
        self,
        rtype: ResourceType,
        namespace: str,
        name: str,
        apply: Callable[[dict[str, Any]], dict[str, Any]],
        *,
        subresource: str | None,
        strict: bool,
        precondition_rv: str | None,
    ) -> dict[str, Any]:
        """Patch atomically: ``apply`` maps the current object to the wanted one (under the lock)."""
        with self._cond:
            current = self.get(rtype, namespace, name)
            wanted = apply(current)
            if not isinstance(wanted, dict):
                raise ApiError(422, "Invalid", "the patch produced a non-object document")
            wanted.setdefault("metadata", {})["resourceVersion"] = (
                precondition_rv or current["metadata"]["resourceVersion"]
            )
            return self.update(rtype, namespace, name, wanted, subresource=subresource, strict=strict)

    def delete(self, rtype: ResourceType, namespace: str, name: str) -> dict[str, Any]:
        with self._cond:
            old = self._bucket(rtype).get((namespace, name))
            if old is None:
                raise not_found(rtype, name)
            if old["metadata"].get("finalizers"):
                if old["metadata"].get("deletionTimestamp"):
                    return self._view(rtype, old)
                new = copy.deepcopy(old)
                new["metadata"]["deletionTimestamp"] = format_time(datetime.now(UTC))
                return self._commit(rtype, namespace, new, "MODIFIED")
            return self._remove(rtype, namespace, name)

    def _remove(self, rtype: ResourceType, namespace: str, name: str) -> dict[str, Any]:
        obj = self._bucket(rtype).pop((namespace, name))
        obj = copy.deepcopy(obj)
        self._rv += 1
        obj["metadata"]["resourceVersion"] = str(self._rv)
        self._record(Event(self._rv, "DELETED", rtype.key, namespace, self._view(rtype, obj)))
        return self._view(rtype, obj)

    def _merge_for_write(
        self, rtype: ResourceType, old: dict[str, Any], body: dict[str, Any], subresource: str | None
    ) -> dict[str, Any]:
        if subresource == "status":
            new = copy.deepcopy(old)
            if "status" in body:
                new["status"] = copy.deepcopy(body["status"])
            else:
                new.pop("status", None)
            return new
        new = copy.deepcopy(body)
        new.setdefault("metadata", {})
        for key in (*_SERVER_META, "name", "namespace"):
            if key in old["metadata"]:
                new["metadata"][key] = old["metadata"][key]
        if rtype.status_subresource:
            if "status" in old:
                new["status"] = copy.deepcopy(old["status"])
            else:
                new.pop("status", None)
        return new

    def _admit(
        self, rtype: ResourceType, obj: dict[str, Any], old: dict[str, Any] | None, *, strict: bool
    ) -> dict[str, Any]:
        obj.pop("apiVersion", None)
        obj.pop("kind", None)
        causes: list[Cause] = validate_metadata(obj["metadata"], namespaced=rtype.namespaced)
        schema = rtype.schema
        if schema is not None:
            obj, dropped = schema.prune(obj)
            if strict:
                causes += [Cause("FieldValueInvalid", path, "unknown field") for path in dropped]
            obj = schema.normalise_times(schema.apply_defaults(obj))
            view = {**obj, "apiVersion": rtype.api_version, "kind": rtype.kind}
            old_view = None if old is None else {**old, "apiVersion": rtype.api_version, "kind": rtype.kind}
            causes += schema.validate(view, old_view)
        if old is not None and (rtype.group, rtype.plural) == ("events.k8s.io", "events"):
            causes += _event_update_causes(obj, old)
        if causes:
            raise invalid(rtype, str(obj["metadata"].get("name", "")), causes)
        return obj

    def _commit(self, rtype: ResourceType, namespace: str, obj: dict[str, Any], kind: str) -> dict[str, Any]:
        self._rv += 1
        obj["metadata"]["resourceVersion"] = str(self._rv)
        self._bucket(rtype)[(namespace, obj["metadata"]["name"])] = obj
        view = self._view(rtype, obj)
        self._record(Event(self._rv, kind, rtype.key, namespace, view))
        return copy.deepcopy(view)

    def _record(self, event: Event) -> None:
        self._history.append(event)
        self._history_rvs.append(event.rv)
        self._cond.notify_all()

    # -- watches ---------------------------------------------------------------------------------

    def open_watch(
        self, rtype: ResourceType, namespace: str | None, selector: Selector, resource_version: str | None
    ) -> WatchCursor:
        """Start a watch; raise ApiError(410) when ``resource_version`` is older than the compaction."""
        with self._cond:
            if resource_version in (None, "", "0"):
                items, _ = self.list_objects(rtype, namespace, selector)
                return WatchCursor(
                    rtype, namespace, selector, len(self._history), self._epoch, initial=items, rv=self._rv
                )
            try:
                start = int(resource_version)
            except ValueError:
                raise ApiError(400, "BadRequest", f"invalid resource version {resource_version!r}") from None
            if start < self.compacted_rv:
                raise ApiError(410, "Expired", f"too old resource version: {start} ({self.compacted_rv})")
            position = bisect.bisect_right(self._history_rvs, start)
            return WatchCursor(rtype, namespace, selector, position, self._epoch, rv=start)

    def next_events(self, cursor: WatchCursor, timeout: float) -> list[Event] | None:
        """Events for ``cursor`` (waiting up to ``timeout``); None once the watch was closed."""
        with self._cond:
            end = time.monotonic() + timeout
            while True:
                if cursor.epoch != self._epoch:
                    return None
                found = []
                while cursor.position < len(self._history):
                    event = self._history[cursor.position]
                    cursor.position += 1
                    cursor.rv = event.rv
                    if cursor.matches(event):
                        found.append(event)
                if found:
                    return found
                cursor.rv = max(cursor.rv, self._rv)
                remaining = end - time.monotonic()
                if remaining <= 0:
                    return []
                self._cond.wait(remaining)

    def close_watches(self, *, abrupt: bool = False) -> None:
        with self._cond:
            self._abrupt[self._epoch] = abrupt
            self._epoch += 1
            self._cond.notify_all()

    def closed_abruptly(self, cursor: WatchCursor) -> bool:
        with self._cond:
            return self._abrupt.get(cursor.epoch, False)

    def expire(self, older_than: int | None) -> int:
        with self._cond:
            self.compacted_rv = self._rv if older_than is None else older_than
            return self.compacted_rv


def rtype_gv(group: str, version: str) -> str:
    return f"{group}/{version}" if group else version


def _strip(obj: dict[str, Any]) -> dict[str, Any]:
    result = {k: v for k, v in obj.items() if k != "metadata"}
    result["metadata"] = {
        k: v for k, v in obj["metadata"].items() if k not in ("resourceVersion", "managedFields")
    }
    return result


def _same(new: dict[str, Any], old: dict[str, Any]) -> bool:
    return _strip(new) == _strip(old)


def _spec_changed(new: dict[str, Any], old: dict[str, Any]) -> bool:
    def body(obj: dict[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in obj.items() if k not in ("metadata", "status")}

    return body(new) != body(old)


# kubernetes pkg/apis/core/validation/events.go, ValidateEventUpdate: through events.k8s.io/v1 these
# fields never change (note is the core Event's message); eventTime is compared at microseconds; a
# changed series needs count >= 2 (minEventSeriesCount) and a lastObservedTime (validateV1EventSeries).
_EVENT_IMMUTABLE = (
    "regarding", "reason", "note", "type", "action", "related", "reportingController",
    "reportingInstance", "eventTime", "deprecatedSource", "deprecatedFirstTimestamp",
    "deprecatedLastTimestamp", "deprecatedCount",
)  # fmt: skip


def _event_update_causes(new: dict[str, Any], old: dict[str, Any]) -> list[Cause]:
    causes = [
        Cause("FieldValueInvalid", key, "field is immutable")
        for key in _EVENT_IMMUTABLE
        if new.get(key) != old.get(key)
    ]
    series = new.get("series")
    if series != old.get("series") and series is not None:
        if int(series.get("count") or 0) < 2:
            causes.append(Cause("FieldValueInvalid", "series.count", "should be at least 2"))
        if not series.get("lastObservedTime"):
            causes.append(Cause("FieldValueRequired", "series.lastObservedTime", "Required value"))
    return causes
