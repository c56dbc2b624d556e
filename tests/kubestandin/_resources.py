"""Resource types the stand-in serves, API errors as Status objects, metadata validation."""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from tests.kubestandin._schema import Cause, CrdSchema

CRD_DIR = Path(__file__).with_name("crds")

_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_LABEL_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")


@dataclass(frozen=True)
class ResourceType:
    group: str  # "" for the core group
    version: str
    plural: str
    kind: str
    namespaced: bool = True
    status_subresource: bool = False
    schema: CrdSchema | None = field(default=None, compare=False, repr=False)

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def key(self) -> tuple[str, str]:
        return (self.group, self.plural)

    def qualified(self) -> str:
        return f"{self.kind}.{self.group}" if self.group else self.kind


class ApiError(Exception):
    """An API failure, rendered as a ``Status`` object with ``code``."""

    def __init__(
        self,
        code: int,
        reason: str,
        message: str,
        *,
        details: dict[str, Any] | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.reason = reason
        self.message = message
        self.details = details
        self.headers = headers or {}

    def status(self) -> dict[str, Any]:
        body: dict[str, Any] = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        }
        if self.details is not None:
            body["details"] = self.details
        return body


def resource_name(rtype: ResourceType) -> str:
    return f"{rtype.plural}.{rtype.group}" if rtype.group else rtype.plural


def not_found(rtype: ResourceType, name: str) -> ApiError:
    return ApiError(
        404,
        "NotFound",
        f'{resource_name(rtype)} "{name}" not found',
        details={"name": name, "group": rtype.group, "kind": rtype.plural},
    )


def invalid(rtype: ResourceType, name: str, causes: list[Cause]) -> ApiError:
    summary = ", ".join(f"{c.field}: {c.message}" if c.field else c.message for c in causes)
    return ApiError(
        422,
        "Invalid",
        f'{rtype.qualified()} "{name}" is invalid: {summary}',
        details={
            "name": name,
            "group": rtype.group,
            "kind": rtype.kind,
            "causes": [{"reason": c.reason, "message": c.message, "field": c.field} for c in causes],
        },
    )


def validate_metadata(meta: dict[str, Any], *, namespaced: bool) -> list[Cause]:
    causes: list[Cause] = []
    name = meta.get("name")
    if not name:
        causes.append(
            Cause("FieldValueRequired", "metadata.name", "Required value: name or generateName is required")
        )
    elif not isinstance(name, str) or len(name) > 253 or not _DNS_SUBDOMAIN.match(name):
        causes.append(
            Cause(
                "FieldValueInvalid",
                "metadata.name",
                f"Invalid value: {name!r}: a lowercase RFC 1123 subdomain must consist of lower case "
                "alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character",
            )
        )
    namespace = meta.get("namespace")
    if namespaced and (not isinstance(namespace, str) or not _DNS_LABEL.match(namespace)):
        causes.append(Cause("FieldValueInvalid", "metadata.namespace", f"Invalid value: {namespace!r}"))
    for kind in ("labels", "annotations"):
        entries = meta.get(kind) or {}
        if not isinstance(entries, dict):
            causes.append(Cause("FieldValueInvalid", f"metadata.{kind}", "must be a map of string to string"))
            continue
        for key, value in entries.items():
            name_part = key.rsplit("/", 1)[-1]
            if len(name_part) > 63 or not _LABEL_NAME.match(name_part):
                causes.append(Cause("FieldValueInvalid", f"metadata.{kind}", f"Invalid value: {key!r}"))
            if not isinstance(value, str):
                causes.append(Cause("FieldValueInvalid", f"metadata.{kind}[{key}]", "must be a string"))
            elif kind == "labels" and value and (len(value) > 63 or not _LABEL_NAME.match(value)):
                causes.append(Cause("FieldValueInvalid", "metadata.labels", f"Invalid value: {value!r}"))
    return causes


@functools.cache
def _crd_types(path: Path) -> tuple[ResourceType, ...]:
    return tuple(load_crd(path))


def load_crd(path: Path) -> list[ResourceType]:
    """One ResourceType per served version of the CRD in ``path`` (schemas are read-only, so shareable)."""
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    doc = yaml.load(path.read_text(), Loader=loader)
    spec = doc["spec"]
    types = []
    for version in spec["versions"]:
        if not version.get("served", True):
            continue
        openapi = (version.get("schema") or {}).get("openAPIV3Schema")
        types.append(
            ResourceType(
                group=spec["group"],
                version=version["name"],
                plural=spec["names"]["plural"],
                kind=spec["names"]["kind"],
                namespaced=spec.get("scope", "Namespaced") == "Namespaced",
                status_subresource="status" in (version.get("subresources") or {}),
                schema=CrdSchema(openapi) if openapi else None,
            )
        )
    return types


def default_resources() -> list[ResourceType]:
    types: list[ResourceType] = []
    for path in sorted(CRD_DIR.glob("*.yaml")):
        types.extend(_crd_types(path))
    types += [
        ResourceType("", "v1", "events", "Event"),
        ResourceType("events.k8s.io", "v1", "events", "Event"),
        ResourceType("coordination.k8s.io", "v1", "leases", "Lease"),
        ResourceType("", "v1", "configmaps", "ConfigMap"),
    ]
    return types
