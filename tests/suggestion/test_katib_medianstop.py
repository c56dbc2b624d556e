"""Katib's ``medianstop`` served by our early-stopping server (``create_early_stopping_server``, the
process of our early-stopping image), over loopback gRPC.

- Katib's own unit cases, restated (not copied) from kubeflow/katib at 33c8ff4,
  test/unit/v1beta1/earlystopping/test_medianstop_service.py, ``TestMedianStop``: each test below names
  the upstream test it restates. Katib's expected codes and, for medianstop's own settings, Katib's
  messages word for word.
- The live rule, fed through our Pruning API as the collector feeds it from TrainJob progress, against
  the stand-in of Katib's medianstop (tests/katibmodel/stock/medianstop.py, written from
  pkg/earlystopping/v1beta1/medianstop/service.py) and of its sidecar's ``updateStopRules``
  (tests/katibmodel/metricscollector.py ``_Watch``), on the same trial histories.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from concurrent import futures
from contextlib import contextmanager
from datetime import timedelta
from typing import Any

import grpc
import pytest
from kubeflow.katib import katib_api_pb2, katib_api_pb2_grpc

from katib_progress.core.pruning import PruningSpec
from katib_progress.core.types import ProgressPoint
from katib_progress.suggestion.pruning.client import PruningClient
from katib_progress.suggestion.server import SuggestionServer, create_early_stopping_server
from tests.katibmodel.metricscollector import _Watch
from tests.katibmodel.stock.medianstop import MedianStopService
from tests.suggestion.test_pruning_curves import T0

pb: Any = katib_api_pb2
METRIC = "loss"


@pytest.fixture
def server() -> Iterator[SuggestionServer]:
    srv = create_early_stopping_server(["127.0.0.1:0"])
    srv.start()
    try:
        yield srv
    finally:
        srv.stop(0)


@pytest.fixture
def stub(server: SuggestionServer) -> Iterator[Any]:
    with grpc.insecure_channel(server.bound_addresses[0]) as channel:
        yield katib_api_pb2_grpc.EarlyStoppingStub(channel)


def _validate(stub: Any, name: str, settings: dict[str, str]) -> tuple[grpc.StatusCode, str]:
    spec = pb.EarlyStoppingSpec(
        algorithm_name=name,
        algorithm_settings=[pb.EarlyStoppingSetting(name=k, value=v) for k, v in settings.items()],
    )
    try:
        stub.ValidateEarlyStoppingSettings(
            pb.ValidateEarlyStoppingSettingsRequest(early_stopping=spec), timeout=5
        )
    except grpc.RpcError as exc:
        return exc.code(), exc.details() or ""
    return grpc.StatusCode.OK, ""


# -- test_medianstop_service.py, TestMedianStop.test_validate_early_stopping_settings ---------------


@pytest.mark.parametrize("name", ["medianstop", "kp-medianstop"])
@pytest.mark.parametrize(
    ("case", "settings", "code", "details"),
    [
        # "Valid cases"
        ("valid", {"min_trials_required": "2", "start_step": "5"}, grpc.StatusCode.OK, ""),
        # "Unknown config name"
        (
            "unknown setting",
            {"unknown_conf": "100"},
            grpc.StatusCode.INVALID_ARGUMENT,
            "unknown setting unknown_conf for algorithm medianstop",
        ),
        # "Wrong min_trials_required"
        (
            "min_trials_required 0",
            {"min_trials_required": "0"},
            grpc.StatusCode.INVALID_ARGUMENT,
            "min_trials_required must be greater than zero (>0)",
        ),
        # "Wrong start_step"
        (
            "start_step 0",
            {"start_step": "0"},
            grpc.StatusCode.INVALID_ARGUMENT,
            "start_step must be greater or equal than one (>=1)",
        ),
        # not in Katib's test: service.py validate_medianstop_setting's message for a non-integer
        (
            "not an integer",
            {"start_step": "four"},
            grpc.StatusCode.INVALID_ARGUMENT,
            "failed to validate start_step(four): invalid literal for int() with base 10: 'four'",
        ),
        # not in Katib's test: no setting is valid, Katib's defaults apply
        ("defaults", {}, grpc.StatusCode.OK, ""),
    ],
)
def test_validate_early_stopping_settings(
    stub: Any, name: str, case: str, settings: dict[str, str], code: grpc.StatusCode, details: str
) -> None:
    assert _validate(stub, name, settings) == (code, details), case


def test_validate_early_stopping_settings_unknown_algorithm_name(stub: Any) -> None:
    """Katib's "Unknown algorithm name" case: INVALID_ARGUMENT with Katib's details word for word
    (its test compares ``unknown algorithm name unknown`` exactly); the names this service serves
    travel in the trailing metadata."""
    spec = pb.EarlyStoppingSpec(algorithm_name="unknown")
    with pytest.raises(grpc.RpcError) as refused:
        stub.ValidateEarlyStoppingSettings(
            pb.ValidateEarlyStoppingSettingsRequest(early_stopping=spec), timeout=5
        )
    err: Any = refused.value
    assert err.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert err.details() == "unknown algorithm name unknown"
    trailing = dict(err.trailing_metadata() or ())
    assert trailing["katib-progress-served-algorithms"] == "katib-progress,medianstop,kp-medianstop"


def test_our_own_algorithm_keeps_its_name_and_settings(stub: Any) -> None:
    assert _validate(stub, "katib-progress", {"policy": "median", "start_step": "0"}) == (
        grpc.StatusCode.OK,
        "",
    )
    # Katib's settings are medianstop's, not ours
    code, details = _validate(stub, "katib-progress", {"min_trials_required": "0"})
    assert code == grpc.StatusCode.INVALID_ARGUMENT and "min_trials_required" in details


# -- test_medianstop_service.py, TestMedianStop.test_get_earlystopping_rules -------------------------


def test_get_earlystopping_rules(stub: Any) -> None:
    """Katib's case: an Experiment named ``test`` with nothing else set, two trials without a condition,
    Katib's DB manager address: OK. No trial succeeded, so there is no rule (Katib's service returns
    none either: fewer than ``min_trials_required`` averaged trials)."""
    request = pb.GetEarlyStoppingRulesRequest(
        experiment=pb.Experiment(name="test"),
        trials=[pb.Trial(name="test-asfjh"), pb.Trial(name="test-234hs")],
        db_manager_address="katib-db-manager.kubeflow:6789",
    )
    reply = stub.GetEarlyStoppingRules(request, timeout=5)
    assert list(reply.early_stopping_rules) == []


# -- the live rule against Katib's, on the same trial histories -------------------------------------


class _DBManager(katib_api_pb2_grpc.DBManagerServicer):
    """The observation logs Katib's service reads (one row per report, in order)."""

    def __init__(self) -> None:
        self.logs: dict[str, list[float]] = {}

    def GetObservationLog(self, request: Any, context: Any) -> Any:
        rows = [
            pb.MetricLog(time_stamp="", metric=pb.Metric(name=request.metric_name, value=repr(v)))
            for v in self.logs.get(request.trial_name, [])
        ]
        return pb.GetObservationLogReply(observation_log=pb.ObservationLog(metric_logs=rows))


