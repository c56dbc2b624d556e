"""A plain PyTorch training loop that reports live progress to Kubeflow Trainer.

It calls the Kubeflow SDK's ``kubeflow.trainer.update_trainjob_status`` (kubeflow >= 0.5.0) every
``--report-every`` steps with the progress percentage, an ETA and its metrics; inside a TrainJob
with the ``TrainJobStatus`` feature gate the Trainer controller stores them in
``status.trainerStatus``, where the katib-progress collector picks them up. Outside a TrainJob the
calls return False and do nothing, so the same script runs on a laptop.

The data is synthetic (no download), so the example runs anywhere; swap in your own.

Only ``report_progress`` / ``report_final`` matter for katib-progress; the rest is ordinary PyTorch.
"""

from __future__ import annotations

import argparse
import logging
import math
import os
import time
from collections.abc import Callable, Mapping

from kubeflow.trainer import update_trainjob_status

_log = logging.getLogger("custom-loop")

#: Set by the Trainer controller inside a TrainJob when the TrainJobStatus gate is on.
_SERVER_URL_ENV = "KUBEFLOW_TRAINER_SERVER_URL"


def _wire(metrics: Mapping[str, float]) -> dict[str, float | int | str]:
    return dict(metrics.items())


def report_progress(
    step: int, total_steps: int, started: float, metrics: Mapping[str, float], *, now: float | None = None
) -> bool:
    """One live snapshot: progress %, ETA from the mean step time so far, and the metrics.

    The SDK sends at most one update per 5 s per process and drops the rest (returns False):
    calling it often is safe, and intermediate snapshots are allowed to be lost.
    """
    now = time.monotonic() if now is None else now
    done = max(step, 1)
    eta = (now - started) / done * max(total_steps - step, 0)
    return update_trainjob_status(
        progress_percent=min(100, int(100 * step / total_steps)),
        estimated_remaining_seconds=math.ceil(eta),
        metrics=_wire(metrics),
    )


def report_final(
    metrics: Mapping[str, float],
    *,
    attempts: int = 4,
    wait_s: float = 5.5,
    sleep: Callable[[float], None] = time.sleep,
) -> bool:
    """The LAST snapshot must not be dropped: Katib reads the objective once, when the trial ends.

    ``update_trainjob_status`` returns False both when throttled (an update went out less than 5 s
    ago) and on a transient error, so retry past the throttle window. Returns True once delivered,
    False outside a TrainJob (nothing to deliver to) or after ``attempts`` failures.
    """
    if not os.environ.get(_SERVER_URL_ENV):
        return False
    payload = _wire(metrics)
    for attempt in range(attempts):
        if update_trainjob_status(progress_percent=100, estimated_remaining_seconds=0, metrics=payload):
            return True
        if attempt + 1 < attempts:
            sleep(wait_s)
    _log.error("final metrics were not delivered after %d attempts", attempts)
    return False


def train(args: argparse.Namespace) -> dict[str, float]:
    import torch  # the training image has it; importing lazily keeps the helpers above testable
    from torch import nn

    torch.manual_seed(args.seed)
    n, dim = 4096, 20
    x = torch.randn(n, dim)
    w_true = torch.randn(dim, 1)
    y = ((x @ w_true).squeeze(1) + 0.5 * torch.randn(n) > 0).long()
    split = int(0.8 * n)
    x_train, y_train, x_val, y_val = x[:split], y[:split], x[split:], y[split:]

    model = nn.Sequential(nn.Linear(dim, args.hidden), nn.ReLU(), nn.Linear(args.hidden, 2))
    opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=args.momentum)
    loss_fn = nn.CrossEntropyLoss()
    steps_per_epoch = math.ceil(split / args.batch_size)
    total_steps = args.epochs * steps_per_epoch
    started = time.monotonic()
    step = 0
    metrics: dict[str, float] = {}

    def evaluate() -> dict[str, float]:
        model.eval()
        with torch.no_grad():
            logits = model(x_val)
            val_loss = float(loss_fn(logits, y_val))
            val_acc = float((logits.argmax(1) == y_val).float().mean())
        model.train()
        return {"val_loss": val_loss, "val_accuracy": val_acc}

    for _epoch in range(args.epochs):
        perm = torch.randperm(split)
        for i in range(0, split, args.batch_size):
            idx = perm[i : i + args.batch_size]
            loss = loss_fn(model(x_train[idx]), y_train[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
            step += 1
            if step % args.report_every == 0 and step < total_steps:
                metrics = {"loss": float(loss), **evaluate()}
                report_progress(step, total_steps, started, metrics)
    metrics = {"loss": float(loss), **evaluate()}
    report_final(metrics)
    return metrics


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--momentum", type=float, default=0.9)
    p.add_argument("--hidden", type=int, default=64)
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--epochs", type=int, default=20)
    p.add_argument("--report-every", type=int, default=20)
    p.add_argument("--seed", type=int, default=0)
    return p.parse_args(argv)


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO)
    final = train(parse_args())
    _log.info("final metrics: %s", final)
