from __future__ import annotations

import io
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from rich.console import Console

from katib_progress.local._view import SweepView
from katib_progress.local.experiment import load_experiment
from katib_progress.local.runner import SweepOptions, SweepResult, run_sweep

SCRIPTS = Path(__file__).parent / "scripts"


def experiment_doc(
    args: list[str],
    *,
    name: str = "exp",
    script: str = "raw_trial.py",
    parameters: list[dict[str, Any]] | None = None,
    trial_parameters: list[dict[str, str]] | None = None,
    early_stopping: dict[str, Any] | None = None,
    **spec: Any,
) -> dict[str, Any]:
    params = parameters or [
        {"name": "x", "parameterType": "double", "feasibleSpace": {"min": "0.0", "max": "0.6"}}
    ]
    body: dict[str, Any] = {
        "maxTrialCount": 2,
        "parallelTrialCount": 2,
        "objective": {"type": "minimize", "objectiveMetricName": "loss"},
        "algorithm": {"algorithmName": "random"},
        "parameters": params,
        "trialTemplate": {
            "trialParameters": trial_parameters
            or [{"name": p["name"], "reference": p["name"]} for p in params],
            "trialSpec": {
                "apiVersion": "trainer.kubeflow.org/v1alpha1",
                "kind": "TrainJob",
                "spec": {"trainer": {"command": [sys.executable, str(SCRIPTS / script), *args]}},
            },
        },
    }
    if early_stopping is not None:
        body["earlyStopping"] = early_stopping
    body.update(spec)
    return {
        "apiVersion": "kubeflow.org/v1beta1",
        "kind": "Experiment",
        "metadata": {"name": name},
        "spec": body,
    }


def write_experiment(path: Path, doc: dict[str, Any]) -> Path:
    path.write_text(yaml.safe_dump(doc), encoding="utf-8")
    return path


def sweep(path: Path, workdir: Path, **opts: Any) -> tuple[SweepResult, str]:
    out = io.StringIO()
    view = SweepView(live=False, console=Console(file=out, width=200))
    options = SweepOptions(workdir=workdir, live=False, grace_s=opts.pop("grace_s", 2.0), poll_s=0.05, **opts)
    result = run_sweep(load_experiment(path), options, view=view)
    return result, out.getvalue()


@pytest.fixture
def run_dir(tmp_path: Path) -> Path:
    return tmp_path / "work"
