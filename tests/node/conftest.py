"""Fixtures of the real-node tier: one real single-node cluster for the session (node.py)."""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.e2e import katib
from tests.katibmodel._kube import Kube
from tests.node.node import RealNode, build_pause_image

ROOT = Path(__file__).resolve().parents[2]

#: the images `make images` built (scripts/images.sh: katib-progress/NAME:TAG, no registry); podman holds
#: them as localhost/katib-progress/NAME, which is the "registry" the tier's overlay names, as a user's
#: overlay names theirs (docs/deploy.md, step 2)
REGISTRY = "localhost"
TAG = os.environ.get("IMAGE_TAG", "0.1.0")


def image(name: str) -> str:
    return f"{REGISTRY}/katib-progress/{name}:{TAG}"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    for item in items:
        if here in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.e2e)


@pytest.fixture(scope="session")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RealNode]:
    workdir = tmp_path_factory.mktemp("node")
    # `make images` on the local Debian base (no registry reachable), as tests/e2e/test_images.py;
    # cached, so seconds when nothing changed
    subprocess.run(
        ["scripts/images.sh", "build", "collector"],
        cwd=ROOT,
        env={**os.environ, "IMAGES_BASE": "local"},
        check=True,
        timeout=1800,
    )
    build_pause_image(workdir)
    with RealNode(workdir) as cluster:
        cluster.load_image(image("collector"))
        yield cluster


@pytest.fixture(scope="session")
def installed(node: RealNode) -> dict[str, Any]:
    """The collector installed as docs/deploy.md says, after Katib's and Trainer's CRDs (read from the
    Go module cache, as their own installs put them): the Deployment once Available."""
    kube = Kube(node.api_client())
    katib.install_crds(kube, katib.module_dir("katib-source"), katib.module_dir("trainer-source"))
    node.kubectl("apply", "-k", str(_overlay(node.workdir)))
    return _wait_available(node, "katib-progress", "katib-progress-collector")


def _overlay(workdir: Path) -> Path:
    """docs/deploy.md, "Install the collector": a directory of the user's own, never the checkout."""
    overlay = workdir / "my-katib-progress"
    overlay.mkdir(exist_ok=True)
    base = os.path.relpath(ROOT / "manifests" / "default", overlay)
    (overlay / "kustomization.yaml").write_text(
        "apiVersion: kustomize.config.k8s.io/v1beta1\n"
        "kind: Kustomization\n"
        f"resources:\n  - {base}\n"
        "images:\n"
        "  - name: katib-progress/collector\n"
        f"    newName: {REGISTRY}/katib-progress/collector\n"
        f'    newTag: "{TAG}"\n'
    )
    return overlay


def _wait_available(node: RealNode, namespace: str, name: str, timeout: float = 240) -> dict[str, object]:
    deadline = time.monotonic() + timeout
    last: dict[str, object] = {}
    while time.monotonic() < deadline:
        last = json.loads(node.kubectl("-n", namespace, "get", "deployment", name, "-o", "json"))
        conds = {c["type"]: c["status"] for c in last.get("status", {}).get("conditions", [])}  # type: ignore[union-attr]
        if (
            conds.get("Available") == "True"
            and last["status"].get("readyReplicas") == last["spec"]["replicas"]
        ):  # type: ignore[index]
            return last
        time.sleep(2)
    pods = node.kubectl("-n", namespace, "get", "pods", "-o", "wide")
    events = node.kubectl("-n", namespace, "get", "events")
    raise AssertionError(f"{namespace}/{name} not Available within {timeout}s\n{pods}\n{events}")
