"""The cluster examples (examples/cluster/): each renders, fits katib-config and the real CRDs.

For each Experiment (two YAML files and the one the Kubeflow-SDK script builds offline) the trial
template's TrainJob, after Katib's ``${trialParameters.x}`` substitution, must be a valid TrainJob
under the real CRD schema, and its conditions must be the katib-progress design
(tests/test_examples_gjson.py, docs/deploy.md).
"""

from __future__ import annotations

import copy
import importlib.util
import json
import re
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import yaml
from kubernetes import client

from katib_progress.suggestion._settings import parse_settings
from katib_progress.suggestion.pruning.config import PruningConfig
from tests.kubestandin import KubeStandin, load_crd
from tests.test_examples_gjson import (
    FAILURE_CONDITION,
    MARKER_ANNOTATION,
    MARKER_VALUE,
    SUCCESS_CONDITION,
    katib_condition_met,
)

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples" / "cluster"
KATIB_CONFIG = ROOT / "manifests" / "katib" / "katib-config.yaml"
TRAINJOB_CRD = ROOT / "tests" / "kubestandin" / "crds" / "trainer.kubeflow.org_trainjobs.yaml"
YAML_EXAMPLES = ("hf-transformers", "custom-loop")
PLACEHOLDER = re.compile(r"\$\{trialParameters\.([A-Za-z0-9_-]+)\}")
DNS1035 = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")


