"""Curve bank: small convolutional networks (torch, CPU) really trained on scikit-learn's bundled digits.

Each configuration is a two-convolution CNN (conv k x k -> act -> conv 3 x 3 -> act -> 2 x 2 max-pool ->
dense -> act -> dropout -> 10-way linear, optional batch norm after each convolution) trained with
cross-entropy on the 8 x 8 digit images of ``sklearn.datasets.load_digits`` (1797 images, no download;
fixed 75/25 train/eval split, pixels / 16), random +-1 pixel shifts as augmentation when ``augment``.
Objective: ``eval_accuracy``, maximize, strategy ``max`` (Katib's default for maximize).

Cost model (seconds, deterministic): 30 s start-up; per optimiser step 0.2 s + batch x forward FLOPs x 3
/ 5e7 FLOP/s (a slow shared accelerator, so runs last minutes like a real sweep's); per evaluation
0.5 s + eval set x forward FLOPs / 5e7; +-10 % seeded jitter per report interval (bankkit.RunClock).

Usage:
    nice -n 10 .venv/bin/python benchmarks/curvebank/cnn_digits.py --out benchmarks/data/digits-cnn.json.gz
"""

from __future__ import annotations

import sys
import time
from typing import Any

from bankkit import RunClock, run_configs, sample_configs, standard_args, write_bank

EPOCHS = 8
REPORTS = 24
STARTUP_S = 30.0
FLOPS = 5e7

PARAMETERS: list[dict[str, Any]] = [
    {"name": "learning_rate", "type": "double", "min": 1e-4, "max": 0.3, "log": True},
    {"name": "optimizer", "type": "categorical", "list": ["sgd", "adam", "rmsprop"]},
    {"name": "batch_size", "type": "discrete", "list": [16, 32, 64, 128, 256]},
    {"name": "channels", "type": "int", "min": 2, "max": 24, "log": True},
    {"name": "kernel_size", "type": "discrete", "list": [3, 5]},
    {"name": "dense_units", "type": "int", "min": 8, "max": 256, "log": True},
    {"name": "dropout", "type": "double", "min": 0.0, "max": 0.7},
    {"name": "weight_decay", "type": "double", "min": 1e-6, "max": 1e-2, "log": True},
    {"name": "batch_norm", "type": "categorical", "list": ["true", "false"]},
    {"name": "augment", "type": "categorical", "list": ["true", "false"]},
]


def _data(seed: int) -> tuple[Any, Any, Any, Any]:
    import numpy as np
    import torch
    from sklearn.datasets import load_digits

    d = load_digits()
    order = np.random.default_rng(seed).permutation(len(d.target))
    cut = int(0.75 * len(order))
    x = torch.tensor(d.images / 16.0, dtype=torch.float32).unsqueeze(1)
    y = torch.tensor(d.target, dtype=torch.long)
    tr, ev = torch.tensor(order[:cut]), torch.tensor(order[cut:])
    return x[tr], y[tr], x[ev], y[ev]


def _model(cfg: dict[str, Any]) -> tuple[Any, float]:
    """The network and its forward FLOPs per image."""
    from torch import nn

    c, k, h = int(cfg["channels"]), int(cfg["kernel_size"]), int(cfg["dense_units"])
    bn = cfg["batch_norm"] == "true"
    layers: list[nn.Module] = [nn.Conv2d(1, c, k, padding=k // 2)]
    layers += [nn.BatchNorm2d(c)] if bn else []
    layers += [nn.ReLU(), nn.Conv2d(c, 2 * c, 3, padding=1)]
    layers += [nn.BatchNorm2d(2 * c)] if bn else []
    layers += [nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(), nn.Linear(2 * c * 16, h), nn.ReLU()]
    layers += [nn.Dropout(float(cfg["dropout"])), nn.Linear(h, 10)]
    flops = 2.0 * (64 * k * k * c + 64 * 9 * c * 2 * c + 32 * c * h + 10 * h)
    return nn.Sequential(*layers), flops


def train_one(index: int, cfg: dict[str, Any], seed: int) -> dict[str, Any]:
    import torch
    import torch.nn.functional as F
    from torchkit import Loop, make_optimizer, run_loop, seeded

    rng, gen = seeded(seed, index)
    abort_on_nan = bool(rng.integers(2))
    xtr, ytr, xev, yev = _data(seed)
    model, flops = _model(cfg)
    bs = int(cfg["batch_size"])
    augment = cfg["augment"] == "true"
    opt = make_optimizer(
        str(cfg["optimizer"]), model.parameters(), float(cfg["learning_rate"]), float(cfg["weight_decay"])
    )

    def step_loss(idx: torch.Tensor) -> torch.Tensor:
        xb = xtr[idx]
        if augment:
            dx, dy = (int(v) - 1 for v in torch.randint(0, 3, (2,), generator=gen))
            xb = torch.roll(xb, shifts=(dy, dx), dims=(2, 3))
        return F.cross_entropy(model(xb), ytr[idx])

    def evaluate() -> dict[str, float]:
        logits = model(xev)
        loss = float(F.cross_entropy(logits, yev))
        ok = bool(torch.isfinite(logits).all())
        acc = float((logits.argmax(1) == yev).float().mean()) if ok else float("nan")
        return {"eval_loss": loss, "eval_accuracy": acc}

    steps_per_epoch = -(-len(ytr) // bs)
    clock = RunClock(
        rng, startup_s=STARTUP_S, eval_s=0.5 + len(yev) * flops / FLOPS, total_units=EPOCHS * steps_per_epoch
    )
    loop = Loop(
        model,
        opt,
        "constant",
        len(ytr),
        bs,
        EPOCHS,
        REPORTS,
        step_loss,
        evaluate,
        clock,
        0.2 + bs * flops * 3 / FLOPS,
        abort_on_nan,
    )
    points, status = run_loop(loop, gen)
    return {"params": dict(cfg), "gpus": 1, "status": status, "points": points}


def main(argv: list[str] | None = None) -> int:
    ap = standard_args(__doc__.splitlines()[0], 150, 31337)
    args = ap.parse_args(argv)
    started = time.monotonic()
    configs = sample_configs(PARAMETERS, args.configs, args.seed)
    trials = run_configs(train_one, configs, args.workers, "training digits CNNs", seed=args.seed)
    bank = {
        "name": "digits-cnn",
        "description": (
            f"Two-convolution CNNs (torch, CPU, float32) really trained on scikit-learn's bundled digits "
            f"images (8x8, 75/25 train/eval split, pixels/16), cross-entropy, constant learning rate, "
            f"{EPOCHS} epochs, {REPORTS} evaluations per run; {len(trials)} configurations sampled uniformly "
            f"(log-uniform where log) with seed {args.seed}. A run whose loss turns non-finite keeps "
            "reporting nan or aborts (failed), drawn per run. Metrics are real; elapsed_s follows a "
            "deterministic cost model (30 s start-up, 0.2 s + batch x 3 x forward FLOPs / 5e7 per step, "
            "0.5 s + eval FLOPs / 5e7 per evaluation, +-10% seeded jitter per interval); eta_s is the run's "
            "own estimate. Generated by benchmarks/curvebank/cnn_digits.py."
        ),
        "objective": {"metric": "eval_accuracy", "direction": "maximize", "strategy": "max"},
        "parameters": PARAMETERS,
        "trials": trials,
    }
    write_bank(args.out, bank, started)
    return 0


if __name__ == "__main__":
    sys.exit(main())
