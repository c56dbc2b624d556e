"""Our entries in Katib's katib-config (``katib-progress katib-config merge|remove``, issue 11 part 3):
merged into whatever config the cluster has, every key we do not own kept, idempotent, and the
restart advice right (init is read at controller start, runtime on every use)."""

from __future__ import annotations

import copy
import subprocess
import sys
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from katib_progress import katib_config as kc
from katib_progress.suggestion._settings import ALGORITHMS
from tests.test_manifests import K8S_VERSION, _build

ROOT = Path(__file__).resolve().parents[1]
KATIB_DIR = ROOT / "manifests" / "katib"
UPSTREAM = KATIB_DIR / "upstream"
STOCK = UPSTREAM / "katib-config.standalone.yaml"
SHIPPED = KATIB_DIR / "katib-config.yaml"
OUR_ALGORITHMS = {
    *("kp-tpe", "kp-multivariate-tpe", "kp-cmaes", "kp-random", "kp-grid", "kp-gp", "kp-qmc", "kp-tuned-tpe"),
    *("kp-sobol", "kp-bayesianoptimization", "kp-hyperband"),
}
OUR_EARLY_STOPPINGS = ("katib-progress", "kp-medianstop")
TRAINJOB = "TrainJob.v1alpha1.trainer.kubeflow.org"


def _load(path: Path) -> dict[str, Any]:
    doc: dict[str, Any] = yaml.safe_load(path.read_text())
    return doc


def _by_name(entries: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    names = [e["algorithmName"] for e in entries]
    assert len(names) == len(set(names)), f"duplicate algorithmName in {names}"
    return {e["algorithmName"]: e for e in entries}


def _without_ours(config: dict[str, Any]) -> dict[str, Any]:
    """``config`` minus everything merge may add (our entries and the TrainJob trial resource)."""
    out = kc.remove_config(config)
    controller = (out.get("init") or {}).get("controller") or {}
    if "trialResources" in controller:
        controller["trialResources"] = [r for r in controller["trialResources"] if r != TRAINJOB]
    return out


def _platform_configmap() -> dict[str, Any]:
    """A Kubeflow-platform katib-config as ``kubectl get -o yaml`` prints it: Katib's cert-manager
    config (certGenerator absent = off) with local edits, server-set metadata, a stale kp-tpe."""
    config = _load(UPSTREAM / "katib-config.cert-manager.yaml")
    controller = config["init"]["controller"]
    controller.update(
        {"enableLeaderElection": True, "injectSecurityContext": True, "enableGRPCProbeInSuggestion": False}
    )
    config["init"]["certGenerator"] = {"enable": False}
    config["runtime"]["metricsCollectors"][0]["image"] = "mirror.local/katib/file-metrics-collector:v0.19.0"
    suggestions = config["runtime"]["suggestions"]
    suggestions[1]["resources"] = {"limits": {"memory": "2Gi"}}  # tpe
    suggestions.insert(0, {"algorithmName": "team-bo", "image": "mirror.local/team/bo:3", "foo": [1, "on"]})
    suggestions.append({"algorithmName": "kp-tpe", "image": "old/suggestion:0.0.1"})
    config["runtime"]["earlyStoppings"].append({"algorithmName": "team-es", "image": "mirror.local/es:1"})
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": "katib-config",
            "namespace": "kubeflow",
            "labels": {"app.kubernetes.io/component": "katib", "app.kubernetes.io/name": "katib-controller"},
            "annotations": {
                "kubectl.kubernetes.io/last-applied-configuration": '{"apiVersion":"v1"}',
                "team.example/owner": "ml-platform",
            },
            "resourceVersion": "48213",
            "uid": "0b0c7d2e-6f7a-4d51-9a3e-1f6f0c7d2e6f",
            "creationTimestamp": "2026-11-02T10:00:00Z",
            "managedFields": [{"manager": "kubectl", "operation": "Apply"}],
        },
        "data": {"katib-config.yaml": yaml.safe_dump(config, sort_keys=False), "notes": "keep me\n"},
    }


def test_shipped_reference_is_exactly_the_merge_of_stock() -> None:
    assert SHIPPED.read_text() == kc.merge_text(STOCK.read_text()).text


def test_stock_content_is_preserved() -> None:
    stock, shipped = _load(STOCK), _load(SHIPPED)
    assert shipped["init"] == stock["init"] and TRAINJOB in shipped["init"]["controller"]["trialResources"]
    assert shipped["runtime"]["metricsCollectors"] == stock["runtime"]["metricsCollectors"]
    ours = _by_name(shipped["runtime"]["suggestions"])
    for entry in stock["runtime"]["suggestions"]:
        assert ours[entry["algorithmName"]] == entry  # stock tpe/random/... keep upstream images
    early = _by_name(shipped["runtime"]["earlyStoppings"])
    for entry in stock["runtime"]["earlyStoppings"]:
        assert early[entry["algorithmName"]] == entry


