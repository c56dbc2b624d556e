"""Curve extrapolation: predict the final objective with an uncertainty and prune long shots."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy.optimize import minimize_scalar

from katib_progress.core.types import Decision, Verdict
from katib_progress.suggestion.pruning._history import Direction
from katib_progress.suggestion.pruning.policies.base import Policy, PolicyContext


def _power(x: np.ndarray, c: float | np.ndarray) -> np.ndarray:
    return np.power(x, -c)


def _exp(x: np.ndarray, c: float | np.ndarray) -> np.ndarray:
    return np.exp(-c * x)


def _power_dc(x: np.ndarray, c: float) -> np.ndarray:
    return -np.log(x) * np.power(x, -c)


def _exp_dc(x: np.ndarray, c: float) -> np.ndarray:
    return -x * np.exp(-c * x)


# family -> (basis f_c(x), d f_c / dc, c search range)
_FAMILIES = {
    "power": (_power, _power_dc, (1e-3, 10.0)),
    "exp": (_exp, _exp_dc, (1e-2, 50.0)),
}


@dataclass(frozen=True, slots=True)
class Forecast:
    family: str
    mean: float  # in the minimised orientation
    sd: float
    residual_sd: float


def _linear(x: np.ndarray, y: np.ndarray, f: np.ndarray) -> tuple[float, float, float]:
    """Least squares of y = a + b f with b >= 0; returns (a, b, rss)."""
    fm, ym = f.mean(), y.mean()
    sff = float(((f - fm) ** 2).sum())
    b = max(0.0, float(((f - fm) * (y - ym)).sum()) / sff) if sff > 0 else 0.0
    a = float(ym - b * fm)
    r = y - a - b * f
    return a, b, float(r @ r)


def _grid_rss(y: np.ndarray, f: np.ndarray) -> np.ndarray:
    """Vectorised ``_linear`` rss for every row of ``f`` (one row per candidate ``c``)."""
    fc = f - f.mean(axis=1, keepdims=True)
    yc = y - y.mean()
    sff = (fc * fc).sum(axis=1)
    b = np.maximum(0.0, np.divide(fc @ yc, sff, out=np.zeros_like(sff), where=sff > 0))
    r = yc[None, :] - b[:, None] * fc
    return np.asarray((r * r).sum(axis=1))


def forecast(
    progress: np.ndarray, values: np.ndarray, *, families: tuple[str, ...] = ("power", "exp")
) -> Forecast | None:
    """Fit ``y = a + b * f_c(x)`` (x = progress / 100, b >= 0, so the curve improves) for the power law
    ``f_c = x^-c`` and the exponential ``f_c = exp(-c x)`` to a (to be minimised) curve and predict
    ``y(1)``. ``a`` and ``b`` are solved exactly for each ``c``; ``c`` is found by a coarse log grid
    refined with ``scipy.optimize.minimize_scalar``. The uncertainty combines the parameter covariance
    (``s^2 (J^T J)^-1``, delta method) with the residual noise. Returns the family with the lower AIC.
    """
    x = progress / 100.0
    n = len(x)
    if n < 4:
        return None
    best: tuple[float, Forecast] | None = None
    for family in families:
        basis, dbasis, (lo, hi) = _FAMILIES[family]
        grid = np.geomspace(lo, hi, 24)
        rss = _grid_rss(values, basis(x[None, :], grid[:, None]))
        i = int(np.argmin(rss))
        bounds = (float(grid[max(i - 1, 0)]), float(grid[min(i + 1, len(grid) - 1)]))
        res = minimize_scalar(
            lambda c, basis=basis: _linear(x, values, basis(x, c))[2],
            bounds=bounds,
            method="bounded",
            options={"xatol": 1e-3 * bounds[1]},
        )
        c = float(res.x) if res.success and res.fun <= rss[i] else float(grid[i])
        a, b, rss_c = _linear(x, values, basis(x, c))
        dof = max(n - 3, 1)
        s2 = rss_c / dof
        jac = np.column_stack([np.ones_like(x), basis(x, c), b * dbasis(x, c)])
        one = np.array([1.0])
        mean = a + b * float(basis(one, c)[0])
        grad = np.array([1.0, float(basis(one, c)[0]), b * float(dbasis(one, c)[0])])
        try:
            cov = s2 * np.linalg.pinv(jac.T @ jac)
            var = float(grad @ cov @ grad)
        except np.linalg.LinAlgError:
            var = math.inf
        sd = math.sqrt(max(var, 0.0) + s2)
        aic = n * math.log(max(rss_c, 1e-300) / n) + 6
        if math.isfinite(mean) and (best is None or aic < best[0]):
            best = (aic, Forecast(family, mean, sd, math.sqrt(s2)))
    return None if best is None else best[1]


class ExtrapolationPolicy(Policy):
    """Prune when the probability that the trial's predicted final objective beats the best value any
    other trial has reached is below ``p_threshold``. The threshold is scaled by the remaining compute
    (``p_threshold * (0.5 + remaining_fraction)``): the more a trial still costs, the sooner a long shot
    is stopped.
    """

    name = "extrapolation"

    def __init__(
        self,
        *,
        min_progress: float = 30.0,
        min_points: int = 6,
        p_threshold: float = 0.05,
        refit_every: float = 2.0,
    ) -> None:
        if not (0 <= min_progress < 100):
            raise ValueError(f"extrapolation min_progress must be within [0, 100), got {min_progress}")
        if min_points < 4:
            raise ValueError(f"extrapolation min_points must be >= 4, got {min_points}")
        if not (0 < p_threshold < 1):
            raise ValueError(f"extrapolation p_threshold must be within (0, 1), got {p_threshold}")
        self.min_progress = min_progress
        self.min_points = min_points
        if not (math.isfinite(refit_every) and refit_every >= 0):
            raise ValueError(f"extrapolation refit_every must be >= 0 percent, got {refit_every}")
        self.p_threshold = p_threshold
        self.refit_every = refit_every
        self._fits: dict[str, tuple[float, Forecast | None]] = {}

    def decide(self, ctx: PolicyContext) -> Decision:
        trial = ctx.trial
        p = trial.last_progress
        if p is None or p < self.min_progress or len(trial.values) < self.min_points:
            return Decision(Verdict.CONTINUE, "", self.name)
        other = ctx.experiment.best_other(trial.name)
        if other is None:
            return Decision(Verdict.CONTINUE, "no peer value to beat yet", self.name)
        sign = 1.0 if ctx.direction is Direction.MINIMIZE else -1.0
        fc = self._forecast(trial.name, trial.progress, trial.values, sign)
        if fc is None or not math.isfinite(fc.sd) or fc.sd <= 0:
            return Decision(Verdict.CONTINUE, "curve fit did not converge", self.name)
        target = sign * other[0]
        p_beat = 0.5 * (1.0 + math.erf((target - fc.mean) / (fc.sd * math.sqrt(2.0))))
        remaining = trial.remaining_fraction()
        threshold = self.p_threshold * (0.5 + (0.5 if remaining is None else remaining))
        evidence: dict[str, float | str] = {
            "predicted_final": sign * fc.mean,
            "predicted_sd": fc.sd,
            "best_other": other[0],
            "best_trial": other[1],
            "p_beat": p_beat,
            "threshold": threshold,
            "family": fc.family,
        }
        if p_beat >= threshold:
            return Decision(Verdict.CONTINUE, "", self.name, evidence)
        return Decision(
            Verdict.PRUNE,
            f"{ctx.objective} is predicted to end at {sign * fc.mean:.4g} ± {fc.sd:.2g} ({fc.family} fit "
            f"at {p:.0f}%); P(beating {other[0]:.4g} of {other[1]}) = {p_beat:.3f} < {threshold:.3f}",
            self.name,
            evidence,
        )

    def _forecast(
        self, trial: str, progress: list[float], values: list[float], sign: float
    ) -> Forecast | None:
        """Refit only once the curve has advanced ``refit_every`` percent since the last fit (the fit
        dominates the cost of a decision; replays send thousands of points)."""
        cached = self._fits.get(trial)
        if cached is not None and progress[-1] - cached[0] < self.refit_every:
            return cached[1]
        x = np.maximum(np.asarray(progress), 1e-3)
        fc = forecast(x, sign * np.asarray(values))
        self._fits[trial] = (progress[-1], fc)
        return fc
