"""Curve banks: six small torch (CPU) MLP families where early leaders can lose late.

One generator, one family per ``--family``; every run really trains on data that ships with
scikit-learn (bundled ``load_digits`` / ``load_breast_cancer``, or a synthetic generator with a fixed
seed; no download), an MLP (ReLU, optional dropout) with cross-entropy, evaluated ``REPORTS`` times.

- ``noisy-digits``: ``load_digits`` (1200 train / 597 eval), 35 % of the training labels replaced by a
  random class (eval labels clean); wide nets and little regularisation memorise the noise, so eval
  loss falls then rises: objective ``eval_loss`` minimize, strategy **latest**.
- ``schedule-digits``: ``load_digits``, linear LR warm-up over ``warmup`` of the run then constant,
  cosine, step (/10 at 50 % and 75 %) or linear decay: long warm-ups start slowly and the decayed runs
  finish best. ``eval_loss`` minimize, ``min``.
- ``strongreg-synth``: ``make_classification`` (500 train / 1000 eval, 120 features, 12 informative,
  5 % flipped labels), strong dropout and weight decay slow the start and win at the end.
  ``eval_loss`` minimize, ``latest``.
- ``smallval-cancer``: ``load_breast_cancer`` standardised, 449 train / a 60-sample validation set:
  accuracy moves in steps of 1/60 and is noisy. ``eval_accuracy`` maximize, ``max``.
- ``batchlr-digits``: ``load_digits``, SGD with momentum, batch size 8-512 against the learning rate
  (a fixed number of epochs: small batches take more, cheaper steps). ``eval_accuracy`` maximize, ``max``.
- ``finetune-digits``: a network pretrained once (fixed seed) on digits 0-4, then fine-tuned on 300
  labelled images of digits 5-9 (eval: the other 5-9 images) with a new head, small learning rates,
  optionally frozen body: the start is good, small steps decide, and few labels overfit.
  ``eval_loss`` minimize, ``latest``.

Cost model (seconds, deterministic; bankkit.RunClock): 15 s start-up (30 s for ``finetune-digits``,
which loads a checkpoint); per optimiser step 0.02 s + batch x forward FLOPs x 3 / 2e7 FLOP/s; per
evaluation 0.2 s + eval rows x forward FLOPs / 2e7; +-10 % seeded jitter per report interval.

Usage (about a minute per family on one core):
    nice -n 10 .venv/bin/python benchmarks/curvebank/torch_families.py --family noisy-digits \\
        --out benchmarks/data/noisy-digits.json.gz
"""

from __future__ import annotations

import math
import sys
import time
from functools import cache
from typing import Any

from bankkit import RunClock, run_configs, sample_configs, standard_args, write_bank

REPORTS = 20
FLOPS = 2e7


def _space(*extra: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        {"name": "learning_rate", "type": "double", "min": 1e-4, "max": 0.3, "log": True},
        {"name": "optimizer", "type": "categorical", "list": ["sgd", "adam"]},
        {"name": "width", "type": "int", "min": 16, "max": 512, "log": True},
        {"name": "weight_decay", "type": "double", "min": 1e-6, "max": 1e-1, "log": True},
        {"name": "batch_size", "type": "discrete", "list": [16, 32, 64, 128]},
        *extra,
    ]


