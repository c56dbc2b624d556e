"""A real training script for the local sweep example: a small numpy MLP on scikit-learn's digits.

It knows nothing about Katib. It reports its progress the way any Kubeflow Trainer TrainJob does,
with the Kubeflow SDK's ``update_trainjob_status`` (progress %, ETA and metrics), which the local
sweep receives on its TrainJob status endpoint. Outside a TrainJob that call is a no-op.

The SDK sends at most one update per 5 s per process, so the script trains for about half a minute
and, at the end, retries its final report until it goes through (the objective must be in the
observation log before the trial ends, as with Katib's Push collector).
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time

import numpy as np
from kubeflow.trainer import update_trainjob_status
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split


def softmax_xent(logits: np.ndarray, y: np.ndarray) -> tuple[float, np.ndarray]:
    """Cross-entropy of a plain (unshifted) softmax, as hand-written code often has it: a learning
    rate that is too high overflows exp() and the loss turns into NaN, a real divergence."""
    with np.errstate(all="ignore"):
        exp = np.exp(logits)
        probs = exp / exp.sum(axis=1, keepdims=True)
        loss = float(-np.log(probs[np.arange(len(y)), y]).mean())
    return loss, probs


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--lr", type=float, required=True)
    parser.add_argument("--momentum", type=float, default=0.9)
    parser.add_argument("--hidden", type=int, default=64)
    parser.add_argument("--epochs", type=int, default=40)
    parser.add_argument(
        "--seconds",
        type=float,
        default=30.0,
        help="stretch a full run to about this many seconds: the digits set trains in milliseconds, the "
        "pacing stands in for a bigger model so progress and the SDK's 5 s reporting are visible",
    )
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    x, y = load_digits(return_X_y=True)
    x = (x / 16.0 - 0.5).astype(np.float64)
    x_train, x_test, y_train, y_test = train_test_split(x, y, test_size=0.25, random_state=0, stratify=y)
    rng = np.random.default_rng(args.seed)
    w1 = rng.normal(0, math.sqrt(2 / x.shape[1]), (x.shape[1], args.hidden))
    b1 = np.zeros(args.hidden)
    w2 = rng.normal(0, math.sqrt(1 / args.hidden), (args.hidden, 10))
    b2 = np.zeros(10)
    params = [w1, b1, w2, b2]
    velocity = [np.zeros_like(p) for p in params]
    batch = 64
    epoch_budget = args.seconds / args.epochs
    start = time.monotonic()
    print(f"training lr={args.lr} momentum={args.momentum} hidden={args.hidden}", flush=True)
    for epoch in range(1, args.epochs + 1):
        epoch_start = time.monotonic()
        order = rng.permutation(len(x_train))
        losses = []
        for i in range(0, len(order), batch):
            idx = order[i : i + batch]
            xb, yb = x_train[idx], y_train[idx]
            with np.errstate(all="ignore"):
                h = np.maximum(xb @ w1 + b1, 0)
                loss, probs = softmax_xent(h @ w2 + b2, yb)
                grad = probs
                grad[np.arange(len(yb)), yb] -= 1
                grad /= len(yb)
                grads = [
                    xb.T @ ((grad @ w2.T) * (h > 0)),
                    ((grad @ w2.T) * (h > 0)).sum(0),
                    h.T @ grad,
                    grad.sum(0),
                ]
                for k, g in enumerate(grads):
                    velocity[k] = args.momentum * velocity[k] - args.lr * g
                    params[k] += velocity[k]  # in place: w1, b1, w2, b2 are updated
            losses.append(loss)
        train_loss = float(np.mean(losses))
        with np.errstate(all="ignore"):
            eval_loss, probs = softmax_xent(np.maximum(x_test @ w1 + b1, 0) @ w2 + b2, y_test)
        accuracy = float((probs.argmax(1) == y_test).mean()) if math.isfinite(eval_loss) else 0.0
        if epoch < args.epochs:
            time.sleep(max(0.0, epoch_budget - (time.monotonic() - epoch_start)))
        elapsed = time.monotonic() - start
        eta = round(elapsed / epoch * (args.epochs - epoch))
        metrics = {
            "loss": f"{train_loss:.5g}",
            "eval_loss": f"{eval_loss:.5g}",
            "eval_accuracy": f"{accuracy:.4f}",
        }
        progress = int(100 * epoch / args.epochs)
        print(f"epoch {epoch} {metrics} eta {eta}s", flush=True)
        if epoch < args.epochs or not os.environ.get("KUBEFLOW_TRAINER_SERVER_URL"):
            update_trainjob_status(
                progress_percent=progress, estimated_remaining_seconds=eta, metrics=metrics
            )
            time.sleep(max(0.0, epoch_budget - (time.monotonic() - epoch_start)))
        else:
            # The SDK drops calls within 5 s of the last one: the final report must get through.
            deadline = time.monotonic() + 10
            while not update_trainjob_status(
                progress_percent=100, estimated_remaining_seconds=0, metrics=metrics
            ):
                if time.monotonic() > deadline:
                    print("final status update failed", file=sys.stderr)
                    break
                time.sleep(0.5)
    return 0


if __name__ == "__main__":
    sys.exit(main())
