"""Katib's StdOut and File metrics collectors in a local sweep; rules in local/_textmetrics.py."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from katib_progress.core.errors import ConfigError
from katib_progress.local._textmetrics import ZERO_TIME, parse_json, parse_text
from katib_progress.local.experiment import parse_experiment

from .conftest import experiment_doc, sweep, write_experiment


def test_default_filter_reads_katib_style_lines() -> None:
    text = (
        "2026-01-01T10:00:00Z INFO Train Epoch: 1 [0/60 (0%)]\tloss=2.3026\n"
        "epoch 2 loss = -7.53e-05 accuracy=.98 lossy=1\n"
        "no metric here=1\n"
        "loss=nan\n"
    )
    rows = parse_text(text, ["loss", "accuracy"])
    assert rows == [
        ("2026-01-01T10:00:00Z", "loss", "2.3026"),  # the first word is a timestamp
        (ZERO_TIME, "loss", "-7.53e-05"),
        (ZERO_TIME, "accuracy", ".98"),
        (ZERO_TIME, "loss", ""),  # Katib keeps what the filter matched, even nothing
    ]


def test_custom_filter_and_json_lines() -> None:
    line = (
        "2026-01-01T10:00:00Z INFO "
        "{metricName: accuracy, metricValue: 0.9644};{metricName: loss, metricValue: 0.12}"
    )
    katib_filter = r"{metricName: ([\w|-]+), metricValue: ((-?\d+)(\.\d+)?)}"
    assert parse_text(line, ["accuracy", "loss"], [katib_filter]) == [
        ("2026-01-01T10:00:00Z", "accuracy", "0.9644"),
        ("2026-01-01T10:00:00Z", "loss", "0.12"),
    ]
    lines = "\n".join(
        [
            json.dumps({"timestamp": "2026-01-01T10:00:00Z", "loss": "0.5", "global_step": "1"}),
            json.dumps({"timestamp": 1767261600.5, "loss": "0.25"}),
            json.dumps({"loss": 0.1}),  # a number, not a string: Katib skips it
            "",
        ]
    )
    assert parse_json(lines, ["loss"]) == [
        ("2026-01-01T10:00:00Z", "loss", "0.5"),
        ("2026-01-01T10:00:00Z", "loss", "0.25"),  # Katib reads ".5" as 5 ns; RFC3339Nano keeps whole µs
    ]
    with pytest.raises(ValueError, match="line 2 is not JSON"):
        parse_json('{"loss": "1"}\nloss=1\n', ["loss"])


@pytest.mark.parametrize(
    ("collector", "field", "words"),
    [
        ({"collector": {"kind": "TensorFlowEvent"}}, "collector.kind", "not supported by a local sweep"),
        ({"collector": {"kind": "Custom"}}, "collector.kind", "not supported by a local sweep"),
        ({"collector": {"kind": "Pushh"}}, "collector.kind", "invalid metrics collector kind"),
        (
            {"collector": {"kind": "File"}, "source": {"fileSystemPath": {"path": "m.log", "kind": "File"}}},
            "source.fileSystemPath.path",
            "absolute path",
        ),
        (
            {
                "collector": {"kind": "File"},
                "source": {
                    "fileSystemPath": {"path": "/m.json", "kind": "File", "format": "JSON"},
                    "filter": {"metricsFormat": ["(a)=(b)"]},
                },
            },
            "source.filter",
            "filter must be nil",
        ),
        (
            {"collector": {"kind": "StdOut"}, "source": {"filter": {"metricsFormat": ["loss=(.*)"]}}},
            "source.filter.metricsFormat[0]",
            "two top subexpressions",
        ),
    ],
)
def test_collector_specs_katib_rejects_are_rejected(
    collector: dict[str, Any], field: str, words: str
) -> None:
    doc = experiment_doc(["--x=${trialParameters.x}"], metricsCollectorSpec=collector)
    with pytest.raises(ConfigError) as info:
        parse_experiment(doc, source=Path("e.yaml"))
    assert info.value.field == f"spec.metricsCollectorSpec.{field}" and words in str(info.value)


def _inline(code: str, **spec: Any) -> dict[str, Any]:
    doc = experiment_doc([], maxTrialCount=1, parallelTrialCount=1, **spec)
    doc["spec"]["parameters"] = [
        {"name": "x", "parameterType": "categorical", "feasibleSpace": {"list": ["1"]}}
    ]
    doc["spec"]["algorithm"] = {"algorithmName": "grid"}
    doc["spec"]["trialTemplate"]["trialSpec"]["spec"]["trainer"]["command"] = [
        sys.executable,
        "-c",
        code,
        "${trialParameters.x}",
    ]
    return doc


def test_a_script_that_prints_its_metric_succeeds_by_default(tmp_path: Path, run_dir: Path) -> None:
    """No metricsCollectorSpec means StdOut in Katib: printed ``loss=`` lines are the metric log."""
    code = "import sys; print('loss=0.5'); print('loss=0.2', file=sys.stderr); print('loss=0.3')"
    path = write_experiment(tmp_path / "e.yaml", _inline(code))
    result, out = sweep(path, run_dir)
    assert result.exit_code == 0, out
    (trial,) = result.summary.trials
    assert (trial.status, trial.objective) == ("Succeeded", 0.2)  # min over stdout and stderr
    assert "kind=StdOut" in out and "Katib's default" in out  # the notice says what happens


def test_push_without_a_report_names_the_fix(tmp_path: Path, run_dir: Path) -> None:
    doc = _inline("print('loss=0.2')", metricsCollectorSpec={"collector": {"kind": "Push"}})
    path = write_experiment(tmp_path / "e.yaml", doc)
    result, _ = sweep(path, run_dir)
    (trial,) = result.summary.trials
    assert trial.status == "MetricsUnavailable"
    assert "update_trainjob_status" in trial.message and "StdOut" in trial.message


def test_file_collector_gives_each_trial_its_own_file(tmp_path: Path, run_dir: Path) -> None:
    code = (
        "import sys; open(sys.argv[2], 'w').write("
        "'{metricName: accuracy, metricValue: 0.5}\\n{metricName: accuracy, metricValue: 0.75}\\n')"
    )
    collector = {
        "collector": {"kind": "File"},
        "source": {
            "fileSystemPath": {"path": "/katib/metrics.log", "kind": "File"},
            "filter": {"metricsFormat": [r"{metricName: ([\w|-]+), metricValue: ((-?\d+)(\.\d+)?)}"]},
        },
    }
    doc = _inline(
        code,
        metricsCollectorSpec=collector,
        objective={"type": "maximize", "objectiveMetricName": "accuracy"},
    )
    doc["spec"]["trialTemplate"]["trialSpec"]["spec"]["trainer"]["command"].append("/katib/metrics.log")
    path = write_experiment(tmp_path / "e.yaml", doc)
    result, out = sweep(path, run_dir)
    assert result.exit_code == 0, out
    (trial,) = result.summary.trials
    assert (trial.status, trial.objective) == ("Succeeded", 0.75)
    assert (run_dir / "trials" / trial.name / "katib" / "metrics.log").exists()
    assert "trials/<trial>/katib/metrics.log" in out
