"""The Kubernetes side of the collector: client construction and the TrainJob watcher.

Kubernetes types and the ``kubernetes`` client are confined to this package.
"""

from __future__ import annotations

from katib_progress.collector.kube._client import (
    call_or_none,
    classify,
    context_namespace,
    load_api_client,
)
from katib_progress.collector.kube._model import JobEvent, WatchSettings
from katib_progress.collector.kube._owners import EXPERIMENT_LABEL, TrialRef, trial_owner
from katib_progress.collector.kube.watcher import TrainJobWatcher

__all__ = [
    "EXPERIMENT_LABEL",
    "JobEvent",
    "TrainJobWatcher",
    "TrialRef",
    "WatchSettings",
    "call_or_none",
    "classify",
    "context_namespace",
    "load_api_client",
    "trial_owner",
]