@contextmanager
def serve_db() -> Iterator[tuple[_DBManager, str]]:
    srv = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    servicer = _DBManager()
    katib_api_pb2_grpc.add_DBManagerServicer_to_server(servicer, srv)
    port = srv.add_insecure_port("127.0.0.1:0")
    srv.start()
    try:
        yield servicer, f"127.0.0.1:{port}"
    finally:
        srv.stop(0)


@pytest.fixture
def db() -> Iterator[tuple[_DBManager, str]]:
    with serve_db() as served:
        yield served


def _stock() -> MedianStopService:
    """The stand-in of Katib's service without its Kubernetes client (SetTrialStatus is not used)."""
    service = MedianStopService.__new__(MedianStopService)
    service.is_first_run = True
    service.min_trials_required = 3
    service.start_step = 4
    service.trials_avg_history = {}
    return service


def _experiment(name: str, maximize: bool, settings: dict[str, str], algorithm: str = "kp-medianstop") -> Any:
    objective = pb.ObjectiveSpec(type=pb.MAXIMIZE if maximize else pb.MINIMIZE, objective_metric_name=METRIC)
    early = pb.EarlyStoppingSpec(
        algorithm_name=algorithm,
        algorithm_settings=[pb.EarlyStoppingSetting(name=k, value=v) for k, v in settings.items()],
    )
    return pb.Experiment(name=name, spec=pb.ExperimentSpec(objective=objective, early_stopping=early))


