"""What a local sweep does not honour: every accepted Experiment field that changes nothing locally."""

from __future__ import annotations

from collections.abc import Iterator

from pydantic import BaseModel

from katib_progress.core.pruning import MEDIANSTOP_ALGORITHMS
from katib_progress.local._collector import collector_of
from katib_progress.local._model import ExperimentDoc, Metadata, TrainJobDoc, TrainJobMetadata
from katib_progress.local._render import TRAINER, TRIAL_SPEC
from katib_progress.local._textmetrics import Collector


def unsupported(doc: ExperimentDoc, job: TrainJobDoc) -> Iterator[str]:
    spec = doc.spec
    yield from extras(doc, "")
    yield from extras(job, TRIAL_SPEC)
    if spec.early_stopping is not None and spec.early_stopping.algorithm_name in MEDIANSTOP_ALGORITHMS:
        yield (
            f"spec.earlyStopping.algorithmName={spec.early_stopping.algorithm_name}: Katib's rule, live; "
            "a trial is judged against the trials that had succeeded when it first reported (Katib: "
            "when it was created; locally nothing calls GetEarlyStoppingRules)"
        )
    template = spec.trial_template
    if template.success_condition or template.failure_condition:
        yield (
            "spec.trialTemplate.successCondition/failureCondition: not evaluated; a local trial "
            "completes when its process exits (0 = complete, non-zero = failed)"
        )
    yield from _collector_notes(collector_of(doc))
    yield from _settings_notes(doc)
    if spec.resume_policy is not None:
        yield (
            f"spec.resumePolicy={spec.resume_policy}: not used; a local sweep resumes when the same command "
            "runs again (finished trials kept, interrupted ones run again)"
        )
    if job.spec.runtime_ref is not None:
        name = job.spec.runtime_ref.get("name", "?")
        yield f"{TRIAL_SPEC}.spec.runtimeRef ({name}): ignored; the trainer command runs as a local process"
    trainer = job.spec.trainer
    if trainer is None:
        return
    if trainer.image:
        yield f"{TRAINER}.image ({trainer.image}): not pulled; the command runs on this machine"
    if trainer.num_nodes is not None and trainer.num_nodes > 1:
        yield f"{TRAINER}.numNodes={trainer.num_nodes}: runs as ONE local process (no distributed launch)"
    if trainer.resources_per_node is not None:
        yield f"{TRAINER}.resourcesPerNode: not enforced locally"
    if trainer.num_proc_per_node is not None:
        yield f"{TRAINER}.numProcPerNode: not honoured; one process per trial"
    for i, env in enumerate(trainer.env):
        if env.value_from is not None:
            yield f"{TRAINER}.env[{i}].valueFrom ({env.name}): not resolvable locally; variable not set"


def extras(model: BaseModel, prefix: str) -> Iterator[str]:
    if isinstance(model, Metadata | TrainJobMetadata):
        return
    for key in sorted(model.model_extra or {}):
        yield f"{prefix + '.' if prefix else ''}{key}: not honoured by a local sweep, ignored"
    for name, info in type(model).model_fields.items():
        value = getattr(model, name)
        where = f"{prefix + '.' if prefix else ''}{info.alias or name}"
        if isinstance(value, BaseModel):
            yield from extras(value, where)
        elif isinstance(value, list):
            for i, item in enumerate(value):
                if isinstance(item, BaseModel):
                    yield from extras(item, f"{where}[{i}]")


def _collector_notes(collector: Collector) -> Iterator[str]:
    where = "spec.metricsCollectorSpec.collector.kind"
    if collector.kind == "StdOut":
        yield (
            f"{where}=StdOut (Katib's default when none is given): metrics are read with Katib's "
            "filters from the trial's stdout and stderr (trials/<trial>/stdout.log) once it exits; "
            "live progress and pruning need kind Push (the Kubeflow SDK's update_trainjob_status)"
        )
    elif collector.kind == "File" and collector.path is not None:
        yield (
            f"{where}=File ({collector.path}, {collector.format}): each trial writes its own copy, "
            f"trials/<trial>{collector.path} (the path is rewritten in the trainer's command, args and env), "
            "read once the trial exits; live progress and pruning need kind Push"
        )


def _settings_notes(doc: ExperimentDoc) -> Iterator[str]:
    algorithm = doc.spec.algorithm
    if algorithm.algorithm_name == "cmaes":
        for i, setting in enumerate(algorithm.algorithm_settings):
            if setting.name == "restart_strategy" and setting.value.lower() != "none":
                yield (
                    f"spec.algorithm.algorithmSettings[{i}] restart_strategy={setting.value}: "
                    "accepted, ignored (Optuna >= 4.4 no longer restarts CMA-ES)"
                )
