from __future__ import annotations

import copy
import math
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from katib_progress.core.errors import ConfigError
from katib_progress.local.experiment import load_experiment, parse_experiment

from .conftest import experiment_doc, write_experiment

# Katib's own example, vendored unchanged from shared/reference.
REFERENCE = Path(__file__).resolve().parent / "data" / "katib-experiment-trainjob.example.yaml"
EXAMPLE = Path(__file__).parents[2] / "examples" / "local" / "experiment.yaml"


def _parse(doc: dict[str, Any], tmp_path: Path) -> Any:
    return parse_experiment(doc, source=tmp_path / "exp.yaml")


@pytest.mark.parametrize(
    ("mutate", "field", "fragment"),
    [
        (
            lambda s: s["parameters"][0]["feasibleSpace"].update(min="abc"),
            "spec.parameters[0].feasibleSpace.min",
            "abc",
        ),
        (
            lambda s: s["parameters"][0]["feasibleSpace"].update(min="2", max="1"),
            "spec.parameters[0].feasibleSpace.min",
            "max",
        ),
        (
            lambda s: s["parameters"][0].update(parameterType="float"),
            "spec.parameters[0].parameterType",
            "float",
        ),
        (lambda s: s["parameters"][0].pop("feasibleSpace"), "spec.parameters[0].feasibleSpace", "required"),
        (lambda s: s["objective"].update(type="smallest"), "spec.objective.type", "smallest"),
        (lambda s: s.update(parallelTrialCount=0), "spec.parallelTrialCount", "0"),
        (lambda s: s.update(parallelTrialCount=5), "spec.parallelTrialCount", "maxTrialCount"),
        (
            lambda s: s["trialTemplate"]["trialParameters"][0].update(reference="nope"),
            "spec.trialTemplate.trialParameters[0].reference",
            "nope",
        ),
        (
            lambda s: s["trialTemplate"]["trialSpec"]["spec"]["trainer"].update(
                command=[], args=["--x=${trialParameters.x}"]
            ),
            "spec.trialTemplate.trialSpec.spec.trainer.command",
            "required",
        ),
        (
            lambda s: s["trialTemplate"]["trialSpec"]["spec"]["trainer"].update(numNodes=0),
            "spec.trialTemplate.trialSpec.spec.trainer.numNodes",
            "0",
        ),
        (
            lambda s: s["objective"].update(metricStrategies=[{"name": "acc", "value": "max"}]),
            "spec.objective.metricStrategies[0].name",
            "acc",
        ),
    ],
)
def test_malformed_experiment_names_the_field(mutate: Any, field: str, fragment: str, tmp_path: Path) -> None:
    doc = experiment_doc(["--x=${trialParameters.x}"])
    mutate(doc["spec"])
    with pytest.raises(ConfigError) as info:
        _parse(doc, tmp_path)
    assert info.value.field == field
    assert fragment in str(info.value)


def test_second_parameter_error_is_indexed(tmp_path: Path) -> None:
    params = [
        {"name": "x", "parameterType": "double", "feasibleSpace": {"min": "0", "max": "1"}},
        {"name": "n", "parameterType": "int", "feasibleSpace": {"min": "1.5", "max": "4"}},
    ]
    doc = experiment_doc(["--x=${trialParameters.x}", "--n=${trialParameters.n}"], parameters=params)
    with pytest.raises(ConfigError, match=r"spec\.parameters\[1\]\.feasibleSpace\.min: must be an integer"):
        _parse(doc, tmp_path)


def test_placeholder_without_trial_parameter_is_rejected(tmp_path: Path) -> None:
    doc = experiment_doc(["--x=${trialParameters.x}", "--y=${trialParameters.y}"])
    with pytest.raises(ConfigError, match=r"trialParameters\.y"):
        _parse(doc, tmp_path)


def test_substitution_and_metadata_references(tmp_path: Path) -> None:
    doc = experiment_doc(
        ["--x=${trialParameters.x}", "--name=${trialParameters.trial}", "--ns=${trialParameters.ns}"],
        trial_parameters=[
            {"name": "x", "reference": "x"},
            {"name": "trial", "reference": "${trialSpec.Name}"},
            {"name": "ns", "reference": "${trialSpec.Namespace}"},
        ],
    )
    doc["metadata"]["namespace"] = "team-a"
    doc["spec"]["trialTemplate"]["trialSpec"]["spec"]["trainer"]["env"] = [
        {"name": "LR", "value": "${trialParameters.x}"}
    ]
    exp = _parse(doc, tmp_path)
    original = copy.deepcopy(doc)
    rendered = exp.render("exp-abc", {"x": "0.25"})
    assert rendered.argv[-3:] == ("--x=0.25", "--name=exp-abc", "--ns=team-a")
    assert rendered.env == {"LR": "0.25"}
    assert doc == original  # the caller's input is never mutated


