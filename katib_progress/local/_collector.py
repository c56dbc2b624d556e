"""``spec.metricsCollectorSpec``: Katib's defaulting and validation, and what a local sweep supports.

Defaults from pkg/apis/controller/experiments/v1beta1/experiment_defaults.go
(``setDefaultMetricsCollector``): no collector -> ``StdOut``; ``File`` -> fileSystemPath kind ``File``,
path ``/var/log/katib/metrics.log``, format ``TEXT``. Checks from
pkg/webhook/v1beta1/experiment/validator/validator.go (``validateMetricsCollector``): a File collector
needs an absolute file path and format TEXT or JSON, a JSON file takes no filter, and each filter must
compile and have two top subexpressions.
"""

from __future__ import annotations

import re
from typing import Any

from katib_progress.core.errors import ConfigError
from katib_progress.local._model import ExperimentDoc
from katib_progress.local._textmetrics import Collector

DEFAULT_FILE_PATH = "/var/log/katib/metrics.log"
_SPEC = "spec.metricsCollectorSpec"
_TWO_GROUPS = re.compile(r".*\(.*\).*\(.*\).*")
_NOT_LOCAL = ("TensorFlowEvent", "PrometheusMetric", "Custom", "None")


def collector_of(doc: ExperimentDoc) -> Collector:
    spec = doc.spec.metrics_collector_spec
    collector: dict[str, Any] = dict((spec.collector if spec else None) or {})
    source: dict[str, Any] = dict((spec.source if spec else None) or {})
    kind = collector.get("kind") or "StdOut"
    if kind in _NOT_LOCAL:
        raise ConfigError(
            f"{_SPEC}.collector.kind",
            f"{kind}: not supported by a local sweep; use Push (the Kubeflow SDK's update_trainjob_status), "
            "StdOut or File",
        )
    if kind not in ("Push", "StdOut", "File"):
        raise ConfigError(f"{_SPEC}.collector.kind", f"invalid metrics collector kind: {kind!r}")
    filters = _filters(source)
    if kind != "File":
        return Collector(kind=kind, filters=filters)
    path_spec = dict(source.get("fileSystemPath") or {})
    path = str(path_spec.get("path") or DEFAULT_FILE_PATH)
    if (path_spec.get("kind") or "File") != "File" or not path.startswith("/"):
        raise ConfigError(
            f"{_SPEC}.source.fileSystemPath.path",
            f"file path where metrics file exists is required (an absolute path), got {path!r}",
        )
    fmt = path_spec.get("format") or "TEXT"
    if fmt not in ("TEXT", "JSON"):
        raise ConfigError(f"{_SPEC}.source.fileSystemPath.format", f"must be TEXT or JSON, got {fmt!r}")
    if fmt == "JSON" and filters:
        raise ConfigError(f"{_SPEC}.source.filter", "filter must be nil when format of metrics file is json")
    return Collector(kind="File", path=path, format=fmt, filters=filters)


def _filters(source: dict[str, Any]) -> tuple[str, ...]:
    formats = (source.get("filter") or {}).get("metricsFormat") or []
    if not isinstance(formats, list):
        raise ConfigError(f"{_SPEC}.source.filter.metricsFormat", "must be a list of regular expressions")
    for i, text in enumerate(formats):
        where = f"{_SPEC}.source.filter.metricsFormat[{i}]"
        try:
            re.compile(str(text), re.ASCII)
        except re.error as exc:
            raise ConfigError(where, f"invalid filter: {exc}") from None
        if not _TWO_GROUPS.match(str(text)):
            raise ConfigError(where, f"two top subexpressions are required, got {text!r}")
    return tuple(str(t) for t in formats)
