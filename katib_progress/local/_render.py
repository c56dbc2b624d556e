"""Render a trial from the Experiment's TrainJob template: ``${trialParameters.x}`` substitution as
Katib does, the local command and environment, and pydantic validation with Experiment-path errors."""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from katib_progress.core.errors import ConfigError
from katib_progress.local._model import ParameterSpec, TrainJobDoc

if TYPE_CHECKING:
    from katib_progress.local.experiment import LocalExperiment

PLACEHOLDER = re.compile(r"\$\{trialParameters\.([^}]*)\}")
META_REF = re.compile(
    r"^\$\{trialSpec\.(Name|Namespace|Kind|APIVersion|Labels\[(.+)\]|Annotations\[(.+)\])\}$"
)
TRIAL_SPEC = "spec.trialTemplate.trialSpec"
TRAINER = f"{TRIAL_SPEC}.spec.trainer"


@dataclass(frozen=True, slots=True)
class RenderedTrial:
    """What one trial runs: its argv and the environment the template adds."""

    argv: tuple[str, ...]
    env: Mapping[str, str]


def validate_model(model: type[Any], raw: object, *, prefix: str) -> Any:
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


def strings(node: object) -> Iterator[str]:
    if isinstance(node, str):
        yield node
    elif isinstance(node, Mapping):
        for key, value in node.items():
            yield from strings(key)
            yield from strings(value)
    elif isinstance(node, list):
        for item in node:
            yield from strings(item)


def substitute(node: object, values: Mapping[str, str]) -> object:
    if isinstance(node, str):
        return PLACEHOLDER.sub(lambda m: values[m.group(1)], node)
    if isinstance(node, Mapping):
        return {substitute(k, values): substitute(v, values) for k, v in node.items()}
    if isinstance(node, list):
        return [substitute(item, values) for item in node]
    return node


def sample_value(param: ParameterSpec) -> str:
    space = param.feasible_space
    if space.list_:
        return space.list_[0]
    return space.min or "0"


def meta_value(ref: str, trial_name: str, namespace: str, trial_meta: Mapping[str, Any]) -> str:
    match = META_REF.match(ref)
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


def render_doc(exp: LocalExperiment, trial_name: str, assignments: Mapping[str, str]) -> TrainJobDoc:
    template = exp.doc.spec.trial_template
    trial_spec = template.trial_spec or {}
    meta = trial_spec.get("metadata") if isinstance(trial_spec.get("metadata"), Mapping) else {}
    values: dict[str, str] = {}
    for tp in template.trial_parameters:
        if tp.reference in assignments:
            values[tp.name] = str(assignments[tp.reference])
        elif META_REF.match(tp.reference):
            values[tp.name] = meta_value(tp.reference, trial_name, exp.namespace, meta or {})
        else:
            raise ConfigError(f"assignments.{tp.reference}", f"no value for parameter {tp.reference!r}")
    rendered = substitute(trial_spec, values)
    doc: TrainJobDoc = validate_model(TrainJobDoc, rendered, prefix=TRIAL_SPEC)
    if doc.spec.trainer is None or not doc.spec.trainer.command:
        raise ConfigError(
            f"{TRAINER}.command",
            "required locally: a runtime's default entrypoint cannot run on this machine",
        )
    return doc


def render_trial(exp: LocalExperiment, trial_name: str, assignments: Mapping[str, str]) -> RenderedTrial:
    doc = render_doc(exp, trial_name, assignments)
    trainer = doc.spec.trainer
    assert trainer is not None
    base = exp.source.parent
    argv = tuple(resolve_path(tok, base) for tok in (*trainer.command, *trainer.args))
    env = {e.name: e.value for e in trainer.env if e.value is not None}
    return RenderedTrial(argv=argv, env=env)


def resolve_path(token: str, base: Path) -> str:
    """Relative paths that name a file beside the Experiment become absolute (documented rule)."""
    if not token or token.startswith("-") or Path(token).is_absolute():
        return token
    candidate = base / token
    return str(candidate) if candidate.is_file() else token
