"""End to end over the API stand-in: Experiment + Trial + TrainJob -> rows -> PRUNE from the real
suggestion service over gRPC -> EarlyStopped Trial, suspended TrainJob, Events; final metrics under a
collector outage; leader failover without lost or duplicated rows."""

from __future__ import annotations

import socket
from collections import Counter as Multiset
from typing import Any

from katib_progress.collector.enforce import EARLY_STOPPED, EARLY_STOPPED_REASON
from katib_progress.collector.final_metrics import MARKER_ANNOTATION
from tests.cluster._harness import KatibTrialRule, Stack, running_collector, wait_leader, wait_until


def _wait_seqs(stack: Stack, trial: str, count: int, timeout: float = 10.0) -> None:
    """Wait until ``count`` snapshots are stored (more would be duplicates: asserted by the caller)."""
    wait_until(lambda: len(stack.seqs(trial)) >= count, timeout=timeout)


def _early_stopped(trial: dict[str, Any]) -> list[dict[str, Any]]:
    return [c for c in (trial.get("status") or {}).get("conditions") or () if c["type"] == EARLY_STOPPED]


def test_divergent_trial_is_pruned_suspended_and_explained(stack: Stack) -> None:
    stack.experiment(settings={"policy": "divergence"})
    stack.trial_job("exp-good")
    stack.trial_job("exp-bad")
    cc = stack.collector()
    with running_collector(cc):
        for i, (good, bad) in enumerate([("2.0", "2.1"), ("1.5", "1.9"), ("1.2", "nan")]):
            stack.report("exp-good", i, loss=good)
            stack.report("exp-bad", i, loss=bad)
            _wait_seqs(stack, "exp-good", i + 1)
            _wait_seqs(stack, "exp-bad", i + 1)
        trial = wait_until(lambda: _early_stopped(stack.trial("exp-bad")) and stack.trial("exp-bad"))
        wait_until(lambda: stack.trainjob("exp-bad")["spec"].get("suspend") is True)
        wait_until(lambda: len(stack.events()) >= 2)
        assert len(stack.seqs("exp-good")) == 3 and len(stack.seqs("exp-bad")) == 3
        # A later point of the pruned trial does not prune (or patch) again.
        stack.report("exp-bad", 3, loss="nan")
        wait_until(lambda: len(stack.seqs("exp-bad")) == 4)
        assert cc.term is not None and cc.term.forwarder.idle(5)
    (cond,) = _early_stopped(trial)
    assert cond["status"] == "True" and cond["reason"] == EARLY_STOPPED_REASON
    assert "divergence" in cond["message"] and cond["lastUpdateTime"] == cond["lastTransitionTime"]
    assert cond["lastUpdateTime"].endswith("Z") and len(cond["lastUpdateTime"]) == 20  # metav1.Time
    # written with the condition, from the stored rows (nan is never a row): Katib's getMetrics
    assert trial["status"]["observation"] == {
        "metrics": [{"name": "loss", "min": "1.9", "max": "2.1", "latest": "1.9"}]
    }
    assert not _early_stopped(stack.trial("exp-good"))
    assert stack.trainjob("exp-good")["spec"].get("suspend") is not True
    regarding = sorted((e["regarding"]["kind"], e["regarding"]["name"], e["reason"]) for e in stack.events())
    assert regarding == [("TrainJob", "exp-bad", "TrialPruned"), ("Trial", "exp-bad", "TrialPruned")]
    assert all("divergence" in e["note"] for e in stack.events())
    assert cc.counters.get("collector_prune_enforced_total", result="pruned") == 1
    assert cc.counters.get("collector_prune_decisions_total", verdict="prune") >= 1


def test_hanging_pruning_service_never_delays_collection(stack: Stack) -> None:
    stack.experiment(settings={"policy": "divergence"})
    stack.trial_job("exp-h")
    silent = socket.create_server(("127.0.0.1", 0))  # accepts, never answers: Decide hangs 15 s
    cc = stack.collector(pruning_address=f"127.0.0.1:{silent.getsockname()[1]}", pruning_timeout_s=15.0)
    try:
        with running_collector(cc):
            for i in range(4):
                stack.report("exp-h", i, loss=str(2.0 - i / 10))
                _wait_seqs(stack, "exp-h", i + 1, timeout=5)
            assert cc.term is not None and cc.term.forwarder.pending >= 1  # still waiting on the service
    finally:
        silent.close()
    assert stack.seqs("exp-h") == [0, 1, 2, 3]


