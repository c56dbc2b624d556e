"""A real control plane: etcd and kube-apiserver, built from Go modules (scripts/e2e_build.sh).

What controller-runtime's envtest does, with the binaries built here: etcd on loopback, the API server
with envtest's flags (pkg/internal/testing/controlplane/apiserver.go ``configureAPIServer`` and
``defaultArgs``: RBAC authorization, the ServiceAccount admission plugin off, a service-account key pair,
a service IP range, privileged allowed) and an admin client certificate in ``system:masters``. No
scheduler, kubelet or kube-proxy runs (docs/cluster.md says what plays them); kube-controller-manager
runs its garbage collector and namespace controller only.
"""

from __future__ import annotations

import os
import socket
import ssl
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from kubernetes import client, config

from tests.e2e.pki import Pki
from tests.katibmodel.harness import Process


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def cache_dir() -> Path:
    """Where scripts/e2e_build.sh left the binaries (KP_E2E_CACHE, as that script reads it)."""
    default = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "katib-progress-e2e"
    return Path(os.environ.get("KP_E2E_CACHE", default))


def binary(name: str) -> Path:
    """The newest cached build of ``name``: ``<project>-<version>/<name>`` (``etcd-v3.6.16/etcd``,
    ``katib-v0.19.0/katib-controller``, ``trainer-v2.3.0/trainer-controller-manager``)."""
    root = cache_dir()
    found = sorted(root.glob(f"*/{name}"))
    if not found:
        raise FileNotFoundError(f"{name} not built: run scripts/e2e_build.sh (cache {root})")
    return found[-1]


@dataclass
class ControlPlane:
    workdir: Path
    pki: Pki
    etcd: Process | None = None
    apiserver: Process | None = None
    controller_manager: Process | None = None
    etcd_port: int = 0
    port: int = 0

    @classmethod
    def start(cls, workdir: Path) -> ControlPlane:
        workdir.mkdir(parents=True, exist_ok=True)
        cp = cls(workdir, Pki.create(workdir / "pki"))
        cp.etcd_port = free_port()
        cp.port = free_port()
        cp.start_etcd()
        cp.start_apiserver()
        return cp

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    def start_etcd(self) -> None:
        peer = free_port()
        argv = [
            str(binary("etcd")), "--data-dir", str(self.workdir / "etcd"), "--name", "e2e",
            f"--listen-client-urls=http://127.0.0.1:{self.etcd_port}",
            f"--advertise-client-urls=http://127.0.0.1:{self.etcd_port}",
            f"--listen-peer-urls=http://127.0.0.1:{peer}",
            f"--initial-advertise-peer-urls=http://127.0.0.1:{peer}",
            f"--initial-cluster=e2e=http://127.0.0.1:{peer}",
            "--unsafe-no-fsync",  # envtest's etcd flag: a test store, not a durable one
        ]  # fmt: skip
        self.etcd = Process(argv, self.workdir / "etcd.log")

    def start_apiserver(self) -> None:
        p = self.pki
        argv = [
            str(binary("kube-apiserver")),
            f"--etcd-servers=http://127.0.0.1:{self.etcd_port}",
            f"--secure-port={self.port}", "--bind-address=127.0.0.1", "--advertise-address=127.0.0.1",
            f"--tls-cert-file={p.cert('apiserver')}", f"--tls-private-key-file={p.key('apiserver')}",
            f"--client-ca-file={p.ca}", f"--cert-dir={self.workdir / 'apiserver-certs'}",
            "--authorization-mode=RBAC", "--disable-admission-plugins=ServiceAccount",
            "--allow-privileged=true", "--service-cluster-ip-range=10.0.0.0/24",
            f"--service-account-issuer={self.url}/",
            f"--service-account-key-file={self.workdir / 'pki' / 'sa.pub'}",
            f"--service-account-signing-key-file={self.workdir / 'pki' / 'sa.key'}",
            "--enable-priority-and-fairness=false",  # envtest's default on a test server
        ]  # fmt: skip
        self.apiserver = Process(argv, self.workdir / "kube-apiserver.log")
        self.wait_ready()

    def start_controller_manager(self) -> None:
        """kube-controller-manager with only its garbage collector and namespace controller: Katib deletes
        a finished trial's job with foreground propagation (trial_controller.go ``reconcileJob``), which
        only the garbage collector completes; owner references are followed by it as on a cluster.

        Started once the CRDs exist (``RealKatib.install``): its garbage collector learns resources at
        start and then only at its 30 s discovery resync, so one started before Katib's CRDs left
        Experiments' and Trials' dependents undeleted for up to that long."""
        kubeconfig = self.write_kubeconfig(self.workdir / "controller-manager.kubeconfig")
        argv = [
            str(binary("kube-controller-manager")), f"--kubeconfig={kubeconfig}",
            "--controllers=garbagecollector,namespace", "--leader-elect=false",
            "--secure-port=0", "--use-service-account-credentials=false",
        ]  # fmt: skip
        self.controller_manager = Process(argv, self.workdir / "kube-controller-manager.log")

    def wait_ready(self, timeout: float = 90.0) -> None:
        ctx = ssl.create_default_context(cafile=str(self.pki.ca))
        ctx.load_cert_chain(str(self.pki.cert("admin")), str(self.pki.key("admin")))
        deadline = time.monotonic() + timeout
        while True:
            try:
                with urllib.request.urlopen(f"{self.url}/readyz", context=ctx, timeout=2) as reply:
                    if reply.status == 200:
                        return
            except OSError as exc:
                last = exc
            assert self.apiserver is not None
            if self.apiserver.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"kube-apiserver not ready: {last}\n{self.apiserver.tail(30)}")
            time.sleep(0.3)

    def kill_apiserver(self) -> None:
        """Fault injection: the API server process dies (etcd and its data stay)."""
        assert self.apiserver is not None
        self.apiserver.stop()

    def write_kubeconfig(self, path: Path) -> Path:
        p = self.pki
        path.write_text(
            f"""apiVersion: v1
kind: Config
clusters:
- name: e2e
  cluster: {{server: "{self.url}", certificate-authority: "{p.ca}"}}
users:
- name: admin
  user: {{client-certificate: "{p.cert("admin")}", client-key: "{p.key("admin")}"}}
contexts:
- name: e2e
  context: {{cluster: e2e, user: admin}}
current-context: e2e
"""
        )
        return path

    def api_client(self, kubeconfig: Path) -> client.ApiClient:
        return config.new_client_from_config(config_file=str(kubeconfig))

    def stop(self) -> None:
        for proc in (self.controller_manager, self.apiserver, self.etcd):
            if proc is not None:
                proc.stop()
