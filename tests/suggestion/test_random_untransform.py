"""``_random.Untransform`` gives Optuna's ``_SearchSpaceTransform.untransform`` values exactly."""

from __future__ import annotations

import numpy as np
import pytest
from optuna._transform import _SearchSpaceTransform
from optuna.distributions import CategoricalDistribution, FloatDistribution, IntDistribution

from katib_progress.suggestion._random import Untransform

SPACE = {
    "f": FloatDistribution(-1.0, 2.5),
    "f_log": FloatDistribution(1e-5, 1.0, log=True),
    "f_step": FloatDistribution(0.0, 1.0, step=0.1),
    "f_one": FloatDistribution(0.5, 0.5),
    "f_log_one": FloatDistribution(0.25, 0.25, log=True),
    "i": IntDistribution(1, 16),
    "i_log": IntDistribution(1, 1000, log=True),
    "i_step": IntDistribution(0, 98, step=7),
    "c": CategoricalDistribution(["a", "b", "c", "d"]),
    "c_num": CategoricalDistribution([1, 2.5, None]),
}


@pytest.mark.parametrize("unit", [False, True])
def test_untransform_matches_optuna_on_random_points_and_bounds(unit: bool) -> None:
    """transform_0_1 off: SpaceRandomSampler; on: the cmaes sampler (numeric parameters only)."""
    space = {n: d for n, d in SPACE.items() if not unit or not isinstance(d, CategoricalDistribution)}
    trans = _SearchSpaceTransform(space, transform_0_1=unit)
    ours = Untransform(space, trans)
    low, high = trans.bounds[:, 0], trans.bounds[:, 1]
    rng = np.random.RandomState(0)
    points = [rng.uniform(low, high) for _ in range(3000)]
    points += [low.copy(), high.copy(), np.nextafter(high, low)]
    ties = low.copy()  # all one-hot columns equal: argmax takes the first
    points.append(ties)
    for x in points:
        expected = trans.untransform(x)
        got = ours(x)
        assert got == expected
        assert [type(v) for v in got.values()] == [type(v) for v in expected.values()]
