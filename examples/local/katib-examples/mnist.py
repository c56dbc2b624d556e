"""A small stand-in for the training image of Katib's example Experiments (pytorch-mnist), for local runs.

Same command-line flags and the same output as Katib's examples/v1beta1/trial-images/pytorch-mnist/
mnist.py, so the converted Experiments differ from Katib's only in their trial template:

- training lines through ``logging`` with Katib's format (``%(asctime)s %(levelname)-8s %(message)s``,
  time as ``%Y-%m-%dT%H:%M:%SZ``): ``Train Epoch: 1 [640/1347 (47%)]\\tloss=0.4170``, read by Katib's
  default StdOut filter;
- after each epoch ``{metricName: accuracy, metricValue: 0.9644};{metricName: loss, metricValue: 0.1206}``,
  read by the File example's ``metricsFormat`` filter;
- ``--log-path FILE`` writes the log there instead of stderr; ``--logger hypertune`` appends JSON lines
  (``{"timestamp": ..., "loss": "0.12", "global_step": "1"}``, values as strings, as cloudml-hypertune
  writes them) to ``--log-path``.

Instead of a CNN on MNIST (a download) it trains softmax regression with SGD + momentum on
scikit-learn's bundled 8x8 digits, in well under a second per epoch on one CPU core.
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import sys
import time

import numpy as np
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split


def _args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--test-batch-size", type=int, default=1000)
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--lr", type=float, default=0.01)
    parser.add_argument("--momentum", type=float, default=0.5)
    parser.add_argument("--no-cuda", action="store_true", default=False)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--log-interval", type=int, default=10)
    parser.add_argument("--log-path", type=str, default="")
    parser.add_argument("--save-model", action="store_true", default=False)
    parser.add_argument("--logger", choices=["standard", "hypertune"], default="standard")
    parser.add_argument("--backend", type=str, default="gloo")
    return parser.parse_args()


def _xent(w: np.ndarray, x: np.ndarray, y: np.ndarray) -> tuple[float, np.ndarray]:
    logits = x @ w
    logits -= logits.max(axis=1, keepdims=True)
    probs = np.exp(logits)
    probs /= probs.sum(axis=1, keepdims=True)
    return float(-np.log(probs[np.arange(len(y)), y] + 1e-12).mean()), probs


def main() -> int:
    args = _args()
    fmt = {"format": "%(asctime)s %(levelname)-8s %(message)s", "datefmt": "%Y-%m-%dT%H:%M:%SZ"}
    if args.log_path == "" or args.logger == "hypertune":
        logging.basicConfig(level=logging.DEBUG, **fmt)  # type: ignore[arg-type]
    else:
        logging.basicConfig(level=logging.DEBUG, filename=args.log_path, **fmt)  # type: ignore[arg-type]
    logging.Formatter.converter = time.gmtime  # the "Z" in the format means UTC
    x, y = load_digits(return_X_y=True)
    x = np.hstack([x / 16.0, np.ones((len(x), 1))])
    x_train, x_test, y_train, y_test = train_test_split(x, y, test_size=0.25, random_state=0, stratify=y)
    rng = np.random.default_rng(args.seed)
    w = rng.normal(0.0, 0.01, (x.shape[1], 10))
    velocity = np.zeros_like(w)
    for epoch in range(1, args.epochs + 1):
        order = rng.permutation(len(x_train))
        for batch_idx, start in enumerate(range(0, len(order), args.batch_size)):
            idx = order[start : start + args.batch_size]
            loss, probs = _xent(w, x_train[idx], y_train[idx])
            grad = probs
            grad[np.arange(len(idx)), y_train[idx]] -= 1
            velocity = args.momentum * velocity - args.lr * (x_train[idx].T @ grad) / len(idx)
            w += velocity
            if batch_idx % args.log_interval == 0:
                done = batch_idx * args.batch_size
                logging.info(
                    f"Train Epoch: {epoch} [{done}/{len(x_train)} "
                    f"({100.0 * done / len(x_train):.0f}%)]\tloss={loss:.4f}"
                )
        test_loss, probs = _xent(w, x_test, y_test)
        accuracy = float((probs.argmax(1) == y_test).mean())
        if not math.isfinite(test_loss):
            accuracy = 0.0
        logging.info(
            f"{{metricName: accuracy, metricValue: {accuracy:.4f}}};"
            f"{{metricName: loss, metricValue: {test_loss:.4f}}}\n"
        )
        if args.logger == "hypertune" and args.log_path:
            with open(args.log_path, "a", encoding="utf-8") as out:
                for tag, value in (("loss", test_loss), ("accuracy", accuracy)):
                    line = {"timestamp": time.time(), "trial": "0", tag: str(value)}
                    out.write(json.dumps({**line, "global_step": str(epoch)}) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
