"""``random``: Optuna's random sampling, one draw per ask for the whole search space."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import optuna
from optuna._transform import _SearchSpaceTransform
from optuna.distributions import BaseDistribution, CategoricalDistribution, FloatDistribution, IntDistribution
from optuna.samplers import BaseSampler
from optuna.samplers._lazy_random_state import LazyRandomState
from optuna.trial import FrozenTrial


def seek(rng: np.random.RandomState, seed: int, at: int | None, target: int) -> None:
    """Put ``rng``, which has given ``at`` uniforms of the ``RandomState(seed)`` stream (``None``:
    unknown), where that stream is after ``target`` of them: onwards by drawing the ones in between,
    or from the stream's start when ``target`` is already passed."""
    if at is None or target < at:
        rng.seed(seed)
        at = 0
    if target > at:
        rng.random_sample(target - at)


class SpaceRandomSampler(BaseSampler):
    """Optuna's ``RandomSampler`` distribution, drawn for the whole search space at once.

    ``RandomSampler.sample_independent`` (optuna/samplers/_random.py) draws each parameter
    uniformly over its transformed range (``_SearchSpaceTransform``: log scale for log parameters,
    one unit per step, one column per category) and maps it back; it builds that transform for
    every parameter of every ask. Here the experiment's fixed space is transformed once and one
    draw per ask covers every parameter: the same distribution, a fifth of the work."""

    def __init__(
        self,
        space: dict[str, BaseDistribution],
        *,
        seed: int | None = None,
        rng: LazyRandomState | None = None,
    ) -> None:
        """``rng``: draw from this random state (shared with another sampler) instead of a new one
        seeded with ``seed``."""
        self._space = dict(space)
        self._trans = _SearchSpaceTransform(self._space) if self._space else None
        bounds = self._trans.bounds if self._trans else np.zeros((0, 2))
        self._low, self._high = bounds[:, 0].copy(), bounds[:, 1].copy()
        self._untransform = Untransform(self._space, self._trans) if self._trans else None
        self._rng = LazyRandomState(seed) if rng is None else rng
        self._stream_at: int | None = None  # asks drawn from the experiment's stream (stream mode)

    def reseed_rng(self) -> None:
        self._rng.rng.seed()

    @property
    def columns(self) -> int:
        """Uniform values one draw of the whole space takes from the random state."""
        return len(self._low)

    def position_stream(self, seed: int, index: int) -> None:
        """Put the random state where Katib's ``random`` has it before its ask number ``index``.

        Katib's service (pkg/suggestion/v1beta1/optuna/base_service.py, ``_create_sampler`` and
        ``_ask``) keeps one ``RandomSampler(seed=random_state)`` per experiment and asks each
        suggestion with ``study.ask(fixed_distributions=...)``; Optuna's
        ``RandomSampler.sample_independent`` (optuna/samplers/_random.py, 3.3 as in 5.0) draws one
        uniform per column of each parameter's ``_SearchSpaceTransform``, parameter by parameter. So
        ask ``index`` reads values ``[index * D, (index + 1) * D)`` of one ``RandomState(seed)``
        stream, D being the space's column count: the same values this sampler draws for the whole
        space at once. Positioning from ``index`` alone keeps a restarted service exact (Katib's own
        restarts from the stream's start and repeats earlier suggestions). Not the same as Katib's
        when a parameter has a single value: Optuna takes that value without a draw, here its column
        still consumes one."""
        at = None if self._stream_at is None else self._stream_at * self.columns
        seek(self._rng.rng, seed, at, index * self.columns)
        self._stream_at = index

    def infer_relative_search_space(
        self, study: optuna.Study, trial: FrozenTrial
    ) -> dict[str, BaseDistribution]:
        return dict(self._space)

    def sample_relative(
        self, study: optuna.Study, trial: FrozenTrial, search_space: dict[str, BaseDistribution]
    ) -> dict[str, Any]:
        if not search_space:
            return {}
        return self.draw()

    def draw(self) -> dict[str, Any]:
        """One draw for the whole space (the relative sample; study and trial play no part)."""
        if self._untransform is None:
            return {}
        draw = self._rng.rng.uniform(self._low, self._high)
        if self._stream_at is not None:
            self._stream_at += 1
        return self._untransform(draw)

    def sample_independent(
        self, study: optuna.Study, trial: FrozenTrial, param_name: str, param_distribution: BaseDistribution
    ) -> Any:
        return self.draw_one(param_name, param_distribution)

    def draw_one(self, param_name: str, param_distribution: BaseDistribution) -> Any:
        """One parameter's independent sample (study and trial play no part)."""
        trans = _SearchSpaceTransform({param_name: param_distribution})
        return trans.untransform(self._rng.rng.uniform(trans.bounds[:, 0], trans.bounds[:, 1]))[param_name]


class Untransform:
    """``_SearchSpaceTransform.untransform`` for one fixed space (transform_log on; transform_0_1 as
    the transform has it: on for cmaes): the same values by the same arithmetic
    (optuna/_transform.py ``untransform`` and ``_untransform_numerical_param``; NumPy's scalar
    ``clip`` and ``round`` replaced by ``min``/``max`` and ``round``, which agree for finite floats:
    both round half to even), without NumPy's per-scalar overhead (a third of a random ask)."""

    def __init__(self, space: dict[str, BaseDistribution], trans: _SearchSpaceTransform) -> None:
        assert trans._transform_log
        raw = trans._raw_bounds
        # with transform_0_1, untransform first maps [0, 1] onto the raw bounds: low + x * (high - low)
        self._scale = (raw[:, 0], raw[:, 1] - raw[:, 0]) if trans._transform_0_1 else None
        self._steps: list[tuple[str, int, int, BaseDistribution, Any]] = []
        for (name, dist), columns in zip(space.items(), trans.column_to_encoded_columns, strict=True):
            top = None
            if isinstance(dist, FloatDistribution) and not dist.single():
                top = np.nextafter(dist.high, dist.high - 1)  # a NumPy float, as Optuna's
            self._steps.append((name, int(columns[0]), int(columns[-1]) + 1, dist, top))

    def __call__(self, trans_params: np.ndarray) -> dict[str, Any]:
        if self._scale is not None:
            trans_params = self._scale[0] + trans_params * self._scale[1]
        x: list[float] = trans_params.tolist()
        params: dict[str, Any] = {}
        for name, first, end, d, top in self._steps:
            if isinstance(d, CategoricalDistribution):
                # the highest of the one-hot columns, the first one on a tie (ndarray.argmax)
                row = x[first:end]
                params[name] = d.choices[row.index(max(row))]
                continue
            t = x[first]
            param: int | float
            if isinstance(d, FloatDistribution):
                if d.log:
                    param = math.exp(t)
                    if top is not None:
                        param = float(min(max(param, d.low), top))
                elif d.step is not None:
                    param = float(
                        min(max(float(round((t - d.low) / d.step)) * d.step + d.low, d.low), d.high)
                    )
                else:
                    param = t if top is None else min(t, top)
            else:
                assert isinstance(d, IntDistribution)
                if d.log:
                    param = min(max(round(math.exp(t)), d.low), d.high)
                else:
                    param = min(max(math.floor((t - d.low) / d.step + 0.5) * d.step + d.low, d.low), d.high)
            params[name] = param
        return params
