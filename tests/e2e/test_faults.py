"""Scenario d: faults mid-experiment on real Katib, one component at a time.

Each run starts an Experiment (``kp-tpe``, early stopping ``katib-progress``, 6 trials, 3 in
parallel, every other trial diverging), waits until trials are reporting, SIGKILLs one component,
restarts it after a pause (a pod's container is restarted by the kubelet model, as its
restartPolicy Always would) and then checks that:

- the Experiment completes (Succeeded);
- no trial is left without a terminal condition (none Running);
- no observation row is lost or duplicated: Katib's DB manager holds exactly the trainer statuses
  sent, in order. The one exception is the collector's own outage: ``status.trainerStatus`` holds only
  the latest snapshot, so a snapshot overwritten while no collector ran was never observable; there the
  rows must be an in-order subsequence of what was sent, without duplicates, ending with the final
  snapshot of every trial that ran to completion.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Callable

import pytest

from tests.e2e.cluster import RealKatib
from tests.e2e.curves import every
from tests.katibmodel._kube import has_condition
from tests.katibmodel.harness import Process
from tests.katibmodel.scenarios import NS, converging, diverging, experiment

TERMINAL = ("Succeeded", "Failed", "EarlyStopped", "MetricsUnavailable", "Killed")
PAUSE_S = 2.0


def _sigkill(proc: Process | None) -> None:
    assert proc is not None
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.proc.pid, signal.SIGKILL)
    proc.proc.wait(10)


def _kill_container(katib: RealKatib, experiment_name: str, container: str) -> Callable[[], None]:
    for (ns, deployment), pod in katib.kubelet.pods.items():
        if ns == NS and deployment.startswith(f"{experiment_name}-"):
            for c in pod.containers:
                if c.spec["name"] == container and c.proc is not None:
                    with contextlib.suppress(ProcessLookupError):
                        os.killpg(c.proc.pid, signal.SIGKILL)
                    return lambda: None  # the kubelet model restarts it (CrashLoopBackOff)
    raise AssertionError(f"no running {container} container for {experiment_name}")


def _fault(katib: RealKatib, component: str, experiment_name: str) -> Callable[[], None]:
    """Kill ``component`` now; returns how to bring it back."""
    if component == "collector":
        _sigkill(katib.collector)
        return lambda: katib.start_collector() and None
    if component in ("suggestion", "early-stopping"):
        return _kill_container(katib, experiment_name, component)
    if component == "db-manager":
        _sigkill(katib.db_manager.proc)
        return katib.db_manager.start
    if component == "katib-controller":
        assert katib.controller is not None
        _sigkill(katib.controller.proc)
        return katib.start_katib_controller
    if component == "apiserver":
        _sigkill(katib.cp.apiserver)
        return katib.cp.start_apiserver
    raise AssertionError(component)


def _wait_reporting(katib: RealKatib, name: str, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for t in katib.trial_list(NS, name):
            if len(katib.sent.values(t["metadata"]["name"], "loss")) >= 2:
                return
        time.sleep(0.2)
    raise AssertionError(f"no trial of {name} reported\n{katib.describe(NS, name)}")


def _is_subsequence(part: list[str], whole: list[str]) -> bool:
    it = iter(whole)
    return all(any(x == y for y in it) for x in part)


@pytest.mark.timeout(600)
@pytest.mark.parametrize(
    "component", ["collector", "suggestion", "early-stopping", "db-manager", "katib-controller", "apiserver"]
)
def test_kill_and_restart_mid_experiment(katib: RealKatib, component: str) -> None:
    name = f"fault-{component}"
    katib.script.script = every(2, diverging, converging)
    katib.trainer.interval_s = 0.3
    try:
        katib.submit(experiment(name, max_trials=6, parallel=3))
        _wait_reporting(katib, name)
        restart = _fault(katib, component, name)
        time.sleep(PAUSE_S)
        restart()
        exp = katib.wait_finished(NS, name, timeout=400, stall_s=60)
    finally:
        katib.trainer.interval_s = 0.2
    assert has_condition(exp, "Succeeded"), katib.describe(NS, name)
    trials = katib.trial_list(NS, name)
    assert len(trials) == 6, katib.describe(NS, name)
    for t in trials:
        trial = t["metadata"]["name"]
        assert any(has_condition(t, kind) for kind in TERMINAL), f"{trial} not ended: {t.get('status')}"
        sent = katib.sent.values(trial, "loss")
        stored = [value for _, value, _ in katib.rows(trial, "loss")]
        if component == "collector":
            assert len(set(stored)) == len(stored), f"{trial}: duplicate rows {stored}"
            assert _is_subsequence(stored, sent), f"{trial}: stored {stored} not in order of {sent}"
            if has_condition(t, "Succeeded"):
                assert stored and stored[-1] == sent[-1], f"{trial}: final snapshot missing"
        else:
            assert stored == sent, f"{trial}: stored {stored} != sent {sent}"