def load_module(path: Path, name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def sdk_example() -> ModuleType:
    return load_module(EXAMPLES / "sdk" / "create_experiment.py", "example_sdk_create_experiment")


@pytest.fixture(scope="module", params=[*YAML_EXAMPLES, "sdk"])
def experiment(request: pytest.FixtureRequest, sdk_example: ModuleType) -> dict[str, Any]:
    if request.param == "sdk":
        built: dict[str, Any] = sdk_example.build_experiment()
        return built
    doc: dict[str, Any] = yaml.safe_load((EXAMPLES / request.param / "experiment.yaml").read_text())
    return doc


@pytest.fixture(scope="module")
def katib_config() -> dict[str, Any]:
    config: dict[str, Any] = yaml.safe_load(KATIB_CONFIG.read_text())
    return config


@pytest.fixture(scope="module")
def trainjob_schema() -> Any:
    (rtype,) = load_crd(TRAINJOB_CRD)
    assert rtype.schema is not None
    return rtype.schema


def sample_values(experiment: dict[str, Any], pick: int) -> dict[str, str]:
    """A value per trial parameter, as Katib would substitute it (pick 0: low end, -1: high end)."""
    params = {p["name"]: p for p in experiment["spec"]["parameters"]}
    out = {}
    for tp in experiment["spec"]["trialTemplate"]["trialParameters"]:
        space = params[tp["reference"]]["feasibleSpace"]
        out[tp["name"]] = space["list"][pick] if "list" in space else space["min" if pick == 0 else "max"]
    return out


def render_trial(experiment: dict[str, Any], values: dict[str, str], name: str) -> dict[str, Any]:
    """Katib's substitution over the trialSpec text, plus the metadata Katib sets."""
    text = json.dumps(experiment["spec"]["trialTemplate"]["trialSpec"])
    text = PLACEHOLDER.sub(lambda m: values[m.group(1)], text)
    job: dict[str, Any] = json.loads(text)
    job["metadata"] = {"name": name, "namespace": "team-a", "labels": {"katib.kubeflow.org/experiment": "e"}}
    return job


# ---- Experiment content ------------------------------------------------------------------------


def test_uses_push_collector_and_registered_algorithms(
    experiment: dict[str, Any], katib_config: dict[str, Any]
) -> None:
    spec = experiment["spec"]
    assert spec["metricsCollectorSpec"]["collector"]["kind"] == "Push"
    suggestions = {s["algorithmName"]: s for s in katib_config["runtime"]["suggestions"]}
    early = {s["algorithmName"] for s in katib_config["runtime"]["earlyStoppings"]}
    algorithm = spec["algorithm"]["algorithmName"]
    assert algorithm.startswith("kp-") and algorithm in suggestions
    assert "katib-progress" in suggestions[algorithm]["image"]
    assert spec["earlyStopping"]["algorithmName"] == "katib-progress" in early
    # Katib names the suggestion Deployment and Service "<experiment>-<algorithm>".
    service = f"{experiment['metadata']['name']}-{algorithm}"
    assert len(service) <= 63 and DNS1035.match(service), service


def test_trial_template_conditions_are_the_documented_design(experiment: dict[str, Any]) -> None:
    template = experiment["spec"]["trialTemplate"]
    assert template["successCondition"] == SUCCESS_CONDITION
    assert template["failureCondition"] == FAILURE_CONDITION
    assert template["primaryContainerName"] == "node"
    assert template["trialSpec"]["kind"] == "TrainJob"
    assert template["trialSpec"]["apiVersion"] == "trainer.kubeflow.org/v1alpha1"


def test_trial_parameters_are_declared_referenced_and_used(experiment: dict[str, Any]) -> None:
    spec = experiment["spec"]
    declared = {tp["name"] for tp in spec["trialTemplate"]["trialParameters"]}
    references = {tp["reference"] for tp in spec["trialTemplate"]["trialParameters"]}
    assert references == {p["name"] for p in spec["parameters"]}
    used = set(PLACEHOLDER.findall(json.dumps(spec["trialTemplate"]["trialSpec"])))
    assert used == declared


@pytest.mark.parametrize("pick", [0, -1])
def test_substituted_trial_is_a_valid_trainjob(
    experiment: dict[str, Any], trainjob_schema: Any, pick: int
) -> None:
    job = render_trial(experiment, sample_values(experiment, pick), "custom-loop-x7k2m9pq")
    text = json.dumps(job)
    assert "${trialParameters." not in text and "${trialSpec." not in text  # shell ${VAR}s stay
    assert trainjob_schema.validate(job, None) == []
    pruned, dropped = trainjob_schema.prune(job)
    assert dropped == [], f"fields the API server would drop (kubectl --validate=strict rejects): {dropped}"
    assert pruned == job


def test_validation_catches_a_broken_trial(experiment: dict[str, Any], trainjob_schema: Any) -> None:
    job = render_trial(experiment, sample_values(experiment, 0), "x")
    broken = copy.deepcopy(job)
    broken["spec"]["trainer"]["numNodes"] = "two"
    del broken["spec"]["runtimeRef"]["name"]
    fields = {cause.field for cause in trainjob_schema.validate(broken, None)}
    assert {"spec.trainer.numNodes", "spec.runtimeRef.name"} <= fields


def test_pruning_settings_are_accepted(experiment: dict[str, Any]) -> None:
    spec = experiment["spec"]
    settings = {s["name"]: s["value"] for s in spec["earlyStopping"]["algorithmSettings"]}
    config = PruningConfig.from_settings(
        spec["objective"]["objectiveMetricName"], spec["objective"]["type"], settings
    )
    assert config.objective_metric == spec["objective"]["objectiveMetricName"]


def test_algorithm_settings_are_accepted(experiment: dict[str, Any]) -> None:
    algorithm = experiment["spec"]["algorithm"]
    pairs = [(s["name"], s["value"]) for s in algorithm.get("algorithmSettings") or []]
    parse_settings(algorithm["algorithmName"].removeprefix("kp-"), pairs)


@pytest.mark.parametrize("name", YAML_EXAMPLES)
def test_yaml_examples_state_versions_and_gates(name: str) -> None:
    text = (EXAMPLES / name / "experiment.yaml").read_text()
    for needle in (
        "TrainJobStatus",
        "Trainer v2.3.0",
        "Katib v0.19.0",
        "docs/deploy.md",
        "metrics-collector-injection: enabled",
        # how its image is built: `make example-images` builds the custom loop's; the Transformers one
        # needs torch >= 2.4, which no base reachable here has, so its file says the build command
        "make example-images"
        if name == "custom-loop"
        else "docker build -t katib-progress/example-hf-transformers:",
    ):
        assert needle in text, f"{name}/experiment.yaml must mention {needle!r}"


def test_sdk_example_states_versions_and_gates(sdk_example: ModuleType) -> None:
    doc = sdk_example.__doc__ or ""
    for needle in ("TrainJobStatus", "Trainer v2.3.0", "Katib v0.19.0", "kubeflow 0.5.0", "namespace.yaml"):
        assert needle in doc


# ---- the SDK example ---------------------------------------------------------------------------


def test_sdk_example_ships_train_fn_with_each_parameter(sdk_example: ModuleType) -> None:
    experiment = sdk_example.build_experiment("sdk-x")
    command = experiment["spec"]["trialTemplate"]["trialSpec"]["spec"]["trainer"]["command"]
    script = command[-1]
    assert "def train_fn(" in script and "update_trainjob_status" in script
    for param in ("lr", "momentum", "hidden"):
        assert f"'{param}': '${{trialParameters.{param}}}'" in script
    assert experiment["metadata"]["name"] == "sdk-x"
    assert sdk_example.SUCCESS_CONDITION == SUCCESS_CONDITION


def test_sdk_example_dry_run_prints_the_built_experiment(
    sdk_example: ModuleType, capsys: pytest.CaptureFixture[str]
) -> None:
    assert sdk_example.main(["--dry-run", "--name", "dry"]) == 0
    printed = yaml.safe_load(capsys.readouterr().out)
    assert printed == sdk_example.build_experiment("dry")


def test_example_scripts_compile() -> None:
    for path in sorted(EXAMPLES.glob("*/*.py")):
        compile(path.read_text(), str(path), "exec")


def test_hf_script_needs_no_katib_code() -> None:
    text = (EXAMPLES / "hf-transformers" / "train.py").read_text()
    code = "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("#"))
    body = code.split('"""', 2)[-1]  # after the module docstring
    for needle in ("kubeflow", "katib", "update_trainjob_status", "KubeflowCallback"):
        assert needle not in body.lower() if needle.islower() else needle not in body
    module = load_module(EXAMPLES / "hf-transformers" / "train.py", "example_hf_train")
    args = module.parse_args(["--learning-rate=3e-05", "--weight-decay=0.01", "--warmup-ratio=0.1"])
    assert (args.learning_rate, args.weight_decay, args.warmup_ratio) == (3e-05, 0.01, 0.1)
    with pytest.raises(SystemExit):  # passed to Transformers as warmup_steps: >= 1 would mean steps
        module.parse_args(["--warmup-ratio=1.5"])


# ---- against the Kubernetes API stand-in: create, complete, mark --------------------------------


def test_trainjob_lifecycle_through_the_api_server(kube: KubeStandin, experiment: dict[str, Any]) -> None:
    api = client.CustomObjectsApi(kube.api_client())
    group, version, plural = "trainer.kubeflow.org", "v1alpha1", "trainjobs"
    name = f"{experiment['metadata']['name']}-b7x2k9qz"[:63]
    job = render_trial(experiment, sample_values(experiment, 0), name)
    created = api.create_namespaced_custom_object(group, version, "team-a", plural, job)
    # The server applies the CRD's defaults (runtimeRef kind, suspend, managedBy) and keeps the rest.
    assert created["spec"]["trainer"] == job["spec"]["trainer"]
    assert created["spec"]["runtimeRef"]["kind"] == "ClusterTrainingRuntime"
    assert not katib_condition_met(created, SUCCESS_CONDITION)

    complete = {
        "type": "Complete",
        "status": "True",
        "reason": "JobSetCompleted",
        "message": "TrainJob completed",
        "lastTransitionTime": "2026-01-02T03:04:05Z",
    }
    api.patch_namespaced_custom_object_status(
        group, version, "team-a", plural, name, {"status": {"conditions": [complete]}}
    )
    done = api.get_namespaced_custom_object(group, version, "team-a", plural, name)
    assert katib_condition_met(done, 'status.conditions.#(type=="Complete")#|#(status=="True")#')
    assert not katib_condition_met(done, SUCCESS_CONDITION), "Katib must wait for the final metrics"

    api.patch_namespaced_custom_object(
        group,
        version,
        "team-a",
        plural,
        name,
        {"metadata": {"annotations": {MARKER_ANNOTATION: MARKER_VALUE}}},
    )
    marked = api.get_namespaced_custom_object(group, version, "team-a", plural, name)
    assert katib_condition_met(marked, SUCCESS_CONDITION)
    assert not katib_condition_met(marked, FAILURE_CONDITION)
