"""Parameter values as numbers or categories, and parameter importance via Optuna's evaluators."""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping
from dataclasses import dataclass

from katib_progress.report._extract import objective_value
from katib_progress.report.model import ExperimentRecord, ParameterSpec, TrialStatus

_log = logging.getLogger(__name__)

EVALUATORS = ("auto", "fanova", "ped-anova", "mean-decrease-impurity", "none")


def _as_float(text: str) -> float | None:
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


@dataclass(frozen=True, slots=True)
class ParamAxis:
    """How one parameter is plotted: numeric (``choices`` empty) or categorical (index into choices);
    ``log_scale`` for a numeric parameter searched on a log scale (logUniform/logNormal, all values > 0)."""

    name: str
    choices: tuple[str, ...] = ()
    log_scale: bool = False

    @property
    def numeric(self) -> bool:
        return not self.choices

    def coordinate(self, text: str | None) -> float | None:
        if text is None:
            return None
        if self.numeric:
            return _as_float(text)
        return float(self.choices.index(text)) if text in self.choices else None


def param_axes(record: ExperimentRecord) -> tuple[ParamAxis, ...]:
    """One axis per parameter seen in the search space or in any trial, in a stable order."""
    specs: dict[str, ParameterSpec] = {p.name: p for p in record.parameters}
    names = list(specs)
    for trial in record.trials:
        names.extend(n for n in trial.params if n not in names)
    axes = []
    for name in dict.fromkeys(names):
        seen = [t.params[name] for t in record.trials if name in t.params]
        spec = specs.get(name)
        numeric_kind = spec is None or spec.kind in ("double", "int")
        if numeric_kind and all(_as_float(v) is not None for v in seen):
            positive = all((_as_float(v) or 0.0) > 0 for v in seen)
            axes.append(ParamAxis(name, log_scale=spec is not None and spec.log and positive))
        else:
            choices = tuple(spec.choices) if spec is not None and spec.choices else ()
            extra = sorted({v for v in seen if v not in choices})
            axes.append(ParamAxis(name, choices=(*choices, *extra)))
    return tuple(axes)


def _choose(evaluator: str) -> tuple[str, object] | None:
    from optuna import importance

    if evaluator == "none":
        return None
    if evaluator == "auto":
        try:
            import sklearn  # noqa: F401  (fANOVA needs scikit-learn)

            evaluator = "fanova"
        except ImportError:
            evaluator = "ped-anova"
    if evaluator == "fanova":
        return evaluator, importance.FanovaImportanceEvaluator(seed=0)
    if evaluator == "ped-anova":
        return evaluator, importance.PedAnovaImportanceEvaluator()
    if evaluator == "mean-decrease-impurity":
        return evaluator, importance.MeanDecreaseImpurityImportanceEvaluator(seed=0)
    raise ValueError(f"importance evaluator must be one of {', '.join(EVALUATORS)}, got {evaluator!r}")


def param_importance(
    record: ExperimentRecord, evaluator: str = "auto"
) -> tuple[str, Mapping[str, float], str]:
    """(evaluator used, {param: importance}, note) from an in-memory Optuna study of the records.

    Only succeeded trials with an objective enter the study (as COMPLETE trials); parameters that
    never vary are left out since no evaluator can attribute anything to them.
    """
    chosen = _choose(evaluator)
    if chosen is None:
        return "none", {}, "parameter importance disabled"
    import optuna
    from optuna.distributions import CategoricalDistribution, FloatDistribution

    name, impl = chosen
    axes = [a for a in param_axes(record) if _varies(record, a)]
    dists: dict[str, optuna.distributions.BaseDistribution] = {}
    for axis in axes:
        if axis.numeric:
            vals = [axis.coordinate(t.params.get(axis.name)) for t in record.trials]
            nums = [v for v in vals if v is not None]
            dists[axis.name] = FloatDistribution(min(nums), max(nums), log=axis.log_scale)
        else:
            dists[axis.name] = CategoricalDistribution(list(axis.choices))
    frozen = []
    for trial in record.trials:
        value = objective_value(trial, record.objective)
        if trial.status is not TrialStatus.SUCCEEDED or value is None:
            continue
        params: dict[str, object] = {}
        for axis in axes:
            text = trial.params.get(axis.name)
            params[axis.name] = axis.coordinate(text) if axis.numeric else text
        if any(v is None for v in params.values()):
            continue
        frozen.append(optuna.trial.create_trial(params=params, distributions=dists, value=value))
    if len(frozen) < 2 or not dists:
        return name, {}, f"needs >= 2 succeeded trials and a varying parameter (have {len(frozen)} trials)"
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(direction=record.objective.direction)
    study.add_trials(frozen)
    try:
        result = optuna.importance.get_param_importances(study, evaluator=impl)  # type: ignore[arg-type]
    except (ValueError, RuntimeError) as exc:
        _log.warning("parameter importance (%s) failed: %s", name, exc)
        return name, {}, f"{name} failed: {exc}"
    return name, dict(result), f"{name} over {len(frozen)} succeeded trials"


def _varies(record: ExperimentRecord, axis: ParamAxis) -> bool:
    seen = {t.params.get(axis.name) for t in record.trials if axis.name in t.params}
    return len(seen) > 1
