"""Katib's Experiment admission (mutating defaults + validation) and trial-template substitution.

The API stand-in runs no webhooks, so ``admit`` applies them before the Experiment is stored:
apis/controller/experiments/v1beta1/experiment_defaults.go (SetDefault) and a subset of
webhook/v1beta1/experiment/validator/validator.go (ValidateExperiment on create).
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from tests.katibmodel import katibconfig
from tests.katibmodel._kube import Kube

#: experiments/v1beta1/constants.go
DEFAULT_PARALLEL = 3
TRAINJOB_SUCCESS = 'status.conditions.#(type=="Complete")#|#(status=="True")#'
TRAINJOB_FAILURE = 'status.conditions.#(type=="Failed")#|#(status=="True")#'
TRAINJOB_PRIMARY_POD_LABELS = {
    "jobset.sigs.k8s.io/replicatedjob-name": "node",
    "batch.kubernetes.io/job-completion-index": "0",
}

_PARAM = re.compile(r"\$\{trialParameters\..+?\}")  # consts.TrialTemplateParamReplaceFormatRegex
_META = re.compile(r"\$\{trialSpec\.(.+?)\}")  # consts.TrialTemplateMetaReplaceFormatRegex
_NAME = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?")


#: pkg/webhook/v1beta1/experiment/validation_webhook.go ``Handle``: an Experiment is refused in a namespace
#: without this label, whatever its collector (found by the e2e tier against real Katib)
INJECTION_LABEL = ("katib.kubeflow.org/metrics-collector-injection", "enabled")
#: the stand-in keeps no Namespace objects: the model's namespaces and their labels
NAMESPACE_LABELS: dict[str, dict[str, str]] = {"team-a": dict([INJECTION_LABEL])}


class Rejected(Exception):
    """The admission webhook denied the request (field errors)."""


def check_namespace(experiment: Mapping[str, Any], labels: Mapping[str, Mapping[str, str]]) -> None:
    """validation_webhook.go ``Handle``, before ValidateExperiment: the namespace must carry the label."""
    meta = experiment["metadata"]
    found = labels.get(meta.get("namespace", ""), {})
    if found.get(INJECTION_LABEL[0]) != INJECTION_LABEL[1]:
        raise Rejected(
            f"Cannot create the Experiment {meta['name']!r} in namespace {meta.get('namespace')!r}: "
            f'the namespace lacks label "{INJECTION_LABEL[0]}: {INJECTION_LABEL[1]}"'
        )


def set_defaults(experiment: dict[str, Any]) -> dict[str, Any]:
    """experiment_defaults.go: SetDefault."""
    exp = copy.deepcopy(experiment)
    spec = exp.setdefault("spec", {})
    spec.setdefault("parallelTrialCount", DEFAULT_PARALLEL)
    spec.setdefault("resumePolicy", "Never")
    objective = spec.get("objective")
    if objective is not None:
        strategies = objective.setdefault("metricStrategies", [])
        named = {s.get("name") for s in strategies}
        default = {"minimize": "min", "maximize": "max"}.get(objective.get("type"), "latest")
        if objective.get("objectiveMetricName") not in named:
            strategies.append({"name": objective.get("objectiveMetricName"), "value": default})
        for name in objective.get("additionalMetricNames") or ():
            if name not in named:  # the code uses the objective's direction, not "latest" as its comment says
                strategies.append({"name": name, "value": default})
    template = spec.get("trialTemplate")
    if template and (template.get("trialSpec") or {}).get("kind") == "TrainJob":
        if not template.get("successCondition"):
            template["successCondition"] = TRAINJOB_SUCCESS
        if not template.get("failureCondition"):
            template["failureCondition"] = TRAINJOB_FAILURE
        if not template.get("primaryPodLabels"):
            template["primaryPodLabels"] = dict(TRAINJOB_PRIMARY_POD_LABELS)
    collector_spec = spec.get("metricsCollectorSpec") or {}
    if collector_spec.get("collector") is None:
        collector_spec["collector"] = {"kind": "StdOut"}
    spec["metricsCollectorSpec"] = collector_spec
    for parameter in spec.get("parameters") or ():
        parameter.setdefault("feasibleSpace", {}).setdefault("distribution", "uniform")
    return exp


def validate(kube: Kube, experiment: Mapping[str, Any]) -> list[str]:
    """validator.go: ValidateExperiment (create), the checks a TrainJob Experiment can hit."""
    errors = []
    name = experiment["metadata"]["name"]
    if not _NAME.match(name) or len(name) > 40:
        errors.append("metadata.name: must match ^[a-z]([-a-z0-9]*[a-z0-9])? and be at most 40 characters")
    spec = experiment["spec"]
    max_trials, parallel = spec.get("maxTrialCount"), spec.get("parallelTrialCount")
    max_failed = spec.get("maxFailedTrialCount")
    if max_failed is not None and max_failed < 0:
        errors.append("spec.maxFailedTrialCount: should not be less than 0")
    if max_trials is not None and max_trials <= 0:
        errors.append("spec.maxTrialCount: must be greater than 0")
    if parallel is not None and parallel <= 0:
        errors.append("spec.parallelTrialCount: must be greater than 0")
    if max_failed is not None and max_trials is not None and max_failed > max_trials:
        errors.append("spec.maxFailedTrialCount: should be less than or equal to spec.maxTrialCount")
    if parallel is not None and max_trials is not None and parallel > max_trials:
        errors.append("spec.parallelTrialCount: should be less than or equal to spec.maxTrialCount")
    objective = spec.get("objective") or {}
    if objective.get("type") not in ("minimize", "maximize"):
        errors.append("spec.objective.type: must be minimize or maximize")
    if not objective.get("objectiveMetricName"):
        errors.append("spec.objective.objectiveMetricName: must be specified")
    algorithm = (spec.get("algorithm") or {}).get("algorithmName") or ""
    try:
        katibconfig.suggestion_config(kube, algorithm)
    except katibconfig.KatibConfigError as exc:
        errors.append(
            "spec.algorithm.algorithmName: unable to get Suggestion config data for algorithm "
            f"{algorithm}: {exc}"
        )
    early = spec.get("earlyStopping")
    if early is not None:  # validateEarlyStopping: only that katib-config knows the name
        try:
            katibconfig.early_stopping_config(kube, early.get("algorithmName") or "")
        except katibconfig.KatibConfigError as exc:
            errors.append(f"spec.earlyStopping.algorithmName: unable to get EarlyStopping config data: {exc}")
    errors += _validate_template(spec)
    if not spec.get("parameters"):
        errors.append("spec: spec.parameters or spec.nasConfig must be specified")
    return errors


def _validate_template(spec: Mapping[str, Any]) -> list[str]:
    template = spec.get("trialTemplate")
    if not template:
        return ["spec.trialTemplate: must be specified"]
    errors = []
    if not template.get("primaryContainerName"):
        errors.append("spec.trialTemplate.primaryContainerName: must be specified")
    if not template.get("successCondition") or not template.get("failureCondition"):
        errors.append("spec.trialTemplate: successCondition and failureCondition must be specified")
    if template.get("trialParameters") is None:
        return [*errors, "spec.trialTemplate.trialParameters: must be specified"]
    text = json.dumps(template.get("trialSpec"))
    for p in template["trialParameters"]:
        placeholder = f"${{trialParameters.{p.get('name')}}}"
        if placeholder not in text:
            return [
                *errors,
                f"spec.trialTemplate.trialParameters: {p.get('name')} not found in spec.trialTemplate",
            ]
        text = text.replace(placeholder, "test-value")
    if _PARAM.search(text):
        errors.append(
            "spec.trialTemplate: parameters in spec.trialTemplate not found in spec.trialParameters"
        )
    run = json.loads(text)
    meta = run.get("metadata") or {}
    if meta.get("name") or meta.get("namespace"):
        errors.append(
            "spec.trialTemplate: metadata.name and metadata.namespace in spec.trialTemplate must be omitted"
        )
    if not run.get("apiVersion") or not run.get("kind"):
        errors.append("spec.trialTemplate: APIVersion and Kind in spec.trialTemplate must be specified")
    return errors


def admit(
    kube: Kube,
    experiment: Mapping[str, Any],
    namespace_labels: Mapping[str, Mapping[str, str]] = NAMESPACE_LABELS,
) -> dict[str, Any]:
    """Mutating then validating webhook; raises Rejected listing every field error."""
    defaulted = set_defaults(dict(experiment))
    check_namespace(defaulted, namespace_labels)
    errors = validate(kube, defaulted)
    if errors:
        raise Rejected("; ".join(errors))
    return defaulted


def run_spec(
    experiment: Mapping[str, Any], trial_name: str, namespace: str, assignments: Sequence[Mapping[str, str]]
) -> dict[str, Any]:
    """experiment/manifest/generator.go: GetRunSpecWithHyperParameters / applyParameters -- the
    trialSpec as a JSON string, ``${trialParameters.<name>}`` replaced by the assignment (or trial
    metadata for ``${trialSpec.Name}`` etc.), parsed back, then name and namespace set."""
    template = experiment["spec"]["trialTemplate"]
    trial_spec = template["trialSpec"]
    text = json.dumps(trial_spec)
    values = {a["name"]: a["value"] for a in assignments}
    placeholders: dict[str, str] = {}
    plain = 0
    for p in template.get("trialParameters") or ():
        meta = _META.search(p["reference"])
        if meta is None:
            if p["reference"] not in values:
                raise ValueError(f"unable to find non-meta parameter {p['reference']} in ParameterAssignment")
            placeholders[p["name"]] = values[p["reference"]]
            plain += 1
            continue
        key = meta.group(1)
        meta_values = {
            "Name": trial_name,
            "Namespace": namespace,
            "Kind": trial_spec.get("kind"),
            "APIVersion": trial_spec.get("apiVersion"),
        }
        if key not in meta_values:
            raise ValueError(f"illegal reference of trial metadata: {p['reference']}")
        placeholders[p["name"]] = str(meta_values[key])
    if len(assignments) != plain:
        raise ValueError("unable to find parameter from ParameterAssignment in TrialParameters")
    for name, value in placeholders.items():
        text = text.replace(f"${{trialParameters.{name}}}", value)
    run = json.loads(text)
    run.setdefault("metadata", {})
    run["metadata"]["name"] = trial_name
    run["metadata"]["namespace"] = namespace
    return dict(run)
