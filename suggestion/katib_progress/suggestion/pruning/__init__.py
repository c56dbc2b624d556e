"""Live pruning of hyperparameter-tuning trials (Katib-free; the gRPC edge is ``service``/``client``).

Library use::

    engine = PruningEngine(PruningConfig.from_settings("eval_loss", "minimize", {"policy": "default"}))
    decision = engine.decide(point)      # katib_progress.core.types.ProgressPoint -> Decision
    engine.finish("trial-1", "complete")
"""

from katib_progress.suggestion.pruning._build import build_policy
from katib_progress.suggestion.pruning._history import Direction, TrialState
from katib_progress.suggestion.pruning.config import POLICY_NAMES, PruningConfig
from katib_progress.suggestion.pruning.engine import PruningEngine

__all__ = ["POLICY_NAMES", "Direction", "PruningConfig", "PruningEngine", "TrialState", "build_policy"]
