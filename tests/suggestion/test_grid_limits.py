"""Grid sizes are checked before any value is made; a restarted service keeps serving a grid whose
maxTrialCount was raised while it ran (over gRPC)."""

from __future__ import annotations

import grpc
import pytest

from tests.suggestion.katib_fake import Cond, FakeKatib, experiment, param


def test_a_huge_int_range_is_refused_by_arithmetic_naming_the_parameter(start_server) -> None:
    server = start_server()
    params = [param("units", "int", lo="0", hi="1000000000000"), param("b", "categorical", values=("x", "y"))]
    exp = experiment(algorithm="grid", params=params, max_trials=10)
    for call in ("validate", "ask"):
        katib = FakeKatib(server.bound_addresses[0], exp)
        with pytest.raises(grpc.RpcError) as info:
            katib.validate() if call == "validate" else katib.ask(1)
        katib.close()
        assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT, info.value.details()
        details = str(info.value.details())
        assert "the grid has 2000000000002 combinations, more than the limit 1000000" in details
        assert "units: 1000000000001 values" in details


def test_a_huge_double_range_is_refused_too(start_server) -> None:
    server = start_server()
    params = [param("lr", "double", lo="0", hi="1", step="0.0000000001")]
    katib = FakeKatib(server.bound_addresses[0], experiment(algorithm="grid", params=params, max_trials=10))
    with pytest.raises(grpc.RpcError) as info:
        katib.validate()
    assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "lr: 10000000001 values" in str(info.value.details())


GRID = (param("a", "int", lo="1", hi="3"), param("b", "categorical", values=("x", "y")))


def test_restart_after_max_trial_count_was_raised_keeps_serving(start_server) -> None:
    first = start_server()
    exp = experiment(name="g", algorithm="grid", params=GRID, max_trials=4, settings={"random_state": "2"})
    katib = FakeKatib(first.bound_addresses[0], exp)
    katib.validate()
    katib.run(until=4, parallel=2)
    first.stop(0)
    katib.close()
    # the user raised maxTrialCount beyond the 6 combinations while the experiment ran (Katib allows it)
    katib.exp.spec.max_trial_count = 9
    second = start_server()
    katib.connect(second.bound_addresses[0])
    katib.run(until=9, parallel=2)
    assert len(katib.trials) == 9 and all(t.condition == Cond.SUCCEEDED for t in katib.trials)
    combos = [tuple(v for _, v in t.assignments) for t in katib.trials]
    assert len(set(combos)) == 6  # every combination first, then repeats
    assert set(combos[:6]) == {(a, b) for a in ("1", "2", "3") for b in ("x", "y")}
    # a new experiment asking for more than the grid is still refused when it is created
    with pytest.raises(grpc.RpcError) as info:
        katib.validate()
    assert "maxTrialCount=9: exceeds the 6 combinations" in str(info.value.details())


def test_grid_pick_is_the_first_least_used_combination_in_seeded_order() -> None:
    """``GridPlan.pick``: unused combinations first, in the plan's order; a failed trial frees its
    combination; once all are used, the least-used one that comes first in the order."""
    import optuna
    from optuna.trial import TrialState, create_trial

    from katib_progress.suggestion._grid import GridPlan

    plan = GridPlan({"a": [1, 2, 3], "b": ["x", "y"]}, seed=4)
    order = [plan._params(i) for i in plan._order]
    dists = {
        "a": optuna.distributions.IntDistribution(1, 3),
        "b": optuna.distributions.CategoricalDistribution(["x", "y"]),
    }

    def trial(params: dict, state: TrialState = TrialState.COMPLETE) -> optuna.trial.FrozenTrial:
        return create_trial(
            state=state,
            value=1.0 if state is TrialState.COMPLETE else None,
            params=params,
            distributions=dists,
        )

    trials = [trial(order[0]), trial(order[1], TrialState.FAIL), trial(order[2])]
    assert plan.pick(trials) == order[1]  # the failed one's combination is free again
    trials = [trial(p) for p in order] + [trial(order[3]), trial(order[0])]
    assert plan.pick(trials) == order[1]  # all used once, 0 and 3 twice: the first used once
