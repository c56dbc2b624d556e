"""Kustomize manifests (manifests/): they build, validate against Kubernetes schemas, and hold the
least-privilege, hardening and network rules docs/deploy.md promises."""

from __future__ import annotations

import shutil
import subprocess
from functools import cache
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
MANIFESTS = ROOT / "manifests"
KUSTOMIZATIONS = ("base", "default", "kubeflow-platform")
#: kubernetes-validate ships schemas up to 1.37; 1.33 is the oldest release the examples target.
K8S_VERSION = "1.33.0"
NAMESPACE = "katib-progress"
SERVICE_ACCOUNT = "katib-progress-collector"
POD_LABELS = {"app.kubernetes.io/name": "katib-progress", "app.kubernetes.io/component": "collector"}

#: The collector's permissions, exactly (docs/deploy.md, "Permissions").
EXPECTED_CLUSTER_RULES = {
    ("trainer.kubeflow.org", "trainjobs", verb) for verb in ("get", "list", "watch", "patch")
} | {
    ("kubeflow.org", "trials", "get"),
    ("kubeflow.org", "trials", "list"),  # kube/_owners.py: one paged list per TrainJob (re)list
    ("kubeflow.org", "trials/status", "patch"),
    ("kubeflow.org", "experiments", "get"),
    ("events.k8s.io", "events", "create"),
    ("events.k8s.io", "events", "patch"),
}
EXPECTED_LEASE_RULES = {("coordination.k8s.io", "leases", v) for v in ("get", "create", "update")}
FORBIDDEN_RESOURCES = {"secrets", "pods/log", "pods/exec", "pods/attach", "pods/portforward", "*"}


def _kubectl() -> str:
    path = shutil.which("kubectl")
    if path is None:
        # Debian's kubernetes-client is kubectl 1.20 with kustomize v2.0.3, which cannot build these
        # overlays (directory resources, `labels:`); no registry CI reaches ships a newer kustomize.
        pytest.skip("kubectl >= 1.27 not found (Debian's kubectl 1.20 is too old); overlays not built")
    return path


