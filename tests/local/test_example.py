"""The README's main command on the bundled example (slow: about 2 minutes)."""

from __future__ import annotations

from pathlib import Path

import pytest

from .conftest import sweep

EXAMPLE = Path(__file__).parents[2] / "examples" / "local" / "experiment.yaml"


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_example_sweep_prunes_and_finds_a_best_configuration(tmp_path: Path) -> None:
    result, out = sweep(EXAMPLE, tmp_path / "work", grace_s=5.0)
    assert result.exit_code == 0, out
    summary = result.summary
    assert summary.status == "Succeeded" and len(summary.trials) == 14
    pruned = [t for t in summary.trials if t.status == "EarlyStopped"]
    assert pruned and all(t.message for t in pruned)
    assert summary.compute_saved_s > 0
    assert summary.best is not None and summary.best.objective < 0.5
    assert "Best trial" in out
