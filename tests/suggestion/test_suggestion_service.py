"""GetSuggestions over gRPC, driven the way Katib's controllers drive it."""

from __future__ import annotations

import math
import threading

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from tests.suggestion.katib_fake import Cond, FakeKatib, FakeTrial, experiment, param

NAME_CHARS = set("bcdfghjklmnpqrstvwxz2456789")


def _check_in_space(trial: FakeTrial) -> None:
    values = dict(trial.assignments)
    lr = float(values["lr"])
    assert 0.0001 <= lr <= 0.1
    assert values["layers"] == str(int(values["layers"])) and 1 <= int(values["layers"]) <= 8
    assert values["optimizer"] in ("sgd", "adam", "rmsprop")


def test_health_reports_serving_for_katib_probe_and_overall(start_server) -> None:
    server = start_server()
    with grpc.insecure_channel(server.bound_addresses[0]) as channel:
        stub = health_pb2_grpc.HealthStub(channel)
        for service in ("manager.v1beta1.Suggestion", "", "api.v1.beta1.Suggestion"):
            reply = stub.Check(health_pb2.HealthCheckRequest(service=service), timeout=10)
            assert reply.status == health_pb2.HealthCheckResponse.SERVING, service
        with pytest.raises(grpc.RpcError) as info:
            stub.Check(health_pb2.HealthCheckRequest(service="no.such.Service"), timeout=10)
        assert info.value.code() == grpc.StatusCode.NOT_FOUND


def test_server_listens_on_every_address(start_server) -> None:
    from katib_progress.suggestion.server import create_server

    server = create_server(["127.0.0.1:0", "127.0.0.1:0"])
    server.start()
    try:
        assert len(server.bound_addresses) == 2
        for address in server.bound_addresses:
            katib = FakeKatib(address, experiment(name=f"e{address.rsplit(':', 1)[1]}", algorithm="random"))
            assert len(katib.ask(2)) == 2
            katib.close()
    finally:
        server.stop(0)


@pytest.mark.parametrize(
    ("algorithm", "settings"),
    [
        ("tpe", {"random_state": "1", "n_startup_trials": "4"}),
        ("multivariate-tpe", {"random_state": "2", "n_startup_trials": "4"}),
        ("random", {"random_state": "3"}),
        ("cmaes", {"random_state": "4", "sigma": "0.3"}),
        ("qmc", {"random_state": "5", "qmc_type": "sobol", "scramble": "true"}),
        ("qmc", {"qmc_type": "halton"}),
    ],
)
def test_each_algorithm_completes_an_experiment(start_server, algorithm, settings) -> None:
    server = start_server()
    katib = FakeKatib(
        server.bound_addresses[0], experiment(name="exp-" + algorithm, algorithm=algorithm, settings=settings)
    )
    katib.validate()
    katib.run(until=15, parallel=3)
    assert len(katib.trials) == 15
    names = [t.name for t in katib.trials]
    assert len(set(names)) == 15
    for trial in katib.trials:
        assert trial.condition == Cond.SUCCEEDED
        prefix, suffix = trial.name.rsplit("-", 1)
        assert prefix == "exp-" + algorithm and len(suffix) == 8 and set(suffix) <= NAME_CHARS
        _check_in_space(trial)
    katib.ask(1)  # the next request reports the last results
    study = server.registry.study("exp-" + algorithm)
    assert study is not None
    states = [t.state.name for t in study.trials()]
    assert states.count("COMPLETE") == 15 and states.count("RUNNING") == 1


def test_tpe_beats_random_sampling_on_a_smooth_objective(start_server) -> None:
    server = start_server()
    best = {}
    for algorithm in ("tpe", "random"):
        values = []
        for seed in range(3):
            katib = FakeKatib(
                server.bound_addresses[0],
                experiment(
                    name=f"cmp-{algorithm}-{seed}", algorithm=algorithm, settings={"random_state": str(seed)}
                ),
            )
            katib.run(until=40, parallel=2)
            values.append(min(float(t.metrics["loss"]) for t in katib.trials))
            katib.close()
        best[algorithm] = sum(values) / len(values)
    assert best["tpe"] < best["random"]