def test_our_entries() -> None:
    shipped = _load(SHIPPED)
    suggestions = _by_name(shipped["runtime"]["suggestions"])
    assert set(kc.algorithm_names()) == OUR_ALGORITHMS <= suggestions.keys()
    for name in OUR_ALGORITHMS:
        entry = suggestions[name]
        assert entry["image"] == "katib-progress/suggestion:0.1.0"
        # Katib refuses a suggestion config declaring its own port 6789 / "katib-api".
        assert all(p.get("containerPort") != 6789 for p in entry.get("ports", []))
        assert entry["securityContext"]["runAsNonRoot"] is True
        assert {"requests", "limits"} <= entry["resources"].keys()
    for name in OUR_EARLY_STOPPINGS:  # ours and Katib's medianstop, served live by our image
        early = _by_name(shipped["runtime"]["earlyStoppings"])[name]
        # Katib reads only image, pull policy and resources for the early-stopping container.
        assert set(early) == {"algorithmName", "image", "imagePullPolicy", "resources"}
        assert early["image"] == "katib-progress/earlystopping:0.1.0"
    assert "medianstop" in _by_name(shipped["runtime"]["earlyStoppings"])  # Katib's own stays Katib's


def test_platform_config_keeps_everything_we_do_not_own() -> None:
    live = _platform_configmap()
    before = yaml.safe_load(live["data"]["katib-config.yaml"])
    result = kc.merge_text(yaml.safe_dump(live), suggestion_image="reg/s:2", earlystopping_image="reg/e:2")
    out = yaml.safe_load(result.text)
    after = yaml.safe_load(out["data"]["katib-config.yaml"])
    # certGenerator off, leader election, security-context injection, probes, custom images and
    # entries, the order of everything: all as they were
    assert _without_ours(after) == _without_ours(before)
    assert after["init"] == before["init"]  # TrainJob was there already: init untouched
    assert [e["algorithmName"] for e in after["runtime"]["suggestions"]][
        : len(before["runtime"]["suggestions"])
    ] == [
        e["algorithmName"] for e in before["runtime"]["suggestions"]
    ]  # the stale kp-tpe was replaced in place, the others appended
    suggestions = _by_name(after["runtime"]["suggestions"])
    assert {suggestions[n]["image"] for n in OUR_ALGORITHMS} == {"reg/s:2"}
    assert _by_name(after["runtime"]["earlyStoppings"])["katib-progress"]["image"] == "reg/e:2"
    # the ConfigMap: our data key rewritten, others kept; labels and annotations kept; server-set
    # fields and kubectl's last-applied copy dropped, so `kubectl apply -f -` takes it as is
    assert out["data"]["notes"] == "keep me\n"
    assert out["metadata"] == {
        "name": "katib-config",
        "namespace": "kubeflow",
        "labels": live["metadata"]["labels"],
        "annotations": {"team.example/owner": "ml-platform"},
    }
    assert kubernetes_validate.validate(out, K8S_VERSION, strict=True) == "1.33"
    assert not result.restart_needed
    assert "updated runtime.suggestions kp-tpe" in result.changes
    assert "added runtime.earlyStoppings katib-progress" in result.changes
    assert "no katib-controller restart needed" in result.advice()
    # idempotent: the output merged again changes nothing and says so
    again = kc.merge_text(result.text, suggestion_image="reg/s:2", earlystopping_image="reg/e:2")
    assert again.text == result.text and again.changes == () and not again.restart_needed
    assert again.advice() == (
        "katib-config: already up to date, nothing changed; no katib-controller restart needed.\n"
    )


def test_missing_trainjob_is_appended_and_needs_a_restart() -> None:
    live = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "katib-config", "namespace": "katib-system"},
        "data": {"katib-config.yaml": (UPSTREAM / "katib-config.leader-election.yaml").read_text()},
    }
    before = yaml.safe_load(live["data"]["katib-config.yaml"])
    assert TRAINJOB not in before["init"]["controller"]["trialResources"]
    result = kc.merge_text(yaml.safe_dump(live))
    after = yaml.safe_load(yaml.safe_load(result.text)["data"]["katib-config.yaml"])
    controller = after["init"]["controller"]
    assert controller["trialResources"] == [*before["init"]["controller"]["trialResources"], TRAINJOB]
    assert controller["enableLeaderElection"] is True and after["init"]["certGenerator"] == {"enable": True}
    assert _without_ours(after) == _without_ours(before)
    assert result.restart_needed
    assert f"added {TRAINJOB} to init.controller.trialResources" in result.changes
    advice = result.advice()
    assert "RESTART NEEDED" in advice
    assert "kubectl -n katib-system rollout restart deployment/katib-controller" in advice
    assert not kc.merge_text(result.text).restart_needed  # the second run has nothing to add


