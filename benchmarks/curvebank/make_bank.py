"""Generate a learning-curve bank by really training small numpy MLPs on scikit-learn's bundled data.

Every configuration is trained for real (forward pass, back-propagation, SGD-with-momentum or Adam,
L2 weight decay) on a dataset that ships inside scikit-learn (no download), and its progress is
recorded as a TrainJob's ``status.trainerStatus`` would show it: integer progress percentage, the
run's own ETA, and metrics (``loss``, ``eval_loss``, ``eval_accuracy``, ``learning_rate``, ``epoch``).
Non-finite values are recorded as the strings "nan"/"inf"/"-inf". A run whose loss turns non-finite
either keeps going and keeps reporting "nan" (as Hugging Face's Trainer does) or aborts, in which
case it is recorded as ``status: failed`` with its points ending where it died.

Wall-clock: the metrics are real; ``elapsed_s`` comes from a deterministic compute-cost model
(per-step overhead plus a term proportional to batch size x parameter count, eval cost, start-up,
seeded +-10 % throughput jitter), scaled to minutes-long runs, so the bank is bit-for-bit
reproducible from its seed on any machine. The ETA is the run's own estimate from its speed so far.

Usage:
    .venv/bin/python benchmarks/curvebank/make_bank.py --out benchmarks/data/digits-mlp.json.gz
"""

from __future__ import annotations

import argparse
import gzip
import json
import math
import os
import sys
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

# Be frugal with cores on a shared machine: one BLAS thread per process.
for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import numpy as np  # noqa: E402

EPOCHS = 20
REPORTS = 25  # progress points per run: every 4 %
STARTUP_S = 20.0
STEP_OVERHEAD_S = 0.5
PER_SAMPLE_PARAM_S = 1e-6
EVAL_S = 2.0

PARAMETERS: list[dict[str, Any]] = [
    {"name": "learning_rate", "type": "double", "min": 1e-4, "max": 3.0, "log": True},
    {"name": "hidden_units", "type": "int", "min": 8, "max": 256, "log": True},
    {"name": "batch_size", "type": "discrete", "list": [16, 32, 64, 128, 256]},
    {"name": "weight_decay", "type": "double", "min": 1e-6, "max": 1e-1, "log": True},
    {"name": "momentum", "type": "double", "min": 0.0, "max": 0.99},
    {"name": "init_scale", "type": "double", "min": 0.01, "max": 10.0, "log": True},
    {"name": "optimizer", "type": "categorical", "list": ["sgd", "adam"]},
    {"name": "activation", "type": "categorical", "list": ["relu", "tanh"]},
]

DATASETS = ("digits", "breast_cancer", "wine")


def load_dataset(name: str) -> tuple[np.ndarray, np.ndarray]:
    from sklearn import datasets

    loaders: dict[str, Callable[..., Any]] = {
        "digits": datasets.load_digits,
        "breast_cancer": datasets.load_breast_cancer,
        "wine": datasets.load_wine,
    }
    data = loaders[name]()
    return np.asarray(data.data, dtype=np.float64), np.asarray(data.target, dtype=np.int64)