def _curve(rng: random.Random, maximize: bool) -> list[float]:
    """A noisy learning curve of 1-9 reports, some above and some below the others."""
    level, rate = rng.uniform(0.5, 2.0), rng.uniform(0.0, 0.3)
    values = [level * (1 - rate) ** i + rng.gauss(0, 0.3) for i in range(rng.randint(1, 9))]
    return [-v for v in values] if maximize else values


def _run(
    stub: Any, address: str, db: tuple[_DBManager, str], seed: int, maximize: bool, stock: Any = None
) -> list[int | None]:
    """Katib's loop with trials overlapping: each round GetEarlyStoppingRules (ours and the stock
    stand-in, the same request: every trial so far with its latest condition), 0-2 trials created with
    the stock rule, then every running trial reports 0-2 more values, to our Pruning API (as the
    collector sends TrainJob progress) and to the sidecar model holding its stock rule; a trial that
    runs out of values succeeds. Checks ours prunes exactly where the sidecar stops the trial; returns,
    per trial, the report at which it was stopped (None: ran to its end). ``stock``: Katib's service to
    compare with (anything with ``GetEarlyStoppingRules(request, timeout)``; default the stand-in)."""
    rng = random.Random(seed)
    logs, db_address = db
    settings = {"min_trials_required": str(rng.randint(1, 4)), "start_step": str(rng.randint(1, 5))}
    tag = f"ms-{seed}-{'max' if maximize else 'min'}"
    experiment = _experiment(tag, maximize, settings)
    spec = PruningSpec(METRIC, "maximize" if maximize else "minimize", {"policy": "medianstop", **settings})
    stock = _stock() if stock is None else stock
    conditions: dict[str, Any] = {}
    running: dict[str, tuple[list[float], _Watch]] = {}
    stopped_at: dict[str, int | None] = {}
    with PruningClient(address) as client:
        for round_ in range(14):
            trials = [pb.Trial(name=n, status=pb.TrialStatus(condition=c)) for n, c in conditions.items()]
            request = pb.GetEarlyStoppingRulesRequest(
                experiment=experiment, trials=trials, db_manager_address=db_address
            )
            ours = stub.GetEarlyStoppingRules(request, timeout=5).early_stopping_rules
            theirs = stock.GetEarlyStoppingRules(request, None).early_stopping_rules
            assert list(ours) == list(theirs)  # the same rule for Katib's sidecars
            rules = [
                {
                    "name": r.name,
                    "value": r.value,
                    "comparison": "less" if r.comparison == pb.LESS else "greater",
                }
                for r in theirs
            ]
            for i in range(rng.randint(0, 2) if round_ < 10 else 0):
                name = f"{tag}-{round_}-{i}"
                watch = _Watch(name, "ns", experiment.name, (METRIC,), not maximize, list(rules))
                watch.start_steps = {r["name"]: int(settings["start_step"]) for r in rules}
                running[name] = (_curve(rng, maximize), watch)
                conditions[name] = pb.TrialStatus.RUNNING
                stopped_at[name] = None
            for name in list(running):
                curve, watch = running[name]
                for _ in range(rng.randint(0, 2)):
                    step = len(logs.logs.get(name, []))
                    if step == len(curve):
                        break
                    logs.logs.setdefault(name, []).append(curve[step])
                    point = ProgressPoint(
                        experiment.name,
                        name,
                        step,
                        T0 + timedelta(seconds=step),
                        metrics={METRIC: curve[step]},
                    )
                    prune = client.decide(point, spec).prune
                    had_rules = bool(watch.rules)
                    for rule in list(watch.rules):
                        watch.update(rule, curve[step])
                    assert prune == (had_rules and not watch.rules), (seed, name, step)
                    if prune:
                        stopped_at[name] = step + 1
                        conditions[name] = pb.TrialStatus.EARLYSTOPPED
                        del running[name]
                        break
                else:
                    if len(logs.logs.get(name, [])) == len(curve):
                        client.report_final(experiment.name, name, "complete")
                        conditions[name] = pb.TrialStatus.SUCCEEDED
                        del running[name]
    return list(stopped_at.values())