@pytest.mark.parametrize("controller", [{}, {"trialResources": []}, {"trialResources": None}])
def test_absent_trial_resources_keep_katibs_default(controller: dict[str, Any]) -> None:
    """Katib uses Job.v1.batch when the list is absent or empty (defaults.go): keep it working."""
    config = {
        "apiVersion": "config.kubeflow.org/v1beta1",
        "kind": "KatibConfig",
        "init": {"controller": controller},
    }
    merged = kc.merge_config(config)
    assert merged["init"]["controller"]["trialResources"] == ["Job.v1.batch", TRAINJOB]
    patched = kc.merge_config({"apiVersion": "config.kubeflow.org/v1beta1", "kind": "KatibConfig"})
    assert {e["algorithmName"] for e in patched["runtime"]["suggestions"]} == OUR_ALGORITHMS
    assert [e["algorithmName"] for e in patched["runtime"]["earlyStoppings"]] == list(OUR_EARLY_STOPPINGS)
    assert patched["init"]["controller"]["trialResources"] == ["Job.v1.batch", TRAINJOB]


def test_merge_is_pure_and_replaces_by_name() -> None:
    stock = _load(STOCK)
    before = copy.deepcopy(stock)
    once = kc.merge_config(stock, suggestion_image="r/s:1", earlystopping_image="r/e:1")
    assert stock == before
    assert kc.merge_config(once, suggestion_image="r/s:1", earlystopping_image="r/e:1") == once
    again = kc.merge_config(once, suggestion_image="r/s:2", earlystopping_image="r/e:2", pull_policy="Always")
    suggestions = _by_name(again["runtime"]["suggestions"])
    assert {(suggestions[n]["image"], suggestions[n]["imagePullPolicy"]) for n in OUR_ALGORITHMS} == {
        ("r/s:2", "Always")
    }
    assert len(again["runtime"]["suggestions"]) == len(once["runtime"]["suggestions"])
    early = _by_name(again["runtime"]["earlyStoppings"])
    assert {early[n]["image"] for n in OUR_EARLY_STOPPINGS} == {"r/e:2"}


def test_an_up_to_date_katibconfig_file_is_written_back_byte_for_byte() -> None:
    text = "# our GitOps copy, comments kept\n" + SHIPPED.read_text()
    result = kc.merge_text(text)
    assert result.text == text and result.changes == ()


def test_remove_takes_out_only_our_entries() -> None:
    live = _platform_configmap()
    merged = kc.merge_text(yaml.safe_dump(live)).text
    result = kc.remove_text(merged)
    after = yaml.safe_load(yaml.safe_load(result.text)["data"]["katib-config.yaml"])
    names = {e["algorithmName"] for e in after["runtime"]["suggestions"] + after["runtime"]["earlyStoppings"]}
    assert not names & (OUR_ALGORITHMS | set(OUR_EARLY_STOPPINGS))
    before = yaml.safe_load(live["data"]["katib-config.yaml"])
    assert after == kc.remove_config(before)  # only the stale kp-tpe of the input is gone too
    assert TRAINJOB in after["init"]["controller"]["trialResources"]  # never removed
    assert not result.restart_needed and "removed runtime.earlyStoppings katib-progress" in result.changes


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
        ({"kind": "KatibConfig", "init": {"controller": {"trialResources": "Job"}}}, {}, "trialResources"),
    ],
)
def test_merge_errors_name_the_field(config: dict[str, Any], kwargs: Any, field: str) -> None:
    with pytest.raises(ValueError, match=field.replace("[", r"\[")):
        kc.merge_config(config, **kwargs)


def _cli(*args: str, stdin: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "katib_progress.cli", "katib-config", *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        cwd=ROOT,
    )


def test_cli_merges_a_live_configmap_from_stdin_and_advises_on_stderr(tmp_path: Path) -> None:
    live = yaml.safe_dump(_platform_configmap())
    out = _cli("merge", "--suggestion-image", "reg/s:9", stdin=live)
    assert out.returncode == 0, out.stderr
    assert out.stdout == kc.merge_text(live, suggestion_image="reg/s:9").text
    assert "katib-config: updated runtime.suggestions kp-tpe" in out.stderr
    assert "no katib-controller restart needed" in out.stderr
    path = tmp_path / "cm.yaml"
    path.write_text(out.stdout)
    again = _cli(
        "merge", "--suggestion-image", "reg/s:9", "--input", str(path), "--output-file", str(path), stdin=""
    )
    assert again.returncode == 0 and again.stdout == "" and path.read_text() == out.stdout
    assert "already up to date" in again.stderr
    bad = _cli("merge", stdin="kind: Pod\n")
    assert bad.returncode == 2 and "kind must be KatibConfig" in bad.stderr


def test_no_kustomization_applies_a_katib_config() -> None:
    """A shipped katib-config would replace the cluster's (certGenerator, leader election...)."""
    assert not (KATIB_DIR / "kustomization.yaml").exists()
    assert not [d for d in _build("default") if d["kind"] == "ConfigMap"]


def test_suggestion_service_knows_exactly_the_registered_algorithms() -> None:
    assert {name.removeprefix("kp-") for name in OUR_ALGORITHMS} == set(ALGORITHMS) == set(kc.ALGORITHMS)
