"""The committed curve bank, ``katib-progress bench pruning`` (table and --json), and foreign banks."""

from __future__ import annotations

import gzip
import json
import math
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from katib_progress.bench import BenchSettings, load_bank, parse_bank, run_bench
from katib_progress.cli import main

ROOT = Path(__file__).resolve().parents[1]
BANK = ROOT / "benchmarks" / "data" / "digits-mlp.json.gz"
# shared/ lies beside the repository (as CI lays it out).
REFERENCE_SCHEMA = Path(__file__).resolve().parents[2] / "shared" / "reference" / "curve-bank.schema.json"
PACKAGED_SCHEMA = ROOT / "katib_progress" / "bench" / "curve-bank.schema.json"


def _schema() -> dict[str, Any]:
    """The upstream reference schema (never our packaged copy: the bank must meet the reference)."""
    if not REFERENCE_SCHEMA.exists():
        pytest.skip(f"the reference schema {REFERENCE_SCHEMA} is not beside this checkout")
    loaded: dict[str, Any] = json.loads(REFERENCE_SCHEMA.read_text())
    return loaded


def test_packaged_schema_is_the_reference_schema() -> None:
    assert json.loads(PACKAGED_SCHEMA.read_text()) == _schema()


def test_committed_bank_validates_and_spans_good_slow_and_diverging_runs() -> None:
    assert BANK.stat().st_size < 5_000_000
    document = json.loads(gzip.decompress(BANK.read_bytes()))
    jsonschema.Draft202012Validator(_schema()).validate(document)
    bank = load_bank(BANK)
    assert len(bank.trials) >= 300
    assert {p.name for p in bank.parameters} >= {"learning_rate", "hidden_units", "batch_size", "momentum"}
    finals = [bank.objective(t.points) for t in bank.trials]
    finite = sorted(v for v in finals if v is not None)
    # Good runs (eval loss near 0.1), stalled runs (near ln 10 = 2.30, chance level) and diverged ones.
    assert finite[0] < 0.15
    assert sum(abs(v - math.log(10)) < 0.05 for v in finite) >= 10
    non_finite = [
        t for t in bank.trials if any(not math.isfinite(v) for p in t.points for v in p.metrics.values())
    ]
    assert len(non_finite) >= 3
    assert any(t.status == "failed" for t in bank.trials)
    # ETA is the run's own estimate: it shrinks to zero at the end of a completed run.
    done = next(t for t in bank.trials if t.status == "completed")
    assert done.points[-1].eta_s == 0 and done.points[0].eta_s is not None and done.points[0].eta_s > 0


def _foreign_bank(tmp_path: Path) -> Path:
    """A bank that isn't ours: maximize 'accuracy' (strategy max), other parameter names, plain JSON."""

    def curve(values: list[Any]) -> list[dict[str, Any]]:
        return [
            {
                "progress": 20 * (i + 1),
                "elapsed_s": 30.0 * (i + 1),
                "metrics": {"accuracy": v, "xent": v if isinstance(v, str) else 1 - v},
            }
            for i, v in enumerate(values)
        ]

    doc = {
        "name": "foreign",
        "objective": {"metric": "accuracy", "direction": "maximize", "strategy": "max"},
        "parameters": [
            {"name": "dropout", "type": "double", "min": 0.0, "max": 0.5},
            {"name": "layers", "type": "int", "min": 1, "max": 8},
            {"name": "arch", "type": "categorical", "list": ["cnn", "vit"]},
        ],
        "trials": [
            {
                "params": {"dropout": 0.1, "layers": 2, "arch": "cnn"},
                "points": curve([0.5, 0.7, 0.8, 0.85, 0.9]),
            },
            {
                "params": {"dropout": 0.3, "layers": 4, "arch": "vit"},
                "points": curve([0.4, 0.6, 0.7, 0.8, 0.84]),
            },
            {
                "params": {"dropout": 0.2, "layers": 6, "arch": "cnn"},
                "points": curve([0.1, 0.1, 0.1, 0.1, 0.1]),
            },
            {"params": {"dropout": 0.4, "layers": 8, "arch": "vit"}, "points": curve([0.3, "nan", "nan"])},
            {
                "params": {"dropout": 0.0, "layers": 1, "arch": "cnn"},
                "points": curve([0.5, 0.6, 0.7, 0.75, 0.8]),
            },
        ],
    }
    path = tmp_path / "foreign.json"
    path.write_text(json.dumps(doc))
    return path


def test_a_foreign_maximize_bank_replays_with_regret_in_its_direction(tmp_path: Path) -> None:
    bank = load_bank(_foreign_bank(tmp_path))
    # Finals (strategy max; the NaN run keeps its 0.3): 0.9, 0.84, 0.1, 0.3, 0.8: best 0.9, median 0.8.
    assert (bank.best_final, bank.median) == (0.9, 0.8)
    assert bank.shortfall(0.84, 0.9) == pytest.approx(0.06 / 0.1)
    assert bank.shortfall(0.95, 0.9) == 0.0  # never negative
    settings = BenchSettings(policies=("none", "katib-medianstop"), seeds=2, workers=1, trials=None)
    summaries = run_bench(bank, settings).summaries
    none = summaries[0]
    for run in none.runs:
        assert run.compute_fraction == 1.0
        assert run.best_found == 0.9
        assert run.regret == 0.0
    for run in summaries[1].runs:
        assert run.regret >= 0.0


