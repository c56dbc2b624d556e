"""Shared torch (CPU) training loop of the curve-bank generators: optimisers, LR schedules, reports.

A run trains for ``total_steps`` optimiser steps on shuffled mini-batches, evaluates ``reports`` times at
evenly spaced steps, and records each evaluation as a progress point through :class:`bankkit.RunClock`.
A run whose training or evaluation loss turns non-finite either keeps going and keeps reporting "nan"
(as Hugging Face's Trainer does) or aborts and is recorded ``failed`` with its points ending there;
which of the two is drawn per run from its seed.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from bankkit import RunClock, finite, fmt, report_schedule

SCHEDULES = ("constant", "cosine", "step", "cosine_restarts", "cyclic")


def make_optimizer(
    name: str, params: Any, lr: float, weight_decay: float, momentum: float = 0.9
) -> torch.optim.Optimizer:
    if name == "sgd":
        return torch.optim.SGD(params, lr=lr, momentum=momentum, weight_decay=weight_decay)
    if name == "nesterov":
        return torch.optim.SGD(params, lr=lr, momentum=momentum, nesterov=True, weight_decay=weight_decay)
    if name == "adam":
        return torch.optim.Adam(params, lr=lr, weight_decay=weight_decay)
    if name == "adamw":
        return torch.optim.AdamW(params, lr=lr, weight_decay=weight_decay)
    if name == "rmsprop":
        return torch.optim.RMSprop(params, lr=lr, weight_decay=weight_decay)
    raise ValueError(f"unknown optimizer {name!r}")


def lr_factor(schedule: str, step: int, total: int, steps_per_epoch: int) -> float:
    """Multiplier of the base learning rate at ``step`` (0-based) of ``total``."""
    frac = step / max(total, 1)
    if schedule == "constant":
        return 1.0
    if schedule == "cosine":
        return 0.5 * (1.0 + math.cos(math.pi * frac))
    if schedule == "step":  # /10 at 50 % and again at 75 % of the run
        return 1.0 if frac < 0.5 else 0.1 if frac < 0.75 else 0.01
    if schedule == "cosine_restarts":  # SGDR: periods of 1, 2, 4 ... epochs x 2, doubling (T_mult=2)
        period, start = 2 * steps_per_epoch, 0
        while step >= start + period:
            start, period = start + period, period * 2
        return 0.5 * (1.0 + math.cos(math.pi * (step - start) / period))
    if schedule == "cyclic":  # triangular, 4 epochs up and down, between 0.1x and 1x
        cycle = 4 * steps_per_epoch
        pos = (step % cycle) / cycle
        return 0.1 + 0.9 * (1.0 - abs(2.0 * pos - 1.0))
    raise ValueError(f"unknown schedule {schedule!r}")


def batches(n: int, batch_size: int, gen: torch.Generator) -> Iterator[torch.Tensor]:
    """Index batches forever, reshuffled every epoch (the last batch of an epoch may be smaller)."""
    while True:
        order = torch.randperm(n, generator=gen)
        for pos in range(0, n, batch_size):
            yield order[pos : pos + batch_size]


@dataclass
class Loop:
    """What one run trains and how it reports."""

    model: torch.nn.Module
    optimizer: torch.optim.Optimizer
    schedule: str
    n_train: int
    batch_size: int
    epochs: int
    reports: int
    step_loss: Callable[[torch.Tensor], torch.Tensor]  # batch indices -> training loss
    evaluate: Callable[[], dict[str, float]]  # full eval metrics (first key: the eval loss)
    clock: RunClock
    step_cost_s: float
    abort_on_nan: bool
    clip_grad: float | None = None

    @property
    def steps_per_epoch(self) -> int:
        return math.ceil(self.n_train / self.batch_size)


def run_loop(loop: Loop, gen: torch.Generator) -> tuple[list[dict[str, Any]], str]:
    """Train, evaluate at every report step; return (points, status)."""
    spe = loop.steps_per_epoch
    total = loop.epochs * spe
    report_at = report_schedule(total, loop.reports)
    base_lrs = [g["lr"] for g in loop.optimizer.param_groups]
    points: list[dict[str, Any]] = []
    loss_sum, loss_n = 0.0, 0
    dead: dict[str, float] | None = None  # metrics once the weights are non-finite: they stay so
    it = batches(loop.n_train, loop.batch_size, gen)
    for step in range(total):
        factor = lr_factor(loop.schedule, step, total, spe)
        lr_now = base_lrs[0] * factor
        if dead is None:
            for g, base in zip(loop.optimizer.param_groups, base_lrs, strict=True):
                g["lr"] = base * factor
            idx = next(it)
            loop.model.train()
            loss = loop.step_loss(idx)
            loop.optimizer.zero_grad(set_to_none=True)
            loss.backward()
            if loop.clip_grad:
                torch.nn.utils.clip_grad_norm_(loop.model.parameters(), loop.clip_grad)
            loop.optimizer.step()
            loss_sum += float(loss.detach())
        else:
            loss_sum += math.nan
        loss_n += 1
        loop.clock.work(1, loop.step_cost_s)
        k = report_at.get(step + 1)
        if k is None:
            continue
        if dead is None:
            loop.model.eval()
            with torch.no_grad():
                ev = loop.evaluate()
            if not all(finite(float(p.detach().sum())) for p in loop.model.parameters()):
                dead = {key: math.nan for key in ev}
        else:
            ev = dead
        train_loss = loss_sum / max(loss_n, 1)
        metrics = {"loss": fmt(train_loss)} | {key: fmt(v) for key, v in ev.items()}
        metrics |= {"learning_rate": fmt(lr_now), "epoch": round((step + 1) / spe, 2)}
        points.append(loop.clock.report(100 * k / loop.reports, metrics, loop.reports - k))
        loss_sum, loss_n = 0.0, 0
        first_eval = next(iter(ev.values()))
        if loop.abort_on_nan and not finite(train_loss, first_eval):
            return points, "failed"
    return points, "completed"


def seeded(seed: int, index: int) -> tuple[np.random.Generator, torch.Generator]:
    """Per-run generators: numpy (clock, choices) and torch (init, shuffling), independent of workers."""
    rng = np.random.default_rng([seed, index])
    torch.manual_seed(int(rng.integers(2**31)))
    gen = torch.Generator().manual_seed(int(rng.integers(2**31)))
    return rng, gen
