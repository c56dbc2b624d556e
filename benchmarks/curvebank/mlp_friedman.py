"""Curve bank: MLP regressors (torch, CPU) really trained on scikit-learn's Friedman #1 regression problem.

Each configuration is a fully connected network (``depth`` hidden layers of ``width`` units, activation,
dropout) trained with mean squared error on ``sklearn.datasets.make_friedman1`` (2000 rows, 10 features of
which 5 matter, Gaussian noise sd 1.0, fixed seed; 1500 train / 500 eval; features standardised; the
target standardised or left raw as ``target_scaling`` says). The objective is the eval RMSE in the
target's own units: ``eval_rmse``, minimize, strategy ``min`` (noise floor: 1.0).

Cost model (seconds, deterministic): 25 s start-up; per optimiser step 0.1 s + batch x forward FLOPs x 3
/ 5e7 FLOP/s; per evaluation 0.3 s + eval rows x forward FLOPs / 5e7; +-10 % seeded jitter per report
interval (bankkit.RunClock).

Usage:
    nice -n 10 .venv/bin/python benchmarks/curvebank/mlp_friedman.py \\
        --out benchmarks/data/friedman-mlp.json.gz
"""

from __future__ import annotations

import sys
import time
from typing import Any

from bankkit import RunClock, run_configs, sample_configs, standard_args, write_bank

EPOCHS = 20
REPORTS = 40
STARTUP_S = 25.0
FLOPS = 5e7
N_FEATURES = 10

PARAMETERS: list[dict[str, Any]] = [
    {"name": "learning_rate", "type": "double", "min": 1e-5, "max": 0.3, "log": True},
    {"name": "optimizer", "type": "categorical", "list": ["sgd", "adam", "adamw"]},
    {"name": "batch_size", "type": "discrete", "list": [16, 32, 64, 128, 256]},
    {"name": "depth", "type": "int", "min": 1, "max": 4},
    {"name": "width", "type": "int", "min": 8, "max": 256, "log": True},
    {"name": "activation", "type": "categorical", "list": ["relu", "tanh", "silu"]},
    {"name": "dropout", "type": "double", "min": 0.0, "max": 0.5},
    {"name": "weight_decay", "type": "double", "min": 1e-6, "max": 1e-1, "log": True},
    {"name": "lr_schedule", "type": "categorical", "list": ["constant", "cosine"]},
    {"name": "target_scaling", "type": "categorical", "list": ["standard", "none"]},
]


def _data(seed: int) -> tuple[Any, Any, Any, Any]:
    import torch
    from sklearn.datasets import make_friedman1

    x, y = make_friedman1(n_samples=2000, n_features=N_FEATURES, noise=1.0, random_state=seed)
    mean, std = x[:1500].mean(axis=0), x[:1500].std(axis=0)
    xs = torch.tensor((x - mean) / std, dtype=torch.float32)
    yt = torch.tensor(y, dtype=torch.float32)
    return xs[:1500], yt[:1500], xs[1500:], yt[1500:]


def _model(cfg: dict[str, Any]) -> tuple[Any, float]:
    from torch import nn

    acts = {"relu": nn.ReLU, "tanh": nn.Tanh, "silu": nn.SiLU}
    depth, width = int(cfg["depth"]), int(cfg["width"])
    layers: list[nn.Module] = []
    fan_in = N_FEATURES
    for _ in range(depth):
        layers += [
            nn.Linear(fan_in, width),
            acts[str(cfg["activation"])](),
            nn.Dropout(float(cfg["dropout"])),
        ]
        fan_in = width
    layers.append(nn.Linear(fan_in, 1))
    flops = 2.0 * (N_FEATURES * width + (depth - 1) * width * width + width)
    return nn.Sequential(*layers), flops


def train_one(index: int, cfg: dict[str, Any], seed: int) -> dict[str, Any]:
    import torch
    from torchkit import Loop, make_optimizer, run_loop, seeded

    rng, gen = seeded(seed, index)
    abort_on_nan = bool(rng.integers(2))
    xtr, ytr, xev, yev = _data(seed)
    mu, sd = (float(ytr.mean()), float(ytr.std())) if cfg["target_scaling"] == "standard" else (0.0, 1.0)
    model, flops = _model(cfg)
    bs = int(cfg["batch_size"])
    opt = make_optimizer(
        str(cfg["optimizer"]), model.parameters(), float(cfg["learning_rate"]), float(cfg["weight_decay"])
    )

    def step_loss(idx: torch.Tensor) -> torch.Tensor:
        pred = model(xtr[idx]).squeeze(1)
        return torch.mean((pred - (ytr[idx] - mu) / sd) ** 2)

    def evaluate() -> dict[str, float]:
        err = model(xev).squeeze(1) * sd + mu - yev
        return {"eval_rmse": float(torch.sqrt(torch.mean(err**2))), "eval_mae": float(err.abs().mean())}

    clock = RunClock(
        rng,
        startup_s=STARTUP_S,
        eval_s=0.3 + len(yev) * flops / FLOPS,
        total_units=EPOCHS * -(-len(ytr) // bs),
    )
    loop = Loop(
        model,
        opt,
        str(cfg["lr_schedule"]),
        len(ytr),
        bs,
        EPOCHS,
        REPORTS,
        step_loss,
        evaluate,
        clock,
        0.1 + bs * flops * 3 / FLOPS,
        abort_on_nan,
    )
    points, status = run_loop(loop, gen)
    return {"params": dict(cfg), "gpus": 1, "status": status, "points": points}


def main(argv: list[str] | None = None) -> int:
    ap = standard_args(__doc__.splitlines()[0], 150, 1991)
    args = ap.parse_args(argv)
    started = time.monotonic()
    configs = sample_configs(PARAMETERS, args.configs, args.seed)
    trials = run_configs(train_one, configs, args.workers, "training Friedman MLPs", seed=args.seed)
    bank = {
        "name": "friedman-mlp",
        "description": (
            "Fully connected regression networks (torch, CPU, float32) really trained with MSE on "
            f"scikit-learn's make_friedman1 (2000 rows, 10 features, noise sd 1.0, seed {args.seed}; 1500 "
            "train / 500 eval, standardised features, target standardised or raw per target_scaling), "
            f"{EPOCHS} epochs, {REPORTS} evaluations per run, constant or cosine learning rate; "
            f"{len(trials)} configurations sampled uniformly (log-uniform where log) with seed {args.seed}. "
            "Objective: eval RMSE in target units. A run whose loss turns non-finite keeps reporting nan or "
            "aborts (failed), drawn per run. Metrics are real; elapsed_s follows a deterministic cost model "
            "(25 s start-up, 0.1 s + batch x 3 x forward FLOPs / 5e7 per step, 0.3 s + eval FLOPs / 5e7 per "
            "evaluation, +-10% seeded jitter per interval); eta_s is the run's own estimate. Generated by "
            "benchmarks/curvebank/mlp_friedman.py."
        ),
        "objective": {"metric": "eval_rmse", "direction": "minimize", "strategy": "min"},
        "parameters": PARAMETERS,
        "trials": trials,
    }
    write_bank(args.out, bank, started)
    return 0


if __name__ == "__main__":
    sys.exit(main())
