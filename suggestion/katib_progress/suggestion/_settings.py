"""Typed algorithm settings: one pydantic model per algorithm name.

Setting names and meanings follow Katib's stock Optuna suggestion image (``tpe``,
``multivariate-tpe``, ``cmaes``, ``random``, ``grid``); ``gp``, ``qmc`` and ``tuned-tpe`` are
additions; Katib's ``sobol``, ``bayesianoptimization`` and ``hyperband`` are served by them
(docs/suggestion.md). Values arrive as strings (Katib's ``algorithmSettings``); pydantic coerces
them.
"""

from __future__ import annotations

import importlib.util
import logging
from collections.abc import Iterable, Mapping
from typing import Annotated, Any, ClassVar, Literal

import pydantic
from pydantic import BaseModel, ConfigDict, Field, field_validator

from katib_progress.core.names import ALGORITHM_PREFIX
from katib_progress.core.pruning import hyperband_eta
from katib_progress.suggestion._domain import InvalidExperimentError

_log = logging.getLogger(__name__)

_SEED_MAX = 2**32 - 1
Seed = Annotated[int, Field(ge=0, le=_SEED_MAX)]


class _Settings(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=False)
    #: Python module the algorithm needs beyond the base install (None: always available).
    requires: ClassVar[str | None] = None
    #: Smallest number of numeric (double/int) parameters the algorithm works with.
    min_numeric_params: ClassVar[int] = 0

    random_state: Seed | None = None


class _KatibTPESettings(_Settings):
    """Katib's TPE settings (optuna/service.py ``_validate_tpe_setting``: ``n_startup_trials``,
    ``n_ei_candidates``, ``random_state``, each >= 0) with Optuna 3.3's ``TPESampler`` defaults, as
    Katib's image leaves them (10 startup trials, 24 candidates)."""

    #: Whether the sampler is the multivariate TPE (Katib's ``multivariate-tpe``) or the independent one.
    multivariate_tpe: ClassVar[bool] = False

    n_startup_trials: Annotated[int, Field(ge=0)] = 10
    #: Katib accepts 0 (optuna/service.py ``_validate_tpe_setting``: ">= 0"); Optuna then fails every
    #: ask after the startup trials, so 0 samples with one candidate (``effective_ei_candidates``).
    n_ei_candidates: Annotated[int, Field(ge=0)] = 24
    #: TPESampler's ``prior_weight`` (not a Katib setting): Optuna's 1.0.
    prior_weight: ClassVar[float] = 1.0

    @property
    def effective_ei_candidates(self) -> int:
        return max(1, self.n_ei_candidates)


class TPESettings(_KatibTPESettings):
    """``tpe``: Katib's own, Optuna 3.3's independent TPE with constant liar (optuna/service.py
    ``OptimizerConfiguration``: ``tpe`` sets ``constant_liar`` and leaves ``multivariate`` off),
    reimplemented on this Optuna (``_katib_tpe.KatibTPESampler``): for the same ``random_state`` it
    suggests what Katib's service suggests (docs/suggestion.md, "TPE defaults")."""


class MultivariateTPESettings(_KatibTPESettings):
    """``multivariate-tpe``: Katib's own, Optuna 3.3's multivariate TPE (``_katib_tpe``), with
    Katib's defaults (Optuna 3.3's ``TPESampler``: 24 candidates, prior weight 1.0): for the same
    ``random_state`` it suggests what Katib's service suggests (docs/suggestion.md, "TPE defaults").
    ``multivariate`` is accepted as ``true`` only (it was this service's setting)."""

    multivariate_tpe: ClassVar[bool] = True
    multivariate: Literal[True] = True


class TunedTPESettings(_Settings):
    """``tuned-tpe``: not a Katib name. This Optuna's ``TPESampler`` with the defaults an earlier
    measurement chose on three benchmark functions (multivariate, 64 candidates; constant liar on).
    It was ``tpe``'s until Katib's ``tpe`` was served as Katib's; on functions it was not chosen on it
    was worse than Katib's ``tpe`` (docs/suggestion.md, "TPE defaults"), so it is a default of nothing."""

    n_startup_trials: Annotated[int, Field(ge=0)] = 10
    n_ei_candidates: Annotated[int, Field(ge=0)] = 64
    multivariate: bool = True
    prior_weight: ClassVar[float] = 1.0

    @property
    def effective_ei_candidates(self) -> int:
        return max(1, self.n_ei_candidates)


