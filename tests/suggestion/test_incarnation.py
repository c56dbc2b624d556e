"""An Experiment deleted and applied again never gets a trial name of the one it replaces, while a
restarted service continues the same study under the same names (suggestion/_names.py): the
incarnation travels in Katib's Suggestion status.algorithmSettings."""

from __future__ import annotations

import optuna
import pytest

from katib_progress.suggestion._names import INCARNATION_SETTING
from tests.suggestion.katib_fake import FakeKatib, experiment


def _exp(algorithm: str) -> object:
    return experiment(name="retyped", algorithm=algorithm, settings={"random_state": "7"})


@pytest.mark.parametrize("algorithm", ["random", "tpe"])
def test_a_recreated_experiment_gets_new_names_and_the_same_parameters(start_server, algorithm) -> None:
    server = start_server()
    address = server.bound_addresses[0]
    old = FakeKatib(address, _exp(algorithm), incarnation=None)
    old.run(until=6, parallel=2)
    incarnation = old.kept[INCARNATION_SETTING]
    assert incarnation
    # kubectl delete -f && kubectl apply -f: a new Suggestion, no kept settings; the same service
    # process (or its storage) still holds the old study
    new = FakeKatib(address, _exp(algorithm), incarnation=None)
    new.run(until=6, parallel=2)
    assert new.kept[INCARNATION_SETTING] != incarnation
    assert not {t.name for t in old.trials} & {t.name for t in new.trials}
    if algorithm == "random":  # random_state still fixes the suggestions
        assert [t.assignments for t in old.trials] == [t.assignments for t in new.trials]


def test_a_restarted_service_continues_under_the_same_names(start_server, tmp_path) -> None:
    storage = f"sqlite:///{tmp_path / 'studies.db'}"
    first = start_server(storage)
    katib = FakeKatib(first.bound_addresses[0], _exp("tpe"), incarnation=None)
    katib.run(until=5, parallel=2)
    reference = FakeKatib(
        start_server().bound_addresses[0], _exp("tpe"), incarnation=katib.kept[INCARNATION_SETTING]
    )
    reference.run(until=5, parallel=2)
    assert [t.name for t in reference.trials] == [t.name for t in katib.trials]
    first.stop(0)
    katib.connect(start_server(storage).bound_addresses[0])  # a new pod, Katib's status kept
    kept = dict(katib.kept)
    katib.run(until=9, parallel=2)
    reference.run(until=9, parallel=2)
    assert katib.kept == kept
    assert [t.name for t in katib.trials] == [t.name for t in reference.trials]
    assert len({t.name for t in katib.trials}) == 9


def test_the_stored_study_of_an_earlier_experiment_is_replaced(start_server, tmp_path) -> None:
    """With a storage, the re-created Experiment's first request (no incarnation) does not continue the
    stored study of the deleted one: it starts empty, so none of the old trials counts."""
    storage = f"sqlite:///{tmp_path / 'studies.db'}"
    old = FakeKatib(start_server(storage).bound_addresses[0], _exp("tpe"), incarnation=None)
    old.run(until=4, parallel=2)
    new = FakeKatib(start_server(storage).bound_addresses[0], _exp("tpe"), incarnation=None)
    new.ask(1)
    study = optuna.load_study(study_name="retyped", storage=storage)
    assert len(study.trials) == 1
    assert study.trials[0].user_attrs["katib_trial_name"] == new.trials[0].name
