"""Source adapters filling an ExperimentRecord: a local sweep workdir or a cluster experiment."""

from __future__ import annotations

from katib_progress.report.sources.cluster import load_cluster
from katib_progress.report.sources.local import load_local

__all__ = ["load_cluster", "load_local"]
