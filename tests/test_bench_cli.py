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
    finals = [bank.final_objective(t) for t in bank.trials]
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
    assert bank.true_best() == 0.9
    assert bank.regret(0.84) == pytest.approx(0.06)
    settings = BenchSettings(policies=("none", "katib-medianstop"), seeds=2, workers=1, modes=("pruning",))
    summaries = run_bench(bank, settings)
    none = summaries[0]
    for run in none.runs:
        assert run.compute_fraction == 1.0
        assert run.best_found == 0.9
        assert run.regret == 0.0
    # Accuracy never exceeds 1, so a larger value is never reported as "better than the best".
    for run in summaries[1].runs:
        assert run.regret >= 0.0


def test_cli_json_has_every_policy_and_mode(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _foreign_bank(tmp_path)
    policies = ["none", "katib-medianstop", "optuna-median", "optuna-hyperband"]
    argv = [
        "bench",
        "pruning",
        "--bank",
        str(path),
        "--seeds",
        "2",
        "--budget",
        "4",
        "--workers",
        "2",
        "--json",
    ]
    for p in policies:
        argv += ["--policy", p]
    assert main(argv) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["bank"] == "foreign"
    assert out["objective"] == {"metric": "accuracy", "direction": "maximize", "strategy": "max"}
    assert out["true_best"] == 0.9
    got = {(r["mode"], r["policy"]) for r in out["results"]}
    assert got == {(m, p) for m in ("pruning", "sampler") for p in policies}
    for result in out["results"]:
        for field in ("compute_fraction", "regret", "best_found", "trials_pruned"):
            assert set(result[field]) == {"mean", "std", "min", "max"}
        assert len(result["per_seed"]) == 2
        assert 0.0 < result["compute_fraction"]["mean"] <= 1.0
        if result["policy"] == "none":
            assert result["compute_fraction"]["mean"] == 1.0
            assert result["trials_pruned"]["max"] == 0
        if result["mode"] == "sampler":
            assert all(s["trials"] == 4 for s in result["per_seed"])
        else:
            assert all(s["trials"] == 5 for s in result["per_seed"])


def test_cli_table_and_bad_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _foreign_bank(tmp_path)
    argv = ["bench", "pruning", "--bank", str(path), "--seeds", "1", "--mode", "pruning", "--policy", "none"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "foreign" in out and "none" in out and "1.000" in out
    assert main(["bench", "pruning", "--bank", str(path), "--policy", "nonsense"]) == 2
    assert "nonsense" in capsys.readouterr().err
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"name": "x"}))
    assert main(["bench", "pruning", "--bank", str(bad)]) == 2


def test_engine_over_grpc_decides_like_the_library(tmp_path: Path) -> None:
    doc = json.loads(gzip.decompress(BANK.read_bytes()))
    doc["trials"] = doc["trials"][:40]
    bank = parse_bank(doc)
    settings = BenchSettings(
        policies=("engine:default", "grpc:default"), seeds=1, workers=4, modes=("pruning",)
    )
    lib, rpc = run_bench(bank, settings)
    assert [(o.name, o.state, o.points_seen) for o in lib.runs[0].outcomes] == [
        (o.name, o.state, o.points_seen) for o in rpc.runs[0].outcomes
    ]
    assert lib.runs[0].pruned > 0
