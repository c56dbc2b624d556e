"""Curve bank: deep narrow MLPs (torch, CPU) with LR schedules: noisy curves, plateaus, late improvers.

Data: ``sklearn.datasets.make_gaussian_quantiles`` (2500 points in 6 dimensions, 4 classes = concentric
shells of a Gaussian, fixed seed; 1500 train / 1000 eval): no linear model beats chance (0.25), a network
must learn radial structure. Each configuration is a ``depth`` x ``width`` MLP (ReLU, tanh or sigmoid) whose
initial weights are scaled by ``init_scale`` (small scales and saturating activations sit on a plateau
before they learn, if they ever do), trained with cross-entropy, small to medium batches, and one of five
LR schedules: constant, step (/10 at 50 % and 75 %), cosine, SGDR cosine restarts (periods 2, 4, 8, 16
epochs), cyclic triangular (4-epoch cycles between 0.1x and 1x); gradient norm clipped at 5. 15 epochs,
30 evaluations per run. Objective: ``eval_accuracy``, maximize, strategy ``max``.

Cost model (seconds, deterministic): 20 s start-up; per optimiser step 0.08 s + batch x forward FLOPs x 3
/ 5e7 FLOP/s; per evaluation 0.3 s + eval rows x forward FLOPs / 5e7; +-10 % seeded jitter per report
interval (bankkit.RunClock).

Usage:
    nice -n 10 .venv/bin/python benchmarks/curvebank/deepmlp_schedules.py \\
        --out benchmarks/data/quantiles-deepmlp.json.gz
"""

from __future__ import annotations

import sys
import time
from typing import Any

from bankkit import RunClock, run_configs, sample_configs, standard_args, write_bank

EPOCHS = 15
REPORTS = 30
STARTUP_S = 20.0
FLOPS = 5e7
N_FEATURES, N_CLASSES = 6, 4

PARAMETERS: list[dict[str, Any]] = [
    {"name": "learning_rate", "type": "double", "min": 1e-4, "max": 1.0, "log": True},
    {"name": "optimizer", "type": "categorical", "list": ["sgd", "nesterov", "adam"]},
    {"name": "batch_size", "type": "discrete", "list": [16, 32, 64, 128, 256]},
    {"name": "depth", "type": "int", "min": 2, "max": 6},
    {"name": "width", "type": "int", "min": 8, "max": 128, "log": True},
    {"name": "activation", "type": "categorical", "list": ["relu", "tanh", "sigmoid"]},
    {"name": "init_scale", "type": "double", "min": 0.05, "max": 3.0, "log": True},
    {
        "name": "lr_schedule",
        "type": "categorical",
        "list": ["constant", "step", "cosine", "cosine_restarts", "cyclic"],
    },
    {"name": "weight_decay", "type": "double", "min": 1e-6, "max": 1e-2, "log": True},
]


def _data(seed: int) -> tuple[Any, Any, Any, Any]:
    import torch
    from sklearn.datasets import make_gaussian_quantiles

    x, y = make_gaussian_quantiles(
        n_samples=2500, n_features=N_FEATURES, n_classes=N_CLASSES, random_state=seed
    )
    xt, yt = torch.tensor(x, dtype=torch.float32), torch.tensor(y, dtype=torch.long)
    return xt[:1500], yt[:1500], xt[1500:], yt[1500:]


def _model(cfg: dict[str, Any]) -> tuple[Any, float]:
    import torch
    from torch import nn

    acts = {"relu": nn.ReLU, "tanh": nn.Tanh, "sigmoid": nn.Sigmoid}
    depth, width = int(cfg["depth"]), int(cfg["width"])
    layers: list[nn.Module] = []
    fan_in = N_FEATURES
    for _ in range(depth):
        layers += [nn.Linear(fan_in, width), acts[str(cfg["activation"])]()]
        fan_in = width
    layers.append(nn.Linear(fan_in, N_CLASSES))
    model = nn.Sequential(*layers)
    with torch.no_grad():
        for m in model:
            if isinstance(m, nn.Linear):
                m.weight.mul_(float(cfg["init_scale"]))
    flops = 2.0 * (N_FEATURES * width + (depth - 1) * width * width + width * N_CLASSES)
    return model, flops


def train_one(index: int, cfg: dict[str, Any], seed: int) -> dict[str, Any]:
    import torch
    import torch.nn.functional as F
    from torchkit import Loop, make_optimizer, run_loop, seeded

    rng, gen = seeded(seed, index)
    abort_on_nan = bool(rng.integers(2))
    xtr, ytr, xev, yev = _data(seed)
    model, flops = _model(cfg)
    bs = int(cfg["batch_size"])
    opt = make_optimizer(
        str(cfg["optimizer"]), model.parameters(), float(cfg["learning_rate"]), float(cfg["weight_decay"])
    )

    def step_loss(idx: torch.Tensor) -> torch.Tensor:
        return F.cross_entropy(model(xtr[idx]), ytr[idx])

    def evaluate() -> dict[str, float]:
        logits = model(xev)
        ok = bool(torch.isfinite(logits).all())
        acc = float((logits.argmax(1) == yev).float().mean()) if ok else float("nan")
        return {"eval_loss": float(F.cross_entropy(logits, yev)), "eval_accuracy": acc}

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
        0.08 + bs * flops * 3 / FLOPS,
        abort_on_nan,
        clip_grad=5.0,
    )
    points, status = run_loop(loop, gen)
    return {"params": dict(cfg), "gpus": 1, "status": status, "points": points}


def main(argv: list[str] | None = None) -> int:
    ap = standard_args(__doc__.splitlines()[0], 150, 7)
    args = ap.parse_args(argv)
    started = time.monotonic()
    configs = sample_configs(PARAMETERS, args.configs, args.seed)
    trials = run_configs(train_one, configs, args.workers, "training deep MLPs", seed=args.seed)
    bank = {
        "name": "quantiles-deepmlp",
        "description": (
            "Deep narrow MLPs (torch, CPU, float32; 2-6 hidden layers, ReLU/tanh/sigmoid, initial weights "
            "scaled by init_scale) really trained with cross-entropy on scikit-learn's "
            f"make_gaussian_quantiles (2500 points, 6 dimensions, 4 concentric classes, seed {args.seed}; "
            f"1500 train / 1000 eval), {EPOCHS} epochs, batches of 16-256, LR schedule "
            f"constant/step/cosine/SGDR restarts/cyclic, gradient norm clipped at 5, {REPORTS} evaluations "
            f"per run; {len(trials)} configurations sampled uniformly (log-uniform where log) with seed "
            f"{args.seed}. Curves are noisy, with plateaus at chance and late improvers. A run whose loss "
            "turns non-finite keeps reporting nan or aborts (failed), drawn per run. Metrics are real; "
            "elapsed_s follows a deterministic cost model (20 s start-up, 0.08 s + batch x 3 x forward "
            "FLOPs / 5e7 per step, 0.3 s + eval FLOPs / 5e7 per evaluation, +-10% seeded jitter per "
            "interval); eta_s is the run's own estimate. Generated by "
            "benchmarks/curvebank/deepmlp_schedules.py."
        ),
        "objective": {"metric": "eval_accuracy", "direction": "maximize", "strategy": "max"},
        "parameters": PARAMETERS,
        "trials": trials,
    }
    write_bank(args.out, bank, started)
    return 0


if __name__ == "__main__":
    sys.exit(main())
