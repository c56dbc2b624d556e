"""Load a Katib Experiment YAML for a local sweep: validate, report what cannot be honoured, render trials.

``load_experiment(path)`` returns a frozen :class:`LocalExperiment`. Every problem raises
``ConfigError`` whose ``field`` is the Experiment path, e.g. ``spec.parameters[1].feasibleSpace.min``.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError

from katib_progress.core.errors import ConfigError
from katib_progress.local._model import ExperimentDoc, Metadata, ParameterSpec, TrainJobDoc, TrainJobMetadata

_PLACEHOLDER = re.compile(r"\$\{trialParameters\.([^}]*)\}")
_META_REF = re.compile(
    r"^\$\{trialSpec\.(Name|Namespace|Kind|APIVersion|Labels\[(.+)\]|Annotations\[(.+)\])\}$"
)
_TRIAL_SPEC = "spec.trialTemplate.trialSpec"
_TRAINER = f"{_TRIAL_SPEC}.spec.trainer"
_COUNT_FIELDS = ("maxTrialCount", "parallelTrialCount", "maxFailedTrialCount")


@dataclass(frozen=True, slots=True)
class RenderedTrial:
    """What one trial runs: its argv and the environment the template adds."""

    argv: tuple[str, ...]
    env: Mapping[str, str]


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

        Stock Katib's ``medianstop`` runs as our live ``median`` policy (its ``min_trials_required``
        becomes ``min_trials``); any other algorithm name hands its settings over unchanged.
        """
        early = self.doc.spec.early_stopping
        if early is None:
            return None
        settings = {s.name: s.value for s in early.algorithm_settings}
        if early.algorithm_name == "medianstop":
            out = {"policy": "median"}
            if "min_trials_required" in settings:
                out["min_trials"] = settings.pop("min_trials_required")
            out.update(settings)
            return out
        return settings

    def render(self, trial_name: str, assignments: Mapping[str, str]) -> RenderedTrial:
        """Substitute ``${trialParameters.x}`` as Katib does and return the local command."""
        return _render(self, trial_name, assignments)


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
    doc = _validate(ExperimentDoc, raw, prefix="")
    spec = doc.spec
    _check_parameters(doc)
    _check_objective(doc)
    if spec.max_trial_count is not None and spec.parallel_trial_count > spec.max_trial_count:
        raise ConfigError(
            "spec.parallelTrialCount",
            f"{spec.parallel_trial_count} must be <= spec.maxTrialCount {spec.max_trial_count}",
        )
    if spec.nas_config is not None:
        raise ConfigError("spec.nasConfig", "neural architecture search is not supported by a local sweep")
    template = spec.trial_template
    if template.config_map is not None:
        raise ConfigError("spec.trialTemplate.configMap", "a local sweep needs the trialSpec inline")
    if template.trial_spec is None:
        raise ConfigError(_TRIAL_SPEC, "required: a TrainJob template")
    _check_trial_parameters(doc)
    partial = LocalExperiment(doc=doc, source=source, unsupported=(), fingerprint="")
    sample = {p.name: _sample_value(p) for p in spec.parameters}
    rendered_doc = _render_doc(partial, f"{doc.metadata.name}-sample", sample)
    notes = tuple(_unsupported(doc, rendered_doc))
    return LocalExperiment(doc=doc, source=source, unsupported=notes, fingerprint=_fingerprint(raw))


def _validate(model: type[Any], raw: object, *, prefix: str) -> Any:
    try:
        return model.model_validate(raw)
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = _format_loc(err["loc"], prefix)
        value = err.get("input")
        shown = f" (got {value!r})" if not isinstance(value, dict | list) and err["type"] != "missing" else ""
        raise ConfigError(loc or "experiment", f"{err['msg']}{shown}") from None


def _format_loc(loc: tuple[int | str, ...], prefix: str) -> str:
    out = prefix
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out


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
        if tp.reference not in names and not _META_REF.match(tp.reference):
            raise ConfigError(
                f"{where}.reference",
                f"{tp.reference!r} is neither a parameter name nor a ${{trialSpec.*}} reference",
            )
    used = {m.group(1) for s in _strings(template.trial_spec) for m in _PLACEHOLDER.finditer(s)}
    for name in sorted(used - declared):
        raise ConfigError(
            _TRIAL_SPEC, f"${{trialParameters.{name}}} is not in spec.trialTemplate.trialParameters"
        )
    for i, tp in enumerate(template.trial_parameters):
        if tp.name not in used:
            raise ConfigError(
                f"spec.trialTemplate.trialParameters[{i}].name", f"{tp.name!r} is not used in the trialSpec"
            )


def _strings(node: object) -> Iterator[str]:
    if isinstance(node, str):
        yield node
    elif isinstance(node, Mapping):
        for key, value in node.items():
            yield from _strings(key)
            yield from _strings(value)
    elif isinstance(node, list):
        for item in node:
            yield from _strings(item)


def _substitute(node: object, values: Mapping[str, str]) -> object:
    if isinstance(node, str):
        return _PLACEHOLDER.sub(lambda m: values[m.group(1)], node)
    if isinstance(node, Mapping):
        return {_substitute(k, values): _substitute(v, values) for k, v in node.items()}
    if isinstance(node, list):
        return [_substitute(item, values) for item in node]
    return node


def _sample_value(param: ParameterSpec) -> str:
    space = param.feasible_space
    if space.list_:
        return space.list_[0]
    return space.min or "0"


