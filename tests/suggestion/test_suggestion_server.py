"""The server process: pruning-hub wiring, curve source, CLI serve and graceful shutdown."""

from __future__ import annotations

import dataclasses
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from katib_progress.suggestion import server as server_module
from katib_progress.suggestion._domain import TrialRecord, TrialState
from katib_progress.suggestion._registry import StudyRegistry
from katib_progress.suggestion.katib.convert import experiment_from_proto
from tests.suggestion.katib_fake import Cond, FakeKatib, experiment

ROOT = Path(__file__).resolve().parents[2]


class FakeHub:
    """Stands in for the PruningHub: a registered service and learning curves."""

    def __init__(self, history: object = None) -> None:
        self.history = history  # the server passes its HistoryLoader (None: nothing to rebuild from)
        self.registered = 0
        self.asked: list[tuple[str, str]] = []

    def register(self, server: grpc.Server) -> list[str]:
        self.registered += 1
        handler = grpc.method_handlers_generic_handler("test.Hub", {})
        server.add_generic_rpc_handlers((handler,))
        return ["test.Hub"]

    def curve(self, experiment: str, trial: str) -> list[tuple[float, float]]:
        self.asked.append((experiment, trial))
        if trial.endswith("unknown"):
            raise KeyError(trial)
        return [(10.0, 0.9), (25.4, 0.7), (50.0, 0.6)]


def test_pruning_hub_is_registered_and_serves_curves(monkeypatch) -> None:
    hubs: list[FakeHub] = []

    def make_hub(history: object = None) -> FakeHub:
        hubs.append(FakeHub(history))
        return hubs[-1]

    monkeypatch.setattr(server_module, "PruningHub", make_hub)

    server = server_module.create_server(["127.0.0.1:0"])
    server.start()
    try:
        assert len(hubs) == 1 and hubs[0].registered == 1
        with grpc.insecure_channel(server.bound_addresses[0]) as channel:
            reply = health_pb2_grpc.HealthStub(channel).Check(
                health_pb2.HealthCheckRequest(service="test.Hub")
            )
            assert reply.status == health_pb2.HealthCheckResponse.SERVING
        katib = FakeKatib(server.bound_addresses[0], experiment(name="hub", algorithm="tpe"))
        trials = katib.ask(2)
        katib.finish(trials[0], Cond.EARLYSTOPPED)
        katib.ask(1)
        assert ("hub", trials[0].name) in hubs[0].asked
        study = server.registry.study("hub")
        assert study is not None
        pruned = next(t for t in study.trials() if t.user_attrs["katib_trial_name"] == trials[0].name)
        assert pruned.state.name == "PRUNED"
        assert pruned.intermediate_values == {10: 0.9, 25: 0.7, 50: 0.6}
        assert pruned.value == 0.6
    finally:
        server.stop(0)


def test_a_missing_curve_falls_back_to_the_observation() -> None:
    hub = FakeHub()
    registry = StudyRegistry(curve_source=hub)
    spec = experiment_from_proto(experiment(name="fallback", algorithm="random"))
    suggested = registry.suggest(spec, [], 1, 1)
    first = suggested.suggestions[0]
    renamed = TrialRecord("fallback-unknown", first.assignments, TrialState.PRUNED)
    record = TrialRecord(first.trial_name, first.assignments, TrialState.PRUNED)
    # Katib sends back the incarnation the first reply carried (the Suggestion's status)
    registry.suggest(dataclasses.replace(spec, incarnation=suggested.incarnation), [record, renamed], 1, 2)
    study = registry.study("fallback")
    assert study is not None
    states = {t.user_attrs["katib_trial_name"]: t for t in study.trials()}
    assert states[first.trial_name].intermediate_values == {10: 0.9, 25: 0.7, 50: 0.6}
    assert states["fallback-unknown"].state.name == "PRUNED"
    assert states["fallback-unknown"].intermediate_values == {}


def test_cli_serves_until_sigterm_and_exits_zero(tmp_path) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    db = tmp_path / "cli.db"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "katib_progress.cli",
            "suggestion",
            "serve",
            "--address",
            "127.0.0.1:0",
            "--address",
            "127.0.0.1:0",
            "--storage",
            f"sqlite:///{db}",
        ],
        cwd=ROOT,
        env=env,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        addresses: list[str] = []
        deadline = time.monotonic() + 60
        assert proc.stderr is not None
        while not addresses and time.monotonic() < deadline:
            line = proc.stderr.readline()
            if not line:
                break
            match = re.search(r"listening on (.+)$", line.strip())
            if match:
                addresses = [a.strip() for a in match.group(1).split(",")]
        assert len(addresses) == 2, "the service logs its bound addresses"
        katib = FakeKatib(addresses[1], experiment(name="cli", algorithm="random"))
        katib.run(until=4, parallel=2)
        katib.close()
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert db.exists()
    import optuna

    assert len(optuna.load_study(study_name="cli", storage=f"sqlite:///{db}").get_trials()) == 4
