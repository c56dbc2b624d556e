"""Curve bank: histogram gradient boosting (scikit-learn) really trained, observed by boosting round.

Each configuration is a ``HistGradientBoostingClassifier`` (200 boosting rounds, no early stopping, one
OpenMP thread) fit on a synthetic binary problem from ``sklearn.datasets.make_classification`` (6000 rows,
30 features of which 10 informative and 5 redundant, 4 clusters per class, class_sep 0.7, 5 % flipped
labels; fixed seed; 4000 train / 2000 eval). Progress is boosting rounds done: every 8 rounds the
run reports train and eval log loss, eval accuracy and eval ROC AUC, computed from the model's staged
predictions (``staged_predict_proba``), i.e. exactly what the model after that many rounds predicts.
Objective: ``eval_logloss``, minimize, strategy ``min``.

Cost model (seconds, deterministic): 20 s start-up (data load, binning); per round 0.1 s + 5e-6 s x
train rows x features considered (histogram building) + 2e-7 s x max_leaf_nodes x max_bins x features
considered (split finding); 1 s per evaluation; +-10 % seeded jitter per report interval.

Usage:
    nice -n 10 .venv/bin/python benchmarks/curvebank/hgb_rounds.py --out benchmarks/data/synth-hgb.json.gz
"""

from __future__ import annotations

import sys
import time
from functools import cache
from typing import Any

from bankkit import RunClock, fmt, run_configs, sample_configs, standard_args, write_bank

ROUNDS = 200
EVERY = 8
N_FEATURES = 30
STARTUP_S = 20.0
EVAL_S = 1.0

PARAMETERS: list[dict[str, Any]] = [
    {"name": "learning_rate", "type": "double", "min": 0.005, "max": 1.0, "log": True},
    {"name": "max_leaf_nodes", "type": "int", "min": 4, "max": 256, "log": True},
    {"name": "min_samples_leaf", "type": "int", "min": 2, "max": 400, "log": True},
    {"name": "l2_regularization", "type": "double", "min": 1e-4, "max": 100.0, "log": True},
    {"name": "max_features", "type": "double", "min": 0.1, "max": 1.0},
    {"name": "max_bins", "type": "discrete", "list": [15, 31, 63, 127, 255]},
]


@cache
def _data(seed: int) -> tuple[Any, Any, Any, Any]:
    from sklearn.datasets import make_classification

    x, y = make_classification(
        n_samples=6000,
        n_features=N_FEATURES,
        n_informative=10,
        n_redundant=5,
        n_classes=2,
        n_clusters_per_class=4,
        class_sep=0.7,
        flip_y=0.05,
        random_state=seed,
    )
    return x[:4000], y[:4000], x[4000:], y[4000:]


def _logloss(y: Any, p1: Any) -> float:
    import numpy as np

    p = np.clip(p1, 1e-15, 1 - 1e-15)
    return float(-np.mean(y * np.log(p) + (1 - y) * np.log(1 - p)))


def train_one(index: int, cfg: dict[str, Any], seed: int) -> dict[str, Any]:
    import numpy as np
    from sklearn.ensemble import HistGradientBoostingClassifier
    from sklearn.metrics import roc_auc_score

    rng = np.random.default_rng([seed, index])
    xtr, ytr, xev, yev = _data(seed)
    model = HistGradientBoostingClassifier(
        learning_rate=float(cfg["learning_rate"]),
        max_iter=ROUNDS,
        max_leaf_nodes=int(cfg["max_leaf_nodes"]),
        min_samples_leaf=int(cfg["min_samples_leaf"]),
        l2_regularization=float(cfg["l2_regularization"]),
        max_features=float(cfg["max_features"]),
        max_bins=int(cfg["max_bins"]),
        early_stopping=False,
        random_state=int(rng.integers(2**31)),
    )
    model.fit(xtr, ytr)
    feats = N_FEATURES * float(cfg["max_features"])
    round_s = 0.1 + 5e-6 * len(ytr) * feats + 2e-7 * int(cfg["max_leaf_nodes"]) * int(cfg["max_bins"]) * feats
    clock = RunClock(rng, startup_s=STARTUP_S, eval_s=EVAL_S, total_units=ROUNDS)
    reports = ROUNDS // EVERY
    points = []
    staged = zip(model.staged_predict_proba(xtr), model.staged_predict_proba(xev), strict=True)
    for rnd, (ptr, pev) in enumerate(staged, start=1):
        clock.work(1, round_s)
        if rnd % EVERY:
            continue
        metrics = {
            "loss": fmt(_logloss(ytr, ptr[:, 1])),
            "eval_logloss": fmt(_logloss(yev, pev[:, 1])),
            "eval_accuracy": fmt(float(((pev[:, 1] > 0.5) == yev).mean())),
            "eval_auc": fmt(float(roc_auc_score(yev, pev[:, 1]))),
            "round": rnd,
        }
        k = rnd // EVERY
        points.append(clock.report(100 * rnd / ROUNDS, metrics, reports - k))
    return {"params": dict(cfg), "gpus": 1, "status": "completed", "points": points}


def main(argv: list[str] | None = None) -> int:
    ap = standard_args(__doc__.splitlines()[0], 150, 4242)
    args = ap.parse_args(argv)
    started = time.monotonic()
    configs = sample_configs(PARAMETERS, args.configs, args.seed)
    trials = run_configs(train_one, configs, args.workers, "boosting", seed=args.seed)
    bank = {
        "name": "synth-hgb",
        "description": (
            "scikit-learn HistGradientBoostingClassifier runs really fit on a synthetic binary problem "
            "(make_classification: 6000 rows, 30 features, 10 informative, 5 redundant, 4 clusters per "
            f"class, class_sep 0.7, 5% flipped labels, seed {args.seed}; 4000 train / 2000 eval), {ROUNDS} "
            f"boosting rounds without early stopping, one report every {EVERY} rounds from staged "
            f"predictions (progress = rounds done); {len(trials)} configurations sampled uniformly "
            f"(log-uniform where log) with seed {args.seed}. Metrics are real; elapsed_s follows a "
            "deterministic cost model (20 s start-up; per round 0.1 s + 5e-6 s x rows x features considered "
            "+ 2e-7 s x max_leaf_nodes x max_bins x features considered; 1 s per evaluation; +-10% seeded "
            "jitter per interval); eta_s is the run's own estimate. Generated by "
            "benchmarks/curvebank/hgb_rounds.py."
        ),
        "objective": {"metric": "eval_logloss", "direction": "minimize", "strategy": "min"},
        "parameters": PARAMETERS,
        "trials": trials,
    }
    write_bank(args.out, bank, started)
    return 0


if __name__ == "__main__":
    sys.exit(main())
