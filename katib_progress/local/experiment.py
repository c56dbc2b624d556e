"""Load a Katib Experiment YAML for a local sweep: validate, report what cannot be honoured, render trials.

``load_experiment(path)`` returns a frozen :class:`LocalExperiment`. Every problem raises
``ConfigError`` whose ``field`` is the Experiment path, e.g. ``spec.parameters[1].feasibleSpace.min``.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from katib_progress.core.errors import ConfigError
from katib_progress.core.pruning import (
    MEDIANSTOP_ALGORITHMS,
    early_stopping_settings,
    hyperband_pruning_settings,
)
from katib_progress.local._collector import collector_of
from katib_progress.local._model import ExperimentDoc
from katib_progress.local._notices import unsupported
from katib_progress.local._render import (
    META_REF,
    PLACEHOLDER,
    TRIAL_SPEC,
    RenderedTrial,
    render_doc,
    render_trial,
    sample_value,
    strings,
    validate_model,
)
from katib_progress.local._textmetrics import Collector

_COUNT_FIELDS = ("maxTrialCount", "parallelTrialCount", "maxFailedTrialCount")


@dataclass(frozen=True, slots=True)
class LocalExperiment:
    """A validated Experiment plus the notes on what a local run does not honour."""

    doc: ExperimentDoc
    source: Path
    unsupported: tuple[str, ...]
    fingerprint: str

    @property
    def name(self) -> str:
        return self.doc.metadata.name

    @property
    def namespace(self) -> str:
        return self.doc.metadata.namespace

    @property
    def metric_names(self) -> tuple[str, ...]:
        objective = self.doc.spec.objective
        return (objective.objective_metric_name, *objective.additional_metric_names)

    def strategies(self) -> dict[str, str]:
        """Each metric's strategy; Katib's default is ``min``/``max`` after the objective type."""
        objective = self.doc.spec.objective
        default = "min" if objective.type == "minimize" else "max"
        given = {s.name: s.value for s in objective.metric_strategies}
        return {name: given.get(name, default) for name in self.metric_names}

    def pruning_settings(self) -> dict[str, str] | None:
        """``spec.earlyStopping`` settings for the pruning service (None: no pruning).

        Katib's ``medianstop`` (or ``kp-medianstop``) runs as the ``medianstop`` policy, Katib's rule
        live, with its settings (``core.pruning.early_stopping_settings``); any other algorithm name
        hands its settings over unchanged.
        """
        early = self.doc.spec.early_stopping
        if early is None:
            return None
        settings = {s.name: s.value for s in early.algorithm_settings}
        if early.algorithm_name in MEDIANSTOP_ALGORITHMS:
            return early_stopping_settings(early.algorithm_name, settings)
        # Katib's hyperband algorithm: the hyperband policy with its eta and r_l mapped
        algorithm = self.doc.spec.algorithm
        given = {s.name: s.value for s in algorithm.algorithm_settings}
        return hyperband_pruning_settings(algorithm.algorithm_name, given, settings)

    @property
    def collector(self) -> Collector:
        """The metrics collector after Katib's defaulting (none given: StdOut)."""
        return collector_of(self.doc)

    def render(self, trial_name: str, assignments: Mapping[str, str]) -> RenderedTrial:
        """Substitute ``${trialParameters.x}`` as Katib does and return the local command."""
        return render_trial(self, trial_name, assignments)


def load_experiment(path: str | Path) -> LocalExperiment:
    source = Path(path)
    try:
        text = source.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError("experiment", f"cannot read {source}: {exc.strerror}") from None
    try:
        docs = [d for d in yaml.safe_load_all(text) if d is not None]
    except yaml.YAMLError as exc:
        raise ConfigError("experiment", f"{source} is not valid YAML: {exc}") from None
    experiments = [d for d in docs if isinstance(d, dict) and d.get("kind") == "Experiment"]
    if len(experiments) != 1:
        raise ConfigError("kind", f"{source} must hold exactly one Experiment, found {len(experiments)}")
    return parse_experiment(experiments[0], source=source.resolve())