@cache
def _build(name: str) -> tuple[dict[str, Any], ...]:
    out = subprocess.run(
        [_kubectl(), "kustomize", str(MANIFESTS / name)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert out.returncode == 0, f"kubectl kustomize manifests/{name} failed:\n{out.stderr}"
    return tuple(doc for doc in yaml.safe_load_all(out.stdout) if doc)


def _raw_base() -> list[dict[str, Any]]:
    """The base's resource files as written (no kubectl needed)."""
    kustomization = yaml.safe_load((MANIFESTS / "base" / "kustomization.yaml").read_text())
    docs: list[dict[str, Any]] = []
    for name in kustomization["resources"]:
        docs += [d for d in yaml.safe_load_all((MANIFESTS / "base" / name).read_text()) if d]
    return docs


def _base_docs() -> tuple[dict[str, Any], ...]:
    """The built base when kubectl is there, else the raw files (checks that hold for both)."""
    if shutil.which("kubectl") is None:
        return tuple(_raw_base())
    return _build("base")


def _one(docs: Any, kind: str, name: str | None = None) -> dict[str, Any]:
    found = [d for d in docs if d["kind"] == kind and (name is None or d["metadata"]["name"] == name)]
    assert len(found) == 1, f"expected one {kind} {name or ''}, found {len(found)}"
    return found[0]


def _triples(rules: list[dict[str, Any]]) -> set[tuple[str, str, str]]:
    return {
        (group, resource, verb)
        for rule in rules
        for group in rule.get("apiGroups", [])
        for resource in rule.get("resources", [])
        for verb in rule.get("verbs", [])
    }


@pytest.mark.parametrize("name", KUSTOMIZATIONS)
def test_kustomization_builds_offline(name: str) -> None:
    docs = _build(name)
    assert docs and all({"apiVersion", "kind", "metadata"} <= d.keys() for d in docs)


@pytest.mark.parametrize("name", KUSTOMIZATIONS)
def test_built_manifests_validate_against_kubernetes_schemas(name: str) -> None:
    for doc in _build(name):
        assert kubernetes_validate.validate(doc, K8S_VERSION, strict=True) == "1.33"


def test_raw_base_files_validate_against_kubernetes_schemas() -> None:
    docs = _raw_base()
    assert {d["kind"] for d in docs} >= {"Namespace", "ServiceAccount", "ClusterRole", "Deployment"}
    for doc in docs:
        kubernetes_validate.validate(doc, K8S_VERSION, strict=True)


def test_schema_validation_rejects_a_bad_deployment() -> None:
    deployment = _one(_raw_base(), "Deployment")
    bad = yaml.safe_load(yaml.safe_dump(deployment))
    bad["spec"]["replicas"] = "two"
    bad["spec"]["template"]["spec"]["containers"][0]["securityContext"]["readOnlyRootFs"] = True
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(bad, K8S_VERSION, strict=True)


def test_base_namespaces_everything_into_katib_progress() -> None:
    for doc in _build("base"):
        if doc["kind"] in ("Namespace", "ClusterRole", "ClusterRoleBinding"):
            assert "namespace" not in doc["metadata"]
        else:
            assert doc["metadata"]["namespace"] == NAMESPACE, doc["metadata"]["name"]


# ---- RBAC --------------------------------------------------------------------------------------


def test_cluster_role_grants_exactly_what_the_collector_needs() -> None:
    role = _one(_raw_base(), "ClusterRole", "katib-progress-collector")
    assert _triples(role["rules"]) == EXPECTED_CLUSTER_RULES
    for rule in role["rules"]:
        assert "nonResourceURLs" not in rule and "resourceNames" not in rule
        for key in ("apiGroups", "resources", "verbs"):
            assert "*" not in rule[key], f"wildcard in {key}: {rule}"
        assert not FORBIDDEN_RESOURCES & set(rule["resources"])


def test_leases_only_in_own_namespace_and_only_by_name() -> None:
    docs = _base_docs()
    role = _one(docs, "Role", "katib-progress-collector-leader-election")
    assert role["metadata"].get("namespace", NAMESPACE) == NAMESPACE
    assert _triples(role["rules"]) == EXPECTED_LEASE_RULES
    deployment = _one(docs, "Deployment")
    args = deployment["spec"]["template"]["spec"]["containers"][0]["args"]
    lease = next(a.split("=", 1)[1] for a in args if a.startswith("--leader-election-id="))
    for rule in role["rules"]:
        if set(rule["verbs"]) & {"get", "update"}:
            assert rule["resourceNames"] == [lease]
        else:
            assert rule["verbs"] == ["create"]  # cannot be limited by name


def test_kubeflow_platform_policy_admits_only_the_collector_to_the_db_manager() -> None:
    """kubeflow/manifests' NetworkPolicy katib-db-manager admits profile namespaces and kubeflow only;
    ours adds the collector pods of our namespace on the DB manager's port, nothing else."""
    (policy,) = _build("kubeflow-platform")
    assert (policy["kind"], policy["metadata"]["namespace"]) == ("NetworkPolicy", "kubeflow")
    spec = policy["spec"]
    assert spec["podSelector"] == {"matchLabels": {"katib.kubeflow.org/component": "db-manager"}}
    assert spec["policyTypes"] == ["Ingress"]
    (rule,) = spec["ingress"]
    assert rule["ports"] == [{"protocol": "TCP", "port": 6789}]
    (peer,) = rule["from"]
    assert peer["namespaceSelector"] == {"matchLabels": {"kubernetes.io/metadata.name": NAMESPACE}}
    assert peer["podSelector"] == {"matchLabels": POD_LABELS}
    deployment = _one(_build("default"), "Deployment", "katib-progress-collector")
    assert POD_LABELS.items() <= deployment["spec"]["template"]["metadata"]["labels"].items()
    assert deployment["metadata"]["namespace"] == NAMESPACE
    assert "katib-db-manager.kubeflow:6789" in " ".join(
        deployment["spec"]["template"]["spec"]["containers"][0]["args"]
    )


def test_only_these_roles_exist_and_bind_the_collector() -> None:
    docs = _build("default")
    roles = {(d["kind"], d["metadata"]["name"]) for d in docs if d["kind"] in ("Role", "ClusterRole")}
    assert roles == {
        ("ClusterRole", "katib-progress-collector"),
        ("Role", "katib-progress-collector-leader-election"),
    }
    bindings = [d for d in docs if d["kind"] in ("RoleBinding", "ClusterRoleBinding")]
    assert len(bindings) == 2
    for binding in bindings:
        assert binding["subjects"] == [
            {"kind": "ServiceAccount", "name": SERVICE_ACCOUNT, "namespace": NAMESPACE}
        ]
        expected_kind = "ClusterRole" if binding["kind"] == "ClusterRoleBinding" else "Role"
        assert binding["roleRef"]["kind"] == expected_kind
        assert (expected_kind, binding["roleRef"]["name"]) in roles


# ---- the Deployment ----------------------------------------------------------------------------


def _pod(docs: Any) -> dict[str, Any]:
    deployment = _one(docs, "Deployment", "katib-progress-collector")
    assert deployment["spec"]["replicas"] == 2
    assert deployment["spec"]["selector"]["matchLabels"] == POD_LABELS
    template: dict[str, Any] = deployment["spec"]["template"]
    assert POD_LABELS.items() <= template["metadata"]["labels"].items()
    return template["spec"]


def test_deployment_runs_the_collector_hardened() -> None:
    built = shutil.which("kubectl") is not None
    pod = _pod(_base_docs())
    assert pod["serviceAccountName"] == SERVICE_ACCOUNT
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["runAsUser"] != 0
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    (container,) = pod["containers"]
    sc = container["securityContext"]
    assert sc["readOnlyRootFilesystem"] is True and sc["allowPrivilegeEscalation"] is False
    assert sc["capabilities"] == {"drop": ["ALL"]} and sc["seccompProfile"] == {"type": "RuntimeDefault"}
    assert {"cpu", "memory"} <= container["resources"]["requests"].keys()
    assert {"cpu", "memory"} <= container["resources"]["limits"].keys()
    # kustomize's images: transformer turns the placeholder into the registry reference.
    assert container["image"] == ("katib-progress/collector:0.1.0" if built else "katib-progress-collector")
    mounts = {m["mountPath"] for m in container.get("volumeMounts", [])}
    assert mounts == {"/tmp"}  # the only writable path
    assert all("hostPath" not in v for v in pod.get("volumes", []))


def test_deployment_args_and_probes_follow_the_flag_contract() -> None:
    (container,) = _pod(_raw_base())["containers"]
    args = container["args"]
    assert args[args.index("collector") : args.index("collector") + 2] == ["collector", "run"]
    for flag in (
        "--db-manager=katib-db-manager.kubeflow:6789",
        "--metrics-address=0.0.0.0:8080",
        "--leader-elect",
        "--leader-election-namespace=$(POD_NAMESPACE)",
        "--leader-election-identity=$(POD_NAME)",
    ):
        assert flag in args
    env = {e["name"]: e["valueFrom"]["fieldRef"]["fieldPath"] for e in container["env"] if "valueFrom" in e}
    assert env == {"POD_NAME": "metadata.name", "POD_NAMESPACE": "metadata.namespace"}
    (port,) = container["ports"]
    assert (port["name"], port["containerPort"]) == ("http-metrics", 8080)
    assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "http-metrics"}
    assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "http-metrics"}


