"""Scenario a: the README's cluster example, created with Katib's own Python SDK, on real Katib.

examples/cluster/sdk/create_experiment.py builds the Experiment (Push collector, ``kp-tpe``, early
stopping ``katib-progress``, max 12, parallel 3, the documented successCondition); ``KatibClient``
creates it, waits for it and reads the optimal trial. The training is the played Trainer's scripted
curve: every third trial converges, the others diverge.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, cast

from kubeflow.katib import KatibClient

from tests.e2e.cluster import RealKatib
from tests.e2e.curves import every, renamed
from tests.katibmodel.rules import is_observation_available
from tests.katibmodel.scenarios import converging, diverging
from tests.katibmodel.trainer import Curve

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "examples" / "cluster" / "sdk"))
import create_experiment as sdk_example  # noqa: E402

NS = "team-a"
NAMES = {"loss": "val_loss", "accuracy": "val_accuracy"}


def _good() -> Curve:
    return renamed(converging(), NAMES, keep=True)


def _bad() -> Curve:
    return renamed(diverging(), NAMES, keep=True)


def _true_conditions(trial: dict[str, Any]) -> set[str]:
    conditions = (trial.get("status") or {}).get("conditions") or []
    return {c["type"] for c in conditions if c.get("status") == "True"}


def test_readme_cluster_example_on_real_katib(katib: RealKatib) -> None:
    katib.script.script = every(3, _bad, _good)
    experiment = sdk_example.build_experiment("sdk-example")
    client = KatibClient(config_file=str(katib.kubeconfig), namespace=NS)
    client.create_experiment(cast(Any, experiment), namespace=NS)

    client.wait_for_experiment_condition("sdk-example", NS, "Succeeded", timeout=400, polling_interval=1)
    optimal = client.get_optimal_hyperparameters("sdk-example", NS)
    assert optimal is not None and optimal.best_trial_name

    trials = katib.trial_list(NS, "sdk-example")
    assert len(trials) == 12, katib.describe(NS, "sdk-example")
    stopped = [t for t in trials if "EarlyStopped" in _true_conditions(t)]
    assert len(stopped) >= 3, katib.describe(NS, "sdk-example")
    for t in trials:
        conds = _true_conditions(t)
        assert ("EarlyStopped" in conds) or ("Succeeded" in conds), katib.describe(NS, "sdk-example")
        assert is_observation_available(t), f"{t['metadata']['name']} has no observation"
    # Katib's DB manager holds exactly the trainer statuses sent: no loss, no duplicate, in order
    for t in trials:
        name = t["metadata"]["name"]
        sent = katib.sent.values(name, "val_loss")
        stored = [value for _, value, _ in katib.rows(name, "val_loss")]
        assert stored == sent, f"{name}: stored {stored} != sent {sent}"
