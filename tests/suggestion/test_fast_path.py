"""``random`` and ``hyperband`` in memory take a fast path (no Optuna trial per suggestion; the study
is written when first read, ``_study.ExperimentStudy.materialise``). It gives the replies the general
path gives, across a restart and against a service with ``--storage`` (always the general path), and
the study it writes when read is the general path's."""

from __future__ import annotations

from typing import Any

import pytest

from katib_progress.suggestion import server as server_module
from tests.suggestion.katib_fake import Cond, FakeKatib, FakeTrial, experiment, param
from tests.suggestion.test_suggestion_server import FakeHub

HB_PARAMS = (
    param("lr", "double", lo="0.001", hi="0.1", dist="logUniform"),
    param("epochs", "int", lo="1", hi="81"),
    param("optimizer", "categorical", values=("sgd", "adam")),
)


def _exp(algorithm: str) -> Any:
    if algorithm == "hyperband":
        settings = {"resource_name": "epochs", "r_l": "27", "eta": "3", "random_state": "4"}
        return experiment(
            name="fast",
            algorithm=algorithm,
            settings=settings,
            params=HB_PARAMS,
            early_stopping="katib-progress",
        )
    return experiment(name="fast", algorithm=algorithm, settings={"random_state": "4"})


def _foreign(algorithm: str) -> list[FakeTrial]:
    """Trials this service did not name: finished, running, and one outside the space (skipped)."""
    if algorithm == "hyperband":
        fit = (("lr", "0.01"), ("epochs", "27"), ("optimizer", "adam"))
    else:
        fit = (("lr", "0.01"), ("layers", "4"), ("optimizer", "adam"))
    outside = tuple((n, "9" if n == "lr" else v) for n, v in fit)
    return [
        FakeTrial("fast-manual1", fit, Cond.SUCCEEDED, {"loss": "0.5"}),
        FakeTrial("fast-manual2", fit, Cond.RUNNING),
        FakeTrial("fast-outside", outside, Cond.SUCCEEDED, {"loss": "0.1"}),
    ]


@pytest.fixture
def servers(monkeypatch, start_server):
    """Start servers whose pruning hub has a curve for every trial (EarlyStopped trials get it)."""
    monkeypatch.setattr(server_module, "PruningHub", FakeHub)
    return start_server


def _scenario(katib: FakeKatib, algorithm: str) -> None:
    """Every kind of trial report: succeeded, failed, early-stopped (with and without observation),
    MetricsUnavailable, foreign trials, a trial Katib has not created yet, a retried request."""
    katib.ask(3)
    katib.finish(katib.trials[0])
    katib.finish(katib.trials[1], Cond.FAILED)
    katib.trials.extend(_foreign(algorithm))
    katib.ask(2)
    katib.finish(katib.trials[2], Cond.EARLYSTOPPED)
    katib.ask(1)  # reports the two just issued as running
    katib.trials[-2].condition = Cond.METRICSUNAVAILABLE  # no longer sent
    katib.trials[-3].condition = Cond.EARLYSTOPPED  # without an observation: no longer sent
    katib.finish(katib.trials[4])  # fast-manual2, reported running before
    request = katib.request(2)
    katib.stub.GetSuggestions(request, timeout=60)  # a retry: Katib failed to record the reply
    katib.ask(2)
    katib.trials.pop()  # not created by Katib yet
    katib.ask(1)


def _contents(server: server_module.SuggestionServer) -> list[tuple[Any, ...]]:
    assert server.registry is not None
    study = server.registry.study("fast")
    assert study is not None
    return [
        (
            t.number,
            t.state,
            t.value,
            t.params,
            t.distributions,
            t.user_attrs,
            t.system_attrs,
            t.intermediate_values,
        )
        for t in study.trials()
    ]


def _fast(server: server_module.SuggestionServer) -> bool:
    """Whether the experiment's study is still on the fast path (nothing written to Optuna yet)."""
    assert server.registry is not None
    slot = server.registry._slots["fast"]
    assert slot.study is not None
    return slot.study._recorded is not None


@pytest.mark.parametrize("algorithm", ["random", "hyperband"])
def test_fast_path_replies_and_study_equal_the_general_paths(servers, algorithm) -> None:
    fast, general = servers(), servers()
    one = FakeKatib(fast.bound_addresses[0], _exp(algorithm))
    two = FakeKatib(general.bound_addresses[0], _exp(algorithm))
    one.ask(1)
    two.ask(1)
    _contents(general)  # reading the study moves it to the general path
    assert not _fast(general)
    _scenario(one, algorithm)
    _scenario(two, algorithm)
    one.run(until=20, parallel=3, fail_every=4)
    two.run(until=20, parallel=3, fail_every=4)
    one.ask(1)
    two.ask(1)
    assert _fast(fast)
    assert one.replies == two.replies
    assert len(one.trials) == 21
    assert _contents(fast) == _contents(general)
    assert not _fast(fast)
    assert [t.assignments for t in one.ask(3)] == [t.assignments for t in two.ask(3)]


@pytest.mark.parametrize("algorithm", ["random", "hyperband"])
def test_fast_path_replies_equal_storages_across_a_restart(servers, tmp_path, algorithm) -> None:
    storage = f"sqlite:///{tmp_path / 'studies.db'}"
    memory, stored = servers(), servers(storage)
    one = FakeKatib(memory.bound_addresses[0], _exp(algorithm))
    two = FakeKatib(stored.bound_addresses[0], _exp(algorithm))
    _scenario(one, algorithm)
    _scenario(two, algorithm)
    while len(one.trials) < 14:
        assert one.step(until=30, parallel=3, fail_every=4)
        assert two.step(until=30, parallel=3, fail_every=4)
    assert one.running()
    assert _fast(memory) and not _fast(stored)
    memory.stop(0)
    stored.stop(0)
    memory, stored = servers(), servers(storage)
    one.connect(memory.bound_addresses[0])
    two.connect(stored.bound_addresses[0])
    one.run(until=30, parallel=3, fail_every=4)
    two.run(until=30, parallel=3, fail_every=4)
    assert _fast(memory) and not _fast(stored)
    assert len(one.trials) == 30
    assert one.replies == two.replies