def test_deployment_args_parse_with_the_real_cli() -> None:
    from katib_progress.cli import build_parser

    (container,) = _pod(_raw_base())["containers"]
    args = [
        a.replace("$(POD_NAMESPACE)", "katib-progress").replace("$(POD_NAME)", "p-0")
        for a in container["args"]
    ]
    parsed = build_parser().parse_args(args)
    assert parsed.db_manager == "katib-db-manager.kubeflow:6789"


def test_service_and_pdb_select_the_collector_pods() -> None:
    docs = _base_docs()
    service = _one(docs, "Service")
    assert service["spec"]["selector"] == POD_LABELS
    assert service["spec"]["ports"] == [
        {"name": "http-metrics", "port": 8080, "targetPort": "http-metrics", "protocol": "TCP"}
    ]
    pdb = _one(docs, "PodDisruptionBudget")
    assert pdb["spec"]["selector"]["matchLabels"] == POD_LABELS and pdb["spec"]["minAvailable"] == 1


def test_network_policy_allows_only_metrics_in_and_known_peers_out() -> None:
    policy = _one(_base_docs(), "NetworkPolicy")
    spec = policy["spec"]
    assert spec["podSelector"]["matchLabels"] == POD_LABELS
    assert sorted(spec["policyTypes"]) == ["Egress", "Ingress"]
    (ingress,) = spec["ingress"]
    assert ingress["ports"] == [{"port": 8080, "protocol": "TCP"}]
    egress_ports = {(p["port"], p["protocol"]) for rule in spec["egress"] for p in rule["ports"]}
    assert egress_ports == {
        (53, "UDP"),
        (53, "TCP"),
        (443, "TCP"),
        (6443, "TCP"),
        (6789, "TCP"),
        (6788, "TCP"),
    }
    for rule in spec["egress"]:
        assert rule.get("to"), "every egress rule names its peers"
        assert rule["ports"], "no egress rule may open every port"
    dns = next(r for r in spec["egress"] if {"port": 53, "protocol": "UDP"} in r["ports"])
    assert dns["to"][0]["podSelector"]["matchLabels"] == {"k8s-app": "kube-dns"}


