"""Which Katib Trial (and Experiment) a TrainJob reports for."""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kubernetes import client

from katib_progress.collector.kube._client import classify
from katib_progress.core.names import EXPERIMENT_LABEL

_log = logging.getLogger(__name__)

TRIAL_GROUP = "kubeflow.org"
TRIAL_VERSION = "v1beta1"
TRIAL_API_VERSION = f"{TRIAL_GROUP}/{TRIAL_VERSION}"
TRIAL_PLURAL = "trials"


@dataclass(frozen=True, slots=True)
class TrialRef:
    """The Trial owning a TrainJob; ``experiment`` is "" when not known (e.g. for a deletion)."""

    name: str
    uid: str
    experiment: str


def trial_owner(obj: Mapping[str, Any]) -> tuple[str, str] | None:
    """(name, uid) of the controller ownerReference to a Katib Trial, or None."""
    for ref in (obj.get("metadata") or {}).get("ownerReferences") or ():
        if (
            ref.get("controller") is True
            and ref.get("apiVersion") == TRIAL_API_VERSION
            and ref.get("kind") == "Trial"
            and ref.get("name")
        ):
            return str(ref["name"]), str(ref.get("uid") or "")
    return None


class TrialResolver:
    """Looks Trials up by name (``get trials``) and caches the answer by uid (LRU, bounded).

    ``prefetch(namespace)`` reads every Trial of a scope in one paged LIST (used before a TrainJob list,
    so a start-up or re-list with N jobs costs a few pages, not N GETs); ``drop_prefetched()`` frees it
    once the list is delivered (the watcher keeps each job's TrialRef itself). Without ``list`` on
    Trials (403) it falls back to GETs and says so once.
    """

    def __init__(self, api_client: client.ApiClient, *, max_entries: int, request_timeout_s: float) -> None:
        if max_entries < 1:
            raise ValueError(f"max_entries: must be >= 1, got {max_entries}")
        self._api = client.CustomObjectsApi(api_client)
        self._max = max_entries
        self._timeout = request_timeout_s
        self._lock = threading.Lock()
        self._cache: OrderedDict[str, TrialRef] = OrderedDict()
        self._prefetched: dict[str, TrialRef] = {}
        self._can_list = True

    def prefetch(self, namespace: str | None, page_size: int = 500) -> int:
        """LIST the Trials of ``namespace`` (None: all); returns how many were labelled."""
        if not self._can_list:
            return 0
        found: dict[str, TrialRef] = {}
        token: str | None = None
        while True:
            kwargs: dict[str, Any] = {"limit": page_size, "_request_timeout": self._timeout}
            if token:
                kwargs["_continue"] = token
            try:
                if namespace is None:
                    page = self._api.list_cluster_custom_object(
                        TRIAL_GROUP, TRIAL_VERSION, TRIAL_PLURAL, **kwargs
                    )
                else:
                    page = self._api.list_namespaced_custom_object(
                        TRIAL_GROUP, TRIAL_VERSION, namespace, TRIAL_PLURAL, **kwargs
                    )
            except client.ApiException as exc:
                if exc.status == 403:
                    self._can_list = False
                    _log.warning("cannot list Trials (403); each Trial is read on its own (grant 'list')")
                    return 0
                raise classify(exc) from exc
            for item in page.get("items") or ():
                meta = item.get("metadata") or {}
                ref = self._ref(meta, str(meta.get("name") or ""), "", quiet=True)
                if ref is not None:
                    found[ref.uid] = ref
            token = (page.get("metadata") or {}).get("continue") or None
            if token is None:
                break
        with self._lock:
            self._prefetched.update(found)
        return len(found)

    def drop_prefetched(self) -> None:
        with self._lock:
            self._prefetched = {}

    def __len__(self) -> int:
        with self._lock:
            return len(self._cache)

    def cached(self, uid: str) -> TrialRef | None:
        with self._lock:
            return self._cache.get(uid)

    def resolve(self, namespace: str, name: str, uid: str) -> TrialRef | None:
        """The Trial ``namespace/name`` with ``uid``; None when it is gone, replaced or unlabelled.

        Raises ``TemporaryError`` / ``PermanentError`` when the API cannot answer.
        """
        if uid:
            with self._lock:
                hit = self._prefetched.get(uid) or self._cache.get(uid)
                if hit is not None:
                    if uid in self._cache:
                        self._cache.move_to_end(uid)
                    return hit
        try:
            trial = self._api.get_namespaced_custom_object(
                TRIAL_GROUP, TRIAL_VERSION, namespace, TRIAL_PLURAL, name, _request_timeout=self._timeout
            )
        except client.ApiException as exc:
            if exc.status == 404:
                _log.info("Trial %s/%s not found; its TrainJob is not collected", namespace, name)
                return None
            raise classify(exc) from exc
        ref = self._ref(trial.get("metadata") or {}, name, uid)
        if ref is None:
            return None
        with self._lock:
            self._cache[ref.uid] = ref
            while len(self._cache) > self._max:
                self._cache.popitem(last=False)
        return ref

    @staticmethod
    def _ref(meta: Mapping[str, Any], name: str, uid: str, *, quiet: bool = False) -> TrialRef | None:
        namespace = meta.get("namespace")
        if uid and meta.get("uid") != uid:
            _log.info(
                "Trial %s/%s was replaced (uid %s, owner says %s)", namespace, name, meta.get("uid"), uid
            )
            return None
        experiment = (meta.get("labels") or {}).get(EXPERIMENT_LABEL)
        if not experiment:
            if not quiet:
                _log.warning(
                    "Trial %s/%s has no %s label; its TrainJob is not collected",
                    namespace,
                    name,
                    EXPERIMENT_LABEL,
                )
            return None
        return TrialRef(name=name, uid=str(meta.get("uid") or uid), experiment=str(experiment))
