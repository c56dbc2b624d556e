"""``cmaes`` with a ``random_state`` suggests what Katib's service suggests.

Katib's service (pkg/suggestion/v1beta1/optuna/base_service.py: ``_create_sampler`` builds
``optuna.samplers.CmaEsSampler(seed=random_state)`` once per experiment; ``get_suggestions`` tells
the newly finished trials with ``study.tell(number, value)`` and then ``_ask`` calls
``study.ask(fixed_distributions=...)`` once per suggestion) is replayed here with the installed
Optuna's own ``CmaEsSampler``, which consumes its random streams as Optuna 3.3's (Katib's image) does.
Katib's controller finishes trials oldest first here, as ``FakeKatib.run`` does.
"""

from __future__ import annotations

import optuna
import pytest
from optuna.distributions import BaseDistribution, CategoricalDistribution, FloatDistribution, IntDistribution

from tests.suggestion.katib_fake import DEFAULT_PARAMS, Cond, FakeKatib, default_objective, experiment, param

PARAMS = (*DEFAULT_PARAMS, param("momentum", "double", lo="0.1", hi="0.9"))
SPACE: dict[str, BaseDistribution] = {
    "lr": FloatDistribution(0.0001, 0.1, log=True),
    "layers": IntDistribution(1, 8),
    "optimizer": CategoricalDistribution(["sgd", "adam", "rmsprop"]),
    "momentum": FloatDistribution(0.1, 0.9),
}


def _text(value: object) -> str:
    return repr(value) if isinstance(value, float) else str(value)


def katib_run(seed: int, until: int, parallel: int, fail_every: int = 0) -> list[dict[str, str]]:
    """Katib's service under the controller loop of ``FakeKatib.run``: the suggestions, in order."""
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    study = optuna.create_study(sampler=optuna.samplers.CmaEsSampler(seed=seed))
    made: list[tuple[int, dict[str, str]]] = []  # (optuna number, assignments)
    running: list[int] = []  # indexes into made, oldest first
    finished: list[tuple[int, float | None]] = []  # not yet told
    while True:
        want = min(parallel - len(running), until - len(made))
        if want > 0:
            for number, value in finished:
                if value is not None:
                    study.tell(number, value)
            finished.clear()
            for _ in range(want):
                trial = study.ask(fixed_distributions=SPACE)
                made.append((trial.number, {k: _text(v) for k, v in trial.params.items()}))
                running.append(len(made) - 1)
        if not running:
            return [assignments for _, assignments in made]
        oldest = running.pop(0)
        number, assignments = made[oldest]
        fail = fail_every and (oldest + 1) % fail_every == 0
        # a failed trial is never told a value (Katib's service only tells trials with a metric)
        finished.append((number, None if fail else default_objective(assignments)))


@pytest.mark.parametrize(("parallel", "fail_every"), [(1, 0), (3, 0), (3, 5)])
def test_cmaes_suggests_what_katibs_service_suggests(start_server, parallel, fail_every) -> None:
    expected = katib_run(seed=7, until=40, parallel=parallel, fail_every=fail_every)
    server = start_server()
    exp = experiment(algorithm="cmaes", settings={"random_state": "7"}, params=PARAMS, max_trials=40)
    katib = FakeKatib(server.bound_addresses[0], exp)
    katib.run(until=40, parallel=parallel, fail_every=fail_every)
    assert [t.condition == Cond.FAILED for t in katib.trials].count(True) == (
        40 // fail_every if fail_every else 0
    )
    got = [dict(t.assignments) for t in katib.trials]
    # several CMA-ES generations are told over 40 trials (population 8 for 3 dimensions)
    assert got == expected


def test_another_random_state_is_another_run(start_server) -> None:
    server = start_server()
    exp = experiment(algorithm="cmaes", settings={"random_state": "8"}, params=PARAMS, max_trials=12)
    katib = FakeKatib(server.bound_addresses[0], exp)
    katib.run(until=12, parallel=1)
    assert [dict(t.assignments) for t in katib.trials] != katib_run(seed=7, until=12, parallel=1)
