"""Describe learning-curve banks: size, failures, the finals, and how well early values predict final ranks.

For each bank (curve-bank.schema.json format, validated), with the objective taken as the bank's
strategy says (``min``/``max``/``latest`` over the finite values of the points reached so far):

- trials, failed runs, runs with no finite objective, progress points per run, median run length;
- the distribution of final objectives (best, 10/25/50/75/90 % quantiles from the best side, worst);
- Spearman rank correlation between the objective at 10 %, 25 % and 50 % progress (points with
  progress <= p) and the final objective; a trial with no finite value yet ranks last;
- crossings: among pairs of trials whose values differ both at 25 % and at the end, the share whose
  order at 25 % differs from their final order;
- top-decile at risk: the share of the final top 10 % of trials that stood worse than the median at
  25 % (what a median rule applied at 25 % would have stopped);
- sweeps whose best was outside the top half at 25 %: over the bench's draws (``RandomOrder``, seeds
  0-19, 40 trials), the share whose drawn best trial (final) stood worse than the draw's median at 25 %.

Usage:
    .venv/bin/python benchmarks/curvebank/bank_stats.py benchmarks/data/*.json.gz [--json]
"""

from __future__ import annotations

import argparse
import gzip
import json
import math
import sys
from pathlib import Path
from typing import Any

import numpy as np

SCHEMA = Path(__file__).resolve().parents[2] / "katib_progress" / "bench" / "curve-bank.schema.json"
CHECKPOINTS = (10, 25, 50)


def load(path: Path) -> dict[str, Any]:
    import jsonschema

    raw = gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes()
    doc: dict[str, Any] = json.loads(raw)
    jsonschema.validate(doc, json.loads(SCHEMA.read_text()), cls=jsonschema.Draft202012Validator)
    return doc


def _value(v: Any) -> float:
    if v is None:
        return math.nan
    return float(v)  # float("nan"), float("inf"), float("-inf") parse the bank's strings


def objective(points: list[dict[str, Any]], metric: str, strategy: str) -> float | None:
    """Katib's metricStrategies over the finite values (None when there is none)."""
    vals = [x for x in (_value(p["metrics"].get(metric)) for p in points) if math.isfinite(x)]
    if not vals:
        return None
    return min(vals) if strategy == "min" else max(vals) if strategy == "max" else vals[-1]


def _ranks(values: np.ndarray) -> np.ndarray:
    from scipy.stats import rankdata

    return np.asarray(rankdata(values, method="average"), dtype=float)


def spearman(a: np.ndarray, b: np.ndarray) -> float:
    ra, rb = _ranks(a), _ranks(b)
    if ra.std() == 0 or rb.std() == 0:
        return math.nan
    return float(np.corrcoef(ra, rb)[0, 1])


def crossings(early: np.ndarray, final: np.ndarray) -> float:
    with np.errstate(invalid="ignore"):  # inf - inf is nan: treated as a tie, excluded below
        de = np.sign(early[:, None] - early[None, :])
        df = np.sign(final[:, None] - final[None, :])
        both = (de != 0) & (df != 0) & ~np.isnan(de) & ~np.isnan(df)
    iu = np.triu(np.ones_like(both, dtype=bool), k=1)
    mask = both & iu
    return float((de[mask] != df[mask]).mean()) if mask.any() else math.nan


def stats(doc: dict[str, Any]) -> dict[str, Any]:
    obj = doc["objective"]
    metric, direction = obj["metric"], obj["direction"]
    strategy = obj.get("strategy", "latest")
    sign = 1.0 if direction == "minimize" else -1.0  # oriented: lower is better
    trials = doc["trials"]

    def oriented(points: list[dict[str, Any]]) -> float:
        v = objective(points, metric, strategy)
        return math.inf if v is None else sign * v

    final = np.array([oriented(t["points"]) for t in trials])
    finite_finals = np.sort(final[np.isfinite(final)])
    q = {f"p{int(p)}": float(sign * np.quantile(finite_finals, p / 100)) for p in (10, 25, 50, 75, 90)}
    out: dict[str, Any] = {
        "name": doc["name"],
        "objective": f"{metric} {direction} {strategy}",
        "trials": len(trials),
        "failed": sum(t.get("status") == "failed" for t in trials),
        "no_finite": int((~np.isfinite(final)).sum()),
        "points_per_run": float(np.median([len(t["points"]) for t in trials])),
        "median_run_min": float(np.median([t["points"][-1]["elapsed_s"] for t in trials]) / 60),
        "finals": {"best": float(sign * finite_finals[0])} | q | {"worst": float(sign * finite_finals[-1])},
    }
    for p in CHECKPOINTS:
        early = np.array([oriented([pt for pt in t["points"] if pt["progress"] <= p]) for t in trials])
        out[f"spearman_{p}"] = spearman(early, final)
        if p == 25:
            out["crossings_25"] = crossings(early, final)
            top = final <= np.quantile(final[np.isfinite(final)], 0.1)
            out["top10_below_median_25"] = float((early[top] > np.median(early)).mean())
            out["best_outside_top_half_25"] = _sweeps_best_outside(early, final, doc)
    return out


SWEEP_SEEDS, SWEEP_TRIALS = 20, 40


def _sweeps_best_outside(early: np.ndarray, final: np.ndarray, doc: dict[str, Any]) -> float:
    """Share of the bench's 40-trial draws (seeds 0-19) whose best final stood below the draw's median
    at 25 %."""
    from katib_progress.bench import RandomOrder, parse_bank

    bank = parse_bank(doc)
    outside = 0
    for seed in range(SWEEP_SEEDS):
        drawn = [t.index for _, t in RandomOrder(bank, seed, SWEEP_TRIALS).next_trials(SWEEP_TRIALS, 0.0)]
        ok = [i for i in drawn if math.isfinite(final[i]) and doc["trials"][i].get("status") != "failed"]
        best = min(ok, key=lambda i: final[i])
        outside += bool(early[best] > np.median(early[drawn]))
    return outside / SWEEP_SEEDS


def _f(v: float, digits: int = 3) -> str:
    return "nan" if isinstance(v, float) and math.isnan(v) else f"{v:.{digits}g}" if digits else str(v)


def table(rows: list[dict[str, Any]]) -> str:
    head = (
        "| bank | objective | trials | failed | no finite | pts/run | run min (median) | best | p10 | median "
        "| p90 | worst | rho@10% | rho@25% | rho@50% | crossings@25% | top-10% below median@25% "
        "| sweeps' best outside top half@25% |"
    )
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for r in rows:
        fin = r["finals"]
        cells = [
            r["name"],
            r["objective"],
            str(r["trials"]),
            str(r["failed"]),
            str(r["no_finite"]),
            f"{r['points_per_run']:.0f}",
            f"{r['median_run_min']:.1f}",
            _f(fin["best"], 4),
            _f(fin["p10"], 4),
            _f(fin["p50"], 4),
            _f(fin["p90"], 4),
            _f(fin["worst"], 4),
            f"{r['spearman_10']:.2f}",
            f"{r['spearman_25']:.2f}",
            f"{r['spearman_50']:.2f}",
            f"{r['crossings_25']:.3f}",
            f"{r['top10_below_median_25']:.2f}",
            f"{r['best_outside_top_half_25']:.2f}",
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("banks", nargs="+", type=Path)
    ap.add_argument("--json", action="store_true", help="print JSON instead of the table")
    args = ap.parse_args(argv)
    rows = [stats(load(p)) for p in args.banks]
    print(json.dumps(rows, indent=2) if args.json else table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
