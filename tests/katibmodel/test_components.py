"""katib-config, the composed suggestion pod, the image map, the pod network and admission."""

from __future__ import annotations

import os
import socket
from typing import Any

import pytest

from tests.katibmodel import composer, images, katibconfig, network, scenarios, webhook
from tests.katibmodel._controller import Timing
from tests.katibmodel._kube import Kube
from tests.kubestandin import KubeStandin


@pytest.fixture
def api(kube: KubeStandin) -> Kube:
    k = Kube(kube.api_client())
    katibconfig.install(k, katibconfig.SHIPPED.read_text())
    return k


def _suggestion(algorithm: str, early: str | None) -> dict[str, Any]:
    spec: dict[str, Any] = {"algorithm": {"algorithmName": algorithm}, "requests": 3}
    if early:
        spec["earlyStopping"] = {"algorithmName": early}
    return {
        "apiVersion": "kubeflow.org/v1beta1",
        "kind": "Suggestion",
        "metadata": {"name": "exp", "namespace": "team-a", "uid": "u-1"},
        "spec": spec,
    }


def test_katib_config_last_entry_wins_and_errors_name_the_algorithm(api: Kube) -> None:
    doc = (
        "runtime:\n  suggestions:\n  - {algorithmName: x, image: a}\n  - {algorithmName: x, image: b}\n"
        "  - {algorithmName: y, image: ' '}\n"
    )
    katibconfig.install(api, doc)
    assert katibconfig.suggestion_config(api, "x")["image"] == "b"
    with pytest.raises(
        katibconfig.KatibConfigError, match="required value for image configuration of algorithm name: y"
    ):
        katibconfig.suggestion_config(api, "y")
    with pytest.raises(
        katibconfig.KatibConfigError, match="failed to find early stopping config for algorithm: z"
    ):
        katibconfig.early_stopping_config(api, "z")
    init = katibconfig.InitConfig.read(api)
    assert init.trial_resources == ("Job.v1.batch",) and init.grpc_probe_in_suggestion  # upstream defaults


def test_shipped_config_watches_trainjobs(api: Kube) -> None:
    assert katibconfig.InitConfig.read(api).watches_kind("trainer.kubeflow.org/v1alpha1", "TrainJob")


def test_suggestion_pod_has_two_containers_sharing_one_network(api: Kube) -> None:
    s = _suggestion("kp-tpe", "katib-progress")
    dep = composer.desired_deployment(api, s, grpc_probes=True, timing=Timing())
    sug, es = dep["spec"]["template"]["spec"]["containers"]
    assert dep["metadata"]["name"] == "exp-kp-tpe"
    assert sug["name"] == "suggestion" and {"name": "suggestion-api", "containerPort": 6789} in sug["ports"]
    probe = {
        "grpc": {"port": 6789, "service": "manager.v1beta1.Suggestion"},
        "initialDelaySeconds": 10.0,
        "periodSeconds": 10.0,
    }
    assert sug["readinessProbe"] == probe
    assert sug["livenessProbe"]["periodSeconds"] == 120.0 and sug["livenessProbe"]["failureThreshold"] == 12
    assert es["name"] == "early-stopping" and es["ports"] == [
        {"name": "earlystop-api", "containerPort": 6788}
    ]
    assert "readinessProbe" not in es and "command" not in es and "args" not in es
    assert dep["spec"]["template"]["spec"]["serviceAccountName"] == "exp-kp-tpe"
    assert [p["port"] for p in composer.desired_service(s)["spec"]["ports"]] == [6789, 6788]
    assert composer.algorithm_endpoint(s) == "exp-kp-tpe.team-a:6789"
    assert composer.early_stopping_endpoint(s) == "exp-kp-tpe.team-a:6788"


def test_suggestion_config_must_not_declare_6789(api: Kube) -> None:
    katibconfig.install(
        api, "runtime:\n  suggestions:\n  - {algorithmName: x, image: a, ports: [{containerPort: 6789}]}\n"
    )
    with pytest.raises(composer.ComposeError, match="must not be specified"):
        composer.desired_deployment(api, _suggestion("x", None), grpc_probes=True, timing=Timing())


