"""The suggestion service process SIGKILLed mid-experiment and started again on the same address.

Katib's controllers keep the trial list and send it whole in every GetSuggestions request
(``tests.suggestion.katib_fake.FakeKatib`` does the same over real gRPC). Invariants: every request
after the restart succeeds (no "unknown trial"), the experiment completes with unique trial names,
and the restarted process makes exactly the suggestions an uninterrupted process makes.
"""

from __future__ import annotations

from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from tests.faults._harness import Proc, free_port
from tests.kubestandin.waiting import wait_until
from tests.suggestion.katib_fake import Cond, FakeKatib, experiment

TRIALS = 18
PARALLEL = 3


def _serving(address: str) -> bool:
    try:
        with grpc.insecure_channel(address) as channel:
            reply = health_pb2_grpc.HealthStub(channel).Check(
                health_pb2.HealthCheckRequest(service="manager.v1beta1.Suggestion"), timeout=1
            )
    except grpc.RpcError:
        return False
    return reply.status == health_pb2.HealthCheckResponse.SERVING


def _service(tmp_path: Path, name: str) -> tuple[Proc, str]:
    address = f"127.0.0.1:{free_port()}"
    proc = Proc(["suggestion", "serve", "--address", address], tmp_path / f"{name}.log")
    return proc, address


def _start(proc: Proc, address: str) -> None:
    proc.start()

    def up() -> bool:
        proc.assert_running()
        return _serving(address)

    wait_until(up, timeout=60, interval=0.1)


@pytest.mark.parametrize(
    "algorithm",
    [
        "tpe",
        pytest.param("random", marks=pytest.mark.slow),
        pytest.param("multivariate-tpe", marks=pytest.mark.slow),
    ],
)
def test_suggestion_service_killed_mid_experiment(tmp_path: Path, algorithm: str) -> None:
    exp = experiment(name=f"faults-{algorithm}", algorithm=algorithm, max_trials=TRIALS, parallel=PARALLEL)
    reference_proc, reference_address = _service(tmp_path, "reference")
    restarted_proc, address = _service(tmp_path, "restarted")
    try:
        _start(reference_proc, reference_address)
        reference = FakeKatib(reference_address, exp)
        reference.run(until=TRIALS, parallel=PARALLEL, fail_every=5)
        reference.close()

        _start(restarted_proc, address)
        katib = FakeKatib(address, exp)
        kills = 0
        while katib.step(until=TRIALS, parallel=PARALLEL, fail_every=5):
            if len(katib.trials) in (6, 13) and katib.running() and kills < len(katib.trials) // 6:
                assert restarted_proc.kill() == -9  # no goodbye: the study lived only in memory
                kills += 1
                katib.close()
                _start(restarted_proc, address)  # same address, as behind Katib's Service
                katib.connect(address)
        katib.close()
        restarted_proc.assert_running()
    finally:
        reference_proc.stop_quietly()
        restarted_proc.stop_quietly()
    assert kills == 2
    assert len(katib.trials) == TRIALS
    assert len({t.name for t in katib.trials}) == TRIALS
    assert all(t.condition in (Cond.SUCCEEDED, Cond.FAILED) for t in katib.trials)
    # Same seed, same history: the restarted service continued the very same search.
    assert katib.replies == reference.replies
