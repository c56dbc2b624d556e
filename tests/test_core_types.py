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