def test_reference_example_reports_what_local_cannot_honour() -> None:
    exp = load_experiment(REFERENCE)
    notes = "\n".join(exp.unsupported)
    assert "runtimeRef" in notes and "image" in notes and "numNodes=2" in notes
    assert exp.strategies() == {"loss": "min"}
    argv = exp.render("t", {"lr": "0.02", "momentum": "0.7"}).argv
    assert "--lr=0.02" in argv and "--momentum=0.7" in argv


def test_unknown_fields_are_tolerated_and_reported(tmp_path: Path) -> None:
    doc = experiment_doc(["--x=${trialParameters.x}"])
    doc["spec"]["trialTemplate"]["trialSpec"]["spec"]["initializer"] = {"dataset": {}}
    doc["spec"]["objective"]["surprise"] = 1
    exp = _parse(doc, tmp_path)
    notes = "\n".join(exp.unsupported)
    assert "spec.trialTemplate.trialSpec.spec.initializer" in notes
    assert "spec.objective.surprise" in notes


def test_fingerprint_ignores_counts_only(tmp_path: Path) -> None:
    base = experiment_doc(["--x=${trialParameters.x}"])
    more = copy.deepcopy(base)
    more["spec"]["maxTrialCount"] = 9
    other = copy.deepcopy(base)
    other["spec"]["parameters"][0]["feasibleSpace"]["max"] = "0.9"
    fp = _parse(base, tmp_path).fingerprint
    assert _parse(more, tmp_path).fingerprint == fp
    assert _parse(other, tmp_path).fingerprint != fp


@pytest.mark.parametrize("name", ["medianstop", "kp-medianstop"])
def test_medianstop_runs_katibs_rule_with_its_settings(tmp_path: Path, name: str) -> None:
    doc = experiment_doc(
        ["--x=${trialParameters.x}"],
        early_stopping={
            "algorithmName": name,
            "algorithmSettings": [
                {"name": "min_trials_required", "value": "2"},
                {"name": "start_step", "value": "5"},
            ],
        },
    )
    exp = _parse(doc, tmp_path)
    assert exp.pruning_settings() == {"policy": "medianstop", "min_trials_required": "2", "start_step": "5"}
    (note,) = [n for n in exp.unsupported if "medianstop" in n]
    assert "when it first reported" in note  # the one difference from Katib's, said
    assert not any("start_step" in n for n in exp.unsupported)


def test_bundled_example_loads() -> None:
    exp = load_experiment(EXAMPLE)
    argv = exp.render("t", {"lr": "0.1", "momentum": "0.9", "hidden": "32"}).argv
    assert Path(argv[1]).is_absolute() and argv[1].endswith("examples/local/train.py")


def test_cli_reports_malformed_yaml_with_field(tmp_path: Path) -> None:
    doc = experiment_doc(["--x=${trialParameters.x}"])
    doc["spec"]["parameters"][0]["feasibleSpace"]["max"] = "high"
    path = write_experiment(tmp_path / "bad.yaml", doc)
    proc = subprocess.run(
        [sys.executable, "-m", "katib_progress.cli", "sweep", str(path), "--workdir", str(tmp_path / "w")],
        capture_output=True,
        check=False,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2
    assert "spec.parameters[0].feasibleSpace.max" in proc.stderr and "'high'" in proc.stderr


def test_yaml_without_experiment(tmp_path: Path) -> None:
    path = tmp_path / "x.yaml"
    path.write_text(yaml.safe_dump({"kind": "TrainJob"}))
    with pytest.raises(ConfigError, match="exactly one Experiment"):
        load_experiment(path)


def test_observation_follows_katib_get_metrics() -> None:
    """pkg/controller.v1beta1/trial/trial_controller_util.go getMetrics + status_util.go fallback."""
    from katib_progress.local._katib import katib_observation

    t = [f"2026-01-01T00:00:0{i}Z" for i in range(5)]
    rows = [(t[0], "2.0"), (t[1], "1.0"), (t[2], "nan")]
    assert katib_observation(rows, "min") == 1.0  # a later NaN never replaces min/max
    assert math.isnan(katib_observation(rows, "latest") or 0.0)  # latest is the last row, NaN or not
    first_nan = [(t[0], "nan"), (t[1], "1.0"), (t[2], "3.0")]
    assert math.isnan(katib_observation(first_nan, "min") or 0.0)  # NaN seeds min/max: Go compares false
    assert katib_observation([(t[1], "1.0"), (t[0], "5.0")], "latest") == 1.0  # by timestamp
    assert katib_observation([(t[0], "1.0"), (t[0], "5.0")], "latest") == 5.0  # a tie: the later row
    assert katib_observation([(t[0], "unavailable")], "min") is None
    assert katib_observation([(t[0], "1.0"), (t[1], "unavailable")], "latest") is None
