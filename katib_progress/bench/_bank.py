"""Load and validate a learning-curve bank (curve-bank.schema.json), as frozen dataclasses.

Any file in the format works, not only ours: the objective metric, its direction and strategy, the
parameter names and types all come from the file. ``.json`` and ``.json.gz`` are accepted.
"""

from __future__ import annotations

import gzip
import json
import math
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from pathlib import Path
from types import MappingProxyType
from typing import Any, Literal

import jsonschema

from katib_progress.core.errors import ConfigError
from katib_progress.core.strategy import Strategy, apply_strategy

Direction = Literal["minimize", "maximize"]

_NON_FINITE = {"nan": math.nan, "+nan": math.nan, "-nan": math.nan, "inf": math.inf, "+inf": math.inf}
_NON_FINITE |= {"-inf": -math.inf, "infinity": math.inf, "-infinity": -math.inf}


@dataclass(frozen=True, slots=True)
class BankParameter:
    """One search-space dimension, in Katib's terms."""

    name: str
    type: Literal["double", "int", "discrete", "categorical"]
    min: float | None = None
    max: float | None = None
    log: bool = False
    values: tuple[str | float, ...] = ()


@dataclass(frozen=True, slots=True)
class BankPoint:
    """One recorded progress snapshot; non-finite metric strings are parsed to float nan/inf."""

    progress: float
    elapsed_s: float
    eta_s: float | None
    metrics: Mapping[str, float] = field(default_factory=lambda: MappingProxyType({}))


@dataclass(frozen=True, slots=True)
class BankTrial:
    index: int
    params: Mapping[str, Any]
    status: Literal["completed", "failed"]
    gpus: float
    points: tuple[BankPoint, ...]

    @property
    def cost(self) -> float:
        """Accelerator-seconds the full run used (its last elapsed time x gpus)."""
        return (self.points[-1].elapsed_s if self.points else 0.0) * self.gpus


@dataclass(frozen=True, slots=True)
class Bank:
    name: str
    description: str
    metric: str
    direction: Direction
    strategy: Strategy
    parameters: tuple[BankParameter, ...]
    trials: tuple[BankTrial, ...]
    best_final: float = field(init=False)
    median: float = field(init=False)
    scale: float = field(init=False)

    def __post_init__(self) -> None:
        finals = self.finals()
        best = self.best_of(finals)
        if best is None:
            raise ConfigError(
                "trials", f"no completed trial of bank {self.name!r} reports a finite {self.metric!r}"
            )
        median = float(statistics.median(finals))
        object.__setattr__(self, "best_final", best)
        object.__setattr__(self, "median", median)
        object.__setattr__(self, "scale", abs(median - best) or 1.0)

    def better(self, a: float, b: float) -> bool:
        """True when objective value ``a`` is strictly better than ``b``."""
        return a < b if self.direction == "minimize" else a > b

    def objective(self, points: Sequence[BankPoint]) -> float | None:
        """A trial's observation from the points it reached, as Katib's metricStrategies compute it.

        Only finite values count (non-finite ones are never written as observation rows); None when
        the trial reported no finite objective at all.
        """
        return apply_strategy((p.metrics.get(self.metric, math.nan) for p in points), self.strategy)

    def final(self, trial: BankTrial) -> float | None:
        """The observation Katib records when ``trial`` runs to its end, or None when it would not
        count (the run failed, or it never reported a finite objective: MetricsUnavailable)."""
        if trial.status != "completed":
            return None
        return self.objective(trial.points)

    def best_of(self, values: Iterable[float | None]) -> float | None:
        """The best of the non-None ``values`` in the objective's direction (None if there are none)."""
        present = [v for v in values if v is not None]
        if not present:
            return None
        return min(present) if self.direction == "minimize" else max(present)

    def finals(self) -> list[float]:
        """Finals of every trial that would count when run to its end."""
        return [v for v in (self.final(t) for t in self.trials) if v is not None]

    def median_final(self) -> float:
        return self.median

    def regret_scale(self) -> float:
        """``|median final - best final|`` of the bank: what "a typical trial instead of the best one"
        costs. Regrets are divided by it, so they compare across banks and metrics (1.0 when every
        final is the same, where any regret is 0 anyway)."""
        return self.scale

    def shortfall(self, found: float | None, best: float | None) -> float:
        """Normalized regret of finding ``found`` when ``best`` was there to be found (never negative;
        0 when there was nothing to find; infinite when something was there and nothing was found)."""
        if best is None:
            return 0.0
        if found is None:
            return math.inf
        gap = found - best if self.direction == "minimize" else best - found
        return max(0.0, gap) / self.regret_scale()