DROPOUT = {"name": "dropout", "type": "double", "min": 0.0, "max": 0.7}
FAMILIES: dict[str, dict[str, Any]] = {
    "noisy-digits": {
        "objective": ("eval_loss", "minimize", "latest"),
        "epochs": 30,
        "seed": 2401,
        "space": _space(DROPOUT),
        "what": "load_digits, 35% of the training labels replaced by a random class (eval labels clean)",
    },
    "schedule-digits": {
        "objective": ("eval_loss", "minimize", "min"),
        "epochs": 12,
        "seed": 2402,
        "space": _space(
            {"name": "warmup", "type": "double", "min": 0.0, "max": 0.5},
            {"name": "schedule", "type": "categorical", "list": ["constant", "cosine", "step", "linear"]},
        ),
        "what": "load_digits, linear LR warm-up then constant, cosine, step or linear decay",
    },
    "strongreg-synth": {
        "objective": ("eval_loss", "minimize", "latest"),
        "epochs": 40,
        "seed": 2403,
        "space": [
            {"name": "learning_rate", "type": "double", "min": 1e-4, "max": 0.1, "log": True},
            {"name": "optimizer", "type": "categorical", "list": ["sgd", "adam"]},
            {"name": "width", "type": "int", "min": 32, "max": 512, "log": True},
            {"name": "weight_decay", "type": "double", "min": 1e-6, "max": 0.3, "log": True},
            {"name": "batch_size", "type": "discrete", "list": [16, 32, 64]},
            {"name": "dropout", "type": "double", "min": 0.0, "max": 0.85},
        ],
        "what": "make_classification (500 train / 1000 eval, 120 features, 12 informative, 5% flipped)",
    },
    "smallval-cancer": {
        "objective": ("eval_accuracy", "maximize", "max"),
        "epochs": 25,
        "seed": 2404,
        "space": _space(DROPOUT),
        "what": "load_breast_cancer standardised, 449 train / 60 validation",
    },
    "batchlr-digits": {
        "objective": ("eval_accuracy", "maximize", "max"),
        "epochs": 10,
        "seed": 2405,
        "space": [
            {"name": "learning_rate", "type": "double", "min": 1e-3, "max": 1.0, "log": True},
            {"name": "batch_size", "type": "discrete", "list": [8, 16, 32, 64, 128, 256, 512]},
            {"name": "momentum", "type": "double", "min": 0.0, "max": 0.95},
            {"name": "width", "type": "int", "min": 16, "max": 256, "log": True},
        ],
        "what": "load_digits, SGD with momentum, batch size against learning rate",
    },
    "finetune-digits": {
        "objective": ("eval_loss", "minimize", "latest"),
        "epochs": 30,
        "seed": 2406,
        "space": [
            {"name": "learning_rate", "type": "double", "min": 1e-5, "max": 0.05, "log": True},
            {"name": "optimizer", "type": "categorical", "list": ["sgd", "adam"]},
            {"name": "freeze_body", "type": "categorical", "list": ["true", "false"]},
            {"name": "weight_decay", "type": "double", "min": 1e-6, "max": 1e-1, "log": True},
            {"name": "batch_size", "type": "discrete", "list": [8, 16, 32, 64]},
            DROPOUT,
        ],
        "what": "a net pretrained on digits 0-4 fine-tuned on 300 images of digits 5-9",
    },
}


@cache
def _data(family: str) -> tuple[Any, Any, Any, Any, int]:
    import numpy as np
    import torch
    from sklearn.datasets import load_breast_cancer, load_digits, make_classification

    rng = np.random.default_rng(FAMILIES[family]["seed"])
    if family == "strongreg-synth":
        x, y = make_classification(
            n_samples=1500, n_features=120, n_informative=12, n_redundant=8, flip_y=0.05, random_state=7
        )
        n_tr, classes = 500, 2
    elif family == "smallval-cancer":
        x, y = load_breast_cancer(return_X_y=True)
        order = rng.permutation(len(y))
        x, y = x[order], y[order]
        x = (x - x[:-60].mean(0)) / x[:-60].std(0)
        n_tr, classes = len(y) - 60, 2
    elif family == "finetune-digits":
        x, y = load_digits(return_X_y=True)
        x = x / 16.0
        keep = y >= 5
        x, y = x[keep], y[keep] - 5
        order = rng.permutation(len(y))
        x, y = x[order], y[order]
        n_tr, classes = 300, 5
    else:
        x, y = load_digits(return_X_y=True)
        x = x / 16.0
        order = rng.permutation(len(y))
        x, y = x[order], y[order]
        n_tr, classes = 1200, 10
        if family == "noisy-digits":
            y = y.copy()
            flip = rng.random(n_tr) < 0.35
            y[:n_tr][flip] = rng.integers(0, classes, int(flip.sum()))
    xt, yt = torch.tensor(x, dtype=torch.float32), torch.tensor(y, dtype=torch.long)
    return xt[:n_tr], yt[:n_tr], xt[n_tr:], yt[n_tr:], classes


