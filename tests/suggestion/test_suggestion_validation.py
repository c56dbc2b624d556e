"""ValidateAlgorithmSettings over gRPC, as Katib's controller calls it when an experiment is created."""

from __future__ import annotations

import importlib.util

import grpc
import pytest

from tests.suggestion.katib_fake import FakeKatib, experiment, param


def _reject(address: str, exp: object) -> str:
    katib = FakeKatib(address, exp)
    with pytest.raises(grpc.RpcError) as info:
        katib.validate()
    katib.close()
    assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    return str(info.value.details())


@pytest.mark.parametrize(
    ("algorithm", "settings"),
    [
        ("tpe", {"n_startup_trials": "5", "n_ei_candidates": "12", "random_state": "3"}),
        ("multivariate-tpe", {"n_startup_trials": "0", "random_state": "1"}),
        ("cmaes", {"restart_strategy": "ipop", "sigma": "0.5", "random_state": "2"}),
        ("cmaes", {"restart_strategy": "None"}),
        ("random", {"random_state": "10"}),
        ("qmc", {"qmc_type": "halton", "scramble": "true", "random_state": "4"}),
        ("qmc", {}),
    ],
)
def test_valid_settings_are_accepted(start_server, algorithm, settings) -> None:
    server = start_server()
    katib = FakeKatib(server.bound_addresses[0], experiment(algorithm=algorithm, settings=settings))
    katib.validate()  # raises on any non-OK status
    katib.close()


def test_every_problem_is_listed_with_setting_value_and_allowed(start_server) -> None:
    server = start_server()
    params = [
        param("lr", "double", lo="0.1", hi="0.01"),  # min > max
        param("wd", "double", lo="0", hi="1", dist="normal"),  # unsupported distribution
        param("units", "int", lo="-8", hi="0", dist="logUniform"),  # log with max below 1
        param("act", "categorical"),  # empty list
    ]
    exp = experiment(
        algorithm="tpe",
        settings={"n_startup_trials": "-1", "n_ei_candidates": "abc", "gamma": "0.2"},
        params=params,
    )
    details = _reject(server.bound_addresses[0], exp)
    expected = [
        "algorithmSettings.n_startup_trials='-1'",
        "greater than or equal to 0",
        "algorithmSettings.n_ei_candidates='abc'",
        "algorithmSettings.gamma='0.2': unknown setting for algorithm 'tpe'; allowed:",
        "n_startup_trials",
        "parameters[lr].feasibleSpace: min 0.1 is greater than max 0.01",
        "parameters[wd].feasibleSpace.distribution='normal': not supported; allowed: uniform, logUniform",
        "parameters[units].feasibleSpace.max='0': logUniform needs max >= 1",
        "parameters[act].feasibleSpace.list: empty",
    ]
    for fragment in expected:
        assert fragment in details, (fragment, details)


def test_unknown_algorithm_names_the_allowed_ones(start_server) -> None:
    server = start_server()
    details = _reject(server.bound_addresses[0], experiment(algorithm="nosuch"))
    assert "algorithm.algorithmName='nosuch': unknown algorithm" in details
    for name in ("tpe", "multivariate-tpe", "cmaes", "random", "grid", "gp", "qmc", "sobol", "hyperband"):
        assert name in details


def test_grid_refuses_more_trials_than_combinations(start_server) -> None:
    server = start_server()
    params = [param("a", "int", lo="1", hi="3"), param("b", "categorical", values=("x", "y"))]
    details = _reject(server.bound_addresses[0], experiment(algorithm="grid", params=params, max_trials=7))
    assert "maxTrialCount=7" in details and "6 combinations" in details
    katib = FakeKatib(server.bound_addresses[0], experiment(algorithm="grid", params=params, max_trials=6))
    katib.validate()
    katib.close()


def test_grid_needs_a_step_for_doubles(start_server) -> None:
    server = start_server()
    params = [param("lr", "double", lo="0.1", hi="0.5"), param("wd", "double", lo="0", hi="1", step="0.25")]
    details = _reject(server.bound_addresses[0], experiment(algorithm="grid", params=params, max_trials=5))
    assert "parameters[lr].feasibleSpace.step: required by grid" in details
    assert "wd" not in details


def test_cmaes_needs_two_numeric_parameters(start_server) -> None:
    server = start_server()
    params = [param("lr", "double", lo="0.1", hi="0.5"), param("opt", "categorical", values=("a", "b"))]
    details = _reject(server.bound_addresses[0], experiment(algorithm="cmaes", params=params))
    assert "needs at least 2 double or int parameters, the experiment has 1" in details


def test_bad_objective_and_qmc_settings(start_server) -> None:
    server = start_server()
    exp = experiment(algorithm="qmc", settings={"qmc_type": "lattice", "scramble": "maybe"}, metric="")
    details = _reject(server.bound_addresses[0], exp)
    assert "objective.objectiveMetricName: empty" in details
    assert "algorithmSettings.qmc_type='lattice'" in details and "'sobol' or 'halton'" in details
    assert "algorithmSettings.scramble='maybe'" in details


def test_gp_without_torch_names_the_missing_dependency(start_server, monkeypatch) -> None:
    # torch is installed here (the `gp` extra); make it look absent to the service's dependency check.
    real_find_spec = importlib.util.find_spec

    def find_spec(name: str, *args: object, **kwargs: object) -> object:
        return None if name == "torch" else real_find_spec(name, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(importlib.util, "find_spec", find_spec)
    server = start_server()
    details = _reject(server.bound_addresses[0], experiment(algorithm="gp"))
    assert "needs the Python package 'torch'" in details


def test_get_suggestions_also_rejects_an_invalid_experiment(start_server) -> None:
    server = start_server()
    katib = FakeKatib(
        server.bound_addresses[0], experiment(algorithm="random", settings={"random_state": "-4"})
    )
    with pytest.raises(grpc.RpcError) as info:
        katib.ask(2)
    assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "random_state='-4'" in str(info.value.details())
