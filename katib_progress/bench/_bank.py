"""Load and validate a learning-curve bank (curve-bank.schema.json), as frozen dataclasses.

Any file in the format works, not only ours: the objective metric, its direction and strategy, the
parameter names and types all come from the file. ``.json`` and ``.json.gz`` are accepted.
"""

from __future__ import annotations

import gzip
import json
import math
from collections.abc import Mapping, Sequence
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

    def better(self, a: float, b: float) -> bool:
        """True when objective value ``a`` is strictly better than ``b``."""
        return a < b if self.direction == "minimize" else a > b

    def objective(self, points: Sequence[BankPoint]) -> float | None:
        """A trial's observation from the points it reached, as Katib's metricStrategies compute it.

        Only finite values count (non-finite ones are never written as observation rows); None when
        the trial reported no finite objective at all.
        """
        return apply_strategy((p.metrics.get(self.metric, math.nan) for p in points), self.strategy)

    def final_objective(self, trial: BankTrial) -> float | None:
        return self.objective(trial.points)

    def true_best(self) -> float:
        """Best observation any trial of the bank reaches when run to its end."""
        finals = [v for v in (self.final_objective(t) for t in self.trials) if v is not None]
        if not finals:
            raise ConfigError("trials", f"no trial of bank {self.name!r} reports a finite {self.metric!r}")
        return min(finals) if self.direction == "minimize" else max(finals)

    def regret(self, found: float | None) -> float:
        """How much worse ``found`` is than the bank's true best (>= 0; inf when nothing was found)."""
        if found is None:
            return math.inf
        best = self.true_best()
        return found - best if self.direction == "minimize" else best - found


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
    metric = str(objective["metric"])
    params = []
    for i, raw in enumerate(document["parameters"]):
        kind = raw["type"]
        if kind in ("double", "int") and ("min" not in raw or "max" not in raw):
            raise ConfigError(f"parameters/{i}", f"{kind} parameter {raw['name']!r} needs min and max")
        if kind in ("discrete", "categorical") and not raw.get("list"):
            raise ConfigError(f"parameters/{i}", f"{kind} parameter {raw['name']!r} needs a list")
        params.append(
            BankParameter(
                name=raw["name"],
                type=kind,
                min=raw.get("min"),
                max=raw.get("max"),
                log=bool(raw.get("log", False)),
                values=tuple(raw.get("list", ())),
            )
        )
    names = {p.name for p in params}
    trials = []
    for i, raw in enumerate(document["trials"]):
        missing = names - set(raw["params"])
        if missing:
            raise ConfigError(f"trials/{i}/params", f"missing values for {sorted(missing)}")
        points = []
        last_elapsed = -math.inf
        for j, p in enumerate(raw["points"]):
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
        trials.append(
            BankTrial(
                index=i,
                params=MappingProxyType(dict(raw["params"])),
                status=raw.get("status", "completed"),
                gpus=float(raw.get("gpus", 1)),
                points=tuple(points),
            )
        )
    bank = Bank(
        name=str(document["name"]),
        description=str(document.get("description", "")),
        metric=metric,
        direction=objective["direction"],
        strategy=objective.get("strategy", "latest"),
        parameters=tuple(params),
        trials=tuple(trials),
    )
    bank.true_best()  # raises ConfigError when no trial reports the objective
    return bank


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