def test_int_step_log_uniform_and_discrete_values_round_trip(start_server) -> None:
    server = start_server()
    params = [
        param("batch", "int", lo="16", hi="256", step="16"),
        param("wd", "double", lo="0.00001", hi="0.1", dist="logUniform"),
        param("dropout", "double", lo="0.0", hi="0.5", step="0.1"),
        param("units", "int", lo="1", hi="1024", dist="logUniform"),
        param("momentum", "discrete", values=("0.8", "0.9", "0.99")),
    ]
    katib = FakeKatib(
        server.bound_addresses[0],
        experiment(algorithm="tpe", params=params, settings={"n_startup_trials": "3"}),
        objective=lambda p: float(p["wd"]) + float(p["dropout"]),
    )
    katib.run(until=12, parallel=3)
    for trial in katib.trials:
        v = dict(trial.assignments)
        assert int(v["batch"]) % 16 == 0 and 16 <= int(v["batch"]) <= 256
        assert 0.00001 <= float(v["wd"]) <= 0.1
        d = float(v["dropout"])
        assert 0 <= d <= 0.5 and math.isclose(round(d * 10), d * 10, abs_tol=1e-9)
        assert 1 <= int(v["units"]) <= 1024
        assert v["momentum"] in ("0.8", "0.9", "0.99")


def test_maximize_uses_the_objective_metric_by_name(start_server) -> None:
    server = start_server()
    exp = experiment(algorithm="tpe", maximize=True, metric="accuracy", settings={"random_state": "0"})
    katib = FakeKatib(server.bound_addresses[0], exp, objective=lambda p: -float(p["lr"]))
    katib.run(until=6, parallel=2)
    for trial in katib.trials:
        trial.metrics["loss"] = "123"  # another metric: must not be taken as the objective
    katib.ask(1)
    study = server.registry.study("exp")
    assert study is not None
    assert study.study.direction.name == "MAXIMIZE"
    by_name = {t.user_attrs["katib_trial_name"]: t for t in study.trials()}
    for trial in katib.trials[:6]:
        assert by_name[trial.name].value == pytest.approx(float(trial.metrics["accuracy"]))


