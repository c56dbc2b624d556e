"""Pruning configuration: the Experiment's ``spec.earlyStopping`` settings, validated with pydantic.

Katib hands settings over as a flat ``name -> string`` map; :meth:`PruningConfig.from_settings` turns it
into a typed, validated config and raises ``ConfigError(field, message)`` naming the setting, the value
and what is allowed. Every setting is documented in docs/pruning.md.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any, Literal

import pydantic
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from katib_progress.core.errors import ConfigError
from katib_progress.core.pruning import PruningSpec
from katib_progress.core.timefmt import parse_rfc3339
from katib_progress.suggestion.pruning._history import Direction, Strategy, default_strategy

#: Policy names accepted in the ``policy`` setting (comma-separated; combined with AnyOf).
OPTUNA_POLICIES = ("median", "percentile", "successive_halving", "hyperband", "wilcoxon", "threshold")
OWN_POLICIES = (
    "divergence",
    "stall",
    "lone_stall",
    "extrapolation",
    "adaptive",
    "trend_halving",
    "predictive",
    "budget",
    "nop",
    "medianstop",
)
POLICY_NAMES = ("default", *OPTUNA_POLICIES, *OWN_POLICIES)
#: What ``default`` expands to (see docs/pruning.md for the reasoning).
DEFAULT_POLICIES = ("divergence", "trend_halving")


class PruningConfig(BaseModel):
    """Typed pruning settings for one experiment (immutable)."""

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)

    objective_metric: str = Field(min_length=1)
    direction: Literal["minimize", "maximize"] = "minimize"
    #: The Experiment's own strategy for the objective (``spec.objective.metricStrategies``), as the
    #: collector and the local sweep read it; not a setting. ``metric_strategy`` overrides it.
    objective_strategy: Literal["min", "max", "latest"] | None = None
    policy: str = "default"
    grid_step: float = Field(default=1.0, gt=0, le=10)
    # Comparative (Optuna) policies
    warmup_progress: float = Field(default=20.0, ge=0, lt=100)
    startup_trials: int = Field(default=4, ge=0)
    min_trials: int = Field(default=3, ge=1)
    percentile: float = Field(default=50.0, gt=0, lt=100)
    patience: float = Field(default=0.0, ge=0, le=100)
    patience_min_delta: float = Field(default=0.0, ge=0)
    min_resource: str = "auto"
    reduction_factor: int = Field(default=3, ge=2)
    min_early_stopping_rate: int = Field(default=0, ge=0)
    bootstrap_count: int = Field(default=0, ge=0)
    wilcoxon_p_threshold: float = Field(default=0.1, gt=0, lt=1)
    wilcoxon_startup_steps: int = Field(default=2, ge=0)
    threshold_lower: float | None = None
    threshold_upper: float | None = None
    # Own policies
    divergence_factor: float = Field(default=3.0, gt=1)
    divergence_metrics: str = "loss"
    stall_window: float = Field(default=25.0, gt=0, le=100)
    stall_min_progress: float = Field(default=40.0, ge=0, le=100)
    stall_noise: float = Field(default=1.0, ge=0)
    stall_min_rel_improvement: float = Field(default=0.001, ge=0)
    #: Reports a stall window must hold before the trial is judged (a sparser trial is not judged,
    #: and its decision says why).
    stall_min_points: int = Field(default=5, ge=3)
    #: The objective's metric strategy, as the Experiment's ``metricStrategies`` (Katib's default
    #: follows the objective type: min when minimizing, max when maximizing).
    metric_strategy: Literal["min", "max", "latest"] | None = None
    #: Stall judges a trial only while fewer than ``min_trials`` peers have reached its progress;
    #: with enough peers the percentile/median comparison decides (measured: see docs/benchmarks.md).
    stall_alone_only: bool = True
    # Lone stall (policy ``lone_stall``: acts only while the experiment has no other trial)
    #: Prune when the fitted upper bound of the improvement still ahead is at most this share of the
    #: improvement so far.
    lone_stall_max_remaining: float = Field(default=0.02, gt=0, lt=1)
    #: Residual standard deviations of the fit added to the predicted remaining improvement.
    lone_stall_noise: float = Field(default=1.0, ge=0)
    lone_stall_min_progress: float = Field(default=10.0, ge=0, lt=100)
    #: Finite objective reports needed before a lone trial is judged (4 fits 3 parameters plus one).
    lone_stall_min_points: int = Field(default=5, ge=4)
    extrapolation_min_progress: float = Field(default=30.0, ge=0, lt=100)
    extrapolation_p: float = Field(default=0.05, gt=0, lt=1)
    # Adaptive warm-up (policy ``adaptive``)
    adaptive_rho: float = Field(default=0.8, gt=0, le=1)
    adaptive_min_finished: int = Field(default=4, ge=3)
    adaptive_confidence: float = Field(default=1.0, ge=0)
    adaptive_percentile: float = Field(default=50.0, gt=0, lt=100)
    adaptive_step: float = Field(default=5.0, gt=0, lt=100)
    adaptive_fallback_progress: float = Field(default=50.0, ge=0, lt=100)
    # Trend halving (policy ``trend_halving``)
    trend_rungs: str = "10,20,40,80"
    trend_keep: str = "50,33,25,25"
    trend_horizon: float = Field(default=3.0, ge=0)
    trend_window: float = Field(default=0.25, gt=0, le=1)
    trend_rejudge: bool = True
    trend_gate_below: float = Field(default=0.0, ge=0, lt=100)
    trend_gate_ref: float = Field(default=40.0, gt=0, le=100)
    trend_gate_min: int = Field(default=6, ge=1)
    trend_gate_top: int = Field(default=2, ge=1)
    #: Rank gate: a rung judges only once completed trials' values there predict their finals
    #: (Spearman lower bound >= trend_rho; 0 = off), over at least trend_rho_min_finished trials.
    #: Defaults chosen by leave-one-family-out (``bench pruning --cv``, docs/benchmarks.md).
    trend_rho: float = Field(default=0.5, ge=0, le=1)
    trend_rho_min_finished: int = Field(default=4, ge=3)
    trend_rho_confidence: float = Field(default=1.0, ge=0)
    #: A peer counts as better at a rung only by more than trend_noise x the trial's residual sd.
    trend_noise: float = Field(default=1.0, ge=0)
    #: Under ``latest``, a rung takes the line fitted to the recent values, not the last value.
    trend_smooth: bool = True
    #: Data-driven keep: with trend_adapt_top > 0, once that many trials have completed each rung keeps
    #: the largest share of peers ahead of any of the trend_adapt_top best completed trials there, plus
    #: trend_adapt_margin points, within [trend_adapt_min, the rung's trend_keep] (0 = off).
    trend_adapt_top: int = Field(default=0, ge=0)
    trend_adapt_margin: float = Field(default=10.0, ge=0, lt=100)
    trend_adapt_min: float = Field(default=10.0, gt=0, lt=100)
    # Predictive pruning (policy ``predictive``): a calibrated learning-curve ensemble
    #: Prune when P(the trial's final reaches the predict_top-th best value of the other trials) is
    #: below predict_p (docs/pruning.md).
    predict_top: int = Field(default=1, ge=1)
    predict_p: float = Field(default=0.05, gt=0, lt=1)
    predict_min_progress: float = Field(default=10.0, ge=0, lt=100)
    predict_min_points: int = Field(default=4, ge=4)
    #: Completed trials whose probability integral transforms calibrate the ensemble before it judges.
    predict_min_finished: int = Field(default=4, ge=1)
    #: Pseudo-trials by which the calibration leans on the ensemble's own probabilities.
    predict_prior: float = Field(default=2.0, gt=0)
    #: The most recent completed trials used for calibration.
    predict_calib_window: int = Field(default=200, ge=1)
    #: How the completed trials calibrate the ensemble: event (isotonic, at the decision's target), pit
    #: (probability integral transforms) or none.
    predict_calibration: Literal["event", "pit", "none"] = "event"
    # Cost awareness
    max_prune_progress: float = Field(default=90.0, ge=0, le=100)
    min_remaining_s: float = Field(default=0.0, ge=0)
    deadline: datetime | None = None
    gpu_hour_budget: float | None = Field(default=None, gt=0)
    gpus_per_trial: float = Field(default=1.0, gt=0)
    # Static rules handed to stock Katib collectors; Katib's medianstop (policy ``medianstop``)
    start_step: int = Field(default=4, ge=0)
    #: Katib's medianstop: succeeded trials needed before a trial is judged (Katib's default 3).
    min_trials_required: int = Field(default=3, ge=1)

    @field_validator("policy")
    @classmethod
    def _policy_names(cls, value: str) -> str:
        names = [n.strip() for n in value.split(",") if n.strip()]
        if not names:
            raise ValueError(f"policy must name at least one of {', '.join(POLICY_NAMES)}")
        unknown = [n for n in names if n not in POLICY_NAMES]
        if unknown:
            raise ValueError(f"unknown policy {', '.join(unknown)}; allowed: {', '.join(POLICY_NAMES)}")
        return ",".join(names)

    @field_validator("min_resource")
    @classmethod
    def _min_resource(cls, value: str) -> str:
        if value == "auto":
            return value
        try:
            number = float(value)
        except ValueError:
            raise ValueError(f"min_resource must be 'auto' or a progress percent, got {value!r}") from None
        if not (0 < number <= 100):
            raise ValueError(f"min_resource must be within (0, 100] percent, got {value!r}")
        return value

    @field_validator("trend_rungs", "trend_keep")
    @classmethod
    def _percent_list(cls, value: str) -> str:
        try:
            numbers = [float(v) for v in value.split(",") if v.strip()]
        except ValueError:
            raise ValueError(f"must be a comma list of percents, got {value!r}") from None
        if not numbers or any(not (0 < n < 100) for n in numbers):
            raise ValueError(f"must be a comma list of percents within (0, 100), got {value!r}")
        return ",".join(f"{n:g}" for n in numbers)

    @field_validator("deadline", mode="before")
    @classmethod
    def _deadline(cls, value: object) -> datetime | None:
        """Strict RFC 3339 (as Go parses it): a bare number, a lower-case ``t``/``z`` or a missing zone
        is refused instead of being read as seconds since 1970 or local time."""
        if value is None or value == "":
            return None
        if isinstance(value, datetime):
            if value.tzinfo is None:
                raise ValueError(f"deadline must carry a timezone (RFC 3339), got {value.isoformat()}")
            return value
        return parse_rfc3339(value, field="deadline")

    @model_validator(mode="after")
    def _threshold_bounds(self) -> PruningConfig:
        if "threshold" in self.policy_names and self.threshold_lower is None and self.threshold_upper is None:
            raise ValueError("policy threshold needs threshold_lower or threshold_upper")
        if (
            self.threshold_lower is not None
            and self.threshold_upper is not None
            and self.threshold_lower > self.threshold_upper
        ):
            raise ValueError(
                f"threshold_lower {self.threshold_lower} must not exceed "
                f"threshold_upper {self.threshold_upper}"
            )
        return self

    @model_validator(mode="after")
    def _trend_gate(self) -> PruningConfig:
        if self.trend_gate_below > 0 and self.trend_gate_ref <= self.trend_gate_below:
            raise ValueError(
                f"trend_gate_ref {self.trend_gate_ref:g} must lie past "
                f"trend_gate_below {self.trend_gate_below:g}"
            )
        if self.trend_gate_top > self.trend_gate_min:
            raise ValueError(
                f"trend_gate_top {self.trend_gate_top} must not exceed trend_gate_min {self.trend_gate_min}"
            )
        return self

    @model_validator(mode="after")
    def _trend_lists(self) -> PruningConfig:
        rungs, keep = self.trend_rung_list, self.trend_keep_list
        if rungs != sorted(set(rungs)):
            raise ValueError(f"trend_rungs must increase strictly, got {self.trend_rungs!r}")
        if len(keep) != len(rungs):
            raise ValueError(
                f"trend_keep needs one percent per rung of trend_rungs ({len(rungs)}), "
                f"got {self.trend_keep!r}"
            )
        return self

    @model_validator(mode="after")
    def _predict_window(self) -> PruningConfig:
        if self.predict_calib_window < self.predict_min_finished:
            raise ValueError(
                f"predict_calib_window {self.predict_calib_window} must be >= "
                f"predict_min_finished {self.predict_min_finished}"
            )
        return self

    @property
    def trend_rung_list(self) -> list[float]:
        return [float(v) for v in self.trend_rungs.split(",")]

    @property
    def trend_keep_list(self) -> list[float]:
        return [float(v) for v in self.trend_keep.split(",")]

    @property
    def strategy(self) -> Strategy:
        """The objective's metric strategy: the ``metric_strategy`` setting, else the Experiment's
        (``objective_strategy``), else Katib's default for the direction."""
        if self.metric_strategy is not None:
            return self.metric_strategy
        if self.objective_strategy is not None:
            return self.objective_strategy
        return default_strategy(Direction(self.direction))

    @property
    def policy_names(self) -> tuple[str, ...]:
        names: list[str] = []
        for name in self.policy.split(","):
            for expanded in DEFAULT_POLICIES if name == "default" else (name,):
                if expanded not in names:
                    names.append(expanded)
        return tuple(names)

    @classmethod
    def from_settings(
        cls,
        objective_metric: str,
        direction: str,
        settings: Mapping[str, str] | None = None,
        *,
        objective_strategy: str | None = None,
    ) -> PruningConfig:
        """Build from Katib's earlyStopping settings; raises ConfigError naming the bad setting.

        ``objective_strategy``: the Experiment's ``metricStrategies`` value for the objective (None or
        empty: not given); a ``metric_strategy`` setting overrides it."""
        data: dict[str, Any] = {"objective_metric": objective_metric, "direction": str(direction).lower()}
        if objective_strategy:
            data["objective_strategy"] = str(objective_strategy).lower()
        allowed = settable_fields()
        for key, value in (settings or {}).items():
            if key not in allowed:
                raise ConfigError(key, f"unknown setting {key}={value!r}; allowed: {', '.join(allowed)}")
            data[key] = value
        try:
            return cls.model_validate(data)
        except pydantic.ValidationError as exc:
            err = exc.errors()[0]
            field = ".".join(str(p) for p in err["loc"]) or "settings"
            given = data.get(field, err.get("input"))
            msg = err["msg"].removeprefix("Value error, ")
            raise ConfigError(field, f"{msg} (got {given!r})") from exc

    @classmethod
    def from_spec(cls, spec: PruningSpec) -> PruningConfig:
        """Validate an Experiment's pruning spec; raises ConfigError naming the bad setting."""
        return cls.from_settings(
            spec.objective_metric,
            spec.direction,
            spec.settings,
            objective_strategy=spec.metric_strategy or None,
        )

    def to_settings(self) -> dict[str, str]:
        """The settings map (strings) that :meth:`from_settings` turns back into this config."""
        out: dict[str, str] = {}
        defaults = type(self)(objective_metric=self.objective_metric)
        for name in settable_fields():
            value = getattr(self, name)
            if value is None or value == getattr(defaults, name):
                continue
            if isinstance(value, datetime):
                out[name] = value.isoformat()
            elif isinstance(value, bool):
                out[name] = "true" if value else "false"
            else:
                out[name] = str(value)
        return out


def settable_fields() -> tuple[str, ...]:
    return tuple(
        n
        for n in PruningConfig.model_fields
        if n not in ("objective_metric", "direction", "objective_strategy")
    )