def test_image_map_runs_our_dockerfiles() -> None:
    ours = images.resolve("katib-progress/suggestion:0.1.0")
    assert ours.uid == 65532 and ours.argv({})[0].endswith("katib-progress")
    assert ours.argv({})[1:3] == ["suggestion", "serve"]
    assert images.resolve("ghcr.io/kubeflow/katib/earlystopping-medianstop:latest").uid == 0
    overridden = ours.argv({"command": ["katib-progress"], "args": ["db", "serve"]})
    assert overridden[1:] == ["db", "serve"]
    assert ours.argv({"args": ["x"]})[1:] == ["x"]  # args replace CMD, ENTRYPOINT stays
    assert images.in_pod_network(["--address", "0.0.0.0:6789", "--a=[::]:6788"], "127.1.2.3") == [
        "--address",
        "127.1.2.3:6789",
        "--a=127.1.2.3:6788",
    ]
    with pytest.raises(images.ImageNotModelled):
        images.resolve("example.com/other:1")


def test_listeners_sees_who_binds_a_pod_ip() -> None:
    dns = network.ClusterDNS()
    ip = dns.ip("svc.ns")
    assert dns.resolve("svc.ns:6788") == f"{ip}:6788" and dns.resolve("other.ns:1") == "other.ns:1"
    for family, host in ((socket.AF_INET, ip), (socket.AF_INET6, f"::ffff:{ip}")):
        with socket.socket(family, socket.SOCK_STREAM) as s:
            s.bind((host, 0))
            s.listen()
            port = s.getsockname()[1]
            assert (ip, port) in network.listeners([os.getpid()])[os.getpid()]


def test_admission_defaults_and_rejections(api: Kube) -> None:
    exp = scenarios.experiment("e1", max_trials=2, parallel=3)
    with pytest.raises(webhook.Rejected, match="parallelTrialCount: should be less than or equal"):
        webhook.admit(api, exp)
    exp = scenarios.experiment("e1", algorithm="nope")
    with pytest.raises(webhook.Rejected, match="unable to get Suggestion config data for algorithm nope"):
        webhook.admit(api, exp)
    admitted = webhook.admit(api, scenarios.experiment("e1", early_stopping="medianstop"))
    # additional metrics take the objective's direction (the code, not its comment)
    assert admitted["spec"]["objective"]["metricStrategies"] == [
        {"name": "loss", "value": "min"},
        {"name": "accuracy", "value": "min"},
    ]
    assert admitted["spec"]["resumePolicy"] == "Never"


def test_admission_refuses_a_namespace_without_the_injection_label(api: Kube) -> None:
    """Real Katib's validating webhook refuses it, Push collector or not (tests/e2e showed it)."""
    exp = scenarios.experiment("e1")
    exp["metadata"]["namespace"] = "team-b"
    with pytest.raises(
        webhook.Rejected, match=r"lacks label .katib\.kubeflow\.org/metrics-collector-injection"
    ):
        webhook.admit(api, exp)
    labels = {"team-b": {"katib.kubeflow.org/metrics-collector-injection": "enabled"}}
    admitted = webhook.admit(api, exp, labels)
    assert admitted["metadata"]["namespace"] == "team-b"


def test_run_spec_substitutes_parameters() -> None:
    exp = webhook.set_defaults(scenarios.experiment("e1"))
    run = webhook.run_spec(
        exp, "e1-abc", "team-a", [{"name": "lr", "value": "0.02"}, {"name": "momentum", "value": "0.7"}]
    )
    assert run["metadata"] == {"name": "e1-abc", "namespace": "team-a"}
    assert run["spec"]["trainer"]["command"][-2:] == ["--lr=0.02", "--momentum=0.7"]
    with pytest.raises(ValueError, match="ParameterAssignment"):
        webhook.run_spec(exp, "e1-abc", "team-a", [{"name": "lr", "value": "0.02"}])
