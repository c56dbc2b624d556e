"""Learning curves the played Trainer posts in the e2e scenarios (the Katib model's curves, with the
metric names an Experiment asks for)."""

from __future__ import annotations

from collections.abc import Callable, Mapping

from tests.katibmodel.trainer import Curve, Point, Script


def renamed(curve: Curve, names: Mapping[str, str], *, keep: bool = False) -> Curve:
    """``curve`` with each metric ``old`` reported as ``names[old]`` (and as ``old`` too when ``keep``)."""
    points = []
    for p in curve.points:
        metrics = {names.get(k, k): v for k, v in p.metrics.items()}
        if keep:
            metrics.update(p.metrics)
        points.append(Point(p.progress, metrics, p.eta))
    return Curve(tuple(points), fails=curve.fails, tag=curve.tag)


def every(n: int, bad: Callable[[], Curve], good: Callable[[], Curve]) -> Script:
    """TrainJobs in start order (of this test): every ``n``-th (0, n, 2n...) healthy, the others ``bad``."""
    first: list[int] = []

    def script(index: int, _params: Mapping[str, str]) -> Curve:
        if not first:
            first.append(index)  # the played Trainer counts TrainJobs over the whole session
        return good() if (index - first[0]) % n == 0 else bad()

    return script