@cache
def _pretrained() -> dict[str, Any]:
    """A 64-128-128-5 body+head trained 15 epochs on digits 0-4 (fixed seed): the fine-tuning start."""
    import torch
    from sklearn.datasets import load_digits

    x, y = load_digits(return_X_y=True)
    keep = y < 5
    xt = torch.tensor(x[keep] / 16.0, dtype=torch.float32)
    yt = torch.tensor(y[keep], dtype=torch.long)
    torch.manual_seed(5)
    net = _net(64, 128, 5, 0.0, depth=2)
    opt = torch.optim.Adam(net.parameters(), lr=3e-3)
    gen = torch.Generator().manual_seed(5)
    for _ in range(15):
        for idx in torch.randperm(len(yt), generator=gen).split(32):
            loss = torch.nn.functional.cross_entropy(net(xt[idx]), yt[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
    return {k: v.clone() for k, v in net.state_dict().items()}


def _net(n_in: int, width: int, n_out: int, dropout: float, depth: int = 1) -> Any:
    import torch

    layers: list[Any] = []
    prev = n_in
    for _ in range(depth):
        layers += [torch.nn.Linear(prev, width), torch.nn.ReLU(), torch.nn.Dropout(dropout)]
        prev = width
    layers.append(torch.nn.Linear(prev, n_out))
    return torch.nn.Sequential(*layers)


def _factor(cfg: dict[str, Any], frac: float) -> float:
    warm = float(cfg.get("warmup", 0.0))
    if warm > 0 and frac < warm:
        return (frac + 1e-3) / warm
    rest = (frac - warm) / max(1e-9, 1.0 - warm)
    schedule = cfg.get("schedule", "constant")
    if schedule == "cosine":
        return 0.5 * (1.0 + math.cos(math.pi * rest))
    if schedule == "step":
        return 1.0 if frac < 0.5 else 0.1 if frac < 0.75 else 0.01
    if schedule == "linear":
        return max(0.0, 1.0 - rest)
    return 1.0


def train_one(index: int, cfg: dict[str, Any], family: str, seed: int) -> dict[str, Any]:
    import torch
    from bankkit import finite, fmt, report_schedule
    from torchkit import batches, make_optimizer, seeded

    fam = FAMILIES[family]
    rng, gen = seeded(seed, index)
    xtr, ytr, xev, yev, classes = _data(family)
    dropout = float(cfg.get("dropout", 0.0))
    if family == "finetune-digits":
        net = _net(64, 128, 5, dropout, depth=2)
        state = _pretrained()
        net.load_state_dict(state)
        torch.nn.init.normal_(net[-1].weight, std=0.01)  # a new head
        torch.nn.init.zeros_(net[-1].bias)
        if cfg["freeze_body"] == "true":
            for layer in list(net)[:-1]:
                for p in layer.parameters():
                    p.requires_grad_(False)
        width, depth = 128, 2
    else:
        width, depth = int(cfg["width"]), 1
        net = _net(xtr.shape[1], width, classes, dropout)
    params = [p for p in net.parameters() if p.requires_grad]
    lr = float(cfg["learning_rate"])
    if "momentum" in cfg:
        opt: Any = torch.optim.SGD(params, lr=lr, momentum=float(cfg["momentum"]))
    else:
        opt = make_optimizer(str(cfg["optimizer"]), params, lr, float(cfg["weight_decay"]))
    batch = int(cfg["batch_size"])
    flops = 2 * (xtr.shape[1] * width + (depth - 1) * width * width + width * classes)
    startup = 30.0 if family == "finetune-digits" else 15.0
    spe = math.ceil(len(ytr) / batch)
    total = fam["epochs"] * spe
    clock = RunClock(rng, startup_s=startup, eval_s=0.2 + len(yev) * flops / FLOPS, total_units=total)
    step_cost = 0.02 + batch * flops * 3 / FLOPS
    report_at = report_schedule(total, REPORTS)
    abort_on_nan = bool(rng.integers(2))
    points: list[dict[str, Any]] = []
    it = batches(len(ytr), batch, gen)
    loss_sum, loss_n = 0.0, 0
    for step in range(total):
        factor = _factor(cfg, step / total)
        for g in opt.param_groups:
            g["lr"] = lr * factor
        idx = next(it)
        net.train()
        loss = torch.nn.functional.cross_entropy(net(xtr[idx]), ytr[idx])
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        loss_sum += float(loss.detach())
        loss_n += 1
        clock.work(1, step_cost)
        k = report_at.get(step + 1)
        if k is None:
            continue
        net.eval()
        with torch.no_grad():
            logits = net(xev)
            ev_loss = float(torch.nn.functional.cross_entropy(logits, yev))
            acc = float((logits.argmax(1) == yev).float().mean())
        train_loss = loss_sum / loss_n
        metrics = {"loss": fmt(train_loss), "eval_loss": fmt(ev_loss), "eval_accuracy": fmt(acc)}
        metrics["learning_rate"] = fmt(lr * factor)
        points.append(clock.report(100 * k / REPORTS, metrics, REPORTS - k))
        loss_sum, loss_n = 0.0, 0
        if not finite(train_loss, ev_loss):
            if abort_on_nan:
                return {"params": dict(cfg), "gpus": 1, "status": "failed", "points": points}
            # keep reporting "nan" to the end, as Hugging Face's Trainer does
            for kk in range(k + 1, REPORTS + 1):
                clock.work(total / REPORTS, step_cost)
                nan = {"loss": "nan", "eval_loss": "nan", "eval_accuracy": fmt(1.0 / classes)}
                points.append(clock.report(100 * kk / REPORTS, nan, REPORTS - kk))
            break
    return {"params": dict(cfg), "gpus": 1, "status": "completed", "points": points}


def main(argv: list[str] | None = None) -> int:
    ap = standard_args(__doc__.splitlines()[0], 100, 0)
    ap.add_argument("--family", choices=sorted(FAMILIES), required=True)
    args = ap.parse_args(argv)
    fam = FAMILIES[args.family]
    seed = args.seed or fam["seed"]
    started = time.monotonic()
    configs = sample_configs(fam["space"], args.configs, seed)
    trials = run_configs(train_one, configs, args.workers, args.family, family=args.family, seed=seed)
    metric, direction, strategy = fam["objective"]
    bank = {
        "name": args.family,
        "description": (
            f"torch MLP runs really trained on CPU: {fam['what']}; {fam['epochs']} epochs, {REPORTS} "
            f"evaluations per run; {len(trials)} configurations sampled uniformly (log-uniform where log) "
            f"with seed {seed}. Metrics are real; elapsed_s follows a deterministic cost model (start-up, "
            "a cost per optimiser step from the model's FLOPs, a cost per evaluation, +-10% seeded jitter "
            "per interval); eta_s is the run's own estimate. Generated by "
            f"benchmarks/curvebank/torch_families.py --family {args.family}."
        ),
        "objective": {"metric": metric, "direction": direction, "strategy": strategy},
        "parameters": fam["space"],
        "trials": trials,
    }
    write_bank(args.out, bank, started)
    return 0


if __name__ == "__main__":
    sys.exit(main())
