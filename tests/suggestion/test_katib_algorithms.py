"""Katib's other algorithm names (sobol, bayesianoptimization, hyperband, pbt), over gRPC."""

from __future__ import annotations

import logging

import grpc
import pytest
from kubeflow.katib import katib_api_pb2 as pb
from kubeflow.katib import katib_api_pb2_grpc as pb_grpc

from katib_progress.collector.experiments import ExperimentInfo
from katib_progress.suggestion.server import create_server
from tests.suggestion.katib_fake import FakeKatib, experiment, param


def _details(address: str, exp: object) -> str:
    katib = FakeKatib(address, exp)
    with pytest.raises(grpc.RpcError) as info:
        katib.validate()
    katib.close()
    assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    return str(info.value.details())


def test_sobol_is_qmc_sobol(start_server) -> None:
    server = start_server()
    address = server.bound_addresses[0]
    sobol = FakeKatib(address, experiment(name="s1", algorithm="sobol", settings={"random_state": "3"}))
    qmc = FakeKatib(
        address, experiment(name="s2", algorithm="qmc", settings={"qmc_type": "sobol", "random_state": "3"})
    )
    sobol.validate()
    sobol.run(until=6, parallel=2)
    qmc.run(until=6, parallel=2)
    assert [t.assignments for t in sobol.trials] == [t.assignments for t in qmc.trials]
    details = _details(address, experiment(algorithm="sobol", settings={"qmc_type": "halton"}))
    assert "algorithmSettings.qmc_type='halton'" in details


def test_bayesianoptimization_runs_a_gaussian_process(start_server, caplog) -> None:
    server = start_server()
    address = server.bound_addresses[0]
    settings = {"n_initial_points": "3", "acq_func": "EI", "random_state": "1"}
    katib = FakeKatib(address, experiment(algorithm="bayesianoptimization", settings=settings))
    with caplog.at_level(logging.WARNING):
        katib.validate()
        katib.run(until=6, parallel=1)
    assert len(katib.trials) == 6
    assert "acq_func=EI" in caplog.text and "GPSampler" in caplog.text
    study = server.registry.study("exp")  # type: ignore[union-attr]
    assert type(study.study.sampler).__name__ == "GPSampler"  # type: ignore[union-attr]
    details = _details(
        address, experiment(algorithm="bayesianoptimization", settings={"base_estimator": "RF"})
    )
    assert "algorithmSettings.base_estimator='RF'" in details and "only GP maps honestly" in details


HB_PARAMS = (
    param("lr", "double", lo="0.001", hi="0.1", dist="logUniform"),
    param("epochs", "int", lo="1", hi="81"),
)


def test_hyperband_samples_at_full_budget_and_needs_our_early_stopping(start_server) -> None:
    server = start_server()
    address = server.bound_addresses[0]
    settings = {"resource_name": "epochs", "r_l": "81", "eta": "3"}
    details = _details(address, experiment(algorithm="hyperband", settings=settings, params=HB_PARAMS))
    assert "spec.earlyStopping.algorithmName must be 'katib-progress'" in details
    exp = experiment(
        algorithm="hyperband", settings=settings, params=HB_PARAMS, early_stopping="katib-progress"
    )
    katib = FakeKatib(address, exp)
    katib.validate()
    katib.run(until=8, parallel=2)
    assert {dict(t.assignments)["epochs"] for t in katib.trials} == {"81"}
    assert len({dict(t.assignments)["lr"] for t in katib.trials}) == 8
    bad = {"resource_name": "nope", "r_l": "0"}
    details = _details(
        address,
        experiment(algorithm="hyperband", settings=bad, params=HB_PARAMS, early_stopping="katib-progress"),
    )
    assert "algorithmSettings.r_l='0'" in details
    details = _details(
        address,
        experiment(
            algorithm="hyperband",
            settings={"resource_name": "nope", "r_l": "9"},
            params=HB_PARAMS,
            early_stopping="katib-progress",
        ),
    )
    assert "algorithmSettings.resource_name='nope': not a parameter of the experiment" in details


def test_hyperband_maps_eta_and_r_l_onto_the_hyperband_pruning_policy() -> None:
    """Katib's brackets for r_l=81, eta=3: s_max=4, smallest budget 81*3**-4 = 1 (1.23 % of r_l)."""
    server = create_server(["127.0.0.1:0"], early_stopping=True)
    server.start()
    try:
        exp = experiment(
            name="hb",
            algorithm="kp-hyperband",
            settings={"resource_name": "epochs", "r_l": "81", "eta": "3"},
            params=HB_PARAMS,
            early_stopping="katib-progress",
        )
        with grpc.insecure_channel(server.bound_addresses[0]) as channel:
            stub = pb_grpc.EarlyStoppingStub(channel)
            stub.GetEarlyStoppingRules(pb.GetEarlyStoppingRulesRequest(experiment=exp), timeout=10)
        engine = server.hub.engine("hb")
        assert engine is not None
        assert engine.config.policy_names == ("hyperband",)
        assert engine.config.reduction_factor == 3
        assert float(engine.config.min_resource) == pytest.approx(100 / 81, rel=1e-5)
    finally:
        server.stop(0)
    # the collector sends the same mapped settings with every point
    info = ExperimentInfo.from_object(
        {
            "metadata": {"name": "hb", "namespace": "ns"},
            "spec": {
                "algorithm": {
                    "algorithmName": "kp-hyperband",
                    "algorithmSettings": [{"name": "r_l", "value": "27"}, {"name": "eta", "value": "3"}],
                },
                "earlyStopping": {
                    "algorithmName": "katib-progress",
                    "algorithmSettings": [{"name": "percentile", "value": "30"}],
                },
                "objective": {"objectiveMetricName": "loss", "type": "minimize"},
            },
        }
    )
    spec = info.pruning_spec()
    assert spec is not None
    assert dict(spec.settings) == {
        "percentile": "30",
        "policy": "hyperband",
        "reduction_factor": "3",
        "min_resource": repr(round(100 / 27, 6)),
    }


def test_pbt_is_refused_with_the_reason(start_server) -> None:
    server = start_server()
    settings = {"suggestion_trial_dir": "/x", "n_population": "5", "truncation_threshold": "0.2"}
    details = _details(server.bound_addresses[0], experiment(algorithm="pbt", settings=settings))
    assert "algorithm.algorithmName='pbt': population based training is not supported" in details
    assert "checkpoints" in details