def test_parallel_requests_for_many_experiments(start_server) -> None:
    server = start_server()
    errors: list[BaseException] = []
    results: dict[str, FakeKatib] = {}

    def drive(name: str) -> None:
        try:
            katib = FakeKatib(server.bound_addresses[0], experiment(name=name, algorithm="tpe"))
            katib.run(until=12, parallel=4)
            results[name] = katib
        except BaseException as exc:  # surfaced below
            errors.append(exc)

    threads = [threading.Thread(target=drive, args=(f"par-{i}",)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not errors
    assert sorted(results) == [f"par-{i}" for i in range(6)]
    for katib in results.values():
        assert len({t.name for t in katib.trials}) == 12


def test_concurrent_requests_for_one_experiment_get_distinct_trials(start_server) -> None:
    server = start_server()
    exp = experiment(name="same", algorithm="random", settings={"random_state": "9"})
    replies: list[list[str]] = []
    lock = threading.Lock()

    def ask(i: int) -> None:
        katib = FakeKatib(server.bound_addresses[0], exp)
        request = katib.request(3)
        request.total_request_number = 3 * (i + 1)  # distinct requests, not retries of one
        reply = katib.stub.GetSuggestions(request, timeout=60)
        with lock:
            replies.append([p.trial_name for p in reply.parameter_assignments])
        katib.close()

    threads = [threading.Thread(target=ask, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    names = [n for reply in replies for n in reply]
    assert len(replies) == 8 and all(len(r) == 3 for r in replies)
    assert len(set(names)) == 24
    study = server.registry.study("same")
    assert study is not None
    assert sorted(t.user_attrs["katib_trial_name"] for t in study.trials()) == sorted(names)


def test_a_retried_request_gets_the_same_reply(start_server) -> None:
    server = start_server()
    katib = FakeKatib(server.bound_addresses[0], experiment(algorithm="tpe", settings={"random_state": "1"}))
    katib.run(until=4, parallel=2)
    request = katib.request(2)
    first = katib.stub.GetSuggestions(request, timeout=30)
    again = katib.stub.GetSuggestions(request, timeout=30)  # Katib failed to record the first reply
    assert [p.trial_name for p in first.parameter_assignments] == [
        p.trial_name for p in again.parameter_assignments
    ]
    assert list(first.parameter_assignments) == list(again.parameter_assignments)
    recorded = katib.ask(2)  # the same request once more; this time Katib records the reply
    assert [t.name for t in recorded] == [p.trial_name for p in first.parameter_assignments]
    new = katib.ask(2)  # Katib's request count grew: new trials
    assert {t.name for t in new}.isdisjoint(t.name for t in recorded)
    study = server.registry.study("exp")
    assert study is not None
    assert len(study.trials()) == 8, "a retry creates no extra trials in the study"


def test_grid_covers_every_combination_and_retries_failed_ones(start_server) -> None:
    server = start_server()
    params = [param("a", "int", lo="1", hi="3"), param("b", "categorical", values=("x", "y"))]
    exp = experiment(
        name="grid", algorithm="grid", params=params, max_trials=6, settings={"random_state": "5"}
    )
    katib = FakeKatib(server.bound_addresses[0], exp, objective=lambda p: float(p["a"]))
    katib.validate()
    first = katib.ask(2)
    katib.finish(first[0], Cond.FAILED)
    katib.finish(first[1])
    # Katib replaces the failed trial: its combination comes back under a new name.
    katib.run(until=7, parallel=2)
    combos = [t.assignments for t in katib.trials]
    ok = {t.assignments for t in katib.trials if t.condition == Cond.SUCCEEDED}
    assert len(ok) == 6, "every grid point succeeded once"
    assert combos.count(first[0].assignments) == 2, "the failed point was suggested again"
    assert len({t.name for t in katib.trials}) == 7
    # Beyond the grid (a larger parallel request), points repeat rather than failing.
    extra = katib.ask(2)
    assert all(t.assignments in ok for t in extra)
    study = server.registry.study("grid")
    assert study is not None
    states = sorted(t.state.name for t in study.trials())
    assert states == ["COMPLETE"] * 6 + ["FAIL"] + ["RUNNING"] * 2


def test_duplicate_assignments_are_told_by_trial_name(start_server) -> None:
    server = start_server()
    params = [param("opt", "categorical", values=("a", "b"))]
    exp = experiment(name="dups", algorithm="random", params=params, settings={"random_state": "0"})
    values = iter([5.0, 1.0, 3.0, 4.0, 2.0, 6.0, 7.0, 8.0])
    katib = FakeKatib(server.bound_addresses[0], exp, objective=lambda p: next(values))
    trials = katib.ask(8)
    assert len({t.assignments for t in trials}) < len(trials), "two choices, eight trials: duplicates"
    for trial in reversed(trials):  # finish in another order than issued
        katib.finish(trial)
    katib.ask(1)
    study = server.registry.study("dups")
    assert study is not None
    recorded = {
        t.user_attrs["katib_trial_name"]: t.value for t in study.trials() if t.state.name == "COMPLETE"
    }
    assert recorded == {t.name: float(t.metrics["loss"]) for t in trials}


def test_early_stopped_trial_is_recorded_as_pruned(start_server) -> None:
    server = start_server()
    katib = FakeKatib(server.bound_addresses[0], experiment(name="es", algorithm="tpe"))
    trials = katib.ask(3)
    katib.finish(trials[0], Cond.EARLYSTOPPED)
    katib.finish(trials[1], Cond.FAILED)
    trials[2].condition = Cond.KILLED
    katib.ask(1)
    study = server.registry.study("es")
    assert study is not None
    by_name = {t.user_attrs["katib_trial_name"]: t for t in study.trials()}
    pruned = by_name[trials[0].name]
    assert pruned.state.name == "PRUNED"
    assert pruned.intermediate_values == {0: pytest.approx(float(trials[0].metrics["loss"]))}
    assert by_name[trials[1].name].state.name == "FAIL"
    assert by_name[trials[2].name].state.name == "FAIL"


def test_succeeded_without_a_usable_objective_is_failed_not_an_error(start_server) -> None:
    server = start_server()
    katib = FakeKatib(server.bound_addresses[0], experiment(name="nometric", algorithm="tpe"))
    trials = katib.ask(2)
    trials[0].condition = Cond.SUCCEEDED
    trials[0].metrics["loss"] = "unavailable"
    trials[1].condition = Cond.SUCCEEDED
    trials[1].metrics["accuracy"] = "0.9"
    assert len(katib.ask(2)) == 2
    study = server.registry.study("nometric")
    assert study is not None
    assert [t.state.name for t in study.trials()[:2]] == ["FAIL", "FAIL"]


def test_trials_from_elsewhere_are_accepted(start_server) -> None:
    server = start_server()
    katib = FakeKatib(server.bound_addresses[0], experiment(name="foreign", algorithm="tpe"))
    katib.trials.append(
        FakeTrial(
            "foreign-manual1",
            (("lr", "0.01"), ("layers", "4"), ("optimizer", "adam")),
            Cond.SUCCEEDED,
            {"loss": "0.5"},
        )
    )
    katib.trials.append(
        FakeTrial(
            "foreign-outside",
            (("lr", "9"), ("layers", "4"), ("optimizer", "adam")),
            Cond.SUCCEEDED,
            {"loss": "0.1"},
        )
    )
    katib.trials.append(FakeTrial("foreign-partial", (("lr", "0.01"),), Cond.RUNNING))
    assert len(katib.ask(2)) == 2
    study = server.registry.study("foreign")
    assert study is not None
    names = [t.user_attrs["katib_trial_name"] for t in study.trials()]
    assert "foreign-manual1" in names
    assert "foreign-outside" not in names and "foreign-partial" not in names  # outside the space: skipped
    assert len(katib.ask(1)) == 1


def test_gp_completes_an_experiment(start_server) -> None:
    # torch comes with the `gp` extra, which `make` installs: a missing torch fails here.
    server = start_server()
    exp = experiment(name="gp", algorithm="gp", settings={"random_state": "3", "n_startup_trials": "4"})
    katib = FakeKatib(server.bound_addresses[0], exp)
    katib.validate()
    katib.run(until=10, parallel=2)
    assert len({t.name for t in katib.trials}) == 10
    for trial in katib.trials:
        _check_in_space(trial)


def test_prefixed_algorithm_name_from_katib_config_selects_the_same_sampler(start_server) -> None:
    """katib-config registers our algorithms as ``kp-<name>``; both spellings must behave the same."""
    server = start_server()
    plain = FakeKatib(server.bound_addresses[0], experiment(name="same", settings={"random_state": "7"}))
    plain.validate()
    plain.run(until=6, parallel=2)
    server2 = start_server()
    prefixed = FakeKatib(
        server2.bound_addresses[0],
        experiment(name="same", algorithm="kp-tpe", settings={"random_state": "7"}),
    )
    prefixed.validate()
    prefixed.run(until=6, parallel=2)
    assert [t.assignments for t in prefixed.trials] == [t.assignments for t in plain.trials]
    with pytest.raises(grpc.RpcError) as info:
        FakeKatib(server2.bound_addresses[0], experiment(name="bad", algorithm="kp-nope")).validate()
    assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "kp-nope" in (info.value.details() or "") or "nope" in (info.value.details() or "")
