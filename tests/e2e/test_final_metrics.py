"""Scenario e: the final-metrics race on real Katib.

A trial that posts its final metrics and exits at once: its TrainJob turns Complete right after the
last trainerStatus. Katib's trial controller reads the observation log once, when the real
successCondition (Go gjson, pkg/controller.v1beta1/trial/util.go via ``getCondition``...) holds; with our
documented successCondition that waits for the collector's ``final-metrics`` marker, no trial ends
``MetricsUnavailable`` and each trial's observation is its last reported value.
"""

from __future__ import annotations

import pytest

from tests.e2e.cluster import RealKatib
from tests.e2e.launch import Launch, register
from tests.katibmodel._kube import has_condition
from tests.katibmodel.scenarios import NS, always, converging, experiment

register(
    Launch(
        lambda: experiment("race", early_stopping=None, max_trials=9, parallel=3),
        lambda: always(lambda: converging(steps=4)),
        interval_s=0.0,  # post, post, ..., complete: no pause anywhere
    )
)


@pytest.mark.timeout(600)
@pytest.mark.usefixtures("launched")
def test_final_metrics_then_exit_never_metrics_unavailable(katib: RealKatib) -> None:
    exp = katib.wait_finished(NS, "race", timeout=300)
    assert has_condition(exp, "Succeeded"), katib.describe(NS, "race")
    trials = katib.trial_list(NS, "race")
    assert len(trials) == 9
    for t in trials:
        name = t["metadata"]["name"]
        assert has_condition(t, "Succeeded"), katib.describe(NS, "race")
        assert not has_condition(t, "MetricsUnavailable")
        sent = katib.sent.values(name, "loss")
        metrics = {m["name"]: m for m in t["status"]["observation"]["metrics"]}
        assert metrics["loss"]["latest"] == sent[-1], (name, metrics, sent)
