"""The Katib integration (manifests/katib/): katib-config = Katib's stock config + our entries."""

from __future__ import annotations

import copy
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from katib_progress.suggestion._settings import ALGORITHMS
from tests.test_examples import load_module
from tests.test_manifests import _build

ROOT = Path(__file__).resolve().parents[1]
KATIB_DIR = ROOT / "manifests" / "katib"
SCRIPT = KATIB_DIR / "patch_katib_config.py"
STOCK = KATIB_DIR / "upstream" / "katib-config.standalone.yaml"
SHIPPED = KATIB_DIR / "katib-config.yaml"
OUR_ALGORITHMS = {"kp-tpe", "kp-multivariate-tpe", "kp-cmaes", "kp-random", "kp-grid", "kp-gp", "kp-qmc"}


@pytest.fixture(scope="module")
def patcher() -> Any:
    return load_module(SCRIPT, "manifests_patch_katib_config")


@pytest.fixture(scope="module")
def stock() -> dict[str, Any]:
    doc: dict[str, Any] = yaml.safe_load(STOCK.read_text())
    return doc


@pytest.fixture(scope="module")
def shipped() -> dict[str, Any]:
    doc: dict[str, Any] = yaml.safe_load(SHIPPED.read_text())
    return doc


def _by_name(entries: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    names = [e["algorithmName"] for e in entries]
    assert len(names) == len(set(names)), f"duplicate algorithmName in {names}"
    return {e["algorithmName"]: e for e in entries}


def test_shipped_config_is_the_script_output_for_stock(
    patcher: Any, stock: dict[str, Any], shipped: Any
) -> None:
    assert shipped == patcher.patch_katib_config(stock)


def test_stock_content_is_preserved(stock: dict[str, Any], shipped: dict[str, Any]) -> None:
    assert shipped["init"] == stock["init"]
    assert "TrainJob.v1alpha1.trainer.kubeflow.org" in shipped["init"]["controller"]["trialResources"]
    assert shipped["runtime"]["metricsCollectors"] == stock["runtime"]["metricsCollectors"]
    ours = _by_name(shipped["runtime"]["suggestions"])
    for entry in stock["runtime"]["suggestions"]:
        assert ours[entry["algorithmName"]] == entry  # stock tpe/random/... keep upstream images
    early = _by_name(shipped["runtime"]["earlyStoppings"])
    for entry in stock["runtime"]["earlyStoppings"]:
        assert early[entry["algorithmName"]] == entry


def test_our_entries(patcher: Any, shipped: dict[str, Any]) -> None:
    suggestions = _by_name(shipped["runtime"]["suggestions"])
    assert set(patcher.algorithm_names()) == OUR_ALGORITHMS <= suggestions.keys()
    for name in OUR_ALGORITHMS:
        entry = suggestions[name]
        assert entry["image"] == "ghcr.io/katib-progress/suggestion:0.1.0"
        # Katib refuses a suggestion config declaring its own port 6789 / "katib-api".
        assert all(p.get("containerPort") != 6789 for p in entry.get("ports", []))
        assert entry["securityContext"]["runAsNonRoot"] is True
        assert {"requests", "limits"} <= entry["resources"].keys()
    early = _by_name(shipped["runtime"]["earlyStoppings"])["katib-progress"]
    # Katib reads only image, pull policy and resources for the early-stopping container.
    assert set(early) == {"algorithmName", "image", "imagePullPolicy", "resources"}
    assert early["image"] == "ghcr.io/katib-progress/earlystopping:0.1.0"


def test_patch_is_idempotent_pure_and_replaces_by_name(patcher: Any, stock: dict[str, Any]) -> None:
    before = copy.deepcopy(stock)
    once = patcher.patch_katib_config(stock, suggestion_image="r/s:1", earlystopping_image="r/e:1")
    assert stock == before
    assert patcher.patch_katib_config(once, suggestion_image="r/s:1", earlystopping_image="r/e:1") == once
    again = patcher.patch_katib_config(once, suggestion_image="r/s:2", earlystopping_image="r/e:2")
    suggestions = _by_name(again["runtime"]["suggestions"])
    assert {suggestions[n]["image"] for n in OUR_ALGORITHMS} == {"r/s:2"}
    assert len(again["runtime"]["suggestions"]) == len(once["runtime"]["suggestions"])
    assert _by_name(again["runtime"]["earlyStoppings"])["katib-progress"]["image"] == "r/e:2"


def test_patch_adds_runtime_sections_when_missing(patcher: Any) -> None:
    patched = patcher.patch_katib_config({"apiVersion": "config.kubeflow.org/v1beta1", "kind": "KatibConfig"})
    assert {e["algorithmName"] for e in patched["runtime"]["suggestions"]} == OUR_ALGORITHMS
    assert [e["algorithmName"] for e in patched["runtime"]["earlyStoppings"]] == ["katib-progress"]


@pytest.mark.parametrize(
    ("config", "kwargs", "field"),
    [
        ({"kind": "ConfigMap"}, {}, "kind"),
        ({"kind": "KatibConfig"}, {"suggestion_image": ""}, "suggestion_image"),
        ({"kind": "KatibConfig"}, {"earlystopping_image": "a b"}, "earlystopping_image"),
        ({"kind": "KatibConfig"}, {"pull_policy": "Sometimes"}, "pull_policy"),
        ({"kind": "KatibConfig", "runtime": []}, {}, "runtime"),
        ({"kind": "KatibConfig", "runtime": {"suggestions": {}}}, {}, "runtime.suggestions"),
        ({"kind": "KatibConfig", "runtime": {"suggestions": [{"image": "x"}]}}, {}, "runtime.suggestions[0]"),
    ],
)
def test_patch_errors_name_the_field(patcher: Any, config: dict[str, Any], kwargs: Any, field: str) -> None:
    with pytest.raises(ValueError, match=field.replace("[", r"\[")):
        patcher.patch_katib_config(config, **kwargs)


def test_cli_patches_a_live_configmap(tmp_path: Path, stock: dict[str, Any]) -> None:
    live = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "katib-config", "namespace": "katib-system", "resourceVersion": "42"},
        "data": {"katib-config.yaml": yaml.safe_dump(stock)},
    }
    out = subprocess.run(
        [sys.executable, str(SCRIPT), "--configmap", "--suggestion-image", "reg/s:9"],
        input=yaml.safe_dump(live),
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    configmap = yaml.safe_load(out.stdout)
    assert configmap["metadata"] == {"name": "katib-config", "namespace": "katib-system"}
    inner = yaml.safe_load(configmap["data"]["katib-config.yaml"])
    assert _by_name(inner["runtime"]["suggestions"])["kp-tpe"]["image"] == "reg/s:9"
    bad = subprocess.run(
        [sys.executable, str(SCRIPT)],
        input="kind: Pod\n",
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert bad.returncode == 2 and "kind must be KatibConfig" in bad.stderr


def test_kustomize_output_carries_the_shipped_config(shipped: dict[str, Any]) -> None:
    docs = _build("katib")
    (configmap,) = docs
    assert (configmap["kind"], configmap["metadata"]["name"]) == ("ConfigMap", "katib-config")
    assert configmap["metadata"]["namespace"] == "kubeflow"
    assert yaml.safe_load(configmap["data"]["katib-config.yaml"]) == shipped


def test_suggestion_service_knows_every_registered_algorithm() -> None:
    for name in OUR_ALGORITHMS:
        assert name.removeprefix("kp-") in ALGORITHMS, name