def parse_experiment(raw: Mapping[str, Any], *, source: Path) -> LocalExperiment:
    """Validate an Experiment object (already loaded from YAML/JSON)."""
    _check_scope(raw)
    doc = validate_model(ExperimentDoc, raw, prefix="")
    spec = doc.spec
    _check_parameters(doc)
    _check_objective(doc)
    if spec.max_trial_count is not None and spec.parallel_trial_count > spec.max_trial_count:
        raise ConfigError(
            "spec.parallelTrialCount",
            f"{spec.parallel_trial_count} must be <= spec.maxTrialCount {spec.max_trial_count}",
        )
    template = spec.trial_template
    if template.config_map is not None:
        raise ConfigError("spec.trialTemplate.configMap", "a local sweep needs the trialSpec inline")
    if template.trial_spec is None:
        raise ConfigError(TRIAL_SPEC, "required: a TrainJob template")
    _check_trial_parameters(doc)
    collector_of(doc)
    partial = LocalExperiment(doc=doc, source=source, unsupported=(), fingerprint="")
    sample = {p.name: sample_value(p) for p in spec.parameters}
    rendered_doc = render_doc(partial, f"{doc.metadata.name}-sample", sample)
    notes = tuple(unsupported(doc, rendered_doc))
    return LocalExperiment(doc=doc, source=source, unsupported=notes, fingerprint=_fingerprint(raw))


_NAS = (
    "neural architecture search (NAS) is not supported by a local sweep: it needs Katib's NAS suggestion "
    "services (ENAS, DARTS) and their trial images on a cluster"
)
_TRAINJOB = ("trainer.kubeflow.org/v1alpha1", "TrainJob")
_CONTAINER_JOBS = {"Job", "PyTorchJob", "TFJob", "MPIJob", "XGBoostJob", "PaddleJob", "JAXJob"}


def _check_scope(raw: Mapping[str, Any]) -> None:
    """What a local sweep cannot run, said before any field-level validation (whose errors would
    point at an unrelated field)."""
    spec = raw.get("spec")
    if not isinstance(spec, Mapping):
        return
    if spec.get("nasConfig") is not None:
        raise ConfigError("spec.nasConfig", _NAS)
    template = spec.get("trialTemplate")
    if not isinstance(template, Mapping):
        return
    if template.get("configMap") is not None:
        raise ConfigError(
            "spec.trialTemplate.configMap", "a local sweep needs the trialSpec inline (no ConfigMap to read)"
        )
    trial_spec = template.get("trialSpec")
    if not isinstance(trial_spec, Mapping):
        return
    kind = (trial_spec.get("apiVersion"), trial_spec.get("kind"))
    if kind == _TRAINJOB:
        return
    got = f"{kind[0]} {kind[1]}"
    if kind[1] in _CONTAINER_JOBS:
        hint = (
            "put the primary container's command, args and env under spec.trainer of a TrainJob "
            "(examples/local/katib-examples/ has Katib's examples converted this way)"
        )
    else:
        hint = "a local sweep runs each trial as one process; pipelines and other kinds run only on a cluster"
    raise ConfigError(
        f"{TRIAL_SPEC}.kind", f"a local sweep runs TrainJob trials ({_TRAINJOB[0]}), got {got}: {hint}"
    )


def _number(field: str, text: str | None, *, integer: bool) -> float:
    if text is None:
        raise ConfigError(field, "required")
    try:
        value = float(int(text)) if integer else float(text)
    except ValueError:
        kind = "an integer" if integer else "a number"
        raise ConfigError(field, f"must be {kind}, got {text!r}") from None
    if not math.isfinite(value):
        raise ConfigError(field, f"must be finite, got {text!r}")
    return value


