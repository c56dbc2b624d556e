"""``tpe`` and ``multivariate-tpe`` are Katib's (Optuna 3.3's TPE with Katib's defaults and setting
names, test_katib_tpe.py); the sampler an earlier measurement tuned is ``tuned-tpe``, a name of its
own (docs/suggestion.md, "TPE defaults"). Over gRPC."""

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
def test_tpe_is_katibs_independent_tpe_with_katibs_defaults(start_server, algorithm) -> None:
    server = start_server()
    sampler = _sampler(server, FakeKatib(server.bound_addresses[0], experiment(algorithm=algorithm)))
    assert isinstance(sampler, KatibTPESampler)
    assert (sampler._multivariate, sampler._n_ei, sampler._n_startup, sampler._prior_weight) == (
        False,
        24,
        10,
        1.0,
    )


def test_multivariate_tpe_has_katibs_defaults_and_setting_names(start_server) -> None:
    server = start_server()
    sampler = _sampler(server, FakeKatib(server.bound_addresses[0], experiment(algorithm="multivariate-tpe")))
    assert isinstance(sampler, KatibTPESampler)
    assert (sampler._multivariate, sampler._n_ei, sampler._n_startup, sampler._prior_weight) == (
        True,
        24,
        10,
        1.0,
    )
    settings = {"n_startup_trials": "4", "n_ei_candidates": "12", "random_state": "7"}
    exp = experiment(name="set", algorithm="multivariate-tpe", settings=settings)
    sampler = _sampler(server, FakeKatib(server.bound_addresses[0], exp))
    assert isinstance(sampler, KatibTPESampler)
    assert (sampler._n_ei, sampler._n_startup) == (12, 4)


@pytest.mark.parametrize("algorithm", ["tuned-tpe", "kp-tuned-tpe"])
def test_the_tuned_sampler_has_a_name_of_its_own(start_server, algorithm) -> None:
    server = start_server()
    sampler = _sampler(server, FakeKatib(server.bound_addresses[0], experiment(algorithm=algorithm)))
    assert type(sampler).__name__ == "TPESampler"
    assert sampler._multivariate is True and sampler._n_ei_candidates == 64
    assert sampler._n_startup_trials == 10 and sampler._constant_liar is True
    settings = {
        "n_startup_trials": "4",
        "n_ei_candidates": "12",
        "random_state": "7",
        "multivariate": "false",
    }
    exp = experiment(name="set", algorithm=algorithm, settings=settings)
    sampler = _sampler(server, FakeKatib(server.bound_addresses[0], exp))
    assert (sampler._multivariate, sampler._n_ei_candidates, sampler._n_startup_trials) == (False, 12, 4)


@pytest.mark.parametrize(
    ("algorithm", "settings"),
    [
        ("tpe", {"multivariate": "true"}),  # Katib's tpe knows no such setting
        ("multivariate-tpe", {"multivariate": "false"}),
    ],
)
def test_katib_names_refuse_settings_that_would_change_the_algorithm(
    start_server, algorithm, settings
) -> None:
    server = start_server()
    katib = FakeKatib(server.bound_addresses[0], experiment(algorithm=algorithm, settings=settings))
    with pytest.raises(grpc.RpcError) as info:
        katib.validate()
    assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert f"algorithmSettings.multivariate='{settings['multivariate']}'" in str(info.value.details())
