"""One sampler per experiment, reseeded per ask (issue 15 item 3; random, multivariate-tpe and cmaes
continue Katib's streams instead); restart determinism is covered by
test_suggestion_restart.py (tpe, multivariate-tpe, random, qmc, grid; cmaes with storage)."""

from __future__ import annotations

import pytest

from katib_progress.suggestion._samplers import reseed
from tests.suggestion.katib_fake import FakeKatib, experiment


@pytest.mark.parametrize("algorithm", ["tpe", "multivariate-tpe", "cmaes", "random"])
def test_the_sampler_is_kept_between_calls(start_server, algorithm) -> None:
    server = start_server()
    katib = FakeKatib(
        server.bound_addresses[0], experiment(algorithm=algorithm, settings={"random_state": "3"})
    )
    katib.run(until=6, parallel=3)
    study = server.registry.study("exp")
    assert study is not None
    first = study.study.sampler
    katib.run(until=12, parallel=3)
    assert study.study.sampler is first


def test_gp_gets_a_fresh_sampler_per_ask(start_server) -> None:
    """GPSampler warm-starts each fit from the previous one: kept, it would depend on process age."""
    server = start_server()
    katib = FakeKatib(server.bound_addresses[0], experiment(algorithm="gp", settings={"random_state": "3"}))
    katib.ask(1)
    study = server.registry.study("exp")
    assert study is not None
    first = study.study.sampler
    katib.ask(1)
    assert study.study.sampler is not first


def test_reseed_gives_the_state_of_a_fresh_sampler() -> None:
    import optuna

    kept = optuna.samplers.CmaEsSampler(seed=1)
    kept._cma_rng.rng.rand(5)  # advanced by earlier asks
    kept._independent_sampler._rng.rng.rand(7)  # type: ignore[attr-defined]
    reseed(kept, 42)
    fresh = optuna.samplers.CmaEsSampler(seed=42)
    assert kept._cma_rng.rng.randint(1, 2**31) == fresh._cma_rng.rng.randint(1, 2**31)
    assert kept._independent_sampler._rng.rng.rand() == fresh._independent_sampler._rng.rng.rand()  # type: ignore[attr-defined]
    with pytest.raises(TypeError, match="no random state"):
        reseed(optuna.samplers.BruteForceSampler.__new__(optuna.samplers.BruteForceSampler), 1)


def test_cmaes_tells_each_generation_once_with_its_first_completed_trials(start_server) -> None:
    """The kept CMA-ES optimizer (``_cma.KeptCmaEsSampler``) records what it did in the trials, which
    is what a restart with storage replays: each told list is the first population_size completed
    trials of one generation, in order, and generations advance."""
    from optuna.trial import TrialState

    from katib_progress.suggestion._cma import GENERATION_ATTR, TOLD_ATTR

    server = start_server()
    katib = FakeKatib(
        server.bound_addresses[0], experiment(algorithm="cmaes", settings={"random_state": "5"})
    )
    katib.run(until=40, parallel=3, fail_every=6)
    katib.ask(1)  # report the last results
    study = server.registry.study("exp")
    assert study is not None
    trials = study.trials()
    by_number = {t.number: t for t in trials}
    tells = [t.system_attrs[TOLD_ATTR] for t in trials if TOLD_ATTR in t.system_attrs]
    assert len(tells) >= 3
    for generation, numbers in enumerate(tells):
        members = [t for t in trials if t.system_attrs.get(GENERATION_ATTR) == generation]
        completed = [t.number for t in members if t.state is TrialState.COMPLETE]
        assert numbers == completed[: len(numbers)]
        assert all(by_number[n].state is TrialState.COMPLETE for n in numbers)
    assert len({len(numbers) for numbers in tells}) == 1, "one population size"
    assert max(t.system_attrs.get(GENERATION_ATTR, -1) for t in trials) == len(tells)


@pytest.mark.parametrize("algorithm", ["cmaes", "random", "multivariate-tpe"])
def test_kept_sampler_suggests_what_a_sampler_built_per_ask_suggests(
    start_server, monkeypatch, algorithm
) -> None:
    """A sampler built per ask replays cmaes' generations and random streams from the trial
    attributes: the kept optimizer and streams must be in exactly that state (for random and
    multivariate-tpe: streams positioned from their start by the ask's index are where the kept
    ones are)."""
    from katib_progress.suggestion import _samplers

    def run() -> list:
        server = start_server()
        katib = FakeKatib(
            server.bound_addresses[0],
            experiment(algorithm=algorithm, settings={"random_state": "5"}, max_trials=45),
        )
        katib.run(until=45, parallel=3, fail_every=7)
        return katib.replies

    kept = run()

    def fresh(self, seed, index):
        if algorithm == "cmaes":  # Katib's streams, seeded with random_state, replayed
            return _samplers.make_sampler(self._algorithm, self._settings, self._seed, self._space)
        sampler = _samplers.make_sampler(self._algorithm, self._settings, seed, self._space)
        if self._stream_seed is not None:  # Katib's streams, positioned from their start
            sampler.position_stream(self._stream_seed, index)
        return sampler

    monkeypatch.setattr(_samplers.AskSamplers, "for_ask", fresh)
    assert run() == kept
