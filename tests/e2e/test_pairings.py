"""Scenario b: our services paired with Katib's own, on real Katib.

{``kp-tpe``, Katib's goptuna ``random``, goptuna ``tpe``} x {early stopping ``katib-progress``, none}:
each Experiment runs to completion through Katib's real suggestion controller and trial controller.
Katib's stock katib-config serves ``random`` and ``tpe`` with its Python hyperopt image; here they name
Katib's goptuna image, the Go suggestion service Katib ships for ``cmaes``/``sobol`` and which also
implements ``random`` and ``tpe`` (pkg/suggestion/v1beta1/goptuna/service.go). medianstop is Python
and stays in the Katib model (tests/katibmodel).
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import partial

import pytest

from tests.e2e.cluster import RealKatib
from tests.e2e.curves import every
from tests.e2e.launch import Launch, register
from tests.katibmodel._kube import has_condition
from tests.katibmodel.scenarios import NS, converging, diverging, experiment
from tests.katibmodel.trainer import Curve

PAIRINGS = [(alg, es) for alg in ("kp-tpe", "random", "tpe") for es in ("katib-progress", None)]


def _pairing(algorithm: str, early_stopping: str | None) -> tuple[str, str | None]:
    name = f"pair-{algorithm}-{'kp' if early_stopping else 'none'}"
    body = partial(
        experiment, name, algorithm=algorithm, early_stopping=early_stopping, max_trials=6, parallel=3
    )
    return register(Launch(body, lambda: every(2, diverging, converging))), early_stopping


LAUNCHED = [_pairing(algorithm, early_stopping) for algorithm, early_stopping in PAIRINGS]


@pytest.mark.timeout(900)
@pytest.mark.usefixtures("launched")
def test_every_pairing_completes(katib: RealKatib) -> None:
    for name, early_stopping in LAUNCHED:
        exp = katib.wait_finished(NS, name, timeout=600)
        assert has_condition(exp, "Succeeded"), katib.describe(NS, name)
        trials = katib.trial_list(NS, name)
        assert len(trials) == 6
        for t in trials:
            assert (t.get("status") or {}).get("observation"), f"{t['metadata']['name']}: no observation"
        stopped = int(exp["status"].get("trialsEarlyStopped") or 0)
        if early_stopping is None:
            assert stopped == 0, f"{name}: {stopped} trials early-stopped without early stopping"


@pytest.mark.timeout(600)
def test_kp_medianstop_stops_push_trials_on_real_katib(katib: RealKatib) -> None:
    """Katib's medianstop rules served by our early-stopping image as ``kp-medianstop``, fed from
    TrainJob progress by the collector: Push trials get it without Katib's sidecar."""
    # Katib's bar is the mean of the succeeded trials' early means, diverging ones included, taken when
    # Katib asks for the trial's rule: the first two trials converge, then every other trial diverges;
    # with min_trials_required 1 each diverging trial has a rule from the converging trials that had
    # succeeded when it was created (2 would leave it ruleless when only one had, and a diverging trial
    # that succeeds raises the bar above the next one's best)
    alternate = every(2, converging, diverging)
    first: list[int] = []

    def script(index: int, params: Mapping[str, str]) -> Curve:
        first.append(index)
        return converging() if len(first) <= 2 else alternate(index, params)

    katib.script.script = script
    name = "kp-medianstop"
    settings = {"min_trials_required": "1", "start_step": "3"}
    katib.submit(
        experiment(name, early_stopping="kp-medianstop", settings=settings, max_trials=8, parallel=2)
    )
    exp = katib.wait_finished(NS, name, timeout=400)
    assert has_condition(exp, "Succeeded"), katib.describe(NS, name)
    trials = katib.trial_list(NS, name)
    stopped = [t for t in trials if has_condition(t, "EarlyStopped")]
    assert stopped, katib.describe(NS, name)
    for t in trials:
        assert (t.get("status") or {}).get("observation"), f"{t['metadata']['name']}: no observation"
    for t in stopped:  # only diverging curves are stopped: their loss rose past their start
        losses = [float(v) for v in katib.sent.values(t["metadata"]["name"], "loss")]
        assert losses[-1] > losses[0], (t["metadata"]["name"], losses)
