"""PruningConfig.from_settings: typed settings, errors naming the setting, the value and what is allowed."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from katib_progress.core.errors import ConfigError
from katib_progress.suggestion.pruning import PruningConfig, PruningEngine, build_policy
from katib_progress.suggestion.pruning.policies import AnyOf, CostGuard, DivergencePolicy, NopPolicy


def test_defaults_and_string_settings_are_typed() -> None:
    config = PruningConfig.from_settings(
        "eval_loss", "MINIMIZE", {"percentile": "30", "stall_min_points": "3", "startup_trials": "2"}
    )
    assert config.direction == "minimize"
    assert config.percentile == 30.0
    assert config.stall_min_points == 3
    assert config.strategy == "min"  # Katib's default when minimizing
    assert PruningConfig.from_settings("acc", "maximize", {}).strategy == "max"
    latest = PruningConfig.from_settings("acc", "maximize", {"metric_strategy": "latest"})
    assert latest.strategy == "latest"
    assert config.startup_trials == 2
    assert config.policy_names == ("divergence", "trend_halving")


@pytest.mark.parametrize(
    ("settings", "field", "fragment"),
    [
        ({"percentile": "150"}, "percentile", "150"),
        ({"percentile": "abc"}, "percentile", "abc"),
        ({"grid_step": "0"}, "grid_step", "greater than 0"),
        ({"policy": "median,bogus"}, "policy", "bogus"),
        ({"policy": "threshold"}, "settings", "threshold_lower or threshold_upper"),
        ({"min_resource": "lots"}, "min_resource", "lots"),
        ({"deadline": "2026-01-01T00:00:00"}, "deadline", "not an RFC 3339 timestamp"),
        ({"deadline": "3600"}, "deadline", "not an RFC 3339 timestamp"),
        ({"deadline": "1767225600"}, "deadline", "'1767225600'"),
        ({"deadline": "2026-01-01t00:00:00Z"}, "deadline", "RFC 3339"),
        ({"deadline": "2026-01-01T00:00:00z"}, "deadline", "RFC 3339"),
        ({"deadline": "2026-02-30T00:00:00Z"}, "deadline", "invalid date"),
        ({"divergence_factor": "inf"}, "divergence_factor", "inf"),
        ({"frobnicate": "1"}, "frobnicate", "allowed:"),
        ({"stall_min_points": "2"}, "stall_min_points", "greater than or equal to 3"),
        ({"metric_strategy": "mean"}, "metric_strategy", "'mean'"),
    ],
)
def test_invalid_settings_name_the_setting_and_value(
    settings: dict[str, str], field: str, fragment: str
) -> None:
    with pytest.raises(ConfigError) as err:
        PruningConfig.from_settings("eval_loss", "minimize", settings)
    assert err.value.field == field
    assert fragment in str(err.value)


def test_objective_and_direction_are_validated() -> None:
    with pytest.raises(ConfigError) as err:
        PruningConfig.from_settings("", "minimize", {})
    assert err.value.field == "objective_metric"
    with pytest.raises(ConfigError) as err:
        PruningConfig.from_settings("acc", "sideways", {})
    assert err.value.field == "direction"
    assert "sideways" in str(err.value)


def test_to_settings_round_trips() -> None:
    config = PruningConfig.from_settings(
        "acc",
        "maximize",
        {
            "policy": "median,extrapolation,threshold",
            "threshold_lower": "0.1",
            "deadline": "2026-03-01T12:00:00+00:00",
            "gpu_hour_budget": "12.5",
            "stall_min_points": "4",
            "metric_strategy": "latest",
        },
    )
    again = PruningConfig.from_settings("acc", "maximize", config.to_settings())
    assert again == config
    assert again.deadline == datetime(2026, 3, 1, 12, tzinfo=UTC)


def test_deadline_with_a_zone_offset_is_read_as_that_instant() -> None:
    config = PruningConfig.from_settings("m", "minimize", {"deadline": "2026-03-01T14:00:00.5+02:00"})
    assert config.deadline == datetime(2026, 3, 1, 12, 0, 0, 500000, tzinfo=UTC)
    assert PruningConfig.from_settings("m", "minimize", config.to_settings()) == config


def test_default_policy_tree_keeps_divergence_outside_the_cost_guard() -> None:
    policy = build_policy(PruningConfig.from_settings("eval_loss", "minimize", {}))
    assert isinstance(policy, AnyOf)
    assert isinstance(policy.policies[0], DivergencePolicy)
    assert isinstance(policy.policies[-1], CostGuard)
    assert policy.describe() == "any_of(divergence,cost_guard(trend_halving))"


def test_nop_builds_a_never_pruning_engine() -> None:
    engine = PruningEngine(PruningConfig.from_settings("eval_loss", "minimize", {"policy": "nop"}))
    assert isinstance(engine.policy, NopPolicy)


def test_budget_settings_add_the_budget_policy() -> None:
    config = PruningConfig.from_settings("l", "minimize", {"policy": "median", "gpu_hour_budget": "3"})
    assert "budget" in build_policy(config).describe()


def test_policy_names_the_registry_and_the_docs_agree() -> None:
    from pathlib import Path

    from katib_progress.suggestion.pruning._build import REGISTRY
    from katib_progress.suggestion.pruning.config import POLICY_NAMES, settable_fields

    assert set(REGISTRY) == set(POLICY_NAMES) - {"default"}
    root = Path(__file__).resolve().parents[2] / "docs"
    docs = (root / "pruning.md").read_text()
    for name in POLICY_NAMES:
        assert f"`{name}`" in docs, f"docs/pruning.md does not document policy {name}"
    settings = (root / "reference" / "settings.md").read_text()  # the settings table lives there
    for setting in settable_fields():
        assert f"`{setting}`" in settings, f"docs/reference/settings.md does not document setting {setting}"