@cache
def _schema() -> dict[str, Any]:
    text = resources.files(__package__).joinpath("curve-bank.schema.json").read_text()
    loaded: dict[str, Any] = json.loads(text)
    return loaded


def _number(value: Any, where: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool):
        raise ConfigError(where, f"expected a number, got {value!r}")
    if isinstance(value, int | float):
        return float(value)
    text = str(value).strip().lower()
    if text in _NON_FINITE:
        return _NON_FINITE[text]
    try:
        return float(text)
    except ValueError:
        raise ConfigError(where, f"metric value {value!r} is neither a number nor nan/inf") from None


def _parameter(i: int, raw: Mapping[str, Any]) -> BankParameter:
    kind = raw["type"]
    if kind in ("double", "int") and ("min" not in raw or "max" not in raw):
        raise ConfigError(f"parameters/{i}", f"{kind} parameter {raw['name']!r} needs min and max")
    if kind in ("discrete", "categorical") and not raw.get("list"):
        raise ConfigError(f"parameters/{i}", f"{kind} parameter {raw['name']!r} needs a list")
    return BankParameter(
        name=raw["name"],
        type=kind,
        min=raw.get("min"),
        max=raw.get("max"),
        log=bool(raw.get("log", False)),
        values=tuple(raw.get("list", ())),
    )


def _points(i: int, raw_points: Sequence[Mapping[str, Any]]) -> tuple[BankPoint, ...]:
    points = []
    last_elapsed = -math.inf
    for j, p in enumerate(raw_points):
        where = f"trials/{i}/points/{j}"
        if p["elapsed_s"] < last_elapsed:
            raise ConfigError(f"{where}/elapsed_s", f"{p['elapsed_s']} goes back in time")
        last_elapsed = p["elapsed_s"]
        metrics = {}
        for name, value in p["metrics"].items():
            number = _number(value, f"{where}/metrics/{name}")
            if number is not None:
                metrics[name] = number
        points.append(
            BankPoint(
                progress=float(p["progress"]),
                elapsed_s=float(p["elapsed_s"]),
                eta_s=None if p.get("eta_s") is None else float(p["eta_s"]),
                metrics=MappingProxyType(metrics),
            )
        )
    return tuple(points)


def _trial(i: int, raw: Mapping[str, Any], names: set[str]) -> BankTrial:
    missing = names - set(raw["params"])
    if missing:
        raise ConfigError(f"trials/{i}/params", f"missing values for {sorted(missing)}")
    return BankTrial(
        index=i,
        params=MappingProxyType(dict(raw["params"])),
        status=raw.get("status", "completed"),
        gpus=float(raw.get("gpus", 1)),
        points=_points(i, raw["points"]),
    )


def parse_bank(document: Mapping[str, Any]) -> Bank:
    """Validate ``document`` against the curve-bank schema and convert it (the input is not modified)."""
    errors = sorted(
        jsonschema.Draft202012Validator(_schema()).iter_errors(document), key=lambda e: list(e.path)
    )
    if errors:
        first = errors[0]
        where = "/".join(str(p) for p in first.absolute_path) or "<root>"
        raise ConfigError(where, first.message)
    objective = document["objective"]
    params = [_parameter(i, raw) for i, raw in enumerate(document["parameters"])]
    names = {p.name for p in params}
    return Bank(
        name=str(document["name"]),
        description=str(document.get("description", "")),
        metric=str(objective["metric"]),
        direction=objective["direction"],
        strategy=objective.get("strategy", "latest"),
        parameters=tuple(params),
        trials=tuple(_trial(i, raw, names) for i, raw in enumerate(document["trials"])),
    )


def load_bank(path: str | Path) -> Bank:
    """Read a ``.json`` or ``.json.gz`` bank file, validate it and return the parsed bank."""
    path = Path(path)
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise ConfigError("bank", f"cannot read {path}: {exc}") from exc
    if raw[:2] == b"\x1f\x8b":
        raw = gzip.decompress(raw)
    try:
        document = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise ConfigError("bank", f"{path} is not JSON: {exc}") from exc
    return parse_bank(document)
