"""tpe defaults (chosen by measurement, docs/suggestion.md "TPE defaults"); multivariate-tpe is Katib's
(Optuna 3.3's defaults, test_katib_tpe.py); Katib's setting names keep their meaning (over gRPC)."""

from __future__ import annotations

import grpc
import pytest

from katib_progress.suggestion._katib_tpe import KatibTPESampler
from tests.suggestion.katib_fake import FakeKatib, experiment


def _sampler(server, katib: FakeKatib):  # type: ignore[no-untyped-def]
    katib.ask(1)
    study = server.registry.study(katib.exp.name)
    assert study is not None
    return study.study.sampler


@pytest.mark.parametrize("algorithm", ["tpe", "kp-tpe"])
def test_defaults_are_multivariate_with_64_candidates(start_server, algorithm) -> None:
    server = start_server()
    sampler = _sampler(server, FakeKatib(server.bound_addresses[0], experiment(algorithm=algorithm)))
    assert type(sampler).__name__ == "TPESampler"
    assert sampler._multivariate is True and sampler._n_ei_candidates == 64
    assert sampler._n_startup_trials == 10 and sampler._constant_liar is True
    assert sampler._parzen_estimator_parameters.prior_weight == 1.0


def test_multivariate_tpe_has_katibs_defaults_and_setting_names(start_server) -> None:
    server = start_server()
    sampler = _sampler(server, FakeKatib(server.bound_addresses[0], experiment(algorithm="multivariate-tpe")))
    assert isinstance(sampler, KatibTPESampler)
    assert (sampler._n_ei, sampler._n_startup, sampler._prior_weight) == (24, 10, 1.0)
    settings = {"n_startup_trials": "4", "n_ei_candidates": "12", "random_state": "7"}
    exp = experiment(name="set", algorithm="multivariate-tpe", settings=settings)
    sampler = _sampler(server, FakeKatib(server.bound_addresses[0], exp))
    assert isinstance(sampler, KatibTPESampler)
    assert (sampler._n_ei, sampler._n_startup) == (12, 4)


def test_katib_setting_names_and_the_independent_tpe(start_server) -> None:
    server = start_server()
    settings = {
        "n_startup_trials": "4",
        "n_ei_candidates": "12",
        "random_state": "7",
        "multivariate": "false",
    }
    sampler = _sampler(
        server, FakeKatib(server.bound_addresses[0], experiment(algorithm="tpe", settings=settings))
    )
    assert (
        sampler._multivariate is False and sampler._n_ei_candidates == 12 and sampler._n_startup_trials == 4
    )


def test_multivariate_tpe_cannot_be_made_independent(start_server) -> None:
    server = start_server()
    katib = FakeKatib(
        server.bound_addresses[0],
        experiment(algorithm="multivariate-tpe", settings={"multivariate": "false"}),
    )
    with pytest.raises(grpc.RpcError) as info:
        katib.validate()
    assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "algorithmSettings.multivariate='false'" in str(info.value.details())
