"""The images `make images` builds, run for real with podman (marker ``e2e``).

The three service images are built with ``scripts/images.sh`` on the local Debian base
(``IMAGES_BASE=local``; base and layers cached, so a rebuild without changes takes seconds), then
each is run with exactly the command line its manifest gives it:

- ``--help`` answers and the user is not root;
- the suggestion and early-stopping images, started with their own CMD (Katib sets none), pass their
  HEALTHCHECK, which asks grpc.health.v1 what Katib's probes ask;
- the suggestion image serves whole (fake-controller) Experiments with six ``kp-*`` algorithms;
- each image keeps its base's CA bundle (the host's, mounted for pip during the build, stays out);
- the collector image, started with the Deployment's args (``$(POD_NAME)``/``$(POD_NAMESPACE)``
  filled in as the kubelet does), a read-only root and the Deployment's uid, against the Kubernetes
  API stand-in and the image's own ``db serve`` as the DB manager, answers the Deployment's
  ``/healthz`` and ``/readyz`` probes and takes the leader Lease; SIGTERM stops it cleanly.

Every container is removed afterwards, by id.
"""

from __future__ import annotations

import os
import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from tests.kubestandin import KubeStandin
from tests.suggestion.katib_fake import FakeKatib, experiment
from tests.test_images import default_ref
from tests.test_manifests import _raw_base

ROOT = Path(__file__).resolve().parents[2]
SERVICES = ("collector", "suggestion", "earlystopping")
CACHE = Path(os.environ.get("IMAGES_CACHE", Path.home() / ".cache" / "katib-progress-images"))
LOCAL_BASE = os.environ.get("LOCAL_BASE_IMAGE", "localhost/katib-progress-base:bookworm")


@pytest.fixture(scope="module")
def podman() -> Iterator[Callable[..., subprocess.CompletedProcess[str]]]:
    """Builds the service images, then runs podman with the script's containers.conf; removes
    every container started through ``run -d`` on the way out."""
    subprocess.run(
        ["scripts/images.sh", "build", *SERVICES],
        cwd=ROOT,
        env={**os.environ, "IMAGES_BASE": "local"},
        check=True,
        timeout=3600,
    )
    env = {**os.environ, "CONTAINERS_CONF": str(CACHE / "containers.conf")}
    started: list[str] = []

    def run(*args: str, check: bool = True, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        out = subprocess.run(
            ["podman", *args], env=env, capture_output=True, text=True, timeout=timeout, check=False
        )
        if check and out.returncode != 0:
            raise AssertionError(f"podman {' '.join(args)}: {out.returncode}\n{out.stdout}\n{out.stderr}")
        if args[:2] == ("run", "-d"):
            started.append(out.stdout.strip())
        return out

    try:
        yield run
    finally:
        for cid in started:
            run("rm", "-f", "-t", "5", cid, check=False)


def wait_for(check: Callable[[], Any], timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.5)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.mark.parametrize("name", SERVICES)
def test_help_answers_and_the_user_is_not_root(podman: Callable[..., Any], name: str) -> None:
    helped = podman("run", "--rm", "--network=host", default_ref(name), "--help")
    assert helped.stdout.startswith("usage: katib-progress")
    uid = podman("run", "--rm", "--network=none", "--entrypoint", "id", default_ref(name), "-u").stdout
    assert uid.strip() == "65532"


@pytest.mark.parametrize("name", SERVICES)
def test_the_hosts_ca_bundle_stays_out_of_the_image(podman: Callable[..., Any], name: str) -> None:
    # the build mounts the host's bundle over the build container's for pip; the image keeps the base's
    bundle = "/etc/ssl/certs/ca-certificates.crt"
    base = podman("run", "--rm", "--network=none", LOCAL_BASE, "sha256sum", bundle).stdout
    image = podman(
        "run", "--rm", "--network=none", "--entrypoint", "sha256sum", default_ref(name), bundle
    ).stdout
    assert image == base


@pytest.mark.parametrize(("name", "port"), [("suggestion", 6789), ("earlystopping", 6788)])
def test_katibs_containers_become_healthy_with_the_images_cmd(
    podman: Callable[..., Any], name: str, port: int
) -> None:
    # Katib runs these with the image's ENTRYPOINT and CMD; their HEALTHCHECK asks grpc.health.v1
    # for the service Katib's probe names, on the port Katib's Service targets
    cid = podman("run", "-d", "--network=none", default_ref(name)).stdout.strip()
    wait_for(lambda: podman("healthcheck", "run", cid, check=False).returncode == 0, 90, f"{name} healthy")
    logs = podman("logs", cid).stderr
    assert f"listening on 0.0.0.0:{port}" in logs


def _serving(address: str) -> bool:
    with grpc.insecure_channel(address) as channel:
        try:
            reply = health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=2)
        except grpc.RpcError:
            return False
    return bool(reply.status == health_pb2.HealthCheckResponse.SERVING)


