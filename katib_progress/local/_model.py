"""Pydantic models of a Katib ``Experiment`` (kubeflow.org/v1beta1) whose trials are TrainJobs.

Only the fields a local sweep reads are modelled; unknown fields are tolerated (``extra="allow"``)
and reported by :mod:`katib_progress.local.experiment` when they change what a cluster would do.
YAML numbers are accepted where Katib wants strings (``min: 0.01``) and converted to strings.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field


def _to_str(value: object) -> object:
    if isinstance(value, bool):
        return value
    if isinstance(value, int | float):
        return str(value)
    return value


Str = Annotated[str, BeforeValidator(_to_str)]


class _Model(BaseModel):
    model_config = ConfigDict(extra="allow", frozen=True, populate_by_name=True)


class FeasibleSpace(_Model):
    min: Str | None = None
    max: Str | None = None
    step: Str | None = None
    list_: list[Str] | None = Field(default=None, alias="list")
    distribution: Literal["uniform", "logUniform", "normal", "logNormal"] | None = None


class ParameterSpec(_Model):
    name: str = Field(min_length=1)
    parameter_type: Literal["double", "int", "discrete", "categorical"] = Field(alias="parameterType")
    feasible_space: FeasibleSpace = Field(alias="feasibleSpace")


class MetricStrategy(_Model):
    name: str = Field(min_length=1)
    value: Literal["min", "max", "latest"]


class Objective(_Model):
    type: Literal["minimize", "maximize"]
    goal: float | None = None
    objective_metric_name: str = Field(alias="objectiveMetricName", min_length=1)
    additional_metric_names: list[str] = Field(default_factory=list, alias="additionalMetricNames")
    metric_strategies: list[MetricStrategy] = Field(default_factory=list, alias="metricStrategies")


class Setting(_Model):
    name: str = Field(min_length=1)
    value: Str = ""


class Algorithm(_Model):
    algorithm_name: str = Field(alias="algorithmName", min_length=1)
    algorithm_settings: list[Setting] = Field(default_factory=list, alias="algorithmSettings")


class EarlyStopping(_Model):
    algorithm_name: str = Field(alias="algorithmName", min_length=1)
    algorithm_settings: list[Setting] = Field(default_factory=list, alias="algorithmSettings")


class TrialParameter(_Model):
    name: str = Field(min_length=1)
    description: str | None = None
    reference: str = Field(min_length=1)


class TrialTemplate(_Model):
    primary_container_name: str | None = Field(default=None, alias="primaryContainerName")
    trial_parameters: list[TrialParameter] = Field(default_factory=list, alias="trialParameters")
    trial_spec: dict[str, Any] | None = Field(default=None, alias="trialSpec")
    config_map: dict[str, Any] | None = Field(default=None, alias="configMap")
    retain: bool | None = None
    success_condition: str | None = Field(default=None, alias="successCondition")
    failure_condition: str | None = Field(default=None, alias="failureCondition")


class MetricsCollectorSpec(_Model):
    collector: dict[str, Any] | None = None
    source: dict[str, Any] | None = None


class ExperimentSpec(_Model):
    parameters: list[ParameterSpec] = Field(min_length=1)
    objective: Objective
    algorithm: Algorithm
    early_stopping: EarlyStopping | None = Field(default=None, alias="earlyStopping")
    trial_template: TrialTemplate = Field(alias="trialTemplate")
    parallel_trial_count: int = Field(default=3, alias="parallelTrialCount", ge=1)
    max_trial_count: int | None = Field(default=None, alias="maxTrialCount", ge=1)
    max_failed_trial_count: int | None = Field(default=None, alias="maxFailedTrialCount", ge=0)
    resume_policy: str | None = Field(default=None, alias="resumePolicy")
    metrics_collector_spec: MetricsCollectorSpec | None = Field(default=None, alias="metricsCollectorSpec")
    nas_config: dict[str, Any] | None = Field(default=None, alias="nasConfig")


class Metadata(_Model):
    name: str = Field(min_length=1, max_length=63, pattern=r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
    namespace: str = "default"
    labels: dict[str, str] = Field(default_factory=dict)
    annotations: dict[str, str] = Field(default_factory=dict)


class ExperimentDoc(_Model):
    api_version: Literal["kubeflow.org/v1beta1"] = Field(alias="apiVersion")
    kind: Literal["Experiment"]
    metadata: Metadata
    spec: ExperimentSpec


# --- The TrainJob trial template (trainer.kubeflow.org/v1alpha1) ---------------------------------


class EnvVar(_Model):
    name: str = Field(min_length=1)
    value: Str | None = None
    value_from: dict[str, Any] | None = Field(default=None, alias="valueFrom")


class Trainer(_Model):
    image: str | None = None
    command: list[Str] = Field(default_factory=list)
    args: list[Str] = Field(default_factory=list)
    env: list[EnvVar] = Field(default_factory=list)
    num_nodes: int | None = Field(default=None, alias="numNodes", ge=1)
    resources_per_node: dict[str, Any] | None = Field(default=None, alias="resourcesPerNode")
    num_proc_per_node: Any = Field(default=None, alias="numProcPerNode")


class TrainJobSpec(_Model):
    runtime_ref: dict[str, Any] | None = Field(default=None, alias="runtimeRef")
    trainer: Trainer | None = None
    suspend: bool | None = None


class TrainJobMetadata(_Model):
    name: str | None = None
    namespace: str | None = None
    labels: dict[str, str] = Field(default_factory=dict)
    annotations: dict[str, str] = Field(default_factory=dict)


class TrainJobDoc(_Model):
    api_version: Literal["trainer.kubeflow.org/v1alpha1"] = Field(alias="apiVersion")
    kind: Literal["TrainJob"]
    metadata: TrainJobMetadata = Field(default_factory=TrainJobMetadata)
    spec: TrainJobSpec