def _overfitting_bank(tmp_path: Path) -> Path:
    """Maximize with strategy latest: curves that rise and fall; plain JSON."""
    rng = [0.2, 0.5, 0.7, 0.75, 0.7, 0.6, 0.55, 0.5]
    trials = []
    for k in range(12):
        values = [round(v * (0.5 + 0.05 * k), 4) for v in rng]
        trials.append(
            {
                "params": {"dropout": k / 20},
                "points": [
                    {"progress": 12.5 * (i + 1), "elapsed_s": 20.0 * (i + 1), "metrics": {"f1": v}}
                    for i, v in enumerate(values)
                ],
            }
        )
    doc = {
        "name": "overfit",
        "objective": {"metric": "f1", "direction": "maximize", "strategy": "latest"},
        "parameters": [{"name": "dropout", "type": "double", "min": 0.0, "max": 1.0}],
        "trials": trials,
    }
    path = tmp_path / "overfit.json"
    path.write_text(json.dumps(doc))
    return path


def test_cli_json_has_every_bank_policy_and_mode(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    banks = [_foreign_bank(tmp_path), _overfitting_bank(tmp_path)]
    policies = ["none", "katib-medianstop", "optuna-median", "optuna-sh", "optuna-hyperband"]
    policies += ["engine:percentile|warmup_progress=10"]
    argv = ["bench", "pruning", "--seeds", "2", "--budget", "4", "--workers", "2", "--trials", "6", "--json"]
    for path in banks:
        argv += ["--bank", str(path)]
    for mode in ("pruning", "sampler", "stall"):
        argv += ["--mode", mode]
    for p in policies:
        argv += ["--policy", p]
    assert main(argv) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["settings"]["trials"] == 6 and out["settings"]["seeds"] == 2
    assert [b["bank"] for b in out["banks"]] == ["foreign", "overfit"]
    foreign, overfit = out["banks"]
    assert foreign["objective"] == {"metric": "accuracy", "direction": "maximize", "strategy": "max"}
    assert overfit["objective"]["strategy"] == "latest"
    # Strategy latest: each trial's final is its last value, the best is the last trial's 0.5 * 1.05.
    assert overfit["best_final"] == pytest.approx(0.525)
    for doc in out["banks"]:
        got = {(r["mode"], r["policy"]) for r in doc["results"]}
        assert got == {(m, p) for m in ("pruning", "sampler") for p in policies}
        assert doc["reference"]["pruning"]["compute_fraction"] <= 1.0
        for result in doc["results"]:
            for field in ("compute_fraction", "regret", "trials_pruned"):
                assert set(result[field]) == {"mean", "std", "min", "max"}
            assert 0.0 <= result["hit_rate"] <= 1.0
            assert result["compute_ratio_to_reference"] is not None
            assert len(result["per_seed"]) == 2
            if result["policy"] == "none":
                assert result["compute_fraction"]["mean"] == 1.0
                assert result["regret"]["max"] == 0.0
            trials = 4 if result["mode"] == "sampler" else min(6, doc["trials"])
            assert all(s["trials"] == trials for s in result["per_seed"])
        assert {s["policy"] for s in doc["stall"]} == set(policies)


def test_cli_table_and_bad_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _foreign_bank(tmp_path)
    argv = ["bench", "pruning", "--bank", str(path), "--seeds", "1", "--mode", "pruning", "--policy", "none"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "foreign" in out and "none (ref)" in out and "1.000" in out
    assert main(["bench", "pruning", "--bank", str(path), "--policy", "nonsense"]) == 2
    assert "nonsense" in capsys.readouterr().err
    bad_setting = "engine:percentile|percentile=250"
    assert main(["bench", "pruning", "--bank", str(path), "--policy", bad_setting]) == 2
    assert "percentile" in capsys.readouterr().err
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"name": "x"}))
    assert main(["bench", "pruning", "--bank", str(bad)]) == 2


def test_engine_over_grpc_decides_like_the_library() -> None:
    doc = json.loads(gzip.decompress(BANK.read_bytes()))
    doc["trials"] = doc["trials"][:40]
    bank = parse_bank(doc)
    settings = BenchSettings(policies=("engine:default", "grpc:default"), seeds=1, workers=4)
    lib, rpc = run_bench(bank, settings).summaries
    assert [(o.name, o.state, o.points_seen) for o in lib.runs[0].outcomes] == [
        (o.name, o.state, o.points_seen) for o in rpc.runs[0].outcomes
    ]
    assert lib.runs[0].pruned > 0
