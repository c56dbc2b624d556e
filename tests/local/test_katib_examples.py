"""Katib's own example Experiments (kubeflow/katib examples/v1beta1) on a local sweep.

The ones with a trial that can run on one machine are converted to TrainJob trials in
examples/local/katib-examples/ (outcomes of all of Katib's examples: docs/local.md); the others must be
refused with a message that says why. The full converted set runs in the slow profile.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

from katib_progress.core.errors import ConfigError
from katib_progress.local.experiment import load_experiment, parse_experiment

from .conftest import experiment_doc, sweep

EXAMPLES = Path(__file__).parents[2] / "examples" / "local" / "katib-examples"
ALL = sorted(p.stem for p in EXAMPLES.glob("*.yaml"))
# What the suggestion service refuses, with a message naming the fix (docs/local.md's table).
MAYBE_REJECTED = {
    "hyperband": "earlyStopping.algorithmName must be 'katib-progress'",
    "hyperopt-distribution": "normal",  # distribution normal: refused by the suggestion service today
}


def _copy(name: str, tmp_path: Path, **spec: Any) -> Path:
    shutil.copy(EXAMPLES / "mnist.py", tmp_path / "mnist.py")
    doc = yaml.safe_load((EXAMPLES / f"{name}.yaml").read_text())
    doc["spec"].update(spec)
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


def _run(name: str, tmp_path: Path, **spec: Any) -> Any:
    path = _copy(name, tmp_path, **spec)
    try:
        result, out = sweep(path, tmp_path / "work", grace_s=5.0)
    except ConfigError as exc:
        word = MAYBE_REJECTED.get(name)
        assert word is not None and word in str(exc), f"{name} rejected: {exc}"
        return None
    assert result.exit_code == 0, out
    assert any(t.status == "Succeeded" and t.objective is not None for t in result.summary.trials), out
    return result


@pytest.mark.parametrize(
    "name", ["random", "file-metrics-collector", "file-metrics-collector-with-json-format"]
)
def test_converted_katib_examples_run(name: str, tmp_path: Path) -> None:
    """StdOut (Katib's default), File with Katib's metricsFormat filter, File with JSON lines."""
    result = _run(name, tmp_path, maxTrialCount=1, parallelTrialCount=1)
    (trial,) = result.summary.trials
    metric = result.summary.objective.metric
    assert 0 < trial.observation[metric] <= (1 if metric == "accuracy" else 10)


@pytest.mark.slow
@pytest.mark.timeout(1800)
@pytest.mark.parametrize("name", ALL)
def test_every_converted_katib_example_runs(name: str, tmp_path: Path) -> None:
    _run(name, tmp_path)


def test_every_converted_example_loads() -> None:
    assert len(ALL) >= 15
    for name in ALL:
        exp = load_experiment(EXAMPLES / f"{name}.yaml")
        assert exp.doc.spec.trial_template.trial_spec is not None


def _job_doc(kind: str, api: str) -> dict[str, Any]:
    doc = experiment_doc(["--x=${trialParameters.x}"])
    doc["spec"]["trialTemplate"]["trialSpec"] = {
        "apiVersion": api,
        "kind": kind,
        "spec": {
            "template": {"spec": {"containers": [{"name": "c", "command": ["--x=${trialParameters.x}"]}]}}
        },
    }
    return doc


@pytest.mark.parametrize(
    ("doc", "field", "words"),
    [
        (
            {
                "apiVersion": "kubeflow.org/v1beta1",
                "kind": "Experiment",
                "metadata": {"name": "nas"},
                "spec": {
                    "nasConfig": {"graphConfig": {"numLayers": 8}},
                    "algorithm": {"algorithmName": "enas"},
                },
            },
            "spec.nasConfig",
            "NAS) is not supported",
        ),
        (
            _job_doc("PipelineRun", "tekton.dev/v1beta1"),
            "spec.trialTemplate.trialSpec.kind",
            "got tekton.dev",
        ),
        (
            _job_doc("Job", "batch/v1"),
            "spec.trialTemplate.trialSpec.kind",
            "under spec.trainer of a TrainJob",
        ),
        (_job_doc("PyTorchJob", "kubeflow.org/v1"), "spec.trialTemplate.trialSpec.kind", "TrainJob"),
        (
            _job_doc("TrainJobs", "trainer.kubeflow.org/v1alpha1"),
            "spec.trialTemplate.trialSpec.kind",
            "TrainJobs",
        ),
    ],
    ids=["nas", "tekton", "job", "pytorchjob", "typo"],
)
def test_what_cannot_run_locally_says_why(doc: dict[str, Any], field: str, words: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_experiment(doc, source=Path("e.yaml"))
    assert info.value.field == field and words in str(info.value)


def test_a_config_map_template_says_it_needs_the_spec_inline() -> None:
    doc = experiment_doc([])
    doc["spec"]["trialTemplate"] = {"configMap": {"configMapName": "x", "templatePath": "y"}}
    with pytest.raises(ConfigError, match="inline") as info:
        parse_experiment(doc, source=Path("e.yaml"))
    assert info.value.field == "spec.trialTemplate.configMap"


@pytest.mark.parametrize(
    ("algorithm", "word"), [("sobol", "qmc"), ("bayesianoptimization", "gp"), ("pbt", "checkpoints")]
)
def test_katib_algorithm_names_point_to_ours(algorithm: str, word: str, tmp_path: Path) -> None:
    """Either the suggestion service accepts Katib's name, or the error names what to use."""
    doc = experiment_doc(["--x=${trialParameters.x}", "--steps=1"], maxTrialCount=1, parallelTrialCount=1)
    doc["spec"]["algorithm"] = {"algorithmName": algorithm}
    path = tmp_path / "e.yaml"
    path.write_text(yaml.safe_dump(doc))
    try:
        result, _ = sweep(path, tmp_path / "w")
    except ConfigError as exc:
        assert exc.field == "spec.algorithm" and word in str(exc)
        assert not (tmp_path / "w").exists()
    else:
        assert algorithm != "pbt" and result.exit_code == 0