def _version() -> str:
    import tomllib

    return str(tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"])


def test_one_image_naming_scheme_everywhere() -> None:
    """``[REGISTRY/]katib-progress/<component>:<version>``: what `make images` builds, what the
    manifests, `katib-config merge` and the examples use, and what the release publishes."""
    from katib_progress import katib_config

    version = _version()
    (image,) = yaml.safe_load((MANIFESTS / "base" / "kustomization.yaml").read_text())["images"]
    assert (image["newName"], image["newTag"]) == ("katib-progress/collector", version)
    defaults = (
        katib_config.IMAGE_TAG,
        katib_config.DEFAULT_SUGGESTION_IMAGE,
        katib_config.DEFAULT_EARLYSTOPPING_IMAGE,
    )
    assert defaults == (
        version,
        f"katib-progress/suggestion:{version}",
        f"katib-progress/earlystopping:{version}",
    )
    release = (ROOT / ".github" / "workflows" / "release.yml").read_text()
    assert "ghcr.io/${owner}/katib-progress/${COMPONENT}:${GITHUB_REF_NAME#v}" in release
    workflow = yaml.safe_load(release)
    components = workflow["jobs"]["images"]["strategy"]["matrix"]["component"]
    assert components == ["collector", "suggestion", "earlystopping"]
    assert all((ROOT / "images" / c / "Dockerfile").is_file() for c in components)
    script = (ROOT / "scripts" / "images.sh").read_text()
    assert 'ref() { echo "${IMAGE_REGISTRY:+$IMAGE_REGISTRY/}katib-progress/$1:$IMAGE_TAG"; }' in script
    assert "example-custom-loop" in script.split("ALL_IMAGES=", 1)[1].splitlines()[0]
    for name in ("custom-loop", "hf-transformers"):
        doc = yaml.safe_load((ROOT / "examples" / "cluster" / name / "experiment.yaml").read_text())
        trainer = doc["spec"]["trialTemplate"]["trialSpec"]["spec"]["trainer"]
        assert trainer["image"] == f"katib-progress/example-{name}:{version}"
        assert (ROOT / "examples" / "cluster" / name / "Dockerfile").is_file()


def test_cluster_examples_run_in_the_labelled_namespace() -> None:
    namespace = yaml.safe_load((ROOT / "examples" / "cluster" / "namespace.yaml").read_text())
    assert namespace["kind"] == "Namespace"
    assert namespace["metadata"]["labels"] == {"katib.kubeflow.org/metrics-collector-injection": "enabled"}
    for name in ("custom-loop", "hf-transformers"):
        doc = yaml.safe_load((ROOT / "examples" / "cluster" / name / "experiment.yaml").read_text())
        assert doc["metadata"]["namespace"] == namespace["metadata"]["name"]


def test_the_documented_overlay_sets_the_registry_without_touching_the_checkout(tmp_path: Path) -> None:
    """docs/deploy.md step 2, as written: an overlay in a directory of the user's own."""
    import os
    import re

    text = (ROOT / "docs" / "deploy.md").read_text()
    (body,) = re.findall(r"cat > my-katib-progress/kustomization.yaml <<'EOF'\n(.*?)\nEOF", text, re.S)
    overlay = tmp_path / "my-katib-progress"
    overlay.mkdir()
    checkout = os.path.relpath(MANIFESTS / "default", overlay)
    (overlay / "kustomization.yaml").write_text(body.replace("../katib-progress/manifests/default", checkout))
    out = subprocess.run(
        [_kubectl(), "kustomize", str(overlay)], capture_output=True, text=True, timeout=120, check=False
    )
    assert out.returncode == 0, out.stderr
    docs = [d for d in yaml.safe_load_all(out.stdout) if d]
    deployment = _one(docs, "Deployment", "katib-progress-collector")
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    assert container["image"] == f"registry.example.com/team/katib-progress/collector:{_version()}"
