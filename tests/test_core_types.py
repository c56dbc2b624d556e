from datetime import UTC, datetime

import pytest

from katib_progress.core import Decision, ProgressPoint, Verdict


def _point(**kw: object) -> ProgressPoint:
    base: dict[str, object] = {"experiment": "e", "trial": "t", "seq": 0, "timestamp": datetime.now(UTC)}
    base.update(kw)
    return ProgressPoint(**base)  # type: ignore[arg-type]


def test_point_copies_metrics_so_caller_mutation_is_invisible() -> None:
    metrics = {"loss": 1.0}
    point = _point(metrics=metrics)
    metrics["loss"] = 2.0
    assert point.metrics["loss"] == 1.0


@pytest.mark.parametrize(
    ("field", "value"), [("progress", 101.0), ("progress", -1.0), ("eta_s", -5.0), ("seq", -1)]
)
def test_point_rejects_out_of_range_values_naming_the_field(field: str, value: float) -> None:
    with pytest.raises(ValueError, match=field):
        _point(**{field: value})


def test_decision_helpers() -> None:
    assert not Decision.cont().prune
    assert Decision(Verdict.PRUNE, "diverged").prune


def test_apply_strategy_follows_katib_metric_strategies() -> None:
    from katib_progress.core.strategy import apply_strategy

    values = [0.9, float("nan"), 0.4, 0.6, float("inf")]
    assert apply_strategy(values, "min") == 0.4
    assert apply_strategy(values, "max") == 0.9
    assert apply_strategy(values, "latest") == 0.6  # the last finite value
    assert apply_strategy([float("nan")], "min") is None
    assert apply_strategy([], "latest") is None
