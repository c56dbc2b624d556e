"""Katib Experiments as the collector needs them: algorithm, objective, pruning settings (TTL cache).

Which experiments are pruned (documented in docs/cluster.md; routing in collector/forwarder.py):

- ``spec.earlyStopping.algorithmName`` ``katib-progress`` or ``kp-medianstop`` (Katib's medianstop
  served by our early-stopping image): points are forwarded to our early-stopping container with the
  Experiment's ``earlyStopping.algorithmSettings`` (policies may prune; for ``kp-medianstop``
  Katib's settings with ``policy=medianstop``): ``pruning_spec()``;
- an algorithm of ours (``kp-*``), whatever the early stopping: points are also forwarded to our
  suggestion container with ``policy=nop`` so it learns the curves (never prunes): ``curve_spec()``;
- anything else: collected, never forwarded, never pruned.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from kubernetes import client

from katib_progress.collector.kube._client import TRANSPORT_ERRORS, classify
from katib_progress.core.errors import ConfigError
from katib_progress.core.names import ALGORITHM_PREFIX, EARLY_STOPPING_ALGORITHMS
from katib_progress.core.pruning import (
    PruningSpec,
    early_stopping_settings,
    hyperband_pruning_settings,
    objective_strategy,
)

_log = logging.getLogger(__name__)

GROUP, VERSION, PLURAL = "kubeflow.org", "v1beta1", "experiments"


@dataclass(frozen=True, slots=True)
class ExperimentInfo:
    namespace: str
    name: str
    algorithm: str
    early_stopping: str
    objective_metric: str
    direction: str
    settings: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    uid: str = ""
    #: ``spec.algorithm.algorithmSettings``
    algorithm_settings: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    #: the objective's ``spec.objective.metricStrategies`` value (empty: Katib's default)
    metric_strategy: str = ""

    @property
    def ours(self) -> bool:
        return self.algorithm.startswith(ALGORITHM_PREFIX)

    @property
    def prunes(self) -> bool:
        """True when our early stopping is configured (policies may prune)."""
        return self.early_stopping in EARLY_STOPPING_ALGORITHMS

    @property
    def forwarded(self) -> bool:
        return self.prunes or self.ours

    def pruning_spec(self) -> PruningSpec | None:
        """The spec sent with each point to our pruning engine; None without our early stopping."""
        if not self.prunes or not self.objective_metric:
            return None
        # Katib's hyperband algorithm: the hyperband policy with its eta and r_l mapped
        ours = early_stopping_settings(self.early_stopping, self.settings)
        completed = hyperband_pruning_settings(self.algorithm, self.algorithm_settings, ours)
        settings = MappingProxyType(completed)
        return PruningSpec(
            self.objective_metric, self.direction or "minimize", settings, self.metric_strategy
        )

    def curve_spec(self) -> PruningSpec | None:
        """The spec sent with each point to our suggestion service (curves only); None unless ``kp-*``."""
        if not self.ours or not self.objective_metric:
            return None
        nop = MappingProxyType({"policy": "nop"})
        return PruningSpec(self.objective_metric, self.direction or "minimize", nop, self.metric_strategy)

    @classmethod
    def from_object(cls, obj: Mapping[str, Any]) -> ExperimentInfo:
        meta = obj.get("metadata") or {}
        spec = obj.get("spec") or {}
        objective = spec.get("objective") or {}
        early = spec.get("earlyStopping") or {}
        settings = {
            str(s.get("name")): str(s.get("value", ""))
            for s in early.get("algorithmSettings") or ()
            if isinstance(s, Mapping) and s.get("name")
        }
        algorithm = spec.get("algorithm") or {}
        algorithm_settings = {
            str(s.get("name")): str(s.get("value", ""))
            for s in algorithm.get("algorithmSettings") or ()
            if isinstance(s, Mapping) and s.get("name")
        }
        return cls(
            namespace=str(meta.get("namespace") or ""),
            name=str(meta.get("name") or ""),
            algorithm=str((spec.get("algorithm") or {}).get("algorithmName") or ""),
            early_stopping=str(early.get("algorithmName") or ""),
            objective_metric=str(objective.get("objectiveMetricName") or ""),
            direction=str(objective.get("type") or "minimize").lower(),
            settings=MappingProxyType(settings),
            uid=str(meta.get("uid") or ""),
            algorithm_settings=MappingProxyType(algorithm_settings),
            metric_strategy=objective_strategy(objective),
        )


class ExperimentCache:
    """``get(namespace, name)`` -> ExperimentInfo | None (absent), cached ``ttl_s`` seconds.

    Raises ``TemporaryError``/``PermanentError`` (classified API failures). ``validate`` checks a
    pruning spec (``PruningBackend.validate``: raises ``ConfigError``); None leaves it to the service.
    """

    def __init__(
        self,
        api_client: client.ApiClient,
        *,
        ttl_s: float = 30.0,
        request_timeout_s: float = 10.0,
        validate: Callable[[PruningSpec], object] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if ttl_s < 0:
            raise ValueError(f"ttl_s: must be >= 0, got {ttl_s}")
        self._api = client.CustomObjectsApi(api_client)
        self._ttl = ttl_s
        self._timeout = request_timeout_s
        self._validate = validate
        self._clock = clock
        self._lock = threading.Lock()
        self._cache: dict[tuple[str, str], tuple[float, ExperimentInfo | None]] = {}

    def get(self, namespace: str, name: str) -> ExperimentInfo | None:
        key = (namespace, name)
        now = self._clock()
        with self._lock:
            hit = self._cache.get(key)
            if hit is not None and now - hit[0] < self._ttl:
                return hit[1]
        try:
            obj = self._api.get_namespaced_custom_object(
                GROUP, VERSION, namespace, PLURAL, name, _request_timeout=self._timeout
            )
            info: ExperimentInfo | None = ExperimentInfo.from_object(obj)
        except client.ApiException as exc:
            if exc.status != 404:
                raise classify(exc) from exc
            info = None
        except TRANSPORT_ERRORS as exc:
            raise classify(exc) from exc
        with self._lock:
            self._cache[key] = (now, info)
        return info

    def config(self, namespace: str, name: str) -> tuple[ExperimentInfo | None, PruningSpec | None]:
        """The experiment and its pruning spec; an invalid spec is logged and treated as None."""
        info = self.get(namespace, name)
        if info is None:
            return None, None
        spec = info.pruning_spec()
        try:
            if spec is not None and self._validate is not None:
                self._validate(spec)
            return info, spec
        except ConfigError as exc:
            _log.warning("Experiment %s/%s: pruning settings rejected (%s); not pruned", namespace, name, exc)
            return info, None