class CmaEsSettings(_Settings):
    """``cmaes``: Optuna's CmaEsSampler.

    ``restart_strategy`` is accepted for compatibility with Katib's image; Optuna >= 4.4 no longer
    restarts CMA-ES itself, so only ``none`` changes nothing and ``ipop``/``bipop`` are ignored.
    """

    requires: ClassVar[str | None] = "cmaes"
    min_numeric_params: ClassVar[int] = 2

    restart_strategy: Literal["none", "None", "ipop", "bipop"] = "none"
    sigma: Annotated[float, Field(gt=0)] | None = None


class RandomSettings(_Settings):
    """``random``: Optuna's RandomSampler."""


class GridSettings(_Settings):
    """``grid``: every combination once, in an order shuffled by ``random_state``."""


class GPSettings(_Settings):
    """``gp``: Optuna's GPSampler (Gaussian process; needs PyTorch)."""

    requires: ClassVar[str | None] = "torch"

    n_startup_trials: Annotated[int, Field(ge=0)] = 10
    deterministic_objective: bool = False


class QMCSettings(_Settings):
    """``qmc``: quasi-Monte Carlo points (Sobol or Halton), point k for trial k."""

    qmc_type: Literal["sobol", "halton"] = "sobol"
    scramble: bool = False


class SobolSettings(QMCSettings):
    """``sobol``: Katib's goptuna ``sobol`` (pkg/suggestion/v1beta1/goptuna/converter.go
    ``toGoptunaSampler``: an unscrambled Sobol sampler) served as ``qmc`` with ``qmc_type=sobol``."""

    qmc_type: Literal["sobol"] = "sobol"


class BayesianOptimizationSettings(_Settings):
    """``bayesianoptimization``: Katib's skopt ``Optimizer`` (pkg/suggestion/v1beta1/skopt/service.py
    ``_validate_bayesianoptimization_setting``) served by Optuna's GPSampler, which is the honest
    equivalent for ``base_estimator=GP`` only. ``n_initial_points`` is GPSampler's
    ``n_startup_trials``; ``acq_func`` and ``acq_optimizer`` are accepted with Katib's values but
    GPSampler always maximises log expected improvement with its own optimiser (logged)."""

    requires: ClassVar[str | None] = "torch"

    base_estimator: Literal["GP"] = "GP"
    n_initial_points: Annotated[int, Field(ge=0)] = 10
    acq_func: Literal["gp_hedge", "LCB", "EI", "PI", "EIps", "PIps"] = "gp_hedge"
    acq_optimizer: Literal["auto", "sampling", "lbfgs"] = "auto"

    @field_validator("base_estimator", mode="before")
    @classmethod
    def _only_gp(cls, value: object) -> object:
        if value in ("RF", "ET", "GBRT"):
            raise ValueError(
                f"{value} is a tree ensemble of scikit-optimize, which this service does not have; "
                "only GP maps honestly (to Optuna's GPSampler); use base_estimator=GP or algorithm tpe"
            )
        return value

    @property
    def ignored(self) -> list[str]:
        given = self.model_fields_set
        return [name for name in ("acq_func", "acq_optimizer") if name in given]


class HyperbandSettings(_Settings):
    """``hyperband``: Katib's Hyperband settings (pkg/suggestion/v1beta1/hyperband/service.py
    ``ValidateAlgorithmSettings``: ``r_l`` and ``resource_name`` required, ``eta`` default 3) served as
    random sampling, every trial given the full budget ``resource_name = r_l``, plus the
    ``hyperband`` pruning policy of our early stopping with ``reduction_factor = eta`` and
    ``min_resource`` = Katib's smallest bracket budget (``core.pruning.hyperband_pruning_settings``)."""

    resource_name: Annotated[str, Field(min_length=1)]
    r_l: Annotated[float, Field(gt=0, allow_inf_nan=False)]
    eta: str = "3"

    @field_validator("eta")
    @classmethod
    def _eta(cls, value: str) -> str:
        try:
            eta = hyperband_eta({"eta": value})
        except ValueError:
            raise ValueError(f"eta must be a number, got {value!r}") from None
        if eta < 2:
            # Katib divides by log(eta): eta 1 fails there on every request
            raise ValueError(f"eta must be >= 2 (Katib: <= 0 means 3), got {value!r}")
        return value

    @property
    def reduction(self) -> int:
        return hyperband_eta({"eta": self.eta})


