"""Katib search space -> Optuna distributions, value strings <-> typed values, grid combinations.

Every problem is collected (not only the first) so the user fixes an Experiment in one go.
"""

from __future__ import annotations

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


def _check(spec: ParamSpec, problems: list[str]) -> BaseDistribution | None:
    where = f"parameters[{spec.name}].feasibleSpace"
    if spec.type is None:
        problems.append(
            f"parameters[{spec.name}].parameterType: unknown; allowed: double, int, discrete, categorical"
        )
        return None
    if spec.type in (ParamType.CATEGORICAL, ParamType.DISCRETE):
        if not spec.values:
            problems.append(f"{where}.list: empty; a {spec.type.value} parameter needs at least one value")
            return None
        if spec.type is ParamType.DISCRETE:
            for value in spec.values:
                _number(f"{where}.list[{value!r}]", value, problems, integer=False)
        return CategoricalDistribution(list(dict.fromkeys(spec.values)))
    integer = spec.type is ParamType.INT
    before = len(problems)
    low = _number(f"{where}.min", spec.min, problems, integer=integer)
    high = _number(f"{where}.max", spec.max, problems, integer=integer)
    step = _number(f"{where}.step", spec.step, problems, integer=integer) if spec.step else None
    dist = spec.distribution or Distribution.UNIFORM
    if dist in (Distribution.NORMAL, Distribution.LOG_NORMAL):
        problems.append(f"{where}.distribution={dist.value!r}: not supported; allowed: uniform, logUniform")
    if low is not None and high is not None and low > high:
        problems.append(f"{where}: min {spec.min} is greater than max {spec.max}")
    if step is not None and step <= 0:
        problems.append(f"{where}.step={spec.step!r}: must be > 0")
    log = dist is Distribution.LOG_UNIFORM
    if log and low is not None and low <= 0:
        problems.append(f"{where}.min={spec.min!r}: logUniform needs min > 0")
    if log and step is not None and not (integer and step == 1):
        problems.append(f"{where}.step={spec.step!r}: logUniform cannot be combined with a step")
    if len(problems) > before or low is None or high is None:
        return None
    if integer:
        return IntDistribution(int(low), int(high), log=log, step=int(step or 1))
    return FloatDistribution(low, high, log=log, step=None if log else step)


def build_space(params: Sequence[ParamSpec]) -> Space:
    """Check every parameter; raise ``InvalidExperimentError`` with all problems found."""
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
        dist = _check(spec, problems)
        if dist is not None:
            checked.append(Param(spec, dist))
    if problems:
        raise InvalidExperimentError(problems)
    return Space(tuple(checked))
