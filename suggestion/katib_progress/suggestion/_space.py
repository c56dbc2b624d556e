"""Katib search space -> Optuna distributions, value strings <-> typed values, grid combinations.

Every problem is collected (not only the first) so the user fixes an Experiment in one go.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from optuna.distributions import (
    BaseDistribution,
    CategoricalDistribution,
    FloatDistribution,
    IntDistribution,
)

from katib_progress.suggestion._domain import Distribution, InvalidExperimentError, ParamSpec, ParamType

_log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Param:
    """A checked parameter: its spec and the Optuna distribution serving it."""

    spec: ParamSpec
    distribution: BaseDistribution

    @property
    def name(self) -> str:
        return self.spec.name

    def parse(self, text: str) -> Any:
        """A Katib assignment string -> the value Optuna records (raises ValueError if outside)."""
        dist = self.distribution
        value: Any
        if isinstance(dist, CategoricalDistribution):
            value = text
        elif isinstance(dist, IntDistribution):
            number = float(text)
            if not number.is_integer():
                raise ValueError(f"parameter {self.name!r}: {text!r} is not an integer")
            value = int(number)
        else:
            value = float(text)
        if not dist._contains(dist.to_internal_repr(value)):
            raise ValueError(f"parameter {self.name!r}: {text!r} is outside its feasible space")
        return value

    def format(self, value: Any) -> str:
        if isinstance(self.distribution, IntDistribution):
            return str(int(value))
        if isinstance(self.distribution, FloatDistribution):
            return repr(float(value))
        return str(value)


@dataclass(frozen=True, slots=True)
class Space:
    params: tuple[Param, ...]

    def distributions(self) -> dict[str, BaseDistribution]:
        return {p.name: p.distribution for p in self.params}

    def by_name(self) -> Mapping[str, Param]:
        return {p.name: p for p in self.params}


def _number(field: str, text: str, problems: list[str], *, integer: bool) -> float | None:
    if text == "":
        problems.append(f"{field}: required")
        return None
    try:
        value = float(text)
    except ValueError:
        problems.append(f"{field}={text!r}: not a number")
        return None
    if not math.isfinite(value):
        problems.append(f"{field}={text!r}: must be finite")
        return None
    if integer and not value.is_integer():
        problems.append(f"{field}={text!r}: must be an integer")
        return None
    return value


#: Katib's clamps for a ``logUniform`` min <= 0 (pkg/suggestion/v1beta1/optuna/base_service.py,
#: ``BaseOptunaService._get_optuna_search_space``: ``max(1e-10, float(min))`` / ``max(1, int(min))``).
LOG_MIN_DOUBLE = 1e-10
LOG_MIN_INT = 1


def _list(spec: ParamSpec, kind: ParamType, where: str, problems: list[str]) -> BaseDistribution | None:
    if not spec.values:
        problems.append(f"{where}.list: empty; a {kind.value} parameter needs at least one value")
        return None
    # Katib serves discrete exactly like categorical: a list of strings, never parsed as numbers
    # (internal/search_space.py ``HyperParameter.discrete``; optuna/base_service.py
    # ``_get_optuna_search_space``: CATEGORICAL and DISCRETE -> CategoricalDistribution(list)).
    if kind is ParamType.DISCRETE and not all(_is_number(v) for v in spec.values):
        _log.warning(
            "parameter %r: discrete list %s holds non-numeric values; served as a categorical list, "
            "as Katib's Optuna service does (it never checks discrete values are numbers)",
            spec.name,
            list(spec.values),
        )
    return CategoricalDistribution(list(dict.fromkeys(spec.values)))


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _check(spec: ParamSpec, problems: list[str], *, grid: bool = False) -> BaseDistribution | None:
    """One parameter's Optuna distribution, as Katib's Optuna service builds it.

    ``grid``: the distribution must hold Katib's grid values, which ignore ``logUniform``
    (internal/search_space.py ``convert_to_combinations``: ``range(min, max + 1, step)`` for ints,
    ``np.arange(min, max + step, step)`` for doubles), so it is the linear one with the step.
    """
    where = f"parameters[{spec.name}].feasibleSpace"
    if spec.type is None:
        problems.append(
            f"parameters[{spec.name}].parameterType: unknown; allowed: double, int, discrete, categorical"
        )
        return None
    if spec.type in (ParamType.CATEGORICAL, ParamType.DISCRETE):
        return _list(spec, spec.type, where, problems)
    integer = spec.type is ParamType.INT
    before = len(problems)
    low = _number(f"{where}.min", spec.min, problems, integer=integer)
    high = _number(f"{where}.max", spec.max, problems, integer=integer)
    step = _number(f"{where}.step", spec.step, problems, integer=integer) if spec.step else None
    dist = spec.distribution or Distribution.UNIFORM
    if dist in (Distribution.NORMAL, Distribution.LOG_NORMAL):
        # base_service.py ``_get_optuna_search_space``: "supports only UNIFORM and LOG_UNIFORM"
        problems.append(f"{where}.distribution={dist.value!r}: not supported; allowed: uniform, logUniform")
    if low is not None and high is not None and low > high:
        problems.append(f"{where}: min {spec.min} is greater than max {spec.max}")
    if step is not None and step <= 0:
        problems.append(f"{where}.step={spec.step!r}: must be > 0")
    log = dist is Distribution.LOG_UNIFORM and not grid
    if dist is Distribution.LOG_UNIFORM and grid:
        _log.warning(
            "parameter %r: grid ignores logUniform; its values are min, min+step, ..., max on a linear "
            "scale, as Katib's grid (internal/search_space.py convert_to_combinations) makes them",
            spec.name,
        )
    if log and low is not None and high is not None:
        floor = LOG_MIN_INT if integer else LOG_MIN_DOUBLE
        if high < floor:
            problems.append(f"{where}.max={spec.max!r}: logUniform needs max >= {floor!r}")
        elif low < floor:
            _log.warning(
                "parameter %r: logUniform min %s is raised to %r, as Katib's Optuna service does "
                "(it clamps a logUniform min to 1e-10 for doubles, 1 for ints)",
                spec.name,
                spec.min,
                floor,
            )
            low = floor
    if log and step is not None and not (integer and step == 1):
        _log.warning(
            "parameter %r: logUniform ignores step %s, as Katib's Optuna service does (it builds a "
            "logUniform %s without a step)",
            spec.name,
            spec.step,
            "int with step 1" if integer else "double",
        )
    if len(problems) > before or low is None or high is None:
        return None
    if integer:
        return IntDistribution(int(low), int(high), log=log, step=1 if log else int(step or 1))
    return FloatDistribution(low, high, log=log, step=None if log else step)


def build_space(params: Sequence[ParamSpec], *, grid: bool = False) -> Space:
    """Check every parameter; raise ``InvalidExperimentError`` with all problems found.

    ``grid``: distributions hold Katib's grid values (see ``_check``)."""
    problems: list[str] = []
    checked: list[Param] = []
    seen: set[str] = set()
    if not params:
        problems.append("parameters: empty; at least one parameter is needed")
    for spec in params:
        if not spec.name:
            problems.append("parameters[].name: empty")
            continue
        if spec.name in seen:
            problems.append(f"parameters[{spec.name}].name: declared twice")
            continue
        seen.add(spec.name)
        dist = _check(spec, problems, grid=grid)
        if dist is not None:
            checked.append(Param(spec, dist))
    if problems:
        raise InvalidExperimentError(problems)
    return Space(tuple(checked))
