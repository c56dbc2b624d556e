"""``_ask.ask_trial`` asks as ``Study.ask(fixed_distributions)`` does: same values, same stored trial."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import optuna
import pytest
from optuna.distributions import CategoricalDistribution, FloatDistribution, IntDistribution

from katib_progress.suggestion._ask import ask_trial
from katib_progress.suggestion._katib_tpe import KatibTPESampler

SPACE = {
    "x": FloatDistribution(0.0, 1.0),
    "lr": FloatDistribution(1e-5, 1.0, log=True),
    "k": IntDistribution(1, 16),
    "one": IntDistribution(3, 3),  # single-valued
    "kind": CategoricalDistribution(["a", "b", "c"]),
}

SAMPLERS: dict[str, Callable[[], optuna.samplers.BaseSampler]] = {
    "random": lambda: optuna.samplers.RandomSampler(seed=5),
    "tpe": lambda: optuna.samplers.TPESampler(seed=5, n_startup_trials=4, constant_liar=True),
    "multivariate-tpe": lambda: optuna.samplers.TPESampler(
        seed=5, n_startup_trials=4, multivariate=True, constant_liar=True
    ),
    "katib-multivariate-tpe": lambda: KatibTPESampler(SPACE, seed=5, n_startup_trials=4),
}


def _value(params: dict[str, Any]) -> float:
    return (params["x"] - 0.3) ** 2 + params["k"] / 16 + (params["kind"] == "b")


@pytest.mark.parametrize("storage", [None, "sqlite"])
@pytest.mark.parametrize("sampler", list(SAMPLERS))
def test_ask_trial_matches_study_ask(sampler: str, storage: str | None, tmp_path) -> None:
    def study(name: str) -> optuna.Study:
        url = f"sqlite:///{tmp_path}/{name}.db" if storage else None
        return optuna.create_study(storage=url, sampler=SAMPLERS[sampler]())

    ours, optunas = study("ours"), study("optuna")
    fixed_every = 4  # some trials get a fixed value, as grid, qmc and hyperband give
    for i in range(12):
        fixed = {"k": 7} if i % fixed_every == 0 else None
        if fixed is not None:
            optunas.enqueue_trial(fixed, user_attrs={"i": i})
        expected = optunas.ask(SPACE)
        if fixed is None:
            expected.set_user_attr("i", i)
        trial, params = ask_trial(ours, SPACE, {"i": i}, fixed)
        assert params == expected.params
        assert trial.number == expected.number
        stored = ours.get_trials(deepcopy=False)[-1]
        assert stored.params == optunas.get_trials(deepcopy=False)[-1].params
        assert stored.distributions == SPACE
        assert stored.user_attrs == {"i": i}
        assert stored.state is optuna.trial.TrialState.RUNNING
        if i % 3 != 2:  # leave some running: constant_liar sees them
            ours.tell(trial, _value(params))
            optunas.tell(expected, _value(expected.params))
