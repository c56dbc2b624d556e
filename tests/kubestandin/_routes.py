"""Request routing, the request log record, fault rules and list pagination."""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass
from typing import Any, NamedTuple

from tests.kubestandin._resources import ApiError


class Request(NamedTuple):
    """One logged request, in RBAC terms."""

    verb: str  # get, list, watch, create, update, patch, delete, deletecollection
    group: str
    resource: str
    subresource: str
    namespace: str


@dataclass
class FailRule:
    remaining: int
    status: int
    path: str | None
    hang: float
    retry_after: int | None


@dataclass(frozen=True)
class Route:
    group: str
    version: str
    namespace: str | None
    plural: str
    name: str | None
    subresource: str


def flag(value: str | None) -> bool:
    """A boolean query parameter as Go's strconv.ParseBool reads it."""
    return (value or "").lower() in ("1", "t", "true")


def parse_route(path: str) -> Route | None:
    parts = [p for p in path.split("/") if p]
    if len(parts) >= 3 and parts[0] == "api":
        group, version, rest = "", parts[1], parts[2:]
    elif len(parts) >= 4 and parts[0] == "apis":
        group, version, rest = parts[1], parts[2], parts[3:]
    else:
        return None
    namespace = None
    if len(rest) >= 3 and rest[0] == "namespaces":
        namespace, rest = rest[1], rest[2:]
    if not 1 <= len(rest) <= 3:
        return None
    return Route(
        group,
        version,
        namespace,
        rest[0],
        rest[1] if len(rest) > 1 else None,
        rest[2] if len(rest) > 2 else "",
    )


def paginate(
    items: list[dict[str, Any]], rv: int, query: dict[str, str], compacted_rv: int
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """``limit``/``continue``: pages in namespace/name order; a token older than the compaction is 410.

    Unlike the real server, later pages show the current state, not a snapshot at the first page's rv.
    """
    meta: dict[str, Any] = {"resourceVersion": str(rv)}
    token = query.get("continue")
    if token:
        try:
            state = json.loads(base64.urlsafe_b64decode(token.encode()))
            list_rv, after = int(state["rv"]), tuple(state["after"])
        except (ValueError, KeyError, TypeError):
            raise ApiError(400, "BadRequest", "invalid continue token") from None
        if list_rv < compacted_rv:
            raise ApiError(
                410,
                "Expired",
                "The provided continue parameter is too old to display a consistent list result.",
            )
        meta["resourceVersion"] = str(list_rv)
        items = [i for i in items if _item_key(i) > after]
    limit = int(query.get("limit") or 0)
    if 0 < limit < len(items):
        state = {"rv": int(meta["resourceVersion"]), "after": list(_item_key(items[limit - 1]))}
        meta["continue"] = base64.urlsafe_b64encode(json.dumps(state).encode()).decode()
        meta["remainingItemCount"] = len(items) - limit
        items = items[:limit]
    return meta, items


def _item_key(item: dict[str, Any]) -> tuple[str, str]:
    meta = item.get("metadata") or {}
    return str(meta.get("namespace") or ""), str(meta.get("name") or "")
