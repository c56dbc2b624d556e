"""Delete and re-apply an Experiment mid-run, with another Experiment running beside it, on real Katib.

``kubectl delete -f exp.yaml && kubectl apply -f exp.yaml``: Katib's garbage collection deletes the
Trials (its ``clean-metrics-in-db`` finalizer deletes their logs) and their TrainJobs while the played
Trainer still posts progress. Afterwards:

- no row of a deleted trial is left in Katib's DB manager (MariaDB): the collector's finalizer on each
  TrainJob makes it delete the log after its own last write (docs/collector.md, "Deleted trials");
- the re-created Experiment's trials have names of their own (our suggestion service's incarnation,
  suggestion/_names.py), and each one's rows are exactly what the Trainer sent for it, its
  ``trainjob/seq`` starting at 0;
- both Experiments succeed. Done twice, to catch orderings that only show now and then.
"""

from __future__ import annotations

import time

import pytest

from tests.e2e.cluster import RealKatib
from tests.katibmodel._kube import EXPERIMENTS, TRAINJOBS, TRIALS, has_condition
from tests.katibmodel.scenarios import NS, always, converging, experiment

NAME, BESIDE = "retyped", "beside"
ROUNDS = 2


def _body() -> dict[str, object]:
    return experiment(NAME, max_trials=6, parallel=3)


def _gone(katib: RealKatib, old_trials: list[str], timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        left = [
            n
            for n in old_trials
            if katib.kube.get(TRIALS, NS, n) is not None or katib.kube.get(TRAINJOBS, NS, n) is not None
        ]
        if not left and katib.kube.get(EXPERIMENTS, NS, NAME) is None:
            return
        time.sleep(0.2)
    raise AssertionError(f"still there after {timeout}s: {left}\n{katib.describe(NS, NAME)}")


def _running_with_rows(katib: RealKatib, timeout: float = 180) -> list[str]:
    """Trials of the Experiment once at least two of them have rows (so the delete comes mid-run)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        names = [t["metadata"]["name"] for t in katib.trial_list(NS, NAME)]
        if sum(1 for n in names if katib.rows(n, "loss")) >= 2:
            return names
        time.sleep(0.2)
    raise AssertionError(f"no two trials reporting within {timeout}s\n{katib.describe(NS, NAME)}")


@pytest.mark.timeout(900)
def test_delete_and_reapply_mid_run_leaves_no_row_of_the_old_run(katib: RealKatib) -> None:
    slow = always(lambda: converging(steps=16))
    katib.script.route(NAME, slow, interval_s=0.5)
    katib.script.route(BESIDE, always(converging))
    katib.submit(experiment(BESIDE, max_trials=6, parallel=2))
    deleted: list[str] = []
    katib.submit(_body())
    for _ in range(ROUNDS):
        old = _running_with_rows(katib)
        deleted.extend(old)
        assert katib.kube.delete(EXPERIMENTS, NS, NAME)
        _gone(katib, old)
        katib.submit(_body())
    exp = katib.wait_finished(NS, NAME, timeout=600)
    assert has_condition(exp, "Succeeded"), katib.describe(NS, NAME)
    beside = katib.wait_finished(NS, BESIDE, timeout=600)
    assert has_condition(beside, "Succeeded"), katib.describe(NS, BESIDE)
    time.sleep(2.0)  # a row in flight would have landed by now
    for name in deleted:
        assert katib.mariadb.observation_rows(name) == [], f"deleted trial {name} kept rows"
    trials = [t["metadata"]["name"] for t in katib.trial_list(NS, NAME)]
    assert len(trials) == 6
    assert not set(trials) & set(deleted), "a re-created trial took the name of a deleted one"
    for name in trials:
        sent = katib.sent.values(name, "loss")
        stored = [value for _, value, _ in katib.rows(name, "loss")]
        assert stored == sent, f"{name}: stored {stored}, sent {sent}"
        seqs = [int(value) for _, value, _ in katib.rows(name, "trainjob/seq")]
        assert seqs == list(range(len(sent))), f"{name}: seq {seqs}"
