"""Trials Katib never sends back (MetricsUnavailable; EarlyStopped without an observation) do not stay
RUNNING in the study (issue 15 item 7), over gRPC."""

from __future__ import annotations

from katib_progress.suggestion import server as server_module
from tests.suggestion.katib_fake import Cond, FakeKatib, experiment
from tests.suggestion.test_suggestion_server import FakeHub


def _states(server, name: str) -> dict[str, str]:
    study = server.registry.study(name)
    assert study is not None
    return {t.user_attrs["katib_trial_name"]: t.state.name for t in study.trials()}


def test_a_trial_katib_stops_sending_is_failed(start_server) -> None:
    server = start_server()
    katib = FakeKatib(server.bound_addresses[0], experiment(name="gone", algorithm="tpe"))
    trials = katib.ask(3)
    katib.ask(1)  # Katib reported the three as running
    trials[0].condition = Cond.METRICSUNAVAILABLE
    trials[1].condition = Cond.EARLYSTOPPED  # without an observation
    katib.ask(1)
    states = _states(server, "gone")
    assert states[trials[0].name] == "FAIL"
    assert states[trials[1].name] == "FAIL"
    assert states[trials[2].name] == "RUNNING"


def test_a_trial_never_reported_yet_stays_running(start_server) -> None:
    """Just issued, not created by Katib yet: absent from the next request, but not ended."""
    server = start_server()
    katib = FakeKatib(server.bound_addresses[0], experiment(name="new", algorithm="random"))
    first = katib.ask(2)
    katib.trials.remove(first[1])  # Katib has not created it yet
    katib.ask(1)
    assert _states(server, "new")[first[1].name] == "RUNNING"


def test_an_early_stopped_trial_without_observation_keeps_its_curve(monkeypatch) -> None:
    monkeypatch.setattr(server_module, "PruningHub", FakeHub)
    server = server_module.create_server(["127.0.0.1:0"])
    server.start()
    try:
        katib = FakeKatib(server.bound_addresses[0], experiment(name="curve", algorithm="tpe"))
        trials = katib.ask(2)
        katib.ask(1)
        trials[0].condition = Cond.EARLYSTOPPED
        katib.ask(1)
        study = server.registry.study("curve")
        assert study is not None
        pruned = next(t for t in study.trials() if t.user_attrs["katib_trial_name"] == trials[0].name)
        assert pruned.state.name == "PRUNED"
        assert pruned.intermediate_values == {10: 0.9, 25: 0.7, 50: 0.6}
    finally:
        server.stop(0)
