"""The early-stopping process's pruning history: what a restarted engine is rebuilt from.

``ClusterHistory(api_client, namespace, reader)`` is the hub's ``HistoryLoader``
(katib_progress.suggestion.pruning.service.PruningHub): when the hub first meets an experiment it

1. lists the experiment's Trials in the pod's namespace by Katib's label
   ``katib.kubeflow.org/experiment=<experiment>`` (pkg/controller.v1beta1/consts/const.go
   ``LabelExperimentName``). The early-stopping container runs under the suggestion's ServiceAccount,
   whose Role grants every verb (``*``, so ``list``) on ``trials`` and ``trials/status`` in that
   namespace (pkg/controller.v1beta1/suggestion/composer/composer.go ``DesiredRBAC``);
2. takes each Trial's end from its conditions as Katib reads them (``hasCondition``: type with
   status ``"True"``, pkg/apis/controller/trials/v1beta1/util.go): ``EarlyStopped`` -> pruned,
   ``Succeeded`` -> complete, ``Failed``/``Killed``/``MetricsUnavailable`` -> failed; any other
   Trial is still running;
3. reads every stored observation row of each Trial from Katib's DB manager (``GetObservationLog``
   with an empty metric name) and turns them into progress points
   (katib_progress.suggestion.pruning.restore.points_from_rows).

All or nothing: when the Kubernetes API or the DB manager cannot answer, the loader logs a warning
and returns None, so the hub starts the experiment's engine empty (as before this loader existed)
rather than from part of its history. The service never fails because of it.

The DB manager address follows Katib's ``GetDBManagerAddr`` (pkg/common/v1beta1/katib_manager_util.go
with the defaults of pkg/controller.v1beta1/consts/const.go): ``$KATIB_DB_MANAGER_SERVICE_IP``
(``katib-db-manager``) ``.`` ``$KATIB_DB_MANAGER_SERVICE_NAMESPACE`` (``$KATIB_CORE_NAMESPACE``,
``kubeflow``) ``:`` ``$KATIB_DB_MANAGER_SERVICE_PORT`` (``6789``): ``katib-db-manager.kubeflow:6789``,
the address Katib's suggestion client sends as ``db_manager_address`` (suggestionclient.go).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Mapping
from typing import Any, Protocol

import urllib3
from kubernetes import client

from katib_progress.collector.kube import classify
from katib_progress.collector.rows import MetricRow
from katib_progress.core.errors import ConfigError, PermanentError, TemporaryError
from katib_progress.core.names import EXPERIMENT_LABEL
from katib_progress.core.types import ProgressPoint
from katib_progress.suggestion.pruning.restore import points_from_rows

_log = logging.getLogger(__name__)

KATIB = ("kubeflow.org", "v1beta1")
#: condition type -> the end the engine is told, checked in this order (an early-stopped Trial stays pruned)
_ENDS = (
    ("EarlyStopped", "pruned"),
    ("Succeeded", "complete"),
    ("Failed", "failed"),
    ("Killed", "failed"),
    ("MetricsUnavailable", "failed"),
)


class RowsReader(Protocol):
    """Every stored row of a trial (``collector.katib.readback.StoredRowsReader.all_rows``)."""

    def all_rows(self, trial: str) -> list[MetricRow]: ...


def default_db_manager_address(env: Mapping[str, str] = os.environ) -> str:
    """Katib's ``GetDBManagerAddr`` (see the module docstring)."""
    namespace = env.get("KATIB_DB_MANAGER_SERVICE_NAMESPACE") or env.get("KATIB_CORE_NAMESPACE") or "kubeflow"
    host = env.get("KATIB_DB_MANAGER_SERVICE_IP") or "katib-db-manager"
    port = env.get("KATIB_DB_MANAGER_SERVICE_PORT") or "6789"
    return f"{host}.{namespace}:{port}" if namespace else f"{host}:{port}"


def trial_end(trial: Mapping[str, Any]) -> str | None:
    """The Trial's end for the engine (``pruned``/``complete``/``failed``), None while it runs."""
    conditions = (trial.get("status") or {}).get("conditions") or ()
    true = {c.get("type") for c in conditions if isinstance(c, Mapping) and c.get("status") == "True"}
    for kind, end in _ENDS:
        if kind in true:
            return end
    return None


class ClusterHistory:
    """The hub's history loader in a cluster (see the module docstring).

    ``api_client()`` builds (or returns) the Kubernetes client; it is called on first use so that a
    missing configuration only empties the engine, like any other load failure."""

    def __init__(
        self,
        api_client: Callable[[], client.ApiClient],
        namespace: str,
        reader: RowsReader,
        *,
        request_timeout_s: float = 10.0,
    ) -> None:
        self._api_client = api_client
        self.namespace = namespace
        self._reader = reader
        self._timeout = request_timeout_s

    def _trials(self, experiment: str) -> list[dict[str, Any]]:
        api = client.CustomObjectsApi(self._api_client())
        try:
            listed = api.list_namespaced_custom_object(
                *KATIB,
                self.namespace,
                "trials",
                label_selector=f"{EXPERIMENT_LABEL}={experiment}",
                _request_timeout=self._timeout,
            )
        except (client.ApiException, urllib3.exceptions.HTTPError, OSError) as exc:
            raise classify(exc) from exc
        return [dict(item) for item in listed.get("items") or ()]

    def load(self, experiment: str) -> tuple[list[ProgressPoint], dict[str, str]]:
        """Every stored point and every end of ``experiment``; raises on any failure."""
        points: list[ProgressPoint] = []
        ends: dict[str, str] = {}
        for trial in self._trials(experiment):
            name = str((trial.get("metadata") or {}).get("name") or "")
            if not name:
                continue
            end = trial_end(trial)
            if end is not None:
                ends[name] = end
            rows = [(r.timestamp, r.name, r.value) for r in self._reader.all_rows(name)]
            points += points_from_rows(experiment, name, rows)
        return points, ends

    def __call__(self, experiment: str) -> tuple[list[ProgressPoint], dict[str, str]] | None:
        try:
            points, ends = self.load(experiment)
        except (TemporaryError, PermanentError, ConfigError) as exc:
            _log.warning(
                "experiment %s: pruning history not loaded (%s); starting its engine empty: "
                "curves reported before this service started are not known to the policies",
                experiment,
                exc,
            )
            return None
        _log.info(
            "experiment %s: loaded %d stored points of %d trial(s), %d ended",
            experiment,
            len(points),
            len({p.trial for p in points}),
            len(ends),
        )
        return points, ends
