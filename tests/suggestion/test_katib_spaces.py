"""Search spaces Katib's stock Optuna service accepts are served here too, the same way (over gRPC).

Upstream: pkg/suggestion/v1beta1/optuna/base_service.py ``_get_optuna_search_space`` (sampling)
and pkg/suggestion/v1beta1/internal/search_space.py ``convert_to_combinations`` (grid).
"""

from __future__ import annotations

import logging
import math

import pytest

from tests.suggestion.katib_fake import FakeKatib, experiment, param


def _values(katib: FakeKatib, name: str) -> list[str]:
    return [dict(t.assignments)[name] for t in katib.trials]


def test_log_uniform_double_with_step_ignores_the_step(start_server, caplog) -> None:
    server = start_server()
    params = [
        param("lr", "double", lo="0.001", hi="1", step="0.1", dist="logUniform"),
        param("u", "int", lo="1", hi="3"),
    ]
    katib = FakeKatib(
        server.bound_addresses[0],
        experiment(algorithm="random", params=params, settings={"random_state": "1"}),
    )
    with caplog.at_level(logging.WARNING):
        katib.validate()
        katib.run(until=20, parallel=2)
    lrs = [float(v) for v in _values(katib, "lr")]
    assert all(0.001 <= v <= 1 for v in lrs)
    # Katib builds FloatDistribution(log=True, step=None): values off the 0.1 grid, and below 0.1
    assert any(v < 0.1 for v in lrs)
    assert any(abs(v / 0.1 - round(v / 0.1)) > 1e-6 for v in lrs)
    assert "logUniform ignores step 0.1" in caplog.text


def test_log_uniform_min_zero_is_clamped_as_katib_does(start_server, caplog) -> None:
    server = start_server()
    params = [
        param("lr", "double", lo="0", hi="0.01", dist="logUniform"),
        param("units", "int", lo="0", hi="4", dist="logUniform"),
    ]
    katib = FakeKatib(
        server.bound_addresses[0],
        experiment(algorithm="tpe", params=params, settings={"random_state": "2", "n_startup_trials": "3"}),
    )
    with caplog.at_level(logging.WARNING):
        katib.validate()
        katib.run(until=12, parallel=3)
    lrs = [float(v) for v in _values(katib, "lr")]
    units = [int(v) for v in _values(katib, "units")]
    assert all(1e-10 <= v <= 0.01 for v in lrs)
    # log-uniform over [1e-10, 0.01]: most values are tiny (a uniform draw would be ~0.005)
    assert sorted(lrs)[len(lrs) // 2] < 1e-4
    assert all(1 <= u <= 4 for u in units)
    assert "logUniform min 0 is raised to 1e-10" in caplog.text
    assert "logUniform min 0 is raised to 1" in caplog.text


def test_log_uniform_whose_max_is_below_the_clamp_is_refused(start_server) -> None:
    import grpc

    server = start_server()
    params = [param("units", "int", lo="-4", hi="0", dist="logUniform"), param("x", "double", lo="0", hi="1")]
    katib = FakeKatib(server.bound_addresses[0], experiment(algorithm="random", params=params))
    with pytest.raises(grpc.RpcError) as info:
        katib.validate()
    assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "parameters[units].feasibleSpace.max='0': logUniform needs max >= 1" in str(info.value.details())


def test_int_log_uniform_with_a_step_ignores_the_step(start_server, caplog) -> None:
    server = start_server()
    params = [
        param("units", "int", lo="1", hi="64", step="4", dist="logUniform"),
        param("x", "double", lo="0", hi="1"),
    ]
    katib = FakeKatib(
        server.bound_addresses[0],
        experiment(algorithm="random", params=params, settings={"random_state": "3"}),
    )
    with caplog.at_level(logging.WARNING):
        katib.validate()
        katib.run(until=30, parallel=3)
    units = [int(v) for v in _values(katib, "units")]
    assert all(1 <= u <= 64 for u in units)
    assert any((u - 1) % 4 for u in units), units  # not only 1, 5, 9, ...
    assert "logUniform ignores step 4" in caplog.text


def test_grid_ignores_log_uniform_and_uses_the_step(start_server, caplog) -> None:
    """Katib's grid: range(min, max + 1, step) for ints and np.arange for doubles, whatever the
    distribution (so a logUniform min of 0 stays 0 in the grid)."""
    server = start_server()
    params = [
        param("lr", "double", lo="0.1", hi="0.5", step="0.2", dist="logUniform"),
        param("units", "int", lo="0", hi="8", step="4", dist="logUniform"),
    ]
    exp = experiment(algorithm="grid", params=params, max_trials=9, settings={"random_state": "4"})
    katib = FakeKatib(server.bound_addresses[0], exp)
    with caplog.at_level(logging.WARNING):
        katib.validate()
        katib.run(until=9, parallel=3)
    combos = {
        (round(float(dict(t.assignments)["lr"]), 9), int(dict(t.assignments)["units"])) for t in katib.trials
    }
    assert combos == {(lr, u) for lr in (0.1, 0.3, 0.5) for u in (0, 4, 8)}
    assert "grid ignores logUniform" in caplog.text


def test_discrete_list_of_strings_is_served_like_categorical(start_server, caplog) -> None:
    server = start_server()
    params = [param("act", "discrete", values=("relu", "gelu", "tanh")), param("x", "double", lo="0", hi="1")]
    katib = FakeKatib(
        server.bound_addresses[0],
        experiment(algorithm="tpe", params=params, settings={"n_startup_trials": "3"}),
    )
    with caplog.at_level(logging.WARNING):
        katib.validate()
        katib.run(until=10, parallel=2)
    assert set(_values(katib, "act")) <= {"relu", "gelu", "tanh"}
    assert len(set(_values(katib, "act"))) >= 2
    assert "discrete list ['relu', 'gelu', 'tanh'] holds non-numeric values" in caplog.text


@pytest.mark.parametrize("algorithm", ["tpe", "multivariate-tpe"])
def test_zero_ei_candidates_keeps_serving_after_the_startup_trials(start_server, caplog, algorithm) -> None:
    server = start_server()
    exp = experiment(
        algorithm=algorithm, settings={"n_ei_candidates": "0", "n_startup_trials": "2", "random_state": "5"}
    )
    katib = FakeKatib(server.bound_addresses[0], exp)
    with caplog.at_level(logging.WARNING):
        katib.validate()
        katib.run(until=10, parallel=2)  # Optuna with 0 candidates would fail from the 3rd trial on
    assert len(katib.trials) == 10
    assert all(math.isfinite(float(dict(t.assignments)["lr"])) for t in katib.trials)
    assert "n_ei_candidates=0" in caplog.text