def _check_parameters(doc: ExperimentDoc) -> None:
    seen: set[str] = set()
    for i, param in enumerate(doc.spec.parameters):
        where = f"spec.parameters[{i}]"
        if param.name in seen:
            raise ConfigError(f"{where}.name", f"duplicate parameter name {param.name!r}")
        seen.add(param.name)
        space = param.feasible_space
        if param.parameter_type in ("double", "int"):
            integer = param.parameter_type == "int"
            low = _number(f"{where}.feasibleSpace.min", space.min, integer=integer)
            high = _number(f"{where}.feasibleSpace.max", space.max, integer=integer)
            if low > high:
                raise ConfigError(f"{where}.feasibleSpace.min", f"{space.min} must be <= max {space.max}")
            if (
                space.step is not None
                and _number(f"{where}.feasibleSpace.step", space.step, integer=False) <= 0
            ):
                raise ConfigError(f"{where}.feasibleSpace.step", f"must be > 0, got {space.step!r}")
            if space.distribution in ("logUniform", "logNormal") and low <= 0:
                raise ConfigError(f"{where}.feasibleSpace.min", f"must be > 0 for {space.distribution}")
            if space.list_:
                raise ConfigError(f"{where}.feasibleSpace.list", f"not allowed for {param.parameter_type}")
        else:
            if not space.list_:
                raise ConfigError(f"{where}.feasibleSpace.list", f"required for {param.parameter_type}")
            if param.parameter_type == "discrete":
                for j, item in enumerate(space.list_):
                    _number(f"{where}.feasibleSpace.list[{j}]", item, integer=False)


def _check_objective(doc: ExperimentDoc) -> None:
    objective = doc.spec.objective
    if objective.objective_metric_name in objective.additional_metric_names:
        raise ConfigError(
            "spec.objective.additionalMetricNames",
            f"must not contain the objective metric {objective.objective_metric_name!r}",
        )
    known = {objective.objective_metric_name, *objective.additional_metric_names}
    for i, strategy in enumerate(objective.metric_strategies):
        if strategy.name not in known:
            raise ConfigError(
                f"spec.objective.metricStrategies[{i}].name", f"unknown metric {strategy.name!r}"
            )


def _check_trial_parameters(doc: ExperimentDoc) -> None:
    template = doc.spec.trial_template
    names = {p.name for p in doc.spec.parameters}
    declared: set[str] = set()
    for i, tp in enumerate(template.trial_parameters):
        where = f"spec.trialTemplate.trialParameters[{i}]"
        if tp.name in declared:
            raise ConfigError(f"{where}.name", f"duplicate trial parameter {tp.name!r}")
        declared.add(tp.name)
        if tp.reference not in names and not META_REF.match(tp.reference):
            raise ConfigError(
                f"{where}.reference",
                f"{tp.reference!r} is neither a parameter name nor a ${{trialSpec.*}} reference",
            )
    used = {m.group(1) for s in strings(template.trial_spec) for m in PLACEHOLDER.finditer(s)}
    for name in sorted(used - declared):
        raise ConfigError(
            TRIAL_SPEC, f"${{trialParameters.{name}}} is not in spec.trialTemplate.trialParameters"
        )
    for i, tp in enumerate(template.trial_parameters):
        if tp.name not in used:
            raise ConfigError(
                f"spec.trialTemplate.trialParameters[{i}].name", f"{tp.name!r} is not used in the trialSpec"
            )


def _fingerprint(raw: Mapping[str, Any]) -> str:
    """Identity of the search: the spec without the counts a user may raise to extend a sweep."""
    spec = {k: v for k, v in dict(raw.get("spec") or {}).items() if k not in _COUNT_FIELDS}
    blob = json.dumps(
        {"metadata": {"name": (raw.get("metadata") or {}).get("name")}, "spec": spec}, sort_keys=True
    )
    return hashlib.sha256(blob.encode()).hexdigest()[:16]