def test_experiment_without_our_early_stopping_is_collected_not_pruned(stack: Stack) -> None:
    stack.experiment(algorithm="tpe", early_stopping=None)
    stack.trial_job("exp-a")
    cc = stack.collector()
    with running_collector(cc):
        stack.report("exp-a", 0, loss="1.0")
        wait_until(lambda: len(stack.seqs("exp-a")) == 1)
        stack.report("exp-a", 1, loss="nan")
        wait_until(lambda: len(stack.seqs("exp-a")) == 2)
        assert cc.term is not None and cc.term.forwarder.idle(5)
    assert not _early_stopped(stack.trial("exp-a"))
    assert cc.counters.get("collector_pruning_points_total", result="not_pruned") == 2
    assert cc.counters.total("collector_prune_decisions_total") == 0


def test_final_metrics_survive_a_collector_outage_at_completion(stack: Stack) -> None:
    stack.experiment(settings={"policy": "nop"})
    stack.trial_job("exp-t")
    katib = KatibTrialRule(stack)
    first = stack.collector(identity="c-0")
    with running_collector(first):
        stack.report("exp-t", 0, loss="0.9")
        wait_until(lambda: len(stack.seqs("exp-t")) == 1)
    # The collector is down: the trainer reports its final objective and the TrainJob completes.
    stack.report("exp-t", 1, loss="0.25")
    stack.complete("exp-t")
    for _ in range(3):
        assert katib.reconcile("exp-t") is None  # successCondition not met: Katib does not read yet
    assert MARKER_ANNOTATION not in (stack.trainjob("exp-t")["metadata"].get("annotations") or {})
    second = stack.collector(identity="c-1")
    with running_collector(second):
        outcome = wait_until(lambda: katib.reconcile("exp-t"))
    assert outcome == ("Succeeded", "0.25")
    assert katib.reads == {"exp-t": 1}
    assert stack.trainjob("exp-t")["metadata"]["annotations"][MARKER_ANNOTATION] == "written"
    assert stack.seqs("exp-t") == [0, 1]


def test_completed_job_without_objective_gets_the_marker_and_is_metrics_unavailable(stack: Stack) -> None:
    stack.experiment(settings={"policy": "nop"})
    stack.trial_job("exp-n")
    katib = KatibTrialRule(stack)
    cc = stack.collector()
    with running_collector(cc):
        stack.report("exp-n", 0, accuracy="0.5")  # never reports the objective "loss"
        stack.complete("exp-n")
        outcome = wait_until(lambda: katib.reconcile("exp-n"))
    assert outcome == ("MetricsUnavailable", None)
    assert stack.seqs("exp-n") == [0]


def _no_duplicates(stack: Stack, trial: str) -> None:
    rows = stack.rows(trial)
    dupes = [k for k, n in Multiset(rows).items() if n > 1]
    assert not dupes, dupes


def test_leader_failover_loses_and_duplicates_nothing(stack: Stack) -> None:
    stack.experiment(settings={"policy": "nop"})
    stack.trial_job("exp-f")
    a = stack.collector(identity="c-a", leader=True)
    b = stack.collector(identity="c-b", leader=True)
    with running_collector(a):
        wait_leader(a)
        with running_collector(b):
            assert b.term is None and not b.is_leader  # standby
            for i in range(4):
                stack.report("exp-f", i, loss=str(1.0 - i / 10))
                _wait_seqs(stack, "exp-f", i + 1)
            a.stop()  # graceful: flush, release the Lease
            stack.report("exp-f", 4, loss="0.55")  # written while nobody leads
            wait_leader(b)
            for i in range(5, 8):
                stack.report("exp-f", i, loss=str(1.0 - i / 10))
                _wait_seqs(stack, "exp-f", i + 1)
            assert b.counters.get("collector_jobs_recovered_total") == 1
    assert stack.seqs("exp-f") == list(range(8))
    _no_duplicates(stack, "exp-f")


def test_leader_crash_failover_after_lease_expiry(stack: Stack) -> None:
    stack.experiment(settings={"policy": "nop"})
    stack.trial_job("exp-c")
    a = stack.collector(identity="c-a", leader=True)
    b = stack.collector(identity="c-b", leader=True)
    with running_collector(a), running_collector(b):
        wait_until(lambda: a.is_leader or b.is_leader)
        leader, standby = (a, b) if a.is_leader else (b, a)
        wait_leader(leader)
        for i in range(3):
            stack.report("exp-c", i, loss=str(1.0 - i / 10))
            _wait_seqs(stack, "exp-c", i + 1)
        leader.crash()  # no release: the standby waits for the lease to expire
        stack.report("exp-c", 3, loss="0.6")
        wait_until(lambda: len(stack.seqs("exp-c")) == 4, timeout=15)
        assert standby.is_leader
    assert stack.seqs("exp-c") == [0, 1, 2, 3]
    _no_duplicates(stack, "exp-c")
    assert standby.counters.get("collector_leader_terms_total") == 1
