"""Local sweep: run a Katib Experiment (TrainJob trials) on one machine, live, with pruning.

Public API (imported lazily so ``katib-progress --help`` stays light)::

    from katib_progress.local import load_experiment, run_sweep, SweepOptions, read_summary
    result = run_sweep(load_experiment("experiment.yaml"), SweepOptions(workdir=Path("w")))

See docs/local.md.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "load_experiment": "katib_progress.local.experiment",
    "LocalExperiment": "katib_progress.local.experiment",
    "run_sweep": "katib_progress.local.runner",
    "SweepOptions": "katib_progress.local.runner",
    "SweepResult": "katib_progress.local.runner",
    "default_workdir": "katib_progress.local.runner",
    "read_summary": "katib_progress.local.summary",
    "SweepSummary": "katib_progress.local.summary",
    "TrialSummary": "katib_progress.local.summary",
    "StatusEndpoint": "katib_progress.local.endpoint",
}

__all__ = [
    "LocalExperiment",
    "StatusEndpoint",
    "SweepOptions",
    "SweepResult",
    "SweepSummary",
    "TrialSummary",
    "default_workdir",
    "load_experiment",
    "read_summary",
    "run_sweep",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'katib_progress.local' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
