"""Katib's EarlyStopping API over loopback, backed by the pruning hub."""

from __future__ import annotations

from collections.abc import Iterator
from concurrent import futures
from typing import Any

import grpc
import numpy as np
import pytest
from kubeflow.katib import katib_api_pb2, katib_api_pb2_grpc

from katib_progress.core.types import ProgressPoint
from katib_progress.suggestion.katib import early_stopping
from katib_progress.suggestion.pruning.service import PruningHub
from katib_progress.suggestion.server import create_server
from tests.suggestion.test_pruning_curves import T0

pb: Any = katib_api_pb2


@pytest.fixture
def stack() -> Iterator[tuple[PruningHub, Any]]:
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    hub = PruningHub()
    hub.register(server)
    early_stopping.add_to_server(hub, server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    channel = grpc.insecure_channel(f"127.0.0.1:{port}")
    try:
        yield hub, katib_api_pb2_grpc.EarlyStoppingStub(channel)
    finally:
        channel.close()
        server.stop(0).wait()


def _spec(settings: dict[str, str], name: str = "katib-progress") -> Any:
    return pb.EarlyStoppingSpec(
        algorithm_name=name,
        algorithm_settings=[pb.EarlyStoppingSetting(name=k, value=v) for k, v in settings.items()],
    )


def _experiment(settings: dict[str, str], *, direction: Any = None, name: str = "exp") -> Any:
    objective = pb.ObjectiveSpec(
        type=pb.MINIMIZE if direction is None else direction, objective_metric_name="eval_loss"
    )
    return pb.Experiment(
        name=name, spec=pb.ExperimentSpec(objective=objective, early_stopping=_spec(settings))
    )


def _trial(name: str, condition: Any, value: float | None = None) -> Any:
    metrics = [] if value is None else [pb.Metric(name="eval_loss", value=str(value))]
    return pb.Trial(
        name=name, status=pb.TrialStatus(condition=condition, observation=pb.Observation(metrics=metrics))
    )


def test_validate_accepts_good_settings(stack: tuple[PruningHub, Any]) -> None:
    _, stub = stack
    request = pb.ValidateEarlyStoppingSettingsRequest(early_stopping=_spec({"policy": "median,stall"}))
    assert stub.ValidateEarlyStoppingSettings(request, timeout=5) == pb.ValidateEarlyStoppingSettingsReply()


@pytest.mark.parametrize(
    ("settings", "fragments"),
    [
        ({"percentile": "-3"}, ("percentile", "-3")),
        ({"policy": "median,magic"}, ("policy", "magic", "allowed")),
        ({"warmup_progress": "soon"}, ("warmup_progress", "soon")),
        ({"bogus": "1"}, ("bogus", "allowed")),
    ],
)
def test_validate_rejects_bad_settings_naming_setting_and_value(
    stack: tuple[PruningHub, Any], settings: dict[str, str], fragments: tuple[str, ...]
) -> None:
    _, stub = stack
    request = pb.ValidateEarlyStoppingSettingsRequest(early_stopping=_spec(settings))
    with pytest.raises(grpc.RpcError) as err:
        stub.ValidateEarlyStoppingSettings(request, timeout=5)
    assert err.value.code() is grpc.StatusCode.INVALID_ARGUMENT
    for fragment in fragments:
        assert fragment in err.value.details()


def test_rules_approximate_the_percentile_of_finished_trials(stack: tuple[PruningHub, Any]) -> None:
    hub, stub = stack
    finals = [0.31, 0.45, 0.52, 0.9, 0.28]
    trials = [_trial(f"t{i}", pb.TrialStatus.SUCCEEDED, v) for i, v in enumerate(finals)]
    trials.append(_trial("running", pb.TrialStatus.RUNNING))
    trials.append(_trial("broken", pb.TrialStatus.FAILED, 99.0))  # failed: not a reference
    request = pb.GetEarlyStoppingRulesRequest(
        experiment=_experiment({"policy": "percentile", "percentile": "25", "start_step": "7"}), trials=trials
    )
    reply = stub.GetEarlyStoppingRules(request, timeout=5)
    (rule,) = reply.early_stopping_rules
    assert rule.name == "eval_loss" and rule.comparison == pb.GREATER and rule.start_step == 7
    assert float(rule.value) == pytest.approx(np.percentile(finals, 25))
    # The hub now knows the experiment: live points need no config, and trial ends were recorded.
    engine = hub.engine("exp")
    assert engine is not None and engine.config.percentile == 25
    assert str(engine.trial_state("t0")) == "TrialState.COMPLETE"
    assert not hub.decide(ProgressPoint("exp", "running", 0, T0, 10.0, metrics={"eval_loss": 1.0})).prune


def test_maximize_rules_use_less_and_the_upper_percentile(stack: tuple[PruningHub, Any]) -> None:
    _, stub = stack
    finals = [0.7, 0.8, 0.9, 0.75]
    trials = [_trial(f"t{i}", pb.TrialStatus.SUCCEEDED, v) for i, v in enumerate(finals)]
    experiment = _experiment({"policy": "median,threshold", "threshold_lower": "0.1"}, direction=pb.MAXIMIZE)
    reply = stub.GetEarlyStoppingRules(pb.GetEarlyStoppingRulesRequest(experiment=experiment, trials=trials))
    rules = {(r.comparison, r.value) for r in reply.early_stopping_rules}
    assert (pb.LESS, repr(float(np.percentile(finals, 50)))) in rules
    assert (pb.LESS, "0.1") in rules


def test_no_rules_before_startup_trials_finished(stack: tuple[PruningHub, Any]) -> None:
    _, stub = stack
    trials = [_trial("t0", pb.TrialStatus.SUCCEEDED, 0.5)]
    request = pb.GetEarlyStoppingRulesRequest(experiment=_experiment({"startup_trials": "3"}), trials=trials)
    assert list(stub.GetEarlyStoppingRules(request, timeout=5).early_stopping_rules) == []


def test_rules_reject_an_experiment_with_bad_settings(stack: tuple[PruningHub, Any]) -> None:
    _, stub = stack
    request = pb.GetEarlyStoppingRulesRequest(experiment=_experiment({"stall_window": "0"}))
    with pytest.raises(grpc.RpcError) as err:
        stub.GetEarlyStoppingRules(request, timeout=5)
    assert err.value.code() is grpc.StatusCode.INVALID_ARGUMENT
    assert "stall_window" in err.value.details()


def test_set_trial_status_marks_the_trial_pruned(stack: tuple[PruningHub, Any]) -> None:
    hub, stub = stack
    trials = [_trial("victim", pb.TrialStatus.RUNNING)]
    stub.GetEarlyStoppingRules(pb.GetEarlyStoppingRulesRequest(experiment=_experiment({}), trials=trials))
    stub.SetTrialStatus(pb.SetTrialStatusRequest(trial_name="victim"), timeout=5)
    engine = hub.engine("exp")
    assert engine is not None and str(engine.trial_state("victim")) == "TrialState.PRUNED"
    assert hub.decide(ProgressPoint("exp", "victim", 0, T0, 10.0, metrics={"eval_loss": 0.1})).prune
    # Unknown trials are accepted (Katib may retry after a restart) and change nothing.
    stub.SetTrialStatus(pb.SetTrialStatusRequest(trial_name="ghost"), timeout=5)
    with pytest.raises(grpc.RpcError) as err:
        stub.SetTrialStatus(pb.SetTrialStatusRequest(trial_name=""), timeout=5)
    assert err.value.code() is grpc.StatusCode.INVALID_ARGUMENT


def test_served_by_the_suggestion_server() -> None:
    """The suggestion process registers the hub: EarlyStopping answers there."""
    server = create_server(["127.0.0.1:0"])
    server.start()
    try:
        channel = grpc.insecure_channel(server.bound_addresses[0])
        stub = katib_api_pb2_grpc.EarlyStoppingStub(channel)
        request = pb.ValidateEarlyStoppingSettingsRequest(early_stopping=_spec({"percentile": "500"}))
        with pytest.raises(grpc.RpcError) as err:
            stub.ValidateEarlyStoppingSettings(request, timeout=5)
        assert err.value.code() is grpc.StatusCode.INVALID_ARGUMENT
        channel.close()
    finally:
        server.stop(0)


def test_the_experiments_settings_win_over_a_points_config(stack: tuple[PruningHub, Any]) -> None:
    from katib_progress.suggestion.pruning import PruningConfig

    hub, stub = stack
    stub.GetEarlyStoppingRules(
        pb.GetEarlyStoppingRulesRequest(experiment=_experiment({"policy": "median"})), timeout=5
    )
    engine = hub.engine("exp")
    other = PruningConfig.from_settings("eval_loss", "minimize", {"policy": "nop"})
    hub.decide(ProgressPoint("exp", "t", 0, T0, 10.0, metrics={"eval_loss": 1.0}), other)
    assert hub.engine("exp") is engine and engine is not None and engine.config.policy == "median"


def test_the_default_gets_the_median_rule_of_finished_trials(stack: tuple[PruningHub, Any]) -> None:
    """The default (divergence,trend_halving) is comparative: stock collectors get the median rule."""
    _, stub = stack
    finals = [0.31, 0.45, 0.52, 0.9]
    trials = [_trial(f"t{i}", pb.TrialStatus.SUCCEEDED, v) for i, v in enumerate(finals)]
    request = pb.GetEarlyStoppingRulesRequest(experiment=_experiment({}), trials=trials)
    (rule,) = stub.GetEarlyStoppingRules(request, timeout=5).early_stopping_rules
    assert rule.comparison == pb.GREATER and float(rule.value) == pytest.approx(np.percentile(finals, 50))
