"""Scenario b: our services paired with Katib's own, on real Katib.

{``kp-tpe``, Katib's goptuna ``random``, goptuna ``tpe``} x {early stopping ``katib-progress``, none}:
each Experiment runs to completion through Katib's real suggestion controller and trial controller.
Katib's stock katib-config serves ``random`` and ``tpe`` with its Python hyperopt image; here they name
Katib's goptuna image, the Go suggestion service Katib ships for ``cmaes``/``sobol`` and which also
implements ``random`` and ``tpe`` (pkg/suggestion/v1beta1/goptuna/service.go). medianstop is Python
and stays in the Katib model (tests/katibmodel).
"""

from __future__ import annotations

import pytest

from tests.e2e.cluster import RealKatib
from tests.e2e.curves import every
from tests.katibmodel._kube import has_condition
from tests.katibmodel.scenarios import NS, converging, diverging, experiment

PAIRINGS = [(alg, es) for alg in ("kp-tpe", "random", "tpe") for es in ("katib-progress", None)]


@pytest.mark.timeout(900)
def test_every_pairing_completes(katib: RealKatib) -> None:
    katib.script.script = every(2, diverging, converging)
    names = []
    for algorithm, early_stopping in PAIRINGS:
        name = f"pair-{algorithm}-{'kp' if early_stopping else 'none'}"
        katib.submit(
            experiment(name, algorithm=algorithm, early_stopping=early_stopping, max_trials=6, parallel=3)
        )
        names.append((name, early_stopping))
    for name, early_stopping in names:
        exp = katib.wait_finished(NS, name, timeout=600)
        assert has_condition(exp, "Succeeded"), katib.describe(NS, name)
        trials = katib.trial_list(NS, name)
        assert len(trials) == 6
        for t in trials:
            assert (t.get("status") or {}).get("observation"), f"{t['metadata']['name']}: no observation"
        stopped = int(exp["status"].get("trialsEarlyStopped") or 0)
        if early_stopping is None:
            assert stopped == 0, f"{name}: {stopped} trials early-stopped without early stopping"