def _meta_value(ref: str, trial_name: str, namespace: str, trial_meta: Mapping[str, Any]) -> str:
    match = _META_REF.match(ref)
    assert match is not None
    key = match.group(1)
    if key == "Name":
        return trial_name
    if key == "Namespace":
        return namespace
    if key == "Kind":
        return "TrainJob"
    if key == "APIVersion":
        return "trainer.kubeflow.org/v1alpha1"
    if match.group(2) is not None:
        return str(dict(trial_meta.get("labels") or {}).get(match.group(2), ""))
    return str(dict(trial_meta.get("annotations") or {}).get(match.group(3), ""))


def _render_doc(exp: LocalExperiment, trial_name: str, assignments: Mapping[str, str]) -> TrainJobDoc:
    template = exp.doc.spec.trial_template
    trial_spec = template.trial_spec or {}
    meta = trial_spec.get("metadata") if isinstance(trial_spec.get("metadata"), Mapping) else {}
    values: dict[str, str] = {}
    for tp in template.trial_parameters:
        if tp.reference in assignments:
            values[tp.name] = str(assignments[tp.reference])
        elif _META_REF.match(tp.reference):
            values[tp.name] = _meta_value(tp.reference, trial_name, exp.namespace, meta or {})
        else:
            raise ConfigError(f"assignments.{tp.reference}", f"no value for parameter {tp.reference!r}")
    rendered = _substitute(trial_spec, values)
    doc: TrainJobDoc = _validate(TrainJobDoc, rendered, prefix=_TRIAL_SPEC)
    if doc.spec.trainer is None or not doc.spec.trainer.command:
        raise ConfigError(
            f"{_TRAINER}.command",
            "required locally: a runtime's default entrypoint cannot run on this machine",
        )
    return doc


def _render(exp: LocalExperiment, trial_name: str, assignments: Mapping[str, str]) -> RenderedTrial:
    doc = _render_doc(exp, trial_name, assignments)
    trainer = doc.spec.trainer
    assert trainer is not None
    base = exp.source.parent
    argv = tuple(_resolve(tok, base) for tok in (*trainer.command, *trainer.args))
    env = {e.name: e.value for e in trainer.env if e.value is not None}
    return RenderedTrial(argv=argv, env=env)


def _resolve(token: str, base: Path) -> str:
    """Relative paths that name a file beside the Experiment become absolute (documented rule)."""
    if not token or token.startswith("-") or Path(token).is_absolute():
        return token
    candidate = base / token
    return str(candidate) if candidate.is_file() else token


def _unsupported(doc: ExperimentDoc, job: TrainJobDoc) -> Iterator[str]:
    spec = doc.spec
    yield from _extras(doc, "")
    yield from _extras(job, _TRIAL_SPEC)
    if spec.early_stopping is not None and spec.early_stopping.algorithm_name == "medianstop":
        yield (
            "spec.earlyStopping.algorithmName=medianstop: runs as the live katib-progress 'median' policy "
            "(min_trials_required -> min_trials)"
        )
    template = spec.trial_template
    if template.success_condition or template.failure_condition:
        yield (
            "spec.trialTemplate.successCondition/failureCondition: not evaluated; a local trial "
            "completes when its process exits (0 = complete, non-zero = failed)"
        )
    collector = (spec.metrics_collector_spec.collector or {}) if spec.metrics_collector_spec else {}
    kind = collector.get("kind")
    if kind not in (None, "Push"):
        yield (
            f"spec.metricsCollectorSpec.collector.kind={kind}: not used; metrics arrive through the "
            "local TrainJob status endpoint (Push semantics)"
        )
    if job.spec.runtime_ref is not None:
        name = job.spec.runtime_ref.get("name", "?")
        yield f"{_TRIAL_SPEC}.spec.runtimeRef ({name}): ignored; the trainer command runs as a local process"
    trainer = job.spec.trainer
    if trainer is None:
        return
    if trainer.image:
        yield f"{_TRAINER}.image ({trainer.image}): not pulled; the command runs on this machine"
    if trainer.num_nodes is not None and trainer.num_nodes > 1:
        yield f"{_TRAINER}.numNodes={trainer.num_nodes}: runs as ONE local process (no distributed launch)"
    if trainer.resources_per_node is not None:
        yield f"{_TRAINER}.resourcesPerNode: not enforced locally"
    if trainer.num_proc_per_node is not None:
        yield f"{_TRAINER}.numProcPerNode: not honoured; one process per trial"
    for i, env in enumerate(trainer.env):
        if env.value_from is not None:
            yield f"{_TRAINER}.env[{i}].valueFrom ({env.name}): not resolvable locally; variable not set"


def _extras(model: BaseModel, prefix: str) -> Iterator[str]:
    if isinstance(model, Metadata | TrainJobMetadata):
        return
    for key in sorted(model.model_extra or {}):
        yield f"{prefix + '.' if prefix else ''}{key}: not honoured by a local sweep, ignored"
    for name, info in type(model).model_fields.items():
        value = getattr(model, name)
        where = f"{prefix + '.' if prefix else ''}{info.alias or name}"
        if isinstance(value, BaseModel):
            yield from _extras(value, where)
        elif isinstance(value, list):
            for i, item in enumerate(value):
                if isinstance(item, BaseModel):
                    yield from _extras(item, f"{where}[{i}]")


def _fingerprint(raw: Mapping[str, Any]) -> str:
    """Identity of the search: the spec without the counts a user may raise to extend a sweep."""
    spec = {k: v for k, v in dict(raw.get("spec") or {}).items() if k not in _COUNT_FIELDS}
    blob = json.dumps(
        {"metadata": {"name": (raw.get("metadata") or {}).get("name")}, "spec": spec}, sort_keys=True
    )
    return hashlib.sha256(blob.encode()).hexdigest()[:16]
