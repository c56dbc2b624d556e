"""Katib's own unit cases for its Optuna suggestion service, restated (not copied) as ours and run
through our suggestion server over loopback gRPC (``create_server``, the process of our image).

Source: kubeflow/katib at 33c8ff4, test/unit/v1beta1/suggestion/test_optuna_service.py: ``TestOptuna``
(``test_get_suggestion``, ``test_validate_algorithm_settings``) and
``TestOptunaUnsupportedDistribution`` (``test_unsupported_distribution_raises``). Each case keeps
Katib's algorithm, settings, search space, trial count and expected gRPC code.

What every request here adds to Katib's, because Katib's controller always sends it and our service
refuses a request without it (Katib's webhook never lets such an Experiment through): an objective
metric name and type, and at least one parameter (``_ONE_PARAMETER``) where a case has none. An
invalid case must then be refused for the reason Katib's is: its details name the setting or
parameter at fault. ``TestOptunaUnsupportedDistribution`` calls Katib's internal
``BaseOptunaService``; its cases are asked here through the gRPC API.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import grpc
import pytest
from kubeflow.katib import katib_api_pb2, katib_api_pb2_grpc

from katib_progress.suggestion.server import SuggestionServer

pb: Any = katib_api_pb2


@pytest.fixture
def stub(start_server: Callable[..., SuggestionServer]) -> Iterator[Any]:
    with grpc.insecure_channel(start_server().bound_addresses[0]) as channel:
        yield katib_api_pb2_grpc.SuggestionStub(channel)


def _space(*specs: tuple[str, Any, Any]) -> Any:
    return pb.ExperimentSpec.ParameterSpecs(
        parameters=[pb.ParameterSpec(name=n, parameter_type=t, feasible_space=f) for n, t, f in specs]
    )


# -- test_get_suggestion -----------------------------------------------------------------------------

#: ``test_get_suggestion``'s search space: every kind of parameter and distribution Katib's Optuna
#: service maps (int and double, uniform and log-uniform, with and without a step; categorical and
#: discrete lists).
_TWELVE = _space(
    ("param-1", pb.INT, pb.FeasibleSpace(max="5", min="1")),
    ("param-2", pb.CATEGORICAL, pb.FeasibleSpace(list=["cat1", "cat2", "cat3"])),
    ("param-3", pb.DISCRETE, pb.FeasibleSpace(list=["3", "2", "6"])),
    ("param-4", pb.DOUBLE, pb.FeasibleSpace(max="5", min="1", step="1")),
    ("param-5", pb.INT, pb.FeasibleSpace(max="5", min="1", step="2", distribution=pb.UNIFORM)),
    ("param-6", pb.INT, pb.FeasibleSpace(max="5", min="1", distribution=pb.UNIFORM)),
    ("param-7", pb.INT, pb.FeasibleSpace(max="5", min="1", step="2", distribution=pb.LOG_UNIFORM)),
    ("param-8", pb.INT, pb.FeasibleSpace(max="5", min="1", distribution=pb.LOG_UNIFORM)),
    ("param-9", pb.DOUBLE, pb.FeasibleSpace(max="11", min="1", step="2.5", distribution=pb.UNIFORM)),
    ("param-10", pb.DOUBLE, pb.FeasibleSpace(max="11", min="1", step="2.5", distribution=pb.LOG_UNIFORM)),
    ("param-11", pb.DOUBLE, pb.FeasibleSpace(max="5", min="1", distribution=pb.UNIFORM)),
    ("param-12", pb.DOUBLE, pb.FeasibleSpace(max="5", min="1", distribution=pb.LOG_UNIFORM)),
)


def _objective() -> Any:
    # Katib's case: MAXIMIZE, goal 0.9; the metric name (added) is the one its trials carry
    return pb.ObjectiveSpec(type=pb.MAXIMIZE, goal=0.9, objective_metric_name="metric-2")


def _trial(name: str, assignments: Any, metric_1: str, metric_2: str) -> Any:
    return pb.Trial(
        name=name,
        spec=pb.TrialSpec(
            objective=_objective(),
            parameter_assignments=pb.TrialSpec.ParameterAssignments(assignments=assignments),
        ),
        status=pb.TrialStatus(
            condition=pb.TrialStatus.TrialConditionType.SUCCEEDED,
            observation=pb.Observation(
                metrics=[
                    pb.Metric(name="metric-1", value=metric_1),
                    pb.Metric(name="metric-2", value=metric_2),
                ]
            ),
        ),
    )


def _in_space(assignment: Any) -> None:
    """Each value lies in its parameter's feasible space (what Katib's case leaves implicit)."""
    by_name = {p.name: p for p in _TWELVE.parameters}
    for a in assignment.assignments:
        space = by_name[a.name].feasible_space
        if space.list:
            assert a.value in space.list, (a.name, a.value)
        else:
            assert float(space.min) <= float(a.value) <= float(space.max), (a.name, a.value)
    assert {a.name for a in assignment.assignments} == set(by_name)


@pytest.mark.parametrize(
    ("algorithm", "settings"),
    [
        ("tpe", {"n_startup_trials": "20", "n_ei_candidates": "10", "random_state": "71"}),
        ("multivariate-tpe", {"n_startup_trials": "20", "n_ei_candidates": "10", "random_state": "71"}),
        ("cmaes", {"restart_strategy": "ipop", "sigma": "2", "random_state": "71"}),
        ("random", {"random_state": "71"}),
    ],
)
def test_get_suggestion(stub: Any, algorithm: str, settings: dict[str, str]) -> None:
    """Two suggestions with no trials, then two more once both are reported SUCCEEDED (Katib's
    values: metric-2 = 5643 and 3028)."""
    experiment = pb.Experiment(
        name="test",
        spec=pb.ExperimentSpec(
            algorithm=pb.AlgorithmSpec(
                algorithm_name=algorithm,
                algorithm_settings=[pb.AlgorithmSetting(name=k, value=v) for k, v in settings.items()],
            ),
            objective=_objective(),
            parameter_specs=_TWELVE,
        ),
    )
    first = stub.GetSuggestions(
        pb.GetSuggestionsRequest(experiment=experiment, trials=[], current_request_number=2), timeout=30
    )
    assert len(first.parameter_assignments) == 2
    for assignment in first.parameter_assignments:
        _in_space(assignment)
    trials = [
        _trial(
            first.parameter_assignments[0].trial_name or "test-asfjh",
            first.parameter_assignments[0].assignments,
            "435",
            "5643",
        ),
        _trial(
            first.parameter_assignments[1].trial_name or "test-234hs",
            first.parameter_assignments[1].assignments,
            "123",
            "3028",
        ),
    ]
    second = stub.GetSuggestions(
        pb.GetSuggestionsRequest(experiment=experiment, trials=trials, current_request_number=2), timeout=30
    )
    assert len(second.parameter_assignments) == 2
    for assignment in second.parameter_assignments:
        _in_space(assignment)


def test_get_suggestion_with_katibs_own_trial_names(stub: Any) -> None:
    """Katib's case names its trials ``test-asfjh`` and ``test-234hs`` whatever the service
    suggested: trials we did not name are accepted too (added to the study by their assignments)."""
    experiment = pb.Experiment(
        name="test",
        spec=pb.ExperimentSpec(
            algorithm=pb.AlgorithmSpec(algorithm_name="tpe"), objective=_objective(), parameter_specs=_TWELVE
        ),
    )
    first = stub.GetSuggestions(
        pb.GetSuggestionsRequest(experiment=experiment, current_request_number=2), timeout=30
    )
    trials = [
        _trial("test-asfjh", first.parameter_assignments[0].assignments, "435", "5643"),
        _trial("test-234hs", first.parameter_assignments[1].assignments, "123", "3028"),
    ]
    second = stub.GetSuggestions(
        pb.GetSuggestionsRequest(experiment=experiment, trials=trials, current_request_number=2), timeout=30
    )
    assert len(second.parameter_assignments) == 2


# -- test_validate_algorithm_settings ----------------------------------------------------------------

_ONE_PARAMETER = [("param-1", pb.INT, pb.FeasibleSpace(max="5", min="1"))]
_TWO_INTS = [*_ONE_PARAMETER, ("param-2", pb.INT, pb.FeasibleSpace(max="10", min="9"))]
OK, INVALID = grpc.StatusCode.OK, grpc.StatusCode.INVALID_ARGUMENT

#: (Katib's comment, algorithm, settings, maxTrialCount, parameters (None: Katib's case has none),
#: Katib's expected code, what the details must name for an invalid case)
VALIDATION_CASES = [
    ("Invalid algorithm name", "invalid", {}, 1, None, INVALID, "invalid"),
    (
        "[TPE] Valid case",
        "tpe",
        {"n_startup_trials": "5", "n_ei_candidates": "24", "random_state": "1"},
        100,
        None,
        OK,
        "",
    ),
    ("[TPE] Invalid parameter name", "tpe", {"invalid": "5"}, 100, None, INVALID, "invalid"),
    (
        "[TPE] Invalid n_startup_trials",
        "tpe",
        {"n_startup_trials": "-1"},
        100,
        None,
        INVALID,
        "n_startup_trials",
    ),
    ("[TPE] Invalid n_ei_candidate", "tpe", {"n_ei_candidate": "-1"}, 100, None, INVALID, "n_ei_candidate"),
    ("[TPE] Invalid random_state", "tpe", {"random_state": "-1"}, 100, None, INVALID, "random_state"),
    (
        "[Multivariate-TPE] Valid case",
        "multivariate-tpe",
        {"n_startup_trials": "5", "n_ei_candidates": "24", "random_state": "1"},
        100,
        None,
        OK,
        "",
    ),
    (
        "[CMAES] Valid case",
        "cmaes",
        {"restart_strategy": "ipop", "sigma": "0.1", "random_state": "10"},
        20,
        _TWO_INTS,
        OK,
        "",
    ),
    (
        "[CMAES] Invalid parameter name",
        "cmaes",
        {"invalid": "invalid", "sigma": "0.1"},
        100,
        _TWO_INTS,
        INVALID,
        "invalid",
    ),
    (
        "[CMAES] Invalid restart_strategy",
        "cmaes",
        {"restart_strategy": "invalid", "sigma": "0.1"},
        15,
        _TWO_INTS,
        INVALID,
        "restart_strategy",
    ),
    (
        "[CMAES] Invalid sigma",
        "cmaes",
        {"restart_strategy": "None", "sigma": "-10"},
        55,
        _TWO_INTS,
        INVALID,
        "sigma",
    ),
    (
        "[CMAES] Invalid random_state",
        "cmaes",
        {"sigma": "0.2", "random_state": "-20"},
        25,
        _TWO_INTS,
        INVALID,
        "random_state",
    ),
    ("[CMAES] Invalid number of parameters", "cmaes", {"sigma": "0.2"}, 5, _ONE_PARAMETER, INVALID, "cmaes"),
    ("[RANDOM] Valid Case", "random", {"random_state": "10"}, 23, _TWO_INTS, OK, ""),
    ("[RANDOM] Invalid parameter name", "random", {"invalid": "invalid"}, 33, None, INVALID, "invalid"),
    ("[RANDOM] Invalid random_state", "random", {"random_state": "-1"}, 33, None, INVALID, "random_state"),
    ("[GRID] Valid Case", "grid", {"random_state": "10"}, 5, _ONE_PARAMETER, OK, ""),
    ("[GRID] Invalid parameter name", "grid", {"invalid": "invalid"}, 33, None, INVALID, "invalid"),
    ("[GRID] Invalid random_state", "grid", {"random_state": "-1"}, 10, None, INVALID, "random_state"),
    (
        "[GRID] Invalid feasible_space",
        "grid",
        {"random_state": "1"},
        26,
        [("param-1", pb.DOUBLE, pb.FeasibleSpace(max="5", min="1"))],
        INVALID,
        "param-1",
    ),
    (
        "[GRID] Invalid max_trial_count",
        "grid",
        {"random_state": "1"},
        26,
        [*_ONE_PARAMETER, ("param-2", pb.DOUBLE, pb.FeasibleSpace(max="5", min="1", step="1"))],
        INVALID,
        "maxTrialCount=26",
    ),
]


@pytest.mark.parametrize(
    ("case", "algorithm", "settings", "max_trials", "parameters", "code", "names"),
    VALIDATION_CASES,
    ids=[c[0] for c in VALIDATION_CASES],
)
def test_validate_algorithm_settings(
    stub: Any,
    case: str,
    algorithm: str,
    settings: dict[str, str],
    max_trials: int,
    parameters: list[tuple[str, Any, Any]] | None,
    code: grpc.StatusCode,
    names: str,
) -> None:
    spec = pb.ExperimentSpec(
        max_trial_count=max_trials,
        algorithm=pb.AlgorithmSpec(
            algorithm_name=algorithm,
            algorithm_settings=[pb.AlgorithmSetting(name=k, value=v) for k, v in settings.items()],
        ),
        objective=pb.ObjectiveSpec(type=pb.MINIMIZE, objective_metric_name="loss"),
        parameter_specs=_space(*(_ONE_PARAMETER if parameters is None else parameters)),
    )
    request = pb.ValidateAlgorithmSettingsRequest(experiment=pb.Experiment(name="validation-test", spec=spec))
    try:
        stub.ValidateAlgorithmSettings(request, timeout=10)
        got, details = grpc.StatusCode.OK, ""
    except grpc.RpcError as exc:
        got, details = exc.code(), exc.details() or ""
    assert got == code, (case, details)
    assert names in details, (case, details)


def test_every_validation_case_of_katib_is_restated() -> None:
    """Katib's parametrize list holds 21 cases (11 valid or invalid settings per algorithm, 4 grid)."""
    assert len(VALIDATION_CASES) == 21 and len({c[0] for c in VALIDATION_CASES}) == 21


