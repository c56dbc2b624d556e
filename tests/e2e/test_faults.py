"""Scenario d: faults mid-experiment on real Katib, one component at a time.

A first Experiment (``kp-tpe``, early stopping ``katib-progress``, 15 trials, 3 in parallel, every other
trial diverging) has five components SIGKILLed and restarted one after another while its trials
report: our suggestion container and our early-stopping container (restarted by the kubelet model, as
restartPolicy Always would), katib-db-manager, katib-controller and kube-apiserver (etcd kept). Before
each kill the trials must have reported again since the previous restart, and every kill must come
before the Experiment ends. Then:

- the Experiment completes (Succeeded);
- no trial is left without a terminal condition (none Running);
- no observation row is lost or duplicated: Katib's DB manager holds exactly the trainer statuses sent,
  in order.

A second Experiment loses the collector itself. ``status.trainerStatus`` holds only the latest
snapshot, so a snapshot overwritten while no collector ran was never observable: there the rows must
be an in-order subsequence of what was sent, without duplicates, ending with the final snapshot of
every trial that ran to completion.
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
from tests.katibmodel.expstatus import is_completed
from tests.katibmodel.harness import Process
from tests.katibmodel.scenarios import NS, converging, diverging, experiment

TERMINAL = ("Succeeded", "Failed", "EarlyStopped", "MetricsUnavailable", "Killed")
PAUSE_S = 2.0
ONE_AT_A_TIME = ["suggestion", "early-stopping", "db-manager", "katib-controller", "apiserver"]


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


def _sent_total(katib: RealKatib, name: str) -> int:
    return sum(len(katib.sent.values(t["metadata"]["name"], "loss")) for t in katib.trial_list(NS, name))


def _wait_reporting(katib: RealKatib, name: str, more_than: int, timeout: float = 120) -> int:
    """Wait until the Experiment's trials have sent two points more than ``more_than``; the new total."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with contextlib.suppress(Exception):  # the API server may be coming back
            total = _sent_total(katib, name)
            if total >= more_than + 2:
                return total
        time.sleep(0.2)
    raise AssertionError(f"{name}: no trial reported after the last fault\n{katib.describe(NS, name)}")


def _is_subsequence(part: list[str], whole: list[str]) -> bool:
    it = iter(whole)
    return all(any(x == y for y in it) for x in part)


def _ended(katib: RealKatib, name: str) -> list[dict[str, object]]:
    trials = katib.trial_list(NS, name)
    for t in trials:
        ends = [kind for kind in TERMINAL if has_condition(t, kind)]
        assert ends, f"{t['metadata']['name']} not ended: {t.get('status')}"
    return trials


@pytest.mark.timeout(600)
@pytest.mark.usefixtures("quiet")
def test_five_components_killed_one_at_a_time_mid_experiment(katib: RealKatib) -> None:
    name = "faults"
    katib.script.script = every(2, diverging, converging)
    katib.trainer.interval_s = 0.5
    done: list[str] = []
    try:
        katib.submit(experiment(name, max_trials=15, parallel=3))
        sent = _wait_reporting(katib, name, 0)
        for component in ONE_AT_A_TIME:
            restart = _fault(katib, component, name)
            time.sleep(PAUSE_S)
            restart()
            done.append(component)
            assert not is_completed(katib.experiment(NS, name)), f"ended before all faults: {done}"
            sent = _wait_reporting(katib, name, sent)
        exp = katib.wait_finished(NS, name, timeout=400, stall_s=60)
    finally:
        katib.trainer.interval_s = 0.2
    assert done == ONE_AT_A_TIME
    assert has_condition(exp, "Succeeded"), katib.describe(NS, name)
    trials = _ended(katib, name)
    assert len(trials) == 15, katib.describe(NS, name)
    for t in trials:
        trial = str(t["metadata"]["name"])  # type: ignore[index]
        sent_values = katib.sent.values(trial, "loss")
        stored = [value for _, value, _ in katib.rows(trial, "loss")]
        assert stored == sent_values, f"{trial}: stored {stored} != sent {sent_values}"


@pytest.mark.timeout(600)
@pytest.mark.usefixtures("quiet")
def test_collector_killed_mid_experiment(katib: RealKatib) -> None:
    name = "fault-collector"
    katib.script.script = every(2, diverging, converging)
    katib.trainer.interval_s = 0.3
    try:
        katib.submit(experiment(name, max_trials=6, parallel=3))
        _wait_reporting(katib, name, 0)
        restart = _fault(katib, "collector", name)
        time.sleep(PAUSE_S)
        restart()
        exp = katib.wait_finished(NS, name, timeout=400, stall_s=60)
    finally:
        katib.trainer.interval_s = 0.2
    assert has_condition(exp, "Succeeded"), katib.describe(NS, name)
    trials = _ended(katib, name)
    assert len(trials) == 6, katib.describe(NS, name)
    for t in trials:
        trial = str(t["metadata"]["name"])  # type: ignore[index]
        sent = katib.sent.values(trial, "loss")
        stored = [value for _, value, _ in katib.rows(trial, "loss")]
        assert len(set(stored)) == len(stored), f"{trial}: duplicate rows {stored}"
        assert _is_subsequence(stored, sent), f"{trial}: stored {stored} not in order of {sent}"
        if has_condition(t, "Succeeded"):
            assert stored and stored[-1] == sent[-1], f"{trial}: final snapshot missing"
