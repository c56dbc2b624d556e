"""``bench pruning --calibration``: the predictive policy's reliability table and calibration error."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from katib_progress.bench import load_bank
from katib_progress.bench._calibration import EDGES, calibrate_bank, reliability
from katib_progress.cli import main


def test_reliability_bins_and_ece() -> None:
    # 0.02 predicted, 1 hit in 4 -> |0.02 - 0.25|; 0.8 predicted, 4 of 4 -> |0.8 - 1|
    pairs = [(0.02, True), (0.02, False), (0.02, False), (0.02, False)] + [(0.8, True)] * 4
    rel = reliability(pairs)
    assert rel.events == 8
    counts = {(b.lo, b.hi): b.count for b in rel.bins}
    assert counts[(0.01, 0.05)] == 4 and counts[(0.7, 0.9)] == 4
    assert sum(counts.values()) == 8
    assert rel.ece == pytest.approx(0.5 * 0.23 + 0.5 * 0.2)
    # a probability of exactly 1 falls in the last bin; a perfectly calibrated set has ECE 0
    assert reliability([(1.0, True)]).bins[-1].count == 1
    assert reliability([(0.0, False)] * 3 + [(1.0, True)] * 3).ece == 0.0
    assert len(reliability([]).bins) == len(EDGES) - 1


def _ordered_bank(tmp_path: Path) -> Path:
    """40 power-law losses whose ranks never cross (trial i ends at 0.2 + 0.02 i), 20 reports each."""
    trials = []
    for i in range(40):
        final = 0.2 + 0.02 * i
        points = [
            {
                "progress": 5 * k,
                "elapsed_s": 10.0 * k,
                "metrics": {"eval_loss": final + (0.3 + 0.01 * i) * ((k / 20) ** -0.5 - 1.0)},
            }
            for k in range(1, 21)
        ]
        trials.append({"params": {"x": float(i)}, "points": points})
    doc = {
        "name": "ordered",
        "objective": {"metric": "eval_loss", "direction": "minimize", "strategy": "min"},
        "parameters": [{"name": "x", "type": "double", "min": 0.0, "max": 40.0}],
        "trials": trials,
    }
    path = tmp_path / "ordered.json"
    path.write_text(json.dumps(doc))
    return path


def test_on_curves_whose_ranks_never_cross_a_hopeless_forecast_is_never_a_hit(tmp_path: Path) -> None:
    bank = load_bank(_ordered_bank(tmp_path))
    result = calibrate_bank(bank, seeds=[0, 1], trials=40, workers=4)
    assert result.calibrated.events == len(result.pairs) > 50
    low = [hit for p, _, hit in result.pairs if p < 0.05]
    high = [hit for p, _, hit in result.pairs if p > 0.5]
    assert low and not any(low)  # what it called hopeless never reached the target
    assert all(0.0 <= p <= 1.0 for p, _, _ in result.pairs)
    assert result.calibrated.ece < 0.2
    assert set(result.method_pairs) == {"event", "pit", "none"}
    assert all(len(v) == len(result.pairs) for v in result.method_pairs.values())
    assert high == [] or sum(high) / len(high) > 0.2


def test_cli_prints_the_calibration_tables_and_refuses_cv(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _ordered_bank(tmp_path)
    argv = ["bench", "pruning", "--calibration", "--seeds", "1", "--bank", str(path)]
    assert main([*argv, "--policy", "engine:predictive|predict_top=2"]) == 0
    out = capsys.readouterr().out
    assert "predict_top=2" in out
    assert "| ordered |" in out and "| all banks |" in out
    assert "| [0, 0.01) |" in out and "ECE pit" in out
    assert main([*argv, "--cv"]) == 2
    assert main([*argv, "--policy", "engine:trend_halving"]) == 2
