"""The real Kubeflow Trainer under real Katib: Katib's trial controller creates TrainJobs, Trainer v2.3.0's
own controller manager (feature gate TrainJobStatus) turns each into a JobSet from the stock
``torch-distributed`` ClusterTrainingRuntime and injects its status-server env; the trial processes
(tests/e2e/trial.py) report with the Kubeflow SDK's ``update_trainjob_status`` to Trainer's real status
server, which applies each status to the TrainJob. Only the JobSet level is played
(tests/e2e/trainer.py ``JobSetPlayer``): the process exiting sets the JobSet's Completed/Failed condition
and Trainer's own controller copies it to the TrainJob; early stopping suspends the TrainJob, Trainer
suspends the JobSet and the player kills the process.

One Experiment: ``kp-tpe``, early stopping ``katib-progress``, the Push collector, the documented
successCondition (tests/test_examples_gjson.py SUCCESS_CONDITION), max 3, parallel 3 (one round: the
SDK's 5 s throttle makes each trial about half a minute), every other trial diverging, ``retain: true``
as the Kubeflow SDK sets it (so each TrainJob and JobSet can be read afterwards, and an early-stopped
trial's TrainJob is stopped by suspension, not deletion).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.cluster import RealKatib
from tests.e2e.trainer import JOBSETS
from tests.katibmodel._kube import TRAINJOBS, get_condition, has_condition
from tests.katibmodel.rules import is_observation_available
from tests.katibmodel.scenarios import NS, experiment

NAME = "real-trainer"
#: the SDK example's early-stopping settings (examples/cluster/sdk/create_experiment.py)
SETTINGS = {"policy": "default", "warmup_progress": "20", "min_trials": "3"}


@pytest.fixture(scope="module")
def real_trainer(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RealKatib]:
    with RealKatib(Path(tmp_path_factory.mktemp("e2e-trainer")), trainer="real") as cluster:
        yield cluster


def every_other_diverges(index: int, _jobset: Mapping[str, Any]) -> dict[str, str]:
    """JobSets in the order the player met them: even ones converge, odd ones diverge."""
    return {"KP_E2E_CURVE": "diverging" if index % 2 else "converging", "KP_E2E_STEPS": "6"}


def _true_conditions(trial: Mapping[str, Any]) -> set[str]:
    conditions = (trial.get("status") or {}).get("conditions") or []
    return {c["type"] for c in conditions if c.get("status") == "True"}


def trial_command(exp: dict[str, Any]) -> dict[str, Any]:
    """The stock example's trainer with our trial script as its command (``python3`` is the image's)."""
    trainer = exp["spec"]["trialTemplate"]["trialSpec"]["spec"]["trainer"]
    trainer["command"] = [
        "python3", "-m", "tests.e2e.trial",
        "--lr=${trialParameters.learningRate}", "--momentum=${trialParameters.momentum}",
    ]  # fmt: skip
    return exp


@pytest.mark.timeout(600)
def test_experiment_with_the_real_trainer(real_trainer: RealKatib) -> None:
    katib = real_trainer
    katib.trial_env = every_other_diverges
    exp = experiment(NAME, settings=SETTINGS, max_trials=3, parallel=3, retain=True)
    katib.submit(trial_command(exp))
    exp = katib.wait_finished(NS, NAME, timeout=480, stall_s=60)
    assert has_condition(exp, "Succeeded"), katib.describe(NS, NAME)

    trials = katib.trial_list(NS, NAME)
    assert len(trials) == 3, katib.describe(NS, NAME)
    stopped = [t for t in trials if "EarlyStopped" in _true_conditions(t)]
    assert len(stopped) >= 1, katib.describe(NS, NAME)
    for t in trials:
        conds = _true_conditions(t)
        assert ("EarlyStopped" in conds) or ("Succeeded" in conds), katib.describe(NS, NAME)
        assert is_observation_available(t), f"{t['metadata']['name']} has no observation"
    assert katib.jobsets is not None
    killed = 0
    for t in trials:
        name = t["metadata"]["name"]
        job = katib.kube.get(TRAINJOBS, NS, name)
        jobset = katib.kube.get(JOBSETS, NS, name)
        assert job is not None and jobset is not None, name
        # the JobSet is Trainer's: built from torch-distributed, owned by the TrainJob
        owner = jobset["metadata"]["ownerReferences"][0]
        assert (owner["kind"], owner["uid"]) == ("TrainJob", job["metadata"]["uid"])
        ends = katib.jobsets.ends(name)
        if "Succeeded" in _true_conditions(t):
            # Trainer's jobset plugin (Status) copied the JobSet's Completed condition as Complete
            complete = get_condition(job, "Complete")
            assert complete is not None and complete["reason"] == "AllJobsCompleted", job.get("status")
            assert ends == ["exit 0"], f"{name}: {ends}"
        else:
            # our Enforcer suspended the TrainJob; Trainer set Suspended and suspended the JobSet
            assert job["spec"].get("suspend") is True and jobset["spec"].get("suspend") is True, name
            assert has_condition(job, "Suspended"), job.get("status")
            assert not has_condition(job, "Complete"), job.get("status")
            killed += ends == ["killed: JobSet suspended"]
    assert killed >= 1, katib.describe(NS, NAME)
    # Katib's DB manager holds exactly the statuses the SDK sent: no loss, no duplicate, in order
    for t in trials:
        name = t["metadata"]["name"]
        sent = katib.jobsets.sent(name, "loss")
        assert sent, f"{name}: the SDK sent nothing"
        stored = [value for _, value, _ in katib.rows(name, "loss")]
        assert stored == sent, f"{name}: stored {stored} != sent {sent}"
