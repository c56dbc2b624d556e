"""Whole-experiment validation: every problem in settings, search space and objective at once."""

from __future__ import annotations

from dataclasses import dataclass

from katib_progress.core.names import EARLY_STOPPING_ALGORITHM
from katib_progress.suggestion._domain import ExperimentSpec, InvalidExperimentError, ParamType
from katib_progress.suggestion._grid import GridPlan, grid_size, grid_values
from katib_progress.suggestion._names import default_seed
from katib_progress.suggestion._settings import AlgorithmSettings, HyperbandSettings, parse_settings
from katib_progress.suggestion._space import Param, Space, build_space


@dataclass(frozen=True, slots=True)
class CheckedExperiment:
    spec: ExperimentSpec
    settings: AlgorithmSettings
    space: Space
    seed: int
    grid: GridPlan | None = None


def check_experiment(spec: ExperimentSpec, *, creating: bool = True) -> CheckedExperiment:
    """Validate ``spec``; raise ``InvalidExperimentError`` listing every problem found.

    ``creating``: ValidateAlgorithmSettings (Katib calls it when the Experiment is created); False on
    GetSuggestions, where what a user may edit on a running Experiment (``maxTrialCount``) is not checked.
    """
    problems: list[str] = []
    settings: AlgorithmSettings | None = None
    space: Space | None = None
    if not spec.name:
        problems.append("experiment.name: empty")
    if not spec.objective_metric:
        problems.append("objective.objectiveMetricName: empty")
    if spec.direction is None:
        problems.append("objective.type: unknown; allowed: minimize, maximize")
    try:
        settings = parse_settings(spec.algorithm, spec.settings)
    except InvalidExperimentError as exc:
        problems.extend(exc.problems)
    try:
        space = build_space(spec.params, grid=spec.algorithm == "grid")
    except InvalidExperimentError as exc:
        problems.extend(exc.problems)
    grid: GridPlan | None = None
    seed = default_seed(spec.name)
    if settings is not None and settings.random_state is not None:
        seed = settings.random_state
    if settings is not None and space is not None:
        numeric = sum(1 for p in space.params if p.spec.type in (ParamType.DOUBLE, ParamType.INT))
        if numeric < settings.min_numeric_params:
            problems.append(
                f"algorithm.algorithmName={spec.algorithm!r}: needs at least {settings.min_numeric_params} "
                f"double or int parameters, the experiment has {numeric}"
            )
        if spec.algorithm == "grid":
            grid, grid_problems = _grid(spec, space, seed, creating)
            problems.extend(grid_problems)
        if isinstance(settings, HyperbandSettings):
            problems.extend(_hyperband(spec, settings, space))
    if problems or settings is None or space is None:
        raise InvalidExperimentError(problems)
    return CheckedExperiment(spec, settings, space, seed, grid)


def _hyperband(spec: ExperimentSpec, settings: HyperbandSettings, space: Space) -> list[str]:
    problems = []
    param = space.by_name().get(settings.resource_name)
    where = f"algorithmSettings.resource_name={settings.resource_name!r}"
    # hyperband/service.py ValidateAlgorithmSettings: "value of resource_name setting must be in parameters"
    if param is None:
        problems.append(f"{where}: not a parameter of the experiment")
    elif param.spec.type not in (ParamType.DOUBLE, ParamType.INT):
        problems.append(f"{where}: must be a double or int parameter (every trial gets r_l of it)")
    else:
        try:
            param.parse(resource_value(param, settings.r_l))
        except ValueError:
            problems.append(
                f"algorithmSettings.r_l={settings.r_l!r}: outside parameter {param.name!r} "
                f"(min {param.spec.min}, max {param.spec.max}); every trial is given r_l"
            )
    if spec.early_stopping != EARLY_STOPPING_ALGORITHM:
        problems.append(
            f"algorithm.algorithmName='hyperband': served as random sampling + the hyperband pruning "
            f"policy of our early stopping, so spec.earlyStopping.algorithmName must be "
            f"{EARLY_STOPPING_ALGORITHM!r} (got {spec.early_stopping!r}); without it nothing is pruned"
        )
    return problems


def resource_value(param: Param, r_l: float) -> str:
    """The resource parameter's value for every ``hyperband`` trial: the full budget ``r_l``."""
    if param.spec.type is ParamType.INT:
        return str(int(r_l))
    return repr(float(r_l))


def _grid(spec: ExperimentSpec, space: Space, seed: int, creating: bool) -> tuple[GridPlan | None, list[str]]:
    try:
        values = grid_values(space)
    except InvalidExperimentError as exc:
        return None, list(exc.problems)
    size = grid_size(values)
    problems = []
    # Only when the experiment is created: Katib allows raising maxTrialCount on a running experiment,
    # and its own service checks it in ValidateAlgorithmSettings only (optuna/service.py
    # ``_validate_grid_setting``); a restarted service must go on serving (GridPlan repeats combinations).
    if creating and spec.max_trial_count > size:
        problems.append(
            f"maxTrialCount={spec.max_trial_count}: exceeds the {size} combinations of the grid; "
            f"set maxTrialCount <= {size} or widen the search space"
        )
    if problems:
        return None, problems
    return GridPlan(values, seed), []
