"""The Pruning gRPC API over loopback: PruningHub().register(server) + PruningClient and raw stubs."""

from __future__ import annotations

import math
from collections.abc import Iterator
from concurrent import futures
from dataclasses import dataclass

import grpc
import pytest

from katib_progress.core.errors import PermanentError, TemporaryError
from katib_progress.core.types import ProgressPoint
from katib_progress.suggestion.pruning import PruningConfig
from katib_progress.suggestion.pruning.client import PruningClient
from katib_progress.suggestion.pruning.proto import pruning_pb2 as pb
from katib_progress.suggestion.pruning.proto import pruning_pb2_grpc as pb_grpc
from katib_progress.suggestion.pruning.service import SERVICE_NAME, PruningHub
from tests.suggestion.test_pruning_curves import T0, loss_curve, points


@dataclass
class _Served:
    hub: PruningHub
    address: str
    names: list[str]


@pytest.fixture
def served() -> Iterator[_Served]:
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    hub = PruningHub()
    names = hub.register(server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        yield _Served(hub, f"127.0.0.1:{port}", names)
    finally:
        server.stop(0).wait()


CONFIG = PruningConfig.from_settings(
    "eval_loss",
    "minimize",
    {"policy": "divergence,stall,percentile", "startup_trials": "2", "min_trials": "1"},
)


def test_register_returns_service_names(served: _Served) -> None:
    # The hub serves our Pruning API; Katib's EarlyStopping is added by the server (the Katib edge).
    assert served.names == [SERVICE_NAME]


def test_decide_over_loopback_prunes_a_bad_trial_and_exposes_curves(served: _Served) -> None:
    with PruningClient(served.address) as client:
        for name, floor in (("good0", 0.3), ("good1", 0.32)):
            for point in points(name, loss_curve(floor), experiment="exp-a"):
                assert not client.decide(point, CONFIG).prune
            client.report_final("exp-a", name, "complete")
        verdicts = []
        for point in points("bad", loss_curve(1.2), experiment="exp-a"):
            decision = client.decide(point, CONFIG if point.seq == 0 else None)  # config once is enough
            verdicts.append(decision)
            if decision.prune:
                break
    last = verdicts[-1]
    assert last.prune and last.policy == "percentile" and "median" in last.reason
    assert isinstance(last.evidence["threshold"], float)
    assert last.evidence["value"] > last.evidence["threshold"]
    curve = served.hub.curve("exp-a", "bad")
    assert len(curve) == len(verdicts) and curve[0] == (2.0, loss_curve(1.2)[0][1])
    assert served.hub.curve("exp-a", "nobody") == [] and served.hub.curve("nope", "bad") == []


def test_decide_is_idempotent_over_the_wire(served: _Served) -> None:
    with PruningClient(served.address) as client:
        point = ProgressPoint("exp-b", "t", 0, T0, 10.0, 10.0, 90.0, {"eval_loss": 1.0})
        first = client.decide(point, CONFIG)
        again = client.decide(point, CONFIG)
    assert first == again
    engine = served.hub.engine("exp-b")
    assert engine is not None and engine.points == 1 and engine.repeats == 1


def test_non_finite_metrics_cross_the_wire_and_prune(served: _Served) -> None:
    with PruningClient(served.address) as client:
        point = ProgressPoint("exp-c", "t", 0, T0, 5.0, metrics={"eval_loss": math.nan, "loss": math.inf})
        decision = client.decide(point, CONFIG)
    assert decision.prune and decision.policy == "divergence"


def test_unknown_experiment_without_config_is_invalid_argument(served: _Served) -> None:
    with PruningClient(served.address) as client, pytest.raises(PermanentError, match="config"):
        client.decide(ProgressPoint("never-seen", "t", 0, T0, 5.0, metrics={"eval_loss": 1.0}))


@pytest.mark.parametrize(
    ("request_kwargs", "field"),
    [
        ({"experiment": "", "trial": "t"}, "experiment"),
        ({"experiment": "e", "trial": ""}, "trial"),
        ({"experiment": "e", "trial": "t", "seq": -1}, "seq"),
        ({"experiment": "e", "trial": "t", "progress": 101.0}, "progress"),
        ({"experiment": "e", "trial": "t", "progress": math.nan}, "progress"),
        ({"experiment": "e", "trial": "t", "eta_seconds": -5.0}, "eta_seconds"),
    ],
)
def test_invalid_requests_name_the_field(
    served: _Served, request_kwargs: dict[str, object], field: str
) -> None:
    stub = pb_grpc.PruningStub(grpc.insecure_channel(served.address))
    with pytest.raises(grpc.RpcError) as err:
        stub.Decide(pb.ProgressPointRequest(**request_kwargs), timeout=5)  # type: ignore[arg-type]
    assert err.value.code() is grpc.StatusCode.INVALID_ARGUMENT
    assert err.value.details().startswith(field)


def test_invalid_config_names_the_setting_and_value(served: _Served) -> None:
    stub = pb_grpc.PruningStub(grpc.insecure_channel(served.address))
    config = pb.ExperimentConfig(
        objective_metric_name="eval_loss", direction=pb.MINIMIZE, settings={"percentile": "250"}
    )
    req = pb.ProgressPointRequest(experiment="e", trial="t", progress=5.0, config=config)
    with pytest.raises(grpc.RpcError) as err:
        stub.Decide(req, timeout=5)
    assert err.value.code() is grpc.StatusCode.INVALID_ARGUMENT
    assert "percentile" in err.value.details() and "250" in err.value.details()
    req.config.direction = pb.DIRECTION_UNSPECIFIED
    with pytest.raises(grpc.RpcError) as err:
        stub.Decide(req, timeout=5)
    assert err.value.details().startswith("config.direction")


def test_config_with_deadline_and_budget_round_trips(served: _Served) -> None:
    config = PruningConfig.from_settings(
        "acc",
        "maximize",
        {"policy": "median", "deadline": "2026-01-01T01:00:00+00:00", "gpu_hour_budget": "4"},
    )
    with PruningClient(served.address) as client:
        late = ProgressPoint("exp-d", "t", 0, T0.replace(hour=2), 50.0, metrics={"acc": 0.5})
        decision = client.decide(late, config)
    assert decision.prune and decision.policy == "budget"
    engine = served.hub.engine("exp-d")
    assert engine is not None and engine.config == config


def test_report_final_and_forget(served: _Served) -> None:
    with PruningClient(served.address) as client:
        client.decide(ProgressPoint("exp-e", "t", 0, T0, 5.0, metrics={"eval_loss": 1.0}), CONFIG)
        client.report_final("exp-e", "t", "pruned")
        after = client.decide(ProgressPoint("exp-e", "t", 1, T0, 6.0, metrics={"eval_loss": 0.5}))
        assert after.prune and "already ended" in after.reason
        client.forget("exp-e")
        assert served.hub.engine("exp-e") is None
        with pytest.raises(PermanentError, match="state"):
            client._call("ReportFinal", pb.ReportFinalRequest(experiment="e", trial="t"))


def test_unreachable_service_is_a_temporary_error() -> None:
    with PruningClient("127.0.0.1:1", timeout=0.5) as client, pytest.raises(TemporaryError):
        client.decide(ProgressPoint("e", "t", 0, T0, 5.0), CONFIG)
