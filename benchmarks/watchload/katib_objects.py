"""The Katib side of the simulated fleet: each TrainJob's Trial and the Experiment of a group of Trials
(benchmarks/watchload/objects.py models the TrainJobs and says where each field comes from upstream).
"""

from __future__ import annotations

from typing import Any

from benchmarks.watchload.objects import (
    KATIB_API,
    QUEUE_LABEL,
    TRAINER_API,
    Experiment,
    Job,
    owner_reference,
    trainer_spec,
)

EXPERIMENT_LABEL = "katib.kubeflow.org/experiment"
SUCCESS_CONDITION = (
    '..#(metadata.annotations.katib-progress\\.kubeflow\\.org/final-metrics=="written")#|0.'
    'status.conditions.#(type=="Complete")#|#(status=="True")#'
)
FAILURE_CONDITION = 'status.conditions.#(type=="Failed")#|#(status=="True")#'


def _objective() -> dict[str, Any]:
    return {
        "additionalMetricNames": ["eval_accuracy"],
        "goal": 0.2,
        "metricStrategies": [
            {"name": "eval_loss", "value": "min"},
            {"name": "eval_accuracy", "value": "max"},
        ],
        "objectiveMetricName": "eval_loss",
        "type": "minimize",
    }


def trial(job: Job, rv: str, created: str) -> dict[str, Any]:
    """The Katib Trial owning ``job``'s TrainJob, Running."""
    run_spec = {
        "apiVersion": TRAINER_API,
        "kind": "TrainJob",
        "metadata": {"labels": {QUEUE_LABEL: "gpu-a100"}, "name": job.name, "namespace": job.namespace},
        "spec": {"runtimeRef": {"name": "torch-distributed"}, "trainer": trainer_spec(job)},
    }
    condition = {"lastTransitionTime": created, "lastUpdateTime": created, "status": "True"}
    return {
        "apiVersion": KATIB_API,
        "kind": "Trial",
        "metadata": {
            "creationTimestamp": created,
            "finalizers": ["update-prometheus-metrics"],
            "generation": 1,
            "labels": {EXPERIMENT_LABEL: job.experiment.name},
            "name": job.name,
            "namespace": job.namespace,
            "ownerReferences": [
                owner_reference(KATIB_API, "Experiment", job.experiment.name, job.experiment.uid)
            ],
            "resourceVersion": rv,
            "uid": job.trial_uid,
        },
        "spec": {
            "failureCondition": FAILURE_CONDITION,
            "metricsCollector": {"collector": {"kind": "Push"}},
            "objective": _objective(),
            "parameterAssignments": [
                {"name": "learning_rate", "value": job.lr},
                {"name": "batch_size", "value": job.batch},
            ],
            "primaryContainerName": "node",
            "runSpec": run_spec,
            "successCondition": SUCCESS_CONDITION,
        },
        "status": {
            "conditions": [
                {**condition, "message": "Trial is created", "reason": "TrialCreated", "type": "Created"},
                {**condition, "message": "Trial is running", "reason": "TrialRunning", "type": "Running"},
            ],
            "startTime": created,
        },
    }


def experiment(exp: Experiment, rv: str, created: str, trials: int) -> dict[str, Any]:
    """A running Experiment with a stock algorithm (``random``) and no early stopping."""
    return {
        "apiVersion": KATIB_API,
        "kind": "Experiment",
        "metadata": {
            "creationTimestamp": created,
            "finalizers": ["update-prometheus-metrics"],
            "generation": 1,
            "name": exp.name,
            "namespace": exp.namespace,
            "resourceVersion": rv,
            "uid": exp.uid,
        },
        "spec": {
            "algorithm": {"algorithmName": "random"},
            "maxFailedTrialCount": 10,
            "maxTrialCount": trials * 4,
            "metricsCollectorSpec": {"collector": {"kind": "Push"}},
            "objective": _objective(),
            "parallelTrialCount": trials,
            "parameters": [
                {
                    "feasibleSpace": {"max": "0.001", "min": "0.00001"},
                    "name": "learning_rate",
                    "parameterType": "double",
                },
                {
                    "feasibleSpace": {"list": ["8", "16", "32"]},
                    "name": "batch_size",
                    "parameterType": "categorical",
                },
            ],
            "resumePolicy": "Never",
        },
        "status": {
            "conditions": [
                {
                    "lastTransitionTime": created,
                    "lastUpdateTime": created,
                    "message": "Experiment is running",
                    "reason": "ExperimentRunning",
                    "status": "True",
                    "type": "Running",
                }
            ],
            "runningTrialList": [],
            "startTime": created,
            "trials": trials,
            "trialsRunning": trials,
        },
    }