ALGORITHMS: Mapping[str, type[_Settings]] = {
    "tpe": TPESettings,
    "multivariate-tpe": MultivariateTPESettings,
    "tuned-tpe": TunedTPESettings,
    "cmaes": CmaEsSettings,
    "random": RandomSettings,
    "grid": GridSettings,
    "gp": GPSettings,
    "qmc": QMCSettings,
    # Katib's other algorithm names, served by the samplers above (docs/suggestion.md)
    "sobol": SobolSettings,
    "bayesianoptimization": BayesianOptimizationSettings,
    "hyperband": HyperbandSettings,
}

#: Katib algorithm names refused with a reason (not "unknown").
UNSUPPORTED: Mapping[str, str] = {
    "pbt": (
        "population based training is not supported: it copies checkpoints between trials through a "
        "shared volume (suggestion_trial_dir) and restarts trials from them, which an Optuna sampler "
        "cannot do; use tpe, or random with a pruning policy"
    ),
}

AlgorithmSettings = _Settings


def canonical_algorithm(name: str) -> str:
    """``kp-tpe`` -> ``tpe`` (katib-config's prefixed names select the same algorithm); plain names are
    returned unchanged."""
    return name.removeprefix(ALGORITHM_PREFIX)


def _describe(model: type[_Settings], algorithm: str, err: Mapping[str, Any], raw: Mapping[str, str]) -> str:
    loc = err.get("loc") or ("?",)
    name = str(loc[0])
    if err.get("type") == "extra_forbidden":
        known = ", ".join(sorted(model.model_fields)) or "none"
        return (
            f"algorithmSettings.{name}={raw.get(name)!r}: unknown setting for algorithm "
            f"{algorithm!r}; allowed: {known}"
        )
    msg = str(err.get("msg", "invalid"))
    return f"algorithmSettings.{name}={raw.get(name)!r}: {msg}"


def parse_settings(algorithm: str, settings: Iterable[tuple[str, str]]) -> _Settings:
    """Parse ``algorithm``'s settings, raising ``InvalidExperimentError`` listing every problem."""
    model = ALGORITHMS.get(algorithm)
    if algorithm in UNSUPPORTED:
        raise InvalidExperimentError([f"algorithm.algorithmName={algorithm!r}: {UNSUPPORTED[algorithm]}"])
    if model is None:
        known = ", ".join(sorted(ALGORITHMS))
        problem = f"algorithm.algorithmName={algorithm!r}: unknown algorithm; allowed: {known}"
        raise InvalidExperimentError([problem])
    problems: list[str] = []
    raw: dict[str, str] = {}
    for name, value in settings:
        if name in raw:
            problems.append(f"algorithmSettings.{name}={value!r}: setting given twice")
        raw[name] = value
    parsed: _Settings | None = None
    try:
        parsed = model.model_validate(raw)
    except pydantic.ValidationError as exc:
        problems.extend(_describe(model, algorithm, e, raw) for e in exc.errors())
    if model.requires is not None and importlib.util.find_spec(model.requires) is None:
        problems.append(
            f"algorithm.algorithmName={algorithm!r}: needs the Python package {model.requires!r}, "
            "which is not installed in this suggestion service"
        )
    if problems or parsed is None:
        raise InvalidExperimentError(problems)
    if isinstance(parsed, (_KatibTPESettings, TunedTPESettings)) and parsed.n_ei_candidates == 0:
        _log.warning(
            "algorithmSettings.n_ei_candidates=0: Katib's Optuna service accepts it and then fails every "
            "GetSuggestions once n_startup_trials trials exist (Optuna: 'The size of `samples` must be "
            "positive'); served with 1 candidate (a sample from the good trials' density)"
        )
    if isinstance(parsed, BayesianOptimizationSettings) and parsed.ignored:
        _log.warning(
            "algorithmSettings %s: accepted as Katib's skopt service does, but Optuna's GPSampler always "
            "maximises log expected improvement with its own optimiser",
            ", ".join(f"{n}={getattr(parsed, n)}" for n in parsed.ignored),
        )
    return parsed
