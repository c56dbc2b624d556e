"""A learning-curve model: the distribution of a trial's final objective from its partial curve.

**The ensemble.** A Bayesian model average over parametric curve families fitted online, no weights
to train (numpy/scipy only). Every family has the form ``y(x) = a + b f_theta(x)`` with ``x`` =
progress / 100 in (0, 1], ``b >= 0`` and ``f_theta`` decreasing, so that (oriented so that lower is
better) the curve improves and levels off; ``a`` and ``b`` are solved exactly for every ``theta`` of a
fixed grid (vectorised least squares), which makes one fit a few matrix products. The families are
those of Domhan, Springenberg and Hutter (IJCAI 2015) that this form holds, plus a straight line:

| family | ``f_theta(x)`` | Domhan et al. | parameters |
|---|---|---|---|
| ``pow3`` | ``x^-c`` | pow3 | 3 |
| ``exp3`` | ``exp(-c x)`` | exp3 | 3 |
| ``ilog2`` | ``1 / log(e + c x)`` | ilog2 | 3 |
| ``log_power`` | ``1 / (1 + (x / s)^c)`` | log power, MMF | 4 |
| ``pow4`` | ``(x + s)^-c`` | pow4 | 4 |
| ``weibull`` | ``exp(-(k x)^d)`` | Weibull, Janoschek | 4 |
| ``linear`` | ``-x`` | (a hedge: the curve keeps improving at its pace) | 2 |

Each grid row (family, theta) is one model with Gaussian noise of unknown variance. Its weight is its
profile likelihood with a BIC penalty, ``rss^(-n/2) n^(-k/2)``, the prior spread evenly over families
and, within one, over its grid. Its prediction at ``x = 1`` is the linear regression's predictive
Student-t (``n - k`` degrees of freedom, leverage of ``x = 1`` and the noise), so a fit on few points
or far from the end is wide. The ensemble is the weighted mixture of these t distributions
(:class:`CurvePrediction`: CDF and quantiles).

**Calibration** is separate (``pruning/_calibrate.py``, used by the policy ``predictive``): a mixture fitted
to one curve is typically over-confident; the study's own completed trials tell by how much.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy.special import stdtr

#: Standardised noise floor: the residual sd is never taken below this share of the curve's spread.
_NOISE_FLOOR = 1e-3
#: Mixture members below this share of the heaviest weight are dropped (speed; no visible effect).
_MIN_WEIGHT = 1e-6


def _grid2(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    aa, bb = np.meshgrid(a, b, indexing="ij")
    return aa.ravel(), bb.ravel()


_C_POW = np.geomspace(0.02, 3.0, 24)
_C_EXP = np.geomspace(0.2, 30.0, 24)
_C_ILOG = np.geomspace(0.5, 2000.0, 24)
_S_LOGP, _C_LOGP = _grid2(np.geomspace(0.01, 1.0, 6), np.array([0.5, 1.0, 2.0, 4.0]))
_S_POW4, _C_POW4 = _grid2(np.array([0.01, 0.05, 0.2, 0.5]), np.geomspace(0.1, 3.0, 6))
_K_WEIB, _D_WEIB = _grid2(np.geomspace(1.0, 30.0, 6), np.array([0.5, 1.5, 2.5, 4.0]))


def _bases(x: np.ndarray) -> list[tuple[str, int, np.ndarray]]:
    """(family, parameter count, basis rows ``f_theta(x)`` for every theta of its grid)."""
    xr = x[None, :]
    return [
        ("pow3", 3, np.power(xr, -_C_POW[:, None])),
        ("exp3", 3, np.exp(-_C_EXP[:, None] * xr)),
        ("ilog2", 3, 1.0 / np.log(math.e + _C_ILOG[:, None] * xr)),
        ("log_power", 4, 1.0 / (1.0 + np.power(xr / _S_LOGP[:, None], _C_LOGP[:, None]))),
        ("pow4", 4, np.power(xr + _S_POW4[:, None], -_C_POW4[:, None])),
        ("weibull", 4, np.exp(-np.power(_K_WEIB[:, None] * xr, _D_WEIB[:, None]))),
        ("linear", 2, -xr),
    ]


#: Progress resolution of the precomputed bases: 0.1 percent (x = k / _RES, k = 1.._RES).
_RES = 1000
_TABLE_PARTS = _bases(np.arange(1, _RES + 1) / _RES)
FAMILIES = tuple(name for name, _, _ in _TABLE_PARTS)
#: Every grid row's basis at x = k / _RES (row r, column k - 1); the last column is x = 1.
_TABLE = np.concatenate([f for _, _, f in _TABLE_PARTS])
_ROW_FAMILY = np.concatenate([np.full(len(f), i) for i, (_, _, f) in enumerate(_TABLE_PARTS)])
_ROW_K = np.concatenate([np.full(len(f), float(k)) for _, k, f in _TABLE_PARTS])
#: log prior of a row: even over families, then over the family's grid
_ROW_LOG_PRIOR = np.concatenate(
    [np.full(len(f), -math.log(len(f) * len(_TABLE_PARTS))) for _, _, f in _TABLE_PARTS]
)


@dataclass(frozen=True, slots=True)
class CurvePrediction:
    """The predicted value at the end of the run (``x = 1``), oriented as fitted: a mixture of
    Student-t distributions (weights sum to 1)."""

    weights: np.ndarray
    means: np.ndarray
    scales: np.ndarray
    dof: np.ndarray
    family_weights: dict[str, float]

    @property
    def mean(self) -> float:
        return float(self.weights @ self.means)

    @property
    def family(self) -> str:
        """The family with the largest posterior weight."""
        return max(self.family_weights, key=lambda k: self.family_weights[k])

    def cdf(self, t: float | np.ndarray) -> np.ndarray:
        """P(final <= t) under the mixture (vectorised over ``t``)."""
        tt = np.atleast_1d(np.asarray(t, dtype=float))
        z = (tt[:, None] - self.means[None, :]) / self.scales[None, :]
        return np.asarray(stdtr(self.dof[None, :], z) @ self.weights)

    def cdf1(self, t: float) -> float:
        return float(self.cdf(t)[0])

    def quantiles(self, qs: tuple[float, ...] = (0.05, 0.5, 0.95)) -> tuple[float, ...]:
        """Quantiles of the mixture by bisection on its CDF (60 halvings; exact to float precision
        within the members' 50-sd span)."""
        lo = float(np.min(self.means - 50.0 * self.scales))
        hi = float(np.max(self.means + 50.0 * self.scales))
        q = np.asarray(qs, dtype=float)
        a, b = np.full_like(q, lo), np.full_like(q, hi)
        for _ in range(60):
            mid = 0.5 * (a + b)
            below = self.cdf(mid) < q
            a = np.where(below, mid, a)
            b = np.where(below, b, mid)
        return tuple(float(v) for v in 0.5 * (a + b))


def fit_curve(progress: np.ndarray, values: np.ndarray) -> CurvePrediction | None:
    """The ensemble's prediction of the value at 100 % progress from ``values`` (oriented so that lower
    is better; finite) reported at ``progress`` percent (increasing, > 0). None with fewer than four
    points or no progress spread."""
    idx = np.clip(np.rint(np.asarray(progress, dtype=float) * (_RES / 100.0)), 1, _RES).astype(np.intp) - 1
    y = np.asarray(values, dtype=float)
    n = len(idx)
    if n < 4 or int(idx.max() - idx.min()) <= 0:
        return None
    center = float(y.mean())
    spread = float(y.std())
    scale = spread if spread > 1e-12 * max(1.0, abs(center)) else max(1e-12, 1e-9 * abs(center))
    ys = (y - center) / scale
    f = _TABLE[:, idx]
    fm = f.mean(axis=1)
    fc = f - fm[:, None]
    sff = np.einsum("ij,ij->i", fc, fc)
    ok = sff > 1e-14
    safe_sff = np.where(ok, sff, 1.0)
    b = np.maximum(np.where(ok, fc @ ys / safe_sff, 0.0), 0.0)  # the curve improves (or stays level)
    resid = ys[None, :] - b[:, None] * fc
    rss = np.einsum("ij,ij->i", resid, resid)
    dof = np.maximum(n - _ROW_K, 1.0)
    s2 = np.maximum(rss / dof, _NOISE_FLOOR**2)
    at1 = _TABLE[:, -1] - fm
    lev = 1.0 / n + np.where((b > 0) & ok, at1**2 / safe_sff, 0.0)
    log_w = (
        -0.5 * n * np.log(np.maximum(rss, n * _NOISE_FLOOR**2) / n)
        - 0.5 * _ROW_K * math.log(n)
        + _ROW_LOG_PRIOR
    )
    w = np.exp(log_w - log_w.max())
    keep = w >= _MIN_WEIGHT
    w = w[keep] / w[keep].sum()
    fam = _ROW_FAMILY[keep]
    family_weights = {FAMILIES[i]: float(w[fam == i].sum()) for i in np.unique(fam)}
    mu = (b * at1)[keep] * scale + center
    sd = np.sqrt(s2 * (1.0 + lev))[keep] * scale
    if not (np.all(np.isfinite(mu)) and np.all(np.isfinite(sd))):
        return None
    return CurvePrediction(w, mu, sd, dof[keep], family_weights)
