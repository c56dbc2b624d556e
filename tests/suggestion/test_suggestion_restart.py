"""Restart safety: a new service process continues the same search from Katib's trial list."""

from __future__ import annotations

import pytest

from tests.suggestion.katib_fake import Cond, FakeKatib, experiment, param

GRID_PARAMS = (
    param("a", "int", lo="1", hi="6"),
    param("b", "double", lo="0", hi="1", step="0.25"),
    param("c", "categorical", values=("x", "y")),
)


def _exp(algorithm: str, name: str = "restart"):
    if algorithm == "grid":
        return experiment(
            name=name, algorithm="grid", params=GRID_PARAMS, max_trials=30, settings={"random_state": "11"}
        )
    return experiment(name=name, algorithm=algorithm, settings={"random_state": "11"})


def _objective(params):
    return sum(
        float(v) if v not in ("x", "y", "sgd", "adam", "rmsprop") else len(v) / 10 for v in params.values()
    )


def _uninterrupted(start_server, algorithm: str) -> FakeKatib:
    server = start_server()
    katib = FakeKatib(server.bound_addresses[0], _exp(algorithm), objective=_objective)
    katib.run(until=30, parallel=3, fail_every=7)
    return katib


def _restarted(start_server, algorithm: str, storage: str | None = None, at: int = 10) -> FakeKatib:
    first = start_server(storage)
    katib = FakeKatib(first.bound_addresses[0], _exp(algorithm), objective=_objective)
    while len(katib.trials) < at:
        assert katib.step(until=30, parallel=3, fail_every=7)
    assert katib.running(), "restart while trials are still running"
    first.stop(0)
    katib.close()
    second = start_server(storage)
    katib.connect(second.bound_addresses[0])
    katib.run(until=30, parallel=3, fail_every=7)
    return katib


@pytest.mark.parametrize("algorithm", ["tpe", "multivariate-tpe", "random", "qmc", "grid", "cmaes"])
def test_restart_after_10_of_30_trials_completes_the_experiment(start_server, algorithm) -> None:
    katib = _restarted(start_server, algorithm)
    assert len(katib.trials) == 30
    assert len({t.name for t in katib.trials}) == 30
    assert all(t.condition in (Cond.SUCCEEDED, Cond.FAILED) for t in katib.trials)
    assert sum(t.condition == Cond.SUCCEEDED for t in katib.trials) >= 25


@pytest.mark.parametrize("algorithm", ["tpe", "multivariate-tpe", "random", "qmc", "grid"])
def test_restart_continues_exactly_as_if_never_restarted(start_server, algorithm) -> None:
    """Same seed, same history: the rebuilt study suggests what the live one would have."""
    live = _uninterrupted(start_server, algorithm)
    restarted = _restarted(start_server, algorithm)
    assert restarted.replies == live.replies


def test_grid_after_restart_does_not_repeat_visited_points(start_server) -> None:
    katib = _restarted(start_server, "grid")
    ok = [t.assignments for t in katib.trials if t.condition == Cond.SUCCEEDED]
    assert len(ok) == len(set(ok))


def test_same_seed_same_requests_same_suggestions(start_server) -> None:
    a = _uninterrupted(start_server, "tpe")
    b = _uninterrupted(start_server, "tpe")
    assert a.replies == b.replies
    other = start_server()
    exp = experiment(name="restart", algorithm="tpe", settings={"random_state": "12"})
    c = FakeKatib(other.bound_addresses[0], exp, objective=_objective)
    c.run(until=30, parallel=3, fail_every=7)
    assert c.replies != a.replies, "another seed gives another search"


def test_without_random_state_the_seed_follows_the_experiment_name(start_server) -> None:
    runs = []
    for _ in range(2):
        server = start_server()
        katib = FakeKatib(server.bound_addresses[0], experiment(name="noseed", algorithm="random"))
        katib.run(until=6, parallel=2)
        runs.append(katib.replies)
    assert runs[0] == runs[1]


def test_sqlite_storage_reloads_the_study_after_restart(start_server, tmp_path) -> None:
    import optuna

    url = f"sqlite:///{tmp_path / 'studies.db'}"
    katib = _restarted(start_server, "tpe", storage=url)
    live = _uninterrupted(start_server, "tpe")
    assert katib.replies == live.replies
    katib.ask(1)  # report the last results
    study = optuna.load_study(study_name="restart", storage=url)
    trials = study.get_trials()
    assert len(trials) == 31, "reloaded, not rebuilt: no trial was added twice"
    by_name = {t.user_attrs["katib_trial_name"]: t for t in trials}
    for trial in katib.trials[:30]:
        stored = by_name[trial.name]
        if trial.condition == Cond.SUCCEEDED:
            assert stored.state.name == "COMPLETE"
            assert stored.value == pytest.approx(float(trial.metrics["loss"]))
        else:
            assert stored.state.name == "FAIL"


def test_stored_study_of_a_different_search_is_replaced(start_server, tmp_path) -> None:
    import optuna

    url = f"sqlite:///{tmp_path / 'studies.db'}"
    server = start_server(url)
    katib = FakeKatib(server.bound_addresses[0], _exp("tpe"), objective=_objective)
    katib.run(until=5, parallel=2)
    server.stop(0)
    server = start_server(url)  # the experiment was deleted and created again with another space
    again = FakeKatib(server.bound_addresses[0], _exp("random"), objective=_objective)
    again.run(until=3, parallel=1)
    again.ask(1)
    study = optuna.load_study(study_name="restart", storage=url)
    assert len(study.get_trials()) == 4


def test_restart_before_katib_created_the_last_trials_reuses_no_name(start_server) -> None:
    first = start_server()
    katib = FakeKatib(first.bound_addresses[0], _exp("tpe"), objective=_objective)
    katib.run(until=6, parallel=2)
    pending = katib.ask(2)  # recorded in Katib's Suggestion status ...
    first.stop(0)
    katib.close()
    katib.trials = [t for t in katib.trials if t not in pending]  # ... but not trials yet
    second = start_server()
    katib.connect(second.bound_addresses[0])
    request = katib.request(2)
    request.total_request_number = len(katib.trials) + len(pending) + 2
    reply = katib.stub.GetSuggestions(request, timeout=30)
    names = {p.trial_name for p in reply.parameter_assignments}
    assert len(names) == 2
    assert names.isdisjoint(t.name for t in pending)
    assert names.isdisjoint(t.name for t in katib.trials)


@pytest.mark.parametrize("at", [10, 22])
def test_cmaes_with_storage_resumes_exactly(start_server, tmp_path, at) -> None:
    """CMA-ES records its generations and tells in trial attributes: stored, a restart replays them
    (at 22 of 30 trials, generations have been told before the restart)."""
    live = _uninterrupted(start_server, "cmaes")
    restarted = _restarted(start_server, "cmaes", storage=f"sqlite:///{tmp_path / 'cma.db'}", at=at)
    assert restarted.replies == live.replies
