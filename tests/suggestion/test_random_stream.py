"""``random`` with a ``random_state`` suggests what Katib's service suggests, also after a restart.

Katib's service (pkg/suggestion/v1beta1/optuna/base_service.py: ``_create_sampler`` builds
``optuna.samplers.RandomSampler(seed=random_state)`` once per experiment; ``_ask`` calls
``study.ask(fixed_distributions=self._get_optuna_search_space())`` per suggestion, with a
FloatDistribution(log) for a logUniform double, an IntDistribution for an int and a
CategoricalDistribution for a categorical) is replayed here with Optuna's own RandomSampler.
"""

from __future__ import annotations

import optuna
import pytest
from optuna.distributions import CategoricalDistribution, FloatDistribution, IntDistribution

from tests.suggestion.katib_fake import FakeKatib, experiment


def katib_stream(seed: int, count: int) -> list[dict[str, object]]:
    space = {
        "lr": FloatDistribution(0.0001, 0.1, log=True),
        "layers": IntDistribution(1, 8),
        "optimizer": CategoricalDistribution(["sgd", "adam", "rmsprop"]),
    }
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=seed))
    return [study.ask(fixed_distributions=space).params for _ in range(count)]


def assert_same(ours: tuple[tuple[str, str], ...], katib: dict[str, object]) -> None:
    got = dict(ours)
    assert set(got) == set(katib)
    assert float(got["lr"]) == pytest.approx(katib["lr"], rel=1e-12)
    assert int(got["layers"]) == katib["layers"]
    assert got["optimizer"] == katib["optimizer"]


def test_random_draws_katibs_stream_and_continues_it_after_a_restart(start_server) -> None:
    expected = katib_stream(seed=5, count=12)
    first = start_server()
    exp = experiment(algorithm="random", settings={"random_state": "5"})
    katib = FakeKatib(first.bound_addresses[0], exp)
    katib.ask(3)
    katib.ask(1)
    for trial in katib.trials[:3]:
        katib.finish(trial)
    katib.ask(2)
    assert len(katib.trials) == 6
    for trial, want in zip(katib.trials, expected, strict=False):
        assert_same(trial.assignments, want)
    first.stop(0)

    second = start_server()  # a restarted service: it learns the six trials from the request
    katib.connect(second.bound_addresses[0])
    katib.ask(3)
    katib.ask(3)
    assert len(katib.trials) == 12
    for trial, want in zip(katib.trials, expected, strict=True):
        assert_same(trial.assignments, want)


def test_another_random_state_is_another_stream(start_server) -> None:
    server = start_server()
    exp = experiment(algorithm="random", settings={"random_state": "6"})
    katib = FakeKatib(server.bound_addresses[0], exp)
    katib.ask(3)
    with pytest.raises(AssertionError):
        for trial, want in zip(katib.trials, katib_stream(seed=5, count=3), strict=True):
            assert_same(trial.assignments, want)
