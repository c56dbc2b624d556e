"""``multivariate-tpe`` and ``tpe``: the TPE of Katib's image (Optuna 3.3), on this Optuna.

Katib's service runs ``TPESampler(multivariate=True, constant_liar=True, seed=random_state)`` for
``multivariate-tpe`` and ``TPESampler(constant_liar=True, seed=random_state)`` (3.3's independent
TPE) for ``tpe``, of Optuna 3.3.0 (pkg/suggestion/v1beta1/optuna/service.py
``OptimizerConfiguration``, base_service.py ``_create_sampler``;
cmd/suggestion/optuna/v1beta1/requirements.txt pins ``optuna==3.3.0``). Optuna 5.0's ``TPESampler``
differs from it in ways that change every suggestion after the startup trials (each rule below names
the 3.3 file and function it follows; paths under ``optuna/samplers/_tpe/``):

- bandwidths: 3.3's multivariate estimator gives every observation one Scott-like bandwidth,
  ``0.2 * n ** (-1 / (d + 4)) * range`` (parzen_estimator.py ``_calculate_numerical_distributions``,
  ``compute_sigmas``); 5.0 uses each observation's distance to its neighbours, as for the
  independent TPE;
- densities: 3.3's truncated normal log-density omits ``-log(sigma)`` (_truncnorm.py ``logpdf``),
  which changes the prior kernel's weight against the observations' in ``l(x)`` and ``g(x)``; 5.0
  includes it;
- draw order: 3.3 samples the mixture parameter by parameter in the search space's order
  (probability_distributions.py ``_MixtureOfProductDistribution.sample``); 5.0 draws every
  categorical first, then all numerical parameters in one batch: the same uniforms go to other
  parameters;
- the normal CDF over arrays: 3.3 evaluates erf with fdlibm's piecewise rational approximations
  (_erf.py ``erf``, s_erf.c), 5.0 with ``math.erf`` for fewer than 2000 values;
- quantiles: 3.3 inverts ``log_ndtr`` by 100 bisections of [-100, 100] (_truncnorm.py
  ``_ndtri_exp``), 5.0 by Newton's method to a relative 1e-8: different last digits.

The independent TPE differs from the multivariate one only in its bandwidths (``_neighbour_sigmas``)
and in sampling each parameter on its own (``KatibTPESampler``).

``KatibTPESampler`` implements 3.3's rules (the formulas, with the same NumPy operations in the
same order, so the same floating-point results) and reads Katib's two random streams: 3.3's
``TPESampler`` holds ``RandomState(seed)`` for TPE and a ``RandomSampler(seed)`` for the startup
trials (sampler.py ``TPESampler.__init__``). Both are positioned from the ask's index alone
(``position_stream``) so that a restarted service, rebuilt from Katib's trial list, continues
exactly; see that method for the rule.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import numpy as np
import optuna
from optuna.distributions import BaseDistribution, CategoricalDistribution, FloatDistribution, IntDistribution
from optuna.samplers import BaseSampler
from optuna.samplers._lazy_random_state import LazyRandomState
from optuna.samplers._tpe._erf import efx, erx, pa, pp, qa, qq, ra, rb, sa, sb
from optuna.samplers._tpe._truncnorm import _log_ndtr, _log_ndtr_single, _norm_logpdf
from optuna.search_space import IntersectionSearchSpace
from optuna.study import StudyDirection
from optuna.trial import FrozenTrial, TrialState

from katib_progress.suggestion._random import SpaceRandomSampler, seek

#: 3.3 sampler.py ``TPESampler.__init__`` defaults, as Katib leaves them.
PRIOR_WEIGHT = 1.0
#: 3.3 parzen_estimator.py ``compute_sigmas``: ``SIGMA0_MAGNITUDE``.
_SIGMA0 = 0.2


# -- truncated normal (3.3 _truncnorm.py, _erf.py) ----------------------------------------------


def _coefficients(poly: Any) -> tuple[float, ...]:
    """The coefficients of one of _erf.py's ``numpy.polynomial.Polynomial`` (domain and window
    [-1, 1], so ``Polynomial.__call__`` evaluates them at ``0.0 + 1.0 * x``)."""
    assert list(poly.domain) == [-1, 1] and list(poly.window) == [-1, 1]
    return tuple(float(c) for c in poly.coef)


_Poly = Callable[[Any], Any]


def _horner(coef: tuple[float, ...]) -> _Poly:
    """``Polynomial(coef)(x)`` for one finite value (or an array of them), by ``polyval``'s
    arithmetic (numpy/polynomial/polynomial.py: ``c[-1] + x * 0``, then ``c[i] + c0 * x`` down to
    ``c[0]``), written out as one expression. NumPy's float64 ``+`` and ``*`` round as Python's
    float operations do, so the result is the same. ``Polynomial``'s domain mapping
    ``0.0 + 1.0 * x`` is left out: for a finite ``x`` it only turns -0.0 into 0.0, which changes no
    result here (every constant term is nonzero)."""
    assert all(math.isfinite(c) for c in coef) and coef[0] != 0
    expr = f"({coef[-1]!r} + x * 0)"
    for c in coef[-2::-1]:
        expr = f"({c!r} + {expr} * x)"
    value: _Poly = eval(f"lambda x: {expr}")  # built from our own constants
    return value


_pp, _qq, _pa, _qa, _ra, _sa, _rb, _sb = (_horner(_coefficients(p)) for p in (pp, qq, pa, qa, ra, sa, rb, sb))
_ERX, _EFX = float(erx), float(efx)


#: Up to this many values ``_erf`` works value by value; beyond, NumPy's per-call overhead is
#: the smaller cost (measured: equal at about 90 values).
_ERF_PYTHON_MAX = 80


def _erf_arrays(x: np.ndarray) -> np.ndarray:
    """``_erf`` as 3.3 computes it, each range of ``|x|`` over a NumPy array (the polynomials of
    ``_horner`` work on arrays alike)."""

    def medium(r_poly: _Poly, s_poly: _Poly) -> Callable[[np.ndarray], np.ndarray]:
        def f(v: np.ndarray) -> np.ndarray:
            sign = np.sign(v)
            v = np.abs(v)
            t = 1 / (v * v)
            r = np.exp(-v * v - 0.5625) * np.exp(r_poly(t) / s_poly(t))
            return (1 - r / v) * sign

        return f

    def small2(v: np.ndarray) -> np.ndarray:
        t = np.abs(v) - 1
        return (_ERX + _pa(t) / _qa(t)) * np.sign(v)

    a = np.abs(x)
    out = np.full_like(a, fill_value=np.nan)
    out[np.isposinf(x)] = 1.0
    out[np.isneginf(x)] = -1.0
    cases: list[tuple[np.ndarray, Callable[[np.ndarray], np.ndarray]]] = [
        (a < 2**-28, lambda v: v + _EFX * v),
        ((a >= 2**-28) & (a < 0.84375), lambda v: v + v * (_pp(v * v) / _qq(v * v))),
        ((a >= 0.84375) & (a < 1.25), small2),
        ((a >= 1.25) & (a < 1 / 0.35), medium(_ra, _sa)),
        ((a >= 1 / 0.35) & (a < 6), medium(_rb, _sb)),
        (a >= 6, np.sign),
    ]
    for mask, f in cases:
        if mask.any():
            out[mask] = f(x[mask])
    return out


def _erf(x: np.ndarray) -> np.ndarray:
    """3.3 _erf.py ``erf``: fdlibm's s_erf.c by ranges of ``|x|`` (the coefficients: this Optuna's
    _erf.py, unchanged since 3.3), with 3.3's arithmetic: for 1.25 <= |x| < 6 the product of two
    exponentials (s_erf.c's ``SET_LOW_WORD`` refinement left out, as 3.3 does). 3.3 computes each
    range over the array's values in it with NumPy; here each value's arithmetic is done in Python
    floats (the same rounding) except the exponentials, which stay NumPy's over an array (NumPy's
    ``exp`` need not round as ``math.exp`` does): for the small arrays TPE passes (its candidates),
    most of 3.3's time was NumPy's per-call overhead. Larger arrays (one value per observation)
    go through ``_erf_arrays``."""
    flat = np.ravel(np.asarray(x, dtype=np.float64))
    if flat.size > _ERF_PYTHON_MAX:
        return _erf_arrays(flat).reshape(np.shape(x))
    out = [math.nan] * flat.size
    pending: list[tuple[int, float, float]] = []  # (index, |x|, sign) of 1.25 <= |x| < 6
    args_pdf: list[float] = []
    args_ratio: list[float] = []
    for i, v in enumerate(flat.tolist()):
        a = abs(v)
        if a < 2**-28:
            out[i] = v + _EFX * v
        elif a < 0.84375:
            z = v * v
            out[i] = v + v * (_pp(z) / _qq(z))
        elif a < 1.25:
            t = a - 1
            out[i] = (_ERX + _pa(t) / _qa(t)) * (1.0 if v > 0 else -1.0)
        elif a < 6:
            t = 1 / (a * a)
            ratio = _ra(t) / _sa(t) if a < 1 / 0.35 else _rb(t) / _sb(t)
            pending.append((i, a, 1.0 if v > 0 else -1.0))
            args_pdf.append(-a * a - 0.5625)
            args_ratio.append(ratio)
        elif a >= 6:
            out[i] = 1.0 if v > 0 else -1.0
    if pending:
        rs = (np.exp(np.asarray(args_pdf)) * np.exp(np.asarray(args_ratio))).tolist()
        for (i, a, sign), r in zip(pending, rs, strict=True):
            out[i] = (1 - r / a) * sign
    return np.asarray(out, dtype=np.float64).reshape(np.shape(x))


def _ndtr(a: np.ndarray) -> np.ndarray:
    """3.3 _truncnorm.py ``_ndtr``: the standard normal CDF through ``_erf``."""
    return 0.5 + 0.5 * _erf(a / 2**0.5)


def _log_sum(log_p: np.ndarray, log_q: np.ndarray) -> np.ndarray:
    return np.logaddexp(log_p, log_q)


def _log_diff(log_p: np.ndarray, log_q: np.ndarray) -> np.ndarray:
    return log_p + np.log1p(-np.exp(log_q - log_p))


def _log_gauss_mass(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """log of the standard normal's mass in [a, b] (3.3 _truncnorm.py ``_log_gauss_mass``): in the
    left tail from ``log_ndtr``, a right-tail interval mirrored to the left, an interval around 0 as
    ``log1p(-ndtr(a) - ndtr(-b))``."""
    left = b <= 0
    right = a > 0
    central = ~(left | right)
    out = np.full_like(a, fill_value=np.nan, dtype=np.float64)
    if a[left].size:
        out[left] = _log_diff(_log_ndtr(b[left]), _log_ndtr(a[left]))
    if a[right].size:
        out[right] = _log_diff(_log_ndtr(-a[right]), _log_ndtr(-b[right]))
    if a[central].size:
        out[central] = np.log1p(-_ndtr(a[central]) - _ndtr(-b[central]))
    return out


def _bisect_log_ndtr(target: float) -> float:
    """3.3's ``_bisect(_log_ndtr_single, -100, 100, target)``: 100 halvings of [-100, 100], the
    last midpoint is the answer (_truncnorm.py ``_ndtri_exp_single``, ``_bisect``)."""
    lo, hi = -100.0, 100.0
    if _log_ndtr_single(lo) > target:
        lo, hi = hi, lo
    mid = lo
    for _ in range(100):
        mid = (lo + hi) / 2
        if _log_ndtr_single(mid) < target:
            lo = mid
        else:
            hi = mid
    return mid


#: How far (in units of the estimated evaluation error) from the root a midpoint must be for
#: ``_fast_bisect_log_ndtr`` to take its side from the root instead of evaluating ``log_ndtr``.
#: The estimate is itself several times the error seen: with 1, 3 or 10 the test's 60,000 targets
#: (and 180,000 more, tried once) give 3.3's bisection bit for bit; 10 needs a fifth fewer
#: evaluations than 100 on TPE's quantiles.
_SAFETY = 10.0
#: Halvings ``_fast_bisect_log_ndtr`` takes at once when the root is far from the cells' ends.
_JUMP = 30
_JUMP_WIDTH = 200.0 / 2**_JUMP
_LOG_SQRT_2PI = 0.5 * math.log(2 * math.pi)
#: ``_log_ndtr_single`` without its ``lru_cache`` (the same function: midpoints near a root are
#: almost never asked twice, and the cache's bookkeeping costs a third of a call; the kernels'
#: truncation bounds, which repeat from ask to ask, keep the cached one).
_LOG_NDTR = getattr(_log_ndtr_single, "__wrapped__", _log_ndtr_single)
_SQRT2 = 2**0.5
_INV_SQRT2 = 1 / 2**0.5


def _log_ndtr_inline(a: float) -> float:
    """``_log_ndtr_single(a)`` (_truncnorm.py: ``-ndtr(-a)`` above 6, ``log(ndtr(a))`` above -20,
    with ``_ndtr_single``'s three erf/erfc cases) by the same operations in one function, without
    its two cached calls; below -20 (the asymptotic series) it calls it."""
    if a > 6:
        return -(0.5 * math.erfc(a / _SQRT2))  # -a / sqrt(2) < -1 / sqrt(2): 0.5 * erfc(-x)
    if a > -20:
        x = a / _SQRT2
        if x < -_INV_SQRT2:
            return math.log(0.5 * math.erfc(-x))
        if x < _INV_SQRT2:
            return math.log(0.5 + 0.5 * math.erf(x))
        return math.log(1.0 - 0.5 * math.erfc(x))
    return _LOG_NDTR(a)


def _fast_bisect_log_ndtr(target: float, root: float) -> float:
    """``_bisect_log_ndtr(target)``, bit for bit, with about an eighth of its ``log_ndtr`` calls.

    The bisection only ever asks on which side of ``target`` ``log_ndtr(mid)`` lies. ``log_ndtr``
    is increasing, and its computed value is within a few units in the last place of an increasing
    function; so for a midpoint farther than ``margin`` from the root, with ``margin`` times the
    slope far above that error, the side is that of the root, provided the root is right: that is
    checked by evaluating ``log_ndtr`` at half the margin on each side (the same comparison the
    bisection makes). Otherwise, and for midpoints within the margin, ``log_ndtr`` is evaluated as
    3.3 does. Once a halving changes neither end, every later one repeats it (same midpoint, same
    comparison), so the loop stops there with the same answer; a midpoint equal to an end changes
    nothing (that end's side is known), so it stops there without evaluating."""
    lo, hi = -100.0, 100.0
    if _log_ndtr_single(lo) > target or not math.isfinite(root) or not -100.0 < root < 100.0:
        return _bisect_log_ndtr(target)
    value = _log_ndtr_inline(root)
    # d log_ndtr / dx = pdf / cdf; the evaluation error: a few ulps of the value, and of 1 where
    # the value is log(cdf) with cdf close to 1 (x <= 6, _log_ndtr_single).
    slope = math.exp(-root * root / 2 - _LOG_SQRT_2PI - value)
    # (about 4 ulps; 2e-15 and 2.5e-16 are 9 and 2 ulps, then _SAFETY on top)
    error = 2e-15 * abs(value) + (2.5e-16 if root <= 6 else 0.0)
    margin = _SAFETY * error / slope if slope > 0 else math.inf
    if not margin < 1e-3:
        return _bisect_log_ndtr(target)
    if not (
        _log_ndtr_single(root - margin / 2) < target and not _log_ndtr_single(root + margin / 2) < target
    ):
        return _bisect_log_ndtr(target)
    below_cut, above_cut = root - margin, root + margin
    mid = lo
    left = 100
    # The first _JUMP halvings at once: while every midpoint is outside the cuts, the interval
    # after k halvings is the cell [-100 + j w, -100 + (j + 1) w], w = 200 / 2**k, holding both
    # cuts (each midpoint is exact: a multiple of w / 2 below 2**53 of them). Both cuts must fall
    # well inside one such cell, by a margin far above the rounding of the float arithmetic here
    # (1e-4 of a cell against about 1e-7); otherwise the halvings are taken one by one.
    cell_low = (below_cut + 100.0) / _JUMP_WIDTH
    cell = math.floor(cell_low)
    cell_high = (above_cut + 100.0) / _JUMP_WIDTH
    if cell_low - cell > 1e-4 and cell + 1 - cell_high > 1e-4:
        lo = -100.0 + cell * _JUMP_WIDTH
        hi = lo + _JUMP_WIDTH
        left -= _JUMP
    while left:  # far from the root: the side is the root's
        mid = (lo + hi) / 2
        if mid <= below_cut:
            lo = mid
        elif mid >= above_cut:
            hi = mid
        else:
            break
        left -= 1
    else:
        return mid
    log_ndtr = _log_ndtr_inline  # near it: evaluated as 3.3 does
    while left:
        mid = (lo + hi) / 2
        if mid in (lo, hi):
            # 3.3 would compare log_ndtr(mid) again: below target at lo, not below at hi (each
            # end was set by that comparison, or certified), so the halving changes nothing
            break
        if log_ndtr(mid) < target:
            lo = mid
        else:
            hi = mid
        left -= 1
    return mid


def _ndtri_exp(y: np.ndarray) -> np.ndarray:
    """``x`` with ``log_ndtr(x) == y`` as 3.3 computes it (``_bisect_log_ndtr``), each from a root
    estimated by SciPy's ``ndtri_exp`` (a wrong estimate only costs time: ``_fast_bisect_log_ndtr``
    checks it)."""
    from scipy.special import ndtri_exp

    flat = np.ravel(np.asarray(y, dtype=float))
    with np.errstate(all="ignore"):
        roots = ndtri_exp(flat) if flat.size else flat
    out = [_fast_bisect_log_ndtr(float(t), float(r)) for t, r in zip(flat, roots, strict=True)]
    return np.asarray(out, dtype=float).reshape(np.shape(y))


class _Bounds(NamedTuple):
    """One numerical parameter's kernels standardised: each kernel's truncation bounds ``a``, ``b``,
    the log of its mass in them, and (when sampling) ``log_ndtr`` of its lower tail's end (``a``
    where ``a < 0``, else ``-b``), as ``_ppf`` and ``_logpdf`` compute them for that kernel (3.3
    evaluates them elementwise, once per sampled value; each is a function of the kernel alone)."""

    a: np.ndarray
    b: np.ndarray
    mass: np.ndarray
    tail: np.ndarray | None = None

    @classmethod
    def of(cls, low: float, high: float, mu: np.ndarray, sigma: np.ndarray) -> _Bounds:
        a, b = (low - mu) / sigma, (high - mu) / sigma
        return cls(a, b, _log_gauss_mass(a, b))

    def pick(self, kernels: np.ndarray) -> _Bounds:
        """The bounds of each of ``kernels`` (indices), in that order."""
        tail = None if self.tail is None else self.tail[kernels]
        return _Bounds(self.a[kernels], self.b[kernels], self.mass[kernels], tail)

    def with_tail(self) -> _Bounds:
        if self.tail is not None:
            return self
        left = self.a < 0
        tail = np.empty_like(self.a)
        tail[left] = _log_ndtr(self.a[left])
        tail[~left] = _log_ndtr(-self.b[~left])
        return self._replace(tail=tail)


def _ppf(q: np.ndarray, a: np.ndarray, b: np.ndarray, known: _Bounds | None = None) -> np.ndarray:
    """Quantile ``q`` of the standard normal truncated to [a, b] (3.3 _truncnorm.py ``ppf``: the left
    tail when ``a < 0``, else the mirrored right tail; the mass computed per case). ``known``: each
    value's ``mass`` and ``tail`` already computed (``_Bounds`` indexed like ``q``)."""
    q, a, b = np.atleast_1d(q, a, b)
    q, a, b = np.broadcast_arrays(q, a, b)
    known = (_Bounds(a, b, _log_gauss_mass(a, b)) if known is None else known).with_tail()
    assert known.tail is not None
    left = a < 0
    right = ~left
    out = np.empty_like(q)
    if q[left].size:
        out[left] = _ndtri_exp(_log_sum(known.tail[left], np.log(q[left]) + known.mass[left]))
    if q[right].size:
        out[right] = -_ndtri_exp(_log_sum(known.tail[right], np.log1p(-q[right]) + known.mass[right]))
    out[q == 0] = a[q == 0]
    out[q == 1] = b[q == 1]
    out[a == b] = math.nan
    return out


def _rvs(
    a: np.ndarray,
    b: np.ndarray,
    loc: np.ndarray,
    scale: np.ndarray,
    rng: np.random.RandomState,
    *,
    known: _Bounds | None = None,
) -> np.ndarray:
    """3.3 _truncnorm.py ``rvs``: one uniform per value, through ``ppf``."""
    size = np.broadcast(a, b, loc, scale).shape
    return _ppf(rng.uniform(low=0, high=1, size=size), a, b, known) * scale + loc


def _logpdf(
    x: np.ndarray,
    a: np.ndarray,
    b: np.ndarray,
    loc: np.ndarray,
    scale: np.ndarray,
    *,
    mass: np.ndarray | None = None,
) -> np.ndarray:
    """3.3 _truncnorm.py ``logpdf``: the standard normal's log-density at ``(x - loc) / scale`` over
    its mass in [a, b] (``mass``, if already known), without ``-log(scale)``; -inf outside, NaN for
    an empty interval."""
    z = (x - loc) / scale
    z, a, b = np.atleast_1d(z, a, b)
    out = _norm_logpdf(z) - (_log_gauss_mass(a, b) if mass is None else mass)
    out[(z < a) | (b < z)] = -np.inf  # (the masks broadcast as 3.3's broadcast arrays do)
    out[np.broadcast_to(a == b, out.shape)] = math.nan
    return out


# -- the Parzen estimator (3.3 parzen_estimator.py, probability_distributions.py) ----------------


class _Categorical(NamedTuple):
    weights: np.ndarray  # kernels x choices


class _Numerical(NamedTuple):
    mu: np.ndarray
    sigma: np.ndarray
    low: float
    high: float
    step: float | None  # None: continuous


def default_weights(n: int) -> np.ndarray:
    """3.3 sampler.py ``default_weights``: 1 each for up to 25 observations; beyond, the oldest
    ``n - 25`` ramp linearly from ``1 / n`` to 1."""
    if n == 0:
        return np.asarray([])
    if n < 25:
        return np.ones(n)
    return np.concatenate([np.linspace(1.0 / n, 1.0, num=n - 25), np.ones(25)], axis=0)


def default_gamma(n: int) -> int:
    """3.3 sampler.py ``default_gamma``: the best 10 % (rounded up), at most 25."""
    return min(int(np.ceil(0.1 * n)), 25)


def _neighbour_sigmas(obs: np.ndarray, low: Any, high: Any, step: Any) -> np.ndarray:
    """3.3 parzen_estimator.py ``compute_sigmas``, the independent branch with Katib's parameters
    (prior on, endpoints off): the observations and the prior's mean sorted between the range's ends
    (widened by half a step), each one's bandwidth the larger gap to its two neighbours; the lowest
    and the highest take the gap to their inner neighbour instead (``consider_endpoints=False``, once
    there are at least four points with the ends); in the observations' order, the prior's dropped.
    The same NumPy operations in the same order (``argsort``'s default quicksort included: it orders
    ties as 3.3 does)."""
    mus_with_prior = np.append(obs, 0.5 * (low + high))
    sorted_indices = np.argsort(mus_with_prior)
    sorted_mus = mus_with_prior[sorted_indices]
    ends = np.empty(len(mus_with_prior) + 2, dtype=float)
    ends[0] = low - step / 2
    ends[1:-1] = sorted_mus
    ends[-1] = high + step / 2
    sorted_sigmas = np.maximum(ends[1:-1] - ends[0:-2], ends[2:] - ends[1:-1])
    if ends.shape[0] >= 4:
        sorted_sigmas[0] = ends[2] - ends[1]
        sorted_sigmas[-1] = ends[-2] - ends[-3]
    return np.asarray(sorted_sigmas[np.argsort(sorted_indices)][: len(obs)])


def _is_log(dist: BaseDistribution) -> bool:
    return isinstance(dist, (FloatDistribution, IntDistribution)) and dist.log


class ParzenEstimator:
    """3.3's ``_ParzenEstimator`` with Katib's parameters: prior on (weight ``prior_weight``), magic
    clip on, endpoints off, ``default_weights``, multivariate (parzen_estimator.py
    ``_ParzenEstimator.__init__``, ``_calculate_distributions``)."""

    def __init__(
        self,
        observations: dict[str, np.ndarray],
        space: dict[str, BaseDistribution],
        prior_weight: float = PRIOR_WEIGHT,
        weights: Callable[[int], np.ndarray] = default_weights,
        multivariate: bool = True,
    ) -> None:
        self._space = space
        obs = self._transform(observations)
        n = len(obs)
        w = np.array(weights(n))[:n]
        # the prior is one more kernel (only kernel without observations)
        w = np.array([1.0]) if n == 0 else np.append(w, [prior_weight])
        w /= w.sum()
        self.weights = w
        self.kernels = [
            self._kernels(obs[:, i], dist, prior_weight, len(space), multivariate)
            for i, dist in enumerate(space.values())
        ]
        self._bounds: dict[int, _Bounds] = {}

    def _kernel_bounds(self, i: int, k: _Numerical, tail: bool = False) -> _Bounds:
        """Parameter ``i``'s ``_Bounds``, computed once per estimator: its kernels' truncation to
        [low, high], widened by half a step on each side for a stepped parameter (3.3
        ``_MixtureOfProductDistribution``: ``_BatchedDiscreteTruncNormDistributions``)."""
        if i not in self._bounds:
            half = 0.0 if k.step is None else k.step / 2
            low, high = (k.low, k.high) if k.step is None else (k.low - half, k.high + half)
            self._bounds[i] = _Bounds.of(low, high, k.mu, k.sigma)
        if tail:
            self._bounds[i] = self._bounds[i].with_tail()
        return self._bounds[i]

    def _transform(self, samples: dict[str, np.ndarray]) -> np.ndarray:
        """log of log-scale parameters (3.3 ``_transform``); rows are observations."""
        return np.array(
            [np.log(samples[name]) if _is_log(dist) else samples[name] for name, dist in self._space.items()]
        ).T

    def _untransform(self, values: np.ndarray) -> dict[str, np.ndarray]:
        """exp of log-scale parameters, then ints rounded onto their steps (3.3 ``_untransform``)."""
        out = {}
        for i, (name, dist) in enumerate(self._space.items()):
            v = np.exp(values[:, i]) if _is_log(dist) else values[:, i]
            if isinstance(dist, IntDistribution):
                v = np.clip(dist.low + np.round((v - dist.low) / dist.step) * dist.step, dist.low, dist.high)
            out[name] = v
        return out

    @staticmethod
    def _kernels(
        obs: np.ndarray, dist: BaseDistribution, prior_weight: float, dims: int, multivariate: bool = True
    ) -> _Categorical | _Numerical:
        n = len(obs)
        if isinstance(dist, CategoricalDistribution):
            # 3.3 ``_calculate_categorical_distributions``: each kernel spreads prior_weight / (n + 1)
            # over the choices and puts 1 on its observation; the prior kernel only the spread.
            weights = np.full((n + 1, len(dist.choices)), fill_value=prior_weight / (n + 1))
            weights[np.arange(n), obs.astype(int)] += 1
            weights /= weights.sum(axis=1, keepdims=True)
            return _Categorical(weights)
        assert isinstance(dist, (FloatDistribution, IntDistribution))
        # 3.3 ``_calculate_distributions``: log bounds for log scale; a stepped log parameter
        # becomes continuous over [log(low - step/2), log(high + step/2)].
        low: Any = np.log(dist.low) if dist.log else dist.low
        high: Any = np.log(dist.high) if dist.log else dist.high
        step = dist.step
        if step is not None and dist.log:
            low, high, step = np.log(dist.low - step / 2), np.log(dist.high + step / 2), None
        span = high - low + (step or 0)
        # 3.3 ``_calculate_numerical_distributions`` / ``compute_sigmas``: multivariate, one
        # bandwidth for all; independent, each observation's distance to its farther neighbour
        # (``_neighbour_sigmas``); both clipped to [span / min(100, n + 2), span]; the prior:
        # middle, span.
        if multivariate:
            sigma = _SIGMA0 * max(n, 1) ** (-1.0 / (dims + 4)) * span
            sigmas = np.full(shape=(n,), fill_value=sigma)
        else:
            sigmas = _neighbour_sigmas(obs, low, high, step or 0)
        sigmas = np.asarray(np.clip(sigmas, 1.0 * span / min(100.0, (1.0 + n + 1)), 1.0 * span))
        mus = np.append(obs, [0.5 * (low + high)])
        sigmas = np.append(sigmas, [1.0 * span])
        return _Numerical(mus, sigmas, low, high, step)

    def sample(self, rng: np.random.RandomState, size: int) -> dict[str, np.ndarray]:
        """3.3 ``_MixtureOfProductDistribution.sample``: the kernels, then one value per parameter in
        the space's order (categorical: one uniform against the cumulative weights; numerical: a
        truncated normal, rounded onto the step if any)."""
        active = rng.choice(len(self.weights), p=self.weights, size=size)
        out = np.empty((size, len(self.kernels)), dtype=np.float64)
        for i, k in enumerate(self.kernels):
            if isinstance(k, _Categorical):
                quantile = rng.rand(size)
                cum = np.cumsum(k.weights[active, :], axis=-1)
                cum[:, -1] = 1
                out[:, i] = np.sum(cum < quantile[:, None], axis=-1)
                continue
            mu, sigma = k.mu[active], k.sigma[active]
            # each value's bounds: its kernel's, (k.low [- step / 2] - mu) / sigma, as 3.3's
            picked = self._kernel_bounds(i, k, tail=True).pick(active)
            s = _rvs(picked.a, picked.b, mu, sigma, rng, known=picked)
            if k.step is None:
                out[:, i] = s
            else:
                out[:, i] = np.clip(k.low + np.round((s - k.low) / k.step) * k.step, k.low, k.high)
        return self._untransform(out)

    def log_pdf(self, samples: dict[str, np.ndarray]) -> np.ndarray:
        """3.3 ``_MixtureOfProductDistribution.log_pdf``: per kernel the sum of the parameters'
        log-densities plus the kernel's log weight, then log-sum-exp over kernels."""
        x = self._transform(samples)
        size = len(x)
        logs = np.empty((size, len(self.weights), len(self.kernels)), dtype=np.float64)
        for i, k in enumerate(self.kernels):
            xi = x[:, i]
            if isinstance(k, _Categorical):
                picked = np.take_along_axis(
                    k.weights[None, :, :], xi[:, None, None].astype(np.int64), axis=-1
                )
                logs[:, :, i] = np.log(picked)[:, :, 0]
            elif k.step is None:
                bounds = self._kernel_bounds(i, k)
                logs[:, :, i] = _logpdf(
                    xi[:, None],
                    bounds.a[None, :],
                    bounds.b[None, :],
                    k.mu[None, :],
                    k.sigma[None, :],
                    mass=bounds.mass[None, :],
                )
            else:
                # each sample's cell mass under each kernel, over the kernel's accepted mass: the
                # cells' computed for each distinct sample value and each distinct kernel
                # (mu, sigma) once, then spread (elementwise the same operations as 3.3's over the
                # full grid, so the same values)
                half = k.step / 2
                values, rows = np.unique(xi, return_inverse=True)
                # (mu, sigma) pairs as complex numbers, exactly: one sort, not unique(axis=1)'s
                kernels, cols = np.unique(k.mu + 1j * k.sigma, return_inverse=True)
                mu, sigma = kernels.real[None, :], kernels.imag[None, :]
                lower = np.maximum(values - half, k.low - half)
                upper = np.minimum(values + half, k.high + half)
                mass = _log_gauss_mass((lower[:, None] - mu) / sigma, (upper[:, None] - mu) / sigma)
                accept = self._kernel_bounds(i, k).mass[None, :]
                logs[:, :, i] = mass[rows.reshape(-1)][:, cols.reshape(-1)] - accept
        weighted = np.sum(logs, axis=-1) + np.log(self.weights[None, :])
        top = weighted.max(axis=1)
        top[np.isneginf(top)] = 0
        with np.errstate(divide="ignore"):
            return np.log(np.exp(weighted - top[:, None]).sum(axis=1)) + top


# -- the sampler (3.3 sampler.py) ----------------------------------------------------------------

_FINISHED = (TrialState.COMPLETE, TrialState.PRUNED)


def _score(trial: FrozenTrial, sign: float) -> tuple[float, float]:
    """3.3 sampler.py ``_get_observation_pairs`` (single objective): complete trials first by value,
    then pruned ones by their last step (latest first) and value, running ones last."""
    if trial.state is TrialState.COMPLETE:
        assert trial.value is not None
        return (-math.inf, sign * trial.value)
    if trial.state is TrialState.PRUNED:
        if trial.intermediate_values:
            step, value = max(trial.intermediate_values.items())
            return (-step, math.inf) if math.isnan(value) else (-step, sign * value)
        return (1, 0.0)
    return (math.inf, sign * math.inf)


class KatibTPESampler(BaseSampler):
    """Optuna 3.3's ``TPESampler(multivariate=multivariate, constant_liar=True, seed=seed)`` for one
    fixed search space, single objective, as Katib's ``multivariate-tpe`` (``multivariate=True``) and
    ``tpe`` (``multivariate=False``) run it (optuna/service.py ``OptimizerConfiguration``: ``tpe``
    sets ``constant_liar`` only, so 3.3's default ``multivariate=False`` holds).

    The independent TPE (3.3 sampler.py: ``infer_relative_search_space`` returns ``{}`` without
    ``multivariate``, so ``Trial._suggest`` asks ``sample_independent`` for each parameter in the
    order of Katib's search space) samples each parameter from its own one-dimensional estimators,
    ``_sample(study, trial, {name: distribution})``, with the neighbour bandwidths
    (``_neighbour_sigmas``), from the same TPE random state, parameter after parameter."""

    def __init__(
        self,
        space: dict[str, BaseDistribution],
        *,
        n_startup_trials: int = 10,
        n_ei_candidates: int = 24,
        seed: int | None = None,
        prior_weight: float = PRIOR_WEIGHT,
        multivariate: bool = True,
    ) -> None:
        self._space = dict(space)
        self._multivariate = multivariate
        self._n_startup = n_startup_trials
        self._n_ei = n_ei_candidates
        self._prior_weight = prior_weight
        self._rng = LazyRandomState(seed)
        self._random = SpaceRandomSampler(self._space, seed=seed)
        self._intersection = IntersectionSearchSpace(include_pruned=True)
        self._drawn: int | None = None  # uniforms drawn from the TPE stream (stream mode)
        # each trial's internal parameter values, by (storage, trial id, parameters): a trial's
        # parameters are set when it is created and never change
        self._reprs: dict[tuple[int, int, tuple[str, ...]], tuple[Any, ...] | None] = {}
        # l(x) per search space (one per parameter for the independent TPE), for one set of below
        # trials
        self._below_trials: tuple[Any, ...] | None = None
        self._split_kept: tuple[tuple[int, int, int], tuple[list[FrozenTrial], list[FrozenTrial]]] | None = (
            None
        )
        self._below: dict[tuple[Any, ...], ParzenEstimator] = {}

    # -- Katib's streams ------------------------------------------------------------------------

    def _draws_per_ask(self, first: bool) -> int:
        """Uniforms one TPE ask takes: the kernel choice and one per parameter, per candidate
        (``sample``); with nothing finished yet (``n_startup_trials`` 0, first ask) 3.3 samples each
        parameter on its own (sampler.py ``sample_independent`` -> ``_sample``): two per candidate each,
        as the independent TPE always does."""
        d = sum(not dist.single() for dist in self._space.values())
        return 2 * d * self._n_ei if first or not self._multivariate else (1 + d) * self._n_ei

    def position_stream(self, seed: int, index: int) -> None:
        """Put both random states where Katib's service has them before its ask number ``index``.

        Katib keeps one sampler per experiment (base_service.py ``_ask``): the startup trials read
        the ``RandomSampler`` stream, the later ones the TPE stream. Here each is positioned as a
        sequential experiment would have left it: ask ``index`` saw ``index`` finished trials, so the
        first ``n_startup_trials`` asks were random ones and every later ask took one TPE draw
        (``_draws_per_ask``). That is Katib's stream exactly for one trial at a time (the benchmark's
        protocol); with parallel trials, where Katib's count of random asks depends on when trials
        finished, this stays a function of the ask's index (so of Katib's trial list), not of timing.
        """
        self._random.position_stream(seed, index)
        target = 0
        tpe_asks = index - self._n_startup
        if tpe_asks > 0:
            if self._n_startup == 0:
                target = self._draws_per_ask(True) + (tpe_asks - 1) * self._draws_per_ask(False)
            else:
                target = tpe_asks * self._draws_per_ask(False)
        seek(self._rng.rng, seed, self._drawn, target)
        self._drawn = target

    def reseed_rng(self) -> None:
        self._rng.rng.seed()
        self._random.reseed_rng()

    # -- BaseSampler ----------------------------------------------------------------------------

    def infer_relative_search_space(
        self, study: optuna.Study, trial: FrozenTrial
    ) -> dict[str, BaseDistribution]:
        """3.3 ``infer_relative_search_space``: the finished trials' common parameters, by name.
        During the startup trials the whole space: their random values are drawn at once. The
        independent TPE: none (every parameter through ``sample_independent``)."""
        if self._n_finished(study) < self._n_startup:
            return {name: dist for name, dist in self._space.items() if not dist.single()}
        if not self._multivariate:
            return {}
        space = self._intersection.calculate(study, use_cache=True)
        return {name: dist for name, dist in space.items() if not dist.single()}

    def _n_finished(self, study: optuna.Study) -> int:
        return len(study._get_trials(deepcopy=False, states=_FINISHED, use_cache=True))

    def sample_relative(
        self, study: optuna.Study, trial: FrozenTrial, search_space: dict[str, BaseDistribution]
    ) -> dict[str, Any]:
        """Startup trials: 3.3 samples each parameter with its ``RandomSampler``
        (``sample_independent``); ``SpaceRandomSampler`` draws the same values for the whole space
        at once (see its ``position_stream``)."""
        if not search_space:
            return {}
        if self._n_finished(study) < self._n_startup:
            return self._random.sample_relative(study, trial, search_space)
        return self._sample(study, trial, search_space)

    def sample_independent(
        self, study: optuna.Study, trial: FrozenTrial, param_name: str, param_distribution: BaseDistribution
    ) -> Any:
        if self._n_finished(study) < self._n_startup:
            return self._random.sample_independent(study, trial, param_name, param_distribution)
        return self._sample(study, trial, {param_name: param_distribution})[param_name]

    def _sample(
        self, study: optuna.Study, trial: FrozenTrial, space: dict[str, BaseDistribution]
    ) -> dict[str, Any]:
        """3.3 sampler.py ``_sample`` with constant liar: running trials count as the worst."""
        below, above = self._split(study, trial)
        l_est = self._below_estimator(study, below, space)
        g_est = ParzenEstimator(
            self._observations(study, above, space),
            space,
            self._prior_weight,
            multivariate=self._multivariate,
        )
        samples = l_est.sample(self._rng.rng, self._n_ei)
        if self._drawn is not None:
            self._drawn += (1 + len(space)) * self._n_ei
        score = l_est.log_pdf(samples) - g_est.log_pdf(samples)
        best = int(np.argmax(score))
        return {name: dist.to_external_repr(samples[name][best].item()) for name, dist in space.items()}

    def _split(self, study: optuna.Study, trial: FrozenTrial) -> tuple[list[FrozenTrial], list[FrozenTrial]]:
        """The other trials split into below and above (3.3 sampler.py ``_sample``:
        ``_get_observation_pairs``, ``_split_observation_pairs``). The independent TPE asks it once
        per parameter of a trial, while the study's other trials stay as they are: kept for the
        trial being sampled."""
        key = (id(study._storage), trial._trial_id, trial.number)
        if self._split_kept is not None and self._split_kept[0] == key:
            return self._split_kept[1]
        trials = [
            t
            for t in study._get_trials(
                deepcopy=False, states=(*_FINISHED, TrialState.RUNNING), use_cache=False
            )
            if t.number != trial.number
        ]
        sign = -1.0 if study.direction == StudyDirection.MAXIMIZE else 1.0
        scores = [_score(t, sign) for t in trials]
        n = sum(s[0] < math.inf for s in scores)
        below, above = split(scores, default_gamma(n))
        kept = ([trials[i] for i in below], [trials[i] for i in above])
        self._split_kept = (key, kept)
        return kept

    def _below_estimator(
        self, study: optuna.Study, below: Sequence[FrozenTrial], space: dict[str, BaseDistribution]
    ) -> ParzenEstimator:
        """``l(x)``: a function of the below trials' parameters alone, so the one built for the same
        trials is reused (the asks of one call share it: with constant liar the new running trials
        join ``g(x)``), with the kernels' bounds it has computed."""
        key = (id(study._storage), tuple(t._trial_id for t in below))
        if self._below_trials != key:
            self._below_trials, self._below = key, {}
        space_key = tuple(space.items())
        estimator = self._below.get(space_key)
        if estimator is None:
            estimator = ParzenEstimator(
                self._observations(study, below, space),
                space,
                self._prior_weight,
                multivariate=self._multivariate,
            )
            self._below[space_key] = estimator
        return estimator

    def _observations(
        self, study: optuna.Study, trials: Sequence[FrozenTrial], space: dict[str, BaseDistribution]
    ) -> dict[str, np.ndarray]:
        """3.3 ``_get_internal_repr``: the trials that hold every parameter of ``space``."""
        names = tuple(space)
        storage = id(study._storage)
        rows: list[tuple[Any, ...]] = []
        for t in trials:
            key = (storage, t._trial_id, names)
            if key in self._reprs:
                row = self._reprs[key]
            else:
                row = None
                if all(name in t.params for name in names):
                    row = tuple(t.distributions[name].to_internal_repr(t.params[name]) for name in names)
                self._reprs[key] = row
            if row is not None:
                rows.append(row)
        columns = zip(*rows, strict=True) if rows else ([] for _ in names)
        return {name: np.asarray(list(column)) for name, column in zip(names, columns, strict=True)}


def split(scores: Sequence[tuple[float, float]], n_below: int) -> tuple[list[int], list[int]]:
    """3.3 sampler.py ``_split_observation_pairs`` (single objective): the ``n_below`` lowest scores
    (stable: earlier trials first on ties) and the rest, each in trial order."""
    order = sorted(range(len(scores)), key=lambda i: scores[i])
    return sorted(order[:n_below]), sorted(order[n_below:])