def split(x: np.ndarray, y: np.ndarray, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    order = rng.permutation(len(y))
    cut = int(0.75 * len(y))
    tr, ev = order[:cut], order[cut:]
    mean = x[tr].mean(axis=0)
    std = x[tr].std(axis=0)
    std[std < 1e-6] = 1.0  # constant pixels stay at zero instead of exploding on the eval split
    # float32 like real frameworks, so a diverging run really overflows to inf/nan.
    xs = ((x - mean) / std).astype(np.float32)
    return xs[tr], y[tr], xs[ev], y[ev]


def sample_configs(n: int, seed: int) -> list[dict[str, Any]]:
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        cfg: dict[str, Any] = {}
        for p in PARAMETERS:
            if p["type"] in ("discrete", "categorical"):
                cfg[p["name"]] = p["list"][int(rng.integers(len(p["list"])))]
            elif p.get("log"):
                v = math.exp(rng.uniform(math.log(p["min"]), math.log(p["max"])))
                cfg[p["name"]] = round(v) if p["type"] == "int" else float(f"{v:.6g}")
            else:
                v = rng.uniform(p["min"], p["max"])
                cfg[p["name"]] = round(v) if p["type"] == "int" else float(f"{v:.6g}")
        out.append(cfg)
    return out


def _fmt(v: float) -> float | str:
    if math.isnan(v):
        return "nan"
    if math.isinf(v):
        return "inf" if v > 0 else "-inf"
    return float(f"{v:.6g}")


def _forward(
    w1: np.ndarray, b1: np.ndarray, w2: np.ndarray, b2: np.ndarray, x: np.ndarray, act: str
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Return pre-activations, hidden activations, softmax probabilities and log-probabilities."""
    z = x @ w1 + b1
    h = np.maximum(z, 0.0) if act == "relu" else np.tanh(z)
    logits = h @ w2 + b2
    logits = logits - logits.max(axis=1, keepdims=True)
    logp = logits - np.log(np.exp(logits).sum(axis=1, keepdims=True))
    return z, h, np.exp(logp), logp


def _xent(logp: np.ndarray, y: np.ndarray) -> float:
    return float(-logp[np.arange(len(y)), y].mean())


def _gradients(
    params: list[np.ndarray], xb: np.ndarray, yb: np.ndarray, act: str, wd: float
) -> tuple[list[np.ndarray], float]:
    """Back-propagation of the cross-entropy of one batch: the gradients and the batch loss."""
    z, h, p, logp = _forward(*params, xb, act)
    g = p.copy()
    g[np.arange(len(yb)), yb] -= 1.0
    g /= np.float32(len(yb))
    gw2 = h.T @ g + wd * params[2]
    gb2 = g.sum(axis=0)
    dh = g @ params[2].T
    dz = dh * (z > 0) if act == "relu" else dh * (1.0 - h * h)
    gw1 = xb.T @ dz + wd * params[0]
    gb1 = dz.sum(axis=0)
    return [gw1, gb1, gw2, gb2], _xent(logp, yb)


class _Optimizer:
    """SGD with momentum, or Adam (``momentum`` as beta1), over the parameter list in place."""

    def __init__(self, cfg: dict[str, Any], params: list[np.ndarray]) -> None:
        self.adam = cfg["optimizer"] == "adam"
        self.lr = float(cfg["learning_rate"])
        self.mom = float(cfg["momentum"])
        self.m = [np.zeros_like(p) for p in params]
        self.v = [np.zeros_like(p) for p in params]
        self.t = 0

    def step(self, params: list[np.ndarray], grads: list[np.ndarray]) -> None:
        self.t += 1
        m, v, lr, mom, t = self.m, self.v, self.lr, self.mom, self.t
        for i, gr in enumerate(grads):
            if self.adam:
                m[i] = mom * m[i] + (1 - mom) * gr
                v[i] = 0.999 * v[i] + 0.001 * gr * gr
                mhat = m[i] / (1 - mom**t) if mom > 0 else m[i]
                vhat = v[i] / (1 - 0.999**t)
                params[i] = (params[i] - lr * mhat / (np.sqrt(vhat) + 1e-8)).astype(np.float32)
            else:
                m[i] = (mom * m[i] + gr).astype(np.float32)
                params[i] = (params[i] - lr * m[i]).astype(np.float32)


def _init_params(rng: np.random.Generator, d: int, hdim: int, c: int, scale: float) -> list[np.ndarray]:
    return [
        rng.normal(0.0, scale * math.sqrt(2.0 / d), (d, hdim)).astype(np.float32),
        np.zeros(hdim, dtype=np.float32),
        rng.normal(0.0, scale * math.sqrt(2.0 / hdim), (hdim, c)).astype(np.float32),
        np.zeros(c, dtype=np.float32),
    ]


def _eval_metrics(
    params: list[np.ndarray], xev: np.ndarray, yev: np.ndarray, act: str
) -> tuple[float, float]:
    """(eval loss, eval accuracy; NaN when the outputs are not finite)."""
    _, _, pev, logpev = _forward(*params, xev, act)
    acc = float((pev.argmax(axis=1) == yev).mean()) if np.all(np.isfinite(pev)) else math.nan
    return _xent(logpev, yev), acc


def _point(
    k: int, elapsed: float, eta: float, metrics: dict[str, float], lr: float, epoch: float
) -> dict[str, Any]:
    """The bank entry of report ``k``."""
    return {
        "progress": round(100 * k / REPORTS),
        "elapsed_s": round(elapsed, 1),
        "eta_s": round(eta),
        "metrics": {
            "loss": _fmt(metrics["loss"]),
            "eval_loss": _fmt(metrics["eval_loss"]),
            "eval_accuracy": _fmt(metrics["eval_accuracy"]),
            "learning_rate": _fmt(lr),
            "epoch": epoch,
        },
    }


def train_one(index: int, cfg: dict[str, Any], dataset: str, seed: int) -> dict[str, Any]:
    """Really train one configuration; return its bank entry (params, status, points)."""
    x, y = load_dataset(dataset)
    xtr, ytr, xev, yev = split(x, y, seed)
    rng = np.random.default_rng([seed, index])
    n, d = xtr.shape
    bs = int(cfg["batch_size"])
    act = str(cfg["activation"])
    # Half of the runs abort on a non-finite loss (crash), half keep reporting "nan".
    abort_on_nan = bool(rng.integers(2))
    params = _init_params(rng, d, int(cfg["hidden_units"]), int(y.max()) + 1, float(cfg["init_scale"]))
    optimizer = _Optimizer(cfg, params)
    n_params = sum(p.size for p in params)

    steps_per_epoch = math.ceil(n / bs)
    total = EPOCHS * steps_per_epoch
    report_at = {round(total * k / REPORTS): k for k in range(1, REPORTS + 1)}
    step_cost = STEP_OVERHEAD_S + bs * n_params * PER_SAMPLE_PARAM_S
    elapsed = STARTUP_S
    train_elapsed = 0.0
    points: list[dict[str, Any]] = []
    status = "completed"
    loss_sum, loss_n, step = 0.0, 0, 0
    order = rng.permutation(n)
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        interval_jitter = float(rng.lognormal(0.0, 0.1))
        while step < total:
            pos = (step % steps_per_epoch) * bs
            if pos == 0:
                order = rng.permutation(n)
            idx = order[pos : pos + bs]
            grads, batch_loss = _gradients(params, xtr[idx], ytr[idx], act, float(cfg["weight_decay"]))
            loss_sum += batch_loss
            loss_n += 1
            optimizer.step(params, grads)
            step += 1
            dt = step_cost * interval_jitter
            elapsed += dt
            train_elapsed += dt
            if step in report_at:
                k = report_at[step]
                eval_loss, acc = _eval_metrics(params, xev, yev, act)
                train_loss = loss_sum / max(loss_n, 1)
                elapsed += EVAL_S
                eta = train_elapsed / step * (total - step) + EVAL_S * (REPORTS - k)
                metrics = {"loss": train_loss, "eval_loss": eval_loss, "eval_accuracy": acc}
                points.append(
                    _point(k, elapsed, eta, metrics, optimizer.lr, round(step / steps_per_epoch, 2))
                )
                loss_sum, loss_n = 0.0, 0
                interval_jitter = float(rng.lognormal(0.0, 0.1))
                if abort_on_nan and not (math.isfinite(train_loss) and math.isfinite(eval_loss)):
                    status = "failed"
                    break
    return {"params": dict(cfg), "gpus": 1, "status": status, "points": points}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dataset", choices=DATASETS, default="digits")
    ap.add_argument("--configs", type=int, default=500)
    ap.add_argument("--seed", type=int, default=20260)
    ap.add_argument("--workers", type=int, default=1, help="process pool workers (be frugal: 1 or 2)")
    ap.add_argument("--out", type=Path, required=True, help=".json or .json.gz")
    args = ap.parse_args(argv)

    from rich.progress import Progress

    configs = sample_configs(args.configs, args.seed)
    results: list[dict[str, Any] | None] = [None] * len(configs)
    started = time.monotonic()
    with Progress(transient=False) as bar:
        task = bar.add_task(f"training {args.dataset} MLPs", total=len(configs))
        if args.workers <= 1:
            for i, cfg in enumerate(configs):
                results[i] = train_one(i, cfg, args.dataset, args.seed)
                bar.advance(task)
        else:
            with ProcessPoolExecutor(max_workers=min(args.workers, 2)) as pool:
                futs = {
                    pool.submit(train_one, i, cfg, args.dataset, args.seed): i
                    for i, cfg in enumerate(configs)
                }
                for fut, i in futs.items():
                    results[i] = fut.result()
                    bar.advance(task)
    trials = [r for r in results if r is not None]
    bank = {
        "name": f"{args.dataset}-mlp",
        "description": (
            f"One-hidden-layer numpy MLPs really trained on scikit-learn's bundled {args.dataset} dataset "
            f"(75/25 train/eval split, standardised), {EPOCHS} epochs, {REPORTS} progress reports per run; "
            f"{len(trials)} configurations sampled uniformly (log-uniform where log) with seed {args.seed}. "
            "Metrics are real; elapsed_s follows a deterministic cost model (0.5 s/step + 1e-6 s x batch x "
            "parameters, 2 s per eval, 20 s start-up, +-10% seeded jitter); eta_s is the run's own estimate. "
            "Generated by benchmarks/curvebank/make_bank.py."
        ),
        "objective": {"metric": "eval_loss", "direction": "minimize", "strategy": "min"},
        "parameters": PARAMETERS,
        "trials": trials,
    }
    payload = json.dumps(bank, separators=(",", ":")).encode()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    if args.out.suffix == ".gz":
        # mtime=0 and no file name keep the compressed file byte-identical across regenerations.
        with open(args.out, "wb") as fh, gzip.GzipFile(filename="", fileobj=fh, mode="wb", mtime=0) as gz:
            gz.write(payload)
    else:
        args.out.write_bytes(payload)
    failed = sum(t["status"] == "failed" for t in trials)
    print(
        f"wrote {args.out} ({args.out.stat().st_size / 1e6:.2f} MB): {len(trials)} trials, {failed} failed, "
        f"{time.monotonic() - started:.0f} s",
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
