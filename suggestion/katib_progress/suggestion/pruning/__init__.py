"""Live pruning of hyperparameter-tuning trials (Katib-free; the gRPC edge is ``service``/``client``).

Library use::

    engine = PruningEngine(PruningConfig.from_settings("eval_loss", "minimize", {"policy": "default"}))
    decision = engine.decide(point)      # katib_progress.core.types.ProgressPoint -> Decision
    engine.finish("trial-1", "complete")
"""

from typing import TYPE_CHECKING, Any

from katib_progress.suggestion.pruning._history import Direction, TrialState
from katib_progress.suggestion.pruning.config import POLICY_NAMES, PruningConfig

if TYPE_CHECKING:
    from katib_progress.suggestion.pruning._build import build_policy
    from katib_progress.suggestion.pruning.engine import PruningEngine


def __getattr__(name: str) -> Any:
    # The engine and its policies load Optuna, numpy and scipy. The collector imports this package
    # for the config and the client only (katib-progress[collector] has none of the three: its image
    # stays small), so these two names load on first use.
    if name == "PruningEngine":
        from katib_progress.suggestion.pruning.engine import PruningEngine

        return PruningEngine
    if name == "build_policy":
        from katib_progress.suggestion.pruning._build import build_policy

        return build_policy
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["POLICY_NAMES", "Direction", "PruningConfig", "PruningEngine", "TrialState", "build_policy"]
