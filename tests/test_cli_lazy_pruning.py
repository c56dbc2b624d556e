"""``collector run`` gets the suggestion service's pruning backend lazily: Optuna and SciPy (about a
second of start-up and tens of MiB) are imported only once an Experiment uses our pruning."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

SCRIPT = """
import sys
from katib_progress import cli
from katib_progress.core.pruning import PruningSpec
backend = cli._pruning_backend()
print("before", "optuna" in sys.modules, "scipy" in sys.modules)
backend.validate(PruningSpec("loss", "minimize", {"policy": "default"}))
engine = backend.engine(PruningSpec("loss", "minimize", {"policy": "default"}))
print("after", "optuna" in sys.modules, type(engine).__name__)
"""


def test_pruning_backend_is_imported_on_first_use() -> None:
    out = subprocess.run(
        [sys.executable, "-c", SCRIPT], cwd=ROOT, capture_output=True, text=True, check=True, timeout=120
    ).stdout.split("\n")
    assert out[0] == "before False False"
    assert out[1] == "after True PruningEngine"
