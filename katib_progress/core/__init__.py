"""The Katib-free core: trainer status -> progress points -> curves -> decisions.

Nothing in this package imports Katib, Kubernetes or gRPC, so it can serve Kubeflow Trainer's
planned OptimizationJob as well as Katib.
"""

from katib_progress.core.types import Decision, ProgressPoint, Verdict

__all__ = ["Decision", "ProgressPoint", "Verdict"]
