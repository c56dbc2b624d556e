"""Calibration of the learning-curve ensemble from the study's own completed trials.

For every completed trial (the ``window`` most recent) and every checkpoint ``c`` (10, 20, ... 90 %),
the ensemble is fitted to its reports up to ``c`` once, and kept with what came after ``c`` as the
recorded final takes it (``z``: the best value after ``c`` under the improving strategy, the worst
under the other, the last under ``latest``; oriented so that lower is better) and the best and worst
value up to ``c``. A decision at checkpoint ``c`` about the event "the final reaches the target ``t``"
then asks these trials how such forecasts fared. Three methods (``method``):

- ``event`` (the default): for each completed trial whose event was not already settled at ``c`` (under
  ``min``/``max`` its best so far had not yet reached ``t``), its forecast ``r_j = F_j(t)`` and whether
  it did reach ``t``. An isotonic regression (pool adjacent violators) of the outcomes on ``r_j`` maps the
  running trial's ``F(t)`` to the block of trials it falls in; the answer is the posterior mean of that
  block's frequency under a Beta prior of ``prior x F(t) + 1/2`` hits and ``prior x (1 - F(t)) + 1/2``
  misses (the ensemble's own probability, plus Jeffreys' half a trial each way, so that a block of few
  trials with no hit does not say "never"). This is recalibration of the binary event itself, at the
  decision's own target.
- ``pit``: the probability integral transforms ``u_j = F_j(z_j)`` recalibrate the whole distribution
  (Kuleshov et al., ICML 2018): ``(#{u_j <= F(t)} + prior F(t)) / (N + prior)``.
- ``none``: the ensemble's own ``F(t)``.

Which of the three is the default was chosen on the two banks added with it (adding-rnn,
moons-rffsgd), by expected calibration error; the thirteen banks of the cross-validation only measure
it (docs/benchmarks.md).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Literal

import numpy as np
from scipy.special import stdtr

from katib_progress.suggestion.pruning._lcmodel import CurvePrediction, fit_curve

#: Checkpoints (percent) at which completed trials are refitted.
CHECKPOINTS = (10, 20, 30, 40, 50, 60, 70, 80, 90)
Method = Literal["event", "pit", "none"]
METHODS: tuple[Method, ...] = ("event", "pit", "none")
#: How the recorded final follows from the values: the better of best-so-far and what is to come
#: (``improving``), the worse (``worsening``), or the last value (``latest``).
Kind = Literal["improving", "worsening", "latest"]


def checkpoint(progress: float) -> int | None:
    """The checkpoint of a decision at ``progress`` percent (None below the first)."""
    below = [c for c in CHECKPOINTS if c <= progress + 1e-9]
    return below[-1] if below else None


def isotonic_at(r: np.ndarray, hits: np.ndarray, at: float) -> tuple[float, int]:
    """Pool adjacent violators of ``hits`` (0/1) sorted by ``r``, read at ``at``: (the fitted frequency
    of the block ``at`` falls in, the block's size). Below every ``r`` the first block answers, above
    every ``r`` the last."""
    return read_blocks(isotonic_blocks(r, hits), at)


Blocks = tuple[np.ndarray, np.ndarray, np.ndarray]  # (largest r, frequency, size) per block


def read_blocks(blocks: Blocks, at: float) -> tuple[float, int]:
    his, freqs, sizes = blocks
    i = min(int(np.searchsorted(his, at, side="left")), len(his) - 1)
    return float(freqs[i]), int(sizes[i])


def isotonic_blocks(r: np.ndarray, hits: np.ndarray) -> Blocks:
    """The blocks of the isotonic regression (pool adjacent violators) of ``hits`` on ``r``."""
    order = np.argsort(r, kind="stable")
    rs, hs = r[order], hits[order].astype(float)
    blocks: list[list[float]] = []  # [sum of hits, count, largest r]
    for x, h in zip(rs, hs, strict=True):
        blocks.append([h, 1.0, float(x)])
        while len(blocks) > 1 and blocks[-2][0] / blocks[-2][1] >= blocks[-1][0] / blocks[-1][1]:
            s, n, hi = blocks.pop()
            blocks[-1][0] += s
            blocks[-1][1] += n
            blocks[-1][2] = hi
    return (
        np.asarray([b[2] for b in blocks]),
        np.asarray([b[0] / b[1] for b in blocks]),
        np.asarray([b[1] for b in blocks]),
    )


@dataclass(slots=True)
class _Checkpoint:
    """The completed trials' fits at one checkpoint, stacked for vectorised CDFs."""

    names: list[str] = field(default_factory=list)
    fits: list[CurvePrediction] = field(default_factory=list)
    z: list[float] = field(default_factory=list)
    best: list[float] = field(default_factory=list)
    worst: list[float] = field(default_factory=list)
    u: list[float] = field(default_factory=list)
    _stack: tuple[np.ndarray, ...] | None = None

    def stack(self) -> tuple[np.ndarray, ...]:
        if self._stack is None:
            fits = self.fits
            self._stack = (
                np.concatenate([f.means for f in fits]),
                np.concatenate([f.scales for f in fits]),
                np.concatenate([f.dof for f in fits]),
                np.concatenate([f.weights for f in fits]),
                np.concatenate([np.full(len(f.weights), i) for i, f in enumerate(fits)]),
                np.asarray(self.z),
                np.asarray(self.best),
                np.asarray(self.worst),
                np.sort(np.asarray(self.u)),
            )
        return self._stack

    def drop(self, name: str) -> None:
        if name in self.names:
            i = self.names.index(name)
            for column in (self.names, self.fits, self.z, self.best, self.worst, self.u):
                del column[i]
            self._stack = None


class Calibrator:
    """What the completed trials say about the ensemble at each checkpoint (module doc)."""

    def __init__(self, *, kind: Kind, min_points: int, window: int, prior: float, method: Method) -> None:
        self.kind = kind
        self.min_points = min_points
        self.window = window
        self.prior = prior
        self.method = method
        self._order: deque[str] = deque()
        #: isotonic blocks per (checkpoint, target), valid until the next trial is added
        self._blocks: dict[tuple[int, float], Blocks | None] = {}
        self._at: dict[int, _Checkpoint] = {c: _Checkpoint() for c in CHECKPOINTS}

    def _after(self, values: np.ndarray) -> float:
        if self.kind == "latest":
            return float(values[-1])
        return float(values.min() if self.kind == "improving" else values.max())

    def add(self, name: str, progress: list[float], values: np.ndarray) -> None:
        """A completed trial's curve (``values`` oriented so that lower is better)."""
        x = np.asarray(progress, dtype=float)
        for c in CHECKPOINTS:
            upto = int(np.searchsorted(x, c + 1e-9, side="right"))
            if upto < self.min_points or upto >= len(x):
                continue
            fit = fit_curve(x[:upto], values[:upto])
            if fit is None:
                continue
            z = self._after(values[upto:])
            at = self._at[c]
            at.names.append(name)
            at.fits.append(fit)
            at.z.append(z)
            at.best.append(float(values[:upto].min()))
            at.worst.append(float(values[:upto].max()))
            at.u.append(fit.cdf1(z))
            at._stack = None
        self._blocks.clear()
        self._order.append(name)
        if len(self._order) > self.window:
            old = self._order.popleft()
            for at in self._at.values():
                at.drop(old)

    def count(self, c: int) -> int:
        return len(self._at[c].names)

    def probability(self, c: int, raw: float, target: float, method: Method | None = None) -> float:
        """The calibrated P(the final reaches ``target``) of a trial whose ensemble gives ``raw`` =
        ``F(target)`` at checkpoint ``c`` (by ``method``, default the calibrator's own)."""
        method = method or self.method
        if method == "none" or not self._at[c].names:
            return raw
        means, scales, dofs, weights, owner, z, best, worst, us = self._at[c].stack()
        if method == "pit":
            below = float(np.searchsorted(us, raw, side="right"))
            return (below + self.prior * raw) / (len(us) + self.prior)
        key = (c, target)
        if key not in self._blocks:  # the target changes only when the top-k does: cached
            r = np.bincount(owner, weights=stdtr(dofs, (target - means) / scales) * weights, minlength=len(z))
            if self.kind == "improving":
                open_ = best > target
            elif self.kind == "worsening":
                open_ = worst <= target
            else:
                open_ = np.ones(len(z), dtype=bool)
            self._blocks[key] = isotonic_blocks(r[open_], z[open_] <= target) if open_.any() else None
        blocks = self._blocks[key]
        if blocks is None:
            return raw
        freq, n = read_blocks(blocks, raw)
        # posterior mean of the block's frequency under Beta(prior x raw + 1/2, prior x (1 - raw) + 1/2)
        return (freq * n + self.prior * raw + 0.5) / (n + self.prior + 1.0)
