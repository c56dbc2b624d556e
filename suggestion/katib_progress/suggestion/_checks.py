"""Whole-experiment validation: every problem in settings, search space and objective at once."""

from __future__ import annotations

from dataclasses import dataclass

from katib_progress.suggestion._domain import ExperimentSpec, InvalidExperimentError, ParamType
from katib_progress.suggestion._grid import GRID_MAX_COMBINATIONS, GridPlan, grid_size, grid_values
from katib_progress.suggestion._names import default_seed
from katib_progress.suggestion._settings import AlgorithmSettings, parse_settings
from katib_progress.suggestion._space import Space, build_space


@dataclass(frozen=True, slots=True)
class CheckedExperiment:
    spec: ExperimentSpec
    settings: AlgorithmSettings
    space: Space
    seed: int
    grid: GridPlan | None = None


def check_experiment(spec: ExperimentSpec) -> CheckedExperiment:
    """Validate ``spec``; raise ``InvalidExperimentError`` listing every problem found."""
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
            grid, grid_problems = _grid(spec, space, seed)
            problems.extend(grid_problems)
    if problems or settings is None or space is None:
        raise InvalidExperimentError(problems)
    return CheckedExperiment(spec, settings, space, seed, grid)


def _grid(spec: ExperimentSpec, space: Space, seed: int) -> tuple[GridPlan | None, list[str]]:
    try:
        values = grid_values(space)
    except InvalidExperimentError as exc:
        return None, list(exc.problems)
    size = grid_size(values)
    problems = []
    if size > GRID_MAX_COMBINATIONS:
        problems.append(
            f"parameters: the grid has {size} combinations, more than the limit {GRID_MAX_COMBINATIONS}"
        )
    if spec.max_trial_count > size:
        problems.append(
            f"maxTrialCount={spec.max_trial_count}: exceeds the {size} combinations of the grid; "
            f"set maxTrialCount <= {size} or widen the search space"
        )
    if problems:
        return None, problems
    return GridPlan(values, seed), []