# -- TestOptunaUnsupportedDistribution.test_unsupported_distribution_raises --------------------------


@pytest.mark.parametrize("kind", [pb.DOUBLE, pb.INT])
@pytest.mark.parametrize("distribution", [pb.NORMAL, pb.LOG_NORMAL])
def test_unsupported_distribution_raises(stub: Any, kind: Any, distribution: Any) -> None:
    """Katib's case: parameter ``x`` (double 0.1..0.9 or int 1..9 step 1) with NORMAL or LOG_NORMAL,
    algorithm ``random``: no suggestion, an error naming the distribution and the parameter."""
    space = (
        pb.FeasibleSpace(min="0.1", max="0.9", distribution=distribution)
        if kind == pb.DOUBLE
        else pb.FeasibleSpace(min="1", max="9", step="1", distribution=distribution)
    )
    experiment = pb.Experiment(
        name="unsupported",
        spec=pb.ExperimentSpec(
            algorithm=pb.AlgorithmSpec(algorithm_name="random"),
            objective=pb.ObjectiveSpec(type=pb.MAXIMIZE, objective_metric_name="loss"),
            parameter_specs=_space(("x", kind, space)),
        ),
    )
    for call, request in (
        (stub.GetSuggestions, pb.GetSuggestionsRequest(experiment=experiment, current_request_number=1)),
        (stub.ValidateAlgorithmSettings, pb.ValidateAlgorithmSettingsRequest(experiment=experiment)),
    ):
        with pytest.raises(grpc.RpcError) as info:
            call(request, timeout=10)
        assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        details = info.value.details() or ""
        assert "parameters[x]" in details and ("normal" in details.lower()), details