@pytest.mark.parametrize("maximize", [False, True])
def test_live_medianstop_stops_where_katibs_would(
    stub: Any, server: SuggestionServer, db: Any, maximize: bool
) -> None:
    stops: list[int | None] = []
    for seed in range(12):
        stops += _run(stub, server.bound_addresses[0], db, seed, maximize)
    # the comparison is not vacuous: trials were stopped, others ran to their end
    assert sum(s is not None for s in stops) >= 5
    assert sum(s is None for s in stops) >= 5


def _points(trial: str, values: list[float], experiment: str = "push") -> list[ProgressPoint]:
    return [
        ProgressPoint(
            experiment, trial, i, T0 + timedelta(seconds=i), progress=10.0 * (i + 1), metrics={METRIC: v}
        )
        for i, v in enumerate(values)
    ]


def test_push_trials_without_katibs_calls_are_judged_against_trials_completed_before_them(
    server: SuggestionServer,
) -> None:
    """Only our collector (no GetEarlyStoppingRules call): the peers are the trials that had completed
    when the trial first reported; judged at its ``start_step``-th report only, on its best so far."""
    spec = PruningSpec(
        METRIC, "minimize", {"policy": "medianstop", "min_trials_required": "2", "start_step": "3"}
    )
    with PruningClient(server.bound_addresses[0]) as client:
        # averages of the first 3 reports: 2.0 and 4.0 -> bar 3.0 (the fourth report never counts)
        for name, values in (("a", [3.0, 2.0, 1.0, 0.1]), ("b", [5.0, 4.0, 3.0, 0.1])):
            for point in _points(name, values):
                assert not client.decide(point, spec).prune
            client.report_final("push", name, "complete")
        worse = [client.decide(p, spec) for p in _points("worse", [4.0, 3.5, 3.2, 3.1, 3.0])]
        assert [d.prune for d in worse] == [False, False, True, True, True]  # pruned for good at report 3
        assert "3.2" in worse[2].reason and "mean 3 of 2 succeeded trials" in worse[2].reason
        # best so far 2.9 <= 3.0 at report 3: kept; later reports above the bar change nothing
        kept = [client.decide(p, spec).prune for p in _points("kept", [2.9, 3.5, 3.6, 9.0, 9.0])]
        assert kept == [False] * 5
        # a trial started while only "a" had completed has no rule (min_trials_required=2)
        early = _points("early", [9.0, 9.0, 9.0], experiment="push2")
        for name, values in (("a2", [1.0, 1.0, 1.0]),):
            for point in _points(name, values, experiment="push2"):
                client.decide(point, spec)
            client.report_final("push2", name, "complete")
        assert not client.decide(early[0], spec).prune
        for point in _points("b2", [1.0, 1.0, 1.0], experiment="push2"):
            client.decide(point, spec)
        client.report_final("push2", "b2", "complete")
        assert [client.decide(p, spec).prune for p in early[1:]] == [False, False]


def test_a_trial_older_than_every_call_seen_is_judged_against_trials_completed_before_it(
    server: SuggestionServer, stub: Any
) -> None:
    """A restarted service: Katib's first call it sees already carries a running trial, whose rule
    was made by a call the service never saw; it is judged as without calls, not left without a rule."""
    settings = {"min_trials_required": "1", "start_step": "2"}
    spec = PruningSpec(METRIC, "minimize", {"policy": "medianstop", **settings})
    experiment = _experiment("restarted", False, settings)
    with PruningClient(server.bound_addresses[0]) as client:
        for point in _points("done", [1.0, 1.0], experiment="restarted"):
            client.decide(point, spec)
        client.report_final("restarted", "done", "complete")
        running = _points("running", [5.0, 5.0], experiment="restarted")
        assert not client.decide(running[0], spec).prune
        trials = [
            pb.Trial(name="done", status=pb.TrialStatus(condition=pb.TrialStatus.SUCCEEDED)),
            pb.Trial(name="running", status=pb.TrialStatus(condition=pb.TrialStatus.RUNNING)),
        ]
        request = pb.GetEarlyStoppingRulesRequest(experiment=experiment, trials=trials)
        (rule,) = stub.GetEarlyStoppingRules(request, timeout=5).early_stopping_rules
        assert (rule.value, rule.comparison, rule.start_step) == ("1.0", pb.GREATER, 2)
        assert client.decide(running[1], spec).prune  # best 5.0 > 1.0 at report 2