def test_the_suggestion_image_runs_experiments(podman: Callable[..., Any]) -> None:
    # Katib's side played by the tests' fake controller; the image's Optuna, numpy, scipy and
    # SQLAlchemy at work (the image has no PyTorch: kp-gp is refused, as docs/deploy.md says)
    address = f"127.0.0.1:{free_port()}"
    podman(
        "run", "-d", "--network=host", default_ref("suggestion"), "suggestion", "serve", "--address", address
    )
    wait_for(lambda: _serving(address), 90, "the suggestion service")
    grid_params = list(experiment().spec.parameter_specs.parameters)[1:]  # without the continuous lr
    for algorithm in ("kp-tpe", "kp-multivariate-tpe", "kp-cmaes", "kp-qmc", "kp-random", "kp-grid"):
        params = grid_params if algorithm == "kp-grid" else list(experiment().spec.parameter_specs.parameters)
        exp = experiment(name=f"exp-{algorithm}", algorithm=algorithm, params=params, max_trials=6)
        katib = FakeKatib(address, exp)
        try:
            katib.validate()
            katib.run(until=6, parallel=2)
        finally:
            katib.close()
        assert len({t.assignments for t in katib.trials}) == 6, algorithm
    katib = FakeKatib(address, experiment(name="exp-gp", algorithm="kp-gp"))
    try:
        with pytest.raises(grpc.RpcError) as refused:
            katib.validate()
    finally:
        katib.close()
    assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "torch" in str(refused.value.details())


def _get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=3) as response:
            return response.status, response.read().decode()
    except (urllib.error.URLError, ConnectionError):
        return 0, ""


def _expand(arg: str, env: dict[str, str], *, db: str, metrics: str) -> str:
    """One of the Deployment's args as the kubelet passes it, pointed at this test's addresses."""
    for key, value in env.items():
        arg = arg.replace(f"$({key})", value)
    if arg.startswith("--db-manager="):
        return f"--db-manager={db}"
    if arg.startswith("--metrics-address="):
        return f"--metrics-address={metrics}"
    return arg


def test_the_collector_image_runs_the_deployment(podman: Callable[..., Any], tmp_path: Path) -> None:
    image = default_ref("collector")
    deployment = next(d for d in _raw_base() if d["kind"] == "Deployment")
    pod = deployment["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    uid = pod["securityContext"]["runAsUser"]
    with KubeStandin() as kube:
        kubeconfig = kube.write_kubeconfig(tmp_path / "kubeconfig")
        kubeconfig.chmod(0o644)
        db = f"127.0.0.1:{free_port()}"
        podman(
            "run", "-d", "--network=host", image, "db", "serve", "--address", db, "--db", "/tmp/obs.sqlite"
        )
        wait_for(lambda: _serving(db), 60, "the DB manager")

        metrics = f"127.0.0.1:{free_port()}"
        names = {"POD_NAME": "katib-progress-collector-0", "POD_NAMESPACE": "katib-progress"}
        args = [_expand(arg, names, db=db, metrics=metrics) for arg in container["args"]]
        args.append("--kubeconfig=/kube/config")  # in a pod: the ServiceAccount's in-cluster config
        cid = podman(
            "run", "-d", "--network=host", "--read-only", "--tmpfs", "/tmp", f"--user={uid}:{uid}",
            *(f"--env={k}={v}" for k, v in names.items()),
            "-v", f"{kubeconfig}:/kube/config:ro", image, *args,
        ).stdout.strip()  # fmt: skip
        base = f"http://{metrics}"
        for probe in (container["livenessProbe"], container["readinessProbe"]):
            path = probe["httpGet"]["path"]
            wait_for(lambda path=path: _get(base + path)[0] == 200, 60, f"the collector's {path}")  # type: ignore[misc]
        wait_for(
            lambda: "katib_progress_collector_leader 1.0" in _get(base + "/metrics")[1], 30, "leadership"
        )
        podman("stop", "-t", "20", cid, timeout=60)
        state = podman("inspect", "--format", "{{.State.ExitCode}}", cid).stdout.strip()
        assert state == "0", podman("logs", cid).stderr[-2000:]
