"""A real single-node Kubernetes cluster on this machine, for the real-node tier (docs/cluster.md).

Everything is built from Go modules or Debian packages (scripts/e2e_build.sh, scripts/e2e_deps.sh) and
runs for real: etcd and kube-apiserver (tests/e2e/controlplane.py), kube-controller-manager with its
default controllers, kube-scheduler, a kubelet on containerd and runc, CNI's bridge plugin and
kube-proxy (iptables). Nothing below the controllers is played: Deployments, ReplicaSets, pods and
probes are Kubernetes' own.

What this machine needs (measured): runc with the cgroupfs driver on cgroup v1 (``failCgroupV1:
false``), containerd's CRI with ``restrict_oom_score_adj`` (the VM lacks CAP_SYS_RESOURCE), disk
eviction thresholds at 5 % (the disk may have little free), and the node on the CNI bridge's gateway
address, which the API server also serves on, so pods reach it through the ``kubernetes`` Service.

Every setting lives in files this module writes under its work directory; nothing in /etc is touched.
``stop()`` removes what it created: processes, the pods' containers and mounts, the bridge, and
kube-proxy's iptables rules.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

from kubernetes import client, config

from tests.e2e.controlplane import ControlPlane, binary, free_port
from tests.e2e.pki import Pki
from tests.katibmodel.harness import Process

BRIDGE = "kpnode0"
SUBNET = "10.244.0.0/24"
GATEWAY = "10.244.0.1"
SERVICE_CIDR = "10.96.0.0/24"
NODE = "kp-node"
PAUSE_IMAGE = "localhost/katib-progress/pause:e2e"
CNI_BIN = "/usr/lib/cni"


def _run(*argv: str, check: bool = True, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, check=check, capture_output=True, text=True, timeout=timeout)


class NodePlane(ControlPlane):
    """The control plane served on the bridge's gateway address (reachable from pods) as well."""

    @property
    def url(self) -> str:
        return f"https://{GATEWAY}:{self.port}"

    def start_apiserver(self) -> None:
        p = self.pki
        argv = [
            str(binary("kube-apiserver")),
            f"--etcd-servers=http://127.0.0.1:{self.etcd_port}",
            f"--secure-port={self.port}", f"--bind-address={GATEWAY}", f"--advertise-address={GATEWAY}",
            f"--tls-cert-file={p.cert('apiserver')}", f"--tls-private-key-file={p.key('apiserver')}",
            f"--client-ca-file={p.ca}", f"--cert-dir={self.workdir / 'apiserver-certs'}",
            "--authorization-mode=Node,RBAC", "--allow-privileged=true",
            f"--service-cluster-ip-range={SERVICE_CIDR}",
            f"--service-account-issuer={self.url}/",
            f"--service-account-key-file={p.dir / 'sa.pub'}",
            f"--service-account-signing-key-file={p.dir / 'sa.key'}",
            "--kubelet-preferred-address-types=InternalIP",
            f"--kubelet-client-certificate={p.cert('admin')}", f"--kubelet-client-key={p.key('admin')}",
        ]  # fmt: skip
        self.apiserver = Process(argv, self.workdir / "kube-apiserver.log")
        self.wait_ready()


class RealNode:
    """Start with ``start()`` (or as a context manager); ``kubectl(...)`` runs kubectl against it."""

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        workdir.mkdir(parents=True, exist_ok=True)
        self.procs: dict[str, Process] = {}
        self.cp: NodePlane | None = None
        self.kubeconfig = workdir / "admin.kubeconfig"
        self.containerd_sock = workdir / "containerd" / "containerd.sock"
        self.kubelet_root = workdir / "kubelet"
        self._bridge = False
        self._proxy = False
        # iptables chains named KUBE-* that existed before (none on a fresh machine): left alone
        self._chains_before = kube_chains()
        self._netns_before = _netns()

    # -- lifecycle ---------------------------------------------------------------------------

    def __enter__(self) -> RealNode:
        try:
            return self.start()
        except BaseException:
            self.stop()
            raise

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> RealNode:
        self._make_bridge()
        sans = f"IP:127.0.0.1,IP:{GATEWAY},IP:10.96.0.1,DNS:kubernetes.default.svc,DNS:kubernetes.default"
        pki = Pki.create(self.workdir / "pki", apiserver_sans=sans)
        self.cp = NodePlane(self.workdir / "controlplane", pki)
        self.cp.workdir.mkdir(parents=True, exist_ok=True)
        self.cp.etcd_port = free_port()
        self.cp.port = free_port(GATEWAY)
        self.cp.start_etcd()
        self.cp.start_apiserver()
        self.cp.write_kubeconfig(self.kubeconfig)
        self._start_controller_manager()
        self._start_scheduler()
        self._start_containerd()
        self.load_image(PAUSE_IMAGE)  # the sandbox image: no registry to pull it from
        self._start_kubelet()
        self._start_proxy()
        self._start_dns()
        self.wait_node_ready()
        return self

    def stop(self) -> None:
        """Pods first (so the kubelet unmounts their volumes and removes their sandboxes), then every
        process, then whatever is left: containers, mounts, iptables rules, the bridge."""
        if "kubelet" in self.procs and self.procs["kubelet"].proc.poll() is None:
            with contextlib.suppress(Exception):  # workloads first, or their controllers make new pods
                self.kubectl(
                    "delete", "deployments,replicasets,jobs", "--all", "--all-namespaces", "--wait=true"
                )
                self.kubectl("delete", "pods", "--all", "--all-namespaces", "--wait=true", "--timeout=60s")
        for name in ("coredns", "kube-proxy", "kubelet", "kube-scheduler", "kube-controller-manager"):
            proc = self.procs.pop(name, None)
            if proc is not None:
                proc.stop()
        self._remove_containers()
        proc = self.procs.pop("containerd", None)
        if proc is not None:
            proc.stop()
        if self.cp is not None:
            self.cp.stop()
        self._unmount_all()
        if self._proxy:
            _run(str(binary("kube-proxy")), "--cleanup", check=False)
            self._proxy = False
        remove_kube_chains(self._chains_before)
        for netns in _netns() - self._netns_before:  # sandboxes the runtime had no time to tear down
            if netns.startswith("cni-"):
                _run("ip", "netns", "delete", netns, check=False)
        if self._bridge:
            out = _run("ip", "-o", "link", "show", "master", BRIDGE, check=False).stdout
            for line in out.splitlines():  # "12: vethXXXX@if2: <...>"
                _run("ip", "link", "delete", line.split(":")[1].strip().split("@")[0], check=False)
            _run("ip", "link", "delete", BRIDGE, check=False)
            self._bridge = False

    # -- pieces ------------------------------------------------------------------------------

    def _make_bridge(self) -> None:
        """The bridge CNI's plugin attaches pods to, made first so the API server can serve on its
        gateway address before any pod exists."""
        _run("ip", "link", "delete", BRIDGE, check=False)  # left by a run that was killed
        _run("ip", "link", "add", BRIDGE, "type", "bridge")
        self._bridge = True
        _run("ip", "addr", "add", f"{GATEWAY}/24", "dev", BRIDGE)
        _run("ip", "link", "set", BRIDGE, "up")

    def _start_controller_manager(self) -> None:
        assert self.cp is not None
        p = self.cp.pki
        argv = [
            str(binary("kube-controller-manager")), f"--kubeconfig={self.kubeconfig}",
            "--leader-elect=false", "--secure-port=0", "--use-service-account-credentials=true",
            f"--service-account-private-key-file={p.dir / 'sa.key'}", f"--root-ca-file={p.ca}",
            f"--cluster-signing-cert-file={p.ca}", f"--cluster-signing-key-file={p.dir / 'ca.key'}",
            f"--service-cluster-ip-range={SERVICE_CIDR}",
        ]  # fmt: skip
        self.procs["kube-controller-manager"] = Process(argv, self.workdir / "kube-controller-manager.log")

    def _start_scheduler(self) -> None:
        argv = [
            str(binary("kube-scheduler")), f"--kubeconfig={self.kubeconfig}", "--leader-elect=false",
            "--secure-port=0",
        ]  # fmt: skip
        self.procs["kube-scheduler"] = Process(argv, self.workdir / "kube-scheduler.log")

    def _start_containerd(self) -> None:
        base = self.workdir / "containerd"
        cni = self.workdir / "cni"
        for d in (base, cni):
            d.mkdir(parents=True, exist_ok=True)
        (cni / "10-kpnode.conflist").write_text(
            json.dumps(
                {
                    "cniVersion": "1.0.0",
                    "name": "kpnode",
                    "plugins": [
                        {
                            "type": "bridge",
                            "bridge": BRIDGE,
                            "isGateway": True,
                            "ipMasq": False,
                            "hairpinMode": True,
                            "ipam": {
                                "type": "host-local",
                                "ranges": [[{"subnet": SUBNET, "gateway": GATEWAY}]],
                                "routes": [{"dst": "0.0.0.0/0"}],
                                "dataDir": str(self.workdir / "cni-ipam"),
                            },
                        },
                        {"type": "portmap", "capabilities": {"portMappings": True}},
                    ],
                }
            )
        )
        conf = base / "config.toml"
        conf.write_text(
            f"""version = 2
root = "{base / "root"}"
state = "{base / "state"}"
[grpc]
  address = "{self.containerd_sock}"
[ttrpc]
  address = "{base / "ttrpc.sock"}"
[plugins."io.containerd.internal.v1.opt"]
  path = "{base / "opt"}"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "{PAUSE_IMAGE}"
  restrict_oom_score_adj = true
  enable_selinux = false
  [plugins."io.containerd.grpc.v1.cri".containerd]
    default_runtime_name = "runc"
    snapshotter = "overlayfs"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
        BinaryName = "{shutil.which("runc") or "/usr/sbin/runc"}"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "{CNI_BIN}"
    conf_dir = "{cni}"
"""
        )
        self.procs["containerd"] = Process(
            ["containerd", "--config", str(conf)], self.workdir / "containerd.log"
        )
        deadline = time.monotonic() + 30
        while not self.containerd_sock.exists():
            if time.monotonic() > deadline or self.procs["containerd"].proc.poll() is not None:
                raise RuntimeError("containerd did not start:\n" + self.procs["containerd"].tail())
            time.sleep(0.1)

    def _start_kubelet(self) -> None:
        assert self.cp is not None
        p = self.cp.pki
        self.kubelet_root.mkdir(parents=True, exist_ok=True)
        conf = self.workdir / "kubelet-config.yaml"
        conf.write_text(
            json.dumps(
                {
                    "apiVersion": "kubelet.config.k8s.io/v1beta1",
                    "kind": "KubeletConfiguration",
                    "failCgroupV1": False,
                    "cgroupDriver": "cgroupfs",
                    "containerRuntimeEndpoint": f"unix://{self.containerd_sock}",
                    "address": GATEWAY,
                    "port": free_port(GATEWAY),
                    "readOnlyPort": 0,
                    "healthzBindAddress": "127.0.0.1",
                    "healthzPort": free_port(),
                    "authentication": {
                        "anonymous": {"enabled": False},
                        "webhook": {"enabled": False},
                        "x509": {"clientCAFile": str(p.ca)},
                    },
                    "authorization": {"mode": "AlwaysAllow"},
                    "failSwapOn": False,
                    "evictionHard": {
                        "memory.available": "100Mi",
                        "nodefs.available": "5%",
                        "nodefs.inodesFree": "5%",
                        "imagefs.available": "5%",
                    },
                    "imageGCHighThresholdPercent": 100,
                    "imageGCLowThresholdPercent": 99,
                    "serializeImagePulls": False,
                    "clusterDomain": "cluster.local",
                    "clusterDNS": [GATEWAY],
                    "resolvConf": "/etc/resolv.conf",
                    "registerNode": True,
                }
            )
        )
        # the admin identity (system:masters): the tier's kubelet needs no node certificate of its own
        argv = [
            str(binary("kubelet")), f"--config={conf}", f"--kubeconfig={self.kubeconfig}",
            f"--root-dir={self.kubelet_root}", f"--node-ip={GATEWAY}", f"--hostname-override={NODE}",
            f"--cert-dir={self.workdir / 'kubelet-pki'}", "--v=1",
        ]  # fmt: skip
        self.procs["kubelet"] = Process(argv, self.workdir / "kubelet.log")

    def _start_proxy(self) -> None:
        argv = [
            str(binary("kube-proxy")), f"--kubeconfig={self.kubeconfig}", f"--hostname-override={NODE}",
            "--proxy-mode=iptables", f"--cluster-cidr={SUBNET}", "--conntrack-max-per-core=0",
            f"--healthz-bind-address=127.0.0.1:{free_port()}",
            f"--metrics-bind-address=127.0.0.1:{free_port()}",
        ]  # fmt: skip
        self._proxy = True
        self.procs["kube-proxy"] = Process(argv, self.workdir / "kube-proxy.log")

    def _start_dns(self) -> None:
        """CoreDNS on the node, serving cluster.local on the bridge's gateway address (the kubelet's
        clusterDNS) from the API server. A host process rather than a Deployment: the same program and
        the same kubernetes plugin, without an image of it to build; names outside the cluster are not
        forwarded (this machine reaches no DNS server the pods would need)."""
        corefile = self.workdir / "Corefile"
        corefile.write_text(
            f"""cluster.local:53 in-addr.arpa:53 {{
    bind {GATEWAY}
    errors
    kubernetes cluster.local in-addr.arpa {{
        kubeconfig {self.kubeconfig}
        pods insecure
    }}
}}
"""
        )
        argv = [str(binary("coredns")), "-conf", str(corefile)]
        self.procs["coredns"] = Process(argv, self.workdir / "coredns.log")

    def _remove_containers(self) -> None:
        """Whatever containers the kubelet left (a test that failed mid-way): stopped and removed."""
        if not self.containerd_sock.exists():
            return
        ctr = ["ctr", "--address", str(self.containerd_sock), "--namespace", "k8s.io"]
        listed = _run(*ctr, "tasks", "list", "-q", check=False).stdout.split()
        for task in listed:
            _run(*ctr, "tasks", "kill", "--signal", "SIGKILL", task, check=False)
        for task in listed:
            _run(*ctr, "tasks", "delete", "--force", task, check=False)
        for container in _run(*ctr, "containers", "list", "-q", check=False).stdout.split():
            _run(*ctr, "containers", "delete", container, check=False)

    def _unmount_all(self) -> None:
        """Mounts under the work directory (pod volumes, container root file systems), deepest first."""
        root = str(self.workdir)
        with open("/proc/self/mounts") as mounts:
            points = [line.split()[1] for line in mounts if line.split()[1].startswith(root)]
        for point in sorted(points, key=len, reverse=True):
            _run("umount", "-l", point, check=False)

    # -- use ---------------------------------------------------------------------------------

    def kubectl(self, *args: str, input: str | None = None, timeout: float = 120) -> str:
        out = subprocess.run(
            [str(binary("kubectl")), f"--kubeconfig={self.kubeconfig}", *args],
            check=True,
            capture_output=True,
            text=True,
            input=input,
            timeout=timeout,
        )
        return out.stdout

    def api_client(self) -> client.ApiClient:
        return config.new_client_from_config(config_file=str(self.kubeconfig))

    def load_image(self, image: str) -> None:
        """Copy an image from podman's store into containerd's (``podman save | ctr import``)."""
        archive = self.workdir / "image.tar"
        _run("podman", "save", "--format", "docker-archive", "-o", str(archive), image, timeout=600)
        try:
            ctr = ["ctr", "--address", str(self.containerd_sock), "--namespace", "k8s.io"]
            _run(*ctr, "images", "import", "--no-unpack", str(archive), timeout=600)
        finally:
            archive.unlink(missing_ok=True)

    def wait_node_ready(self, timeout: float = 120) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        last = ""
        while time.monotonic() < deadline:
            for name, proc in self.procs.items():
                if proc.proc.poll() is not None:
                    raise RuntimeError(f"{name} exited {proc.proc.returncode}:\n{proc.tail(30)}")
            try:
                node = json.loads(self.kubectl("get", "node", NODE, "-o", "json"))
            except subprocess.CalledProcessError as exc:
                last = exc.stderr
                time.sleep(1)
                continue
            conds = {c["type"]: c["status"] for c in node.get("status", {}).get("conditions", [])}
            if conds.get("Ready") == "True":
                return dict(node)
            last = json.dumps(conds)
            time.sleep(1)
        raise RuntimeError(
            f"node {NODE} not Ready within {timeout}s: {last}\n{self.procs['kubelet'].tail(30)}"
        )


def build_pause_image(workdir: Path) -> None:
    """The pod sandbox image, from tests/node/pause (a static Go program in an image of its own)."""
    if _run("podman", "image", "exists", PAUSE_IMAGE, check=False).returncode == 0:
        return
    src = Path(__file__).parent / "pause"
    build = workdir / "pause-build"
    build.mkdir(parents=True, exist_ok=True)
    (build / "go.mod").write_text("module katib-progress.local/pause\n\ngo 1.22\n")
    shutil.copy(src / "main.go", build / "main.go")
    env = {**os.environ, "CGO_ENABLED": "0"}
    subprocess.run(
        ["go", "build", "-trimpath", "-ldflags=-s -w", "-o", "pause", "."],
        cwd=build,
        env=env,
        check=True,
        capture_output=True,
    )
    (build / "Containerfile").write_text(
        'FROM scratch\nCOPY pause /pause\nUSER 65535:65535\nENTRYPOINT ["/pause"]\n'
    )
    _run("podman", "build", "-q", "-t", PAUSE_IMAGE, str(build), timeout=300)


def _netns() -> set[str]:
    """Named network namespaces (/run/netns: where containerd's CRI keeps its sandboxes')."""
    try:
        return set(os.listdir("/run/netns"))
    except FileNotFoundError:
        return set()


_IPTABLES = ("iptables", "ip6tables")
_TABLES = ("filter", "nat", "mangle")


def kube_chains() -> set[tuple[str, str, str]]:
    """(command, table, chain) of every KUBE-* chain (the kubelet's and kube-proxy's)."""
    found = set()
    for cmd in _IPTABLES:
        if shutil.which(cmd) is None:
            continue
        for table in _TABLES:
            out = _run(cmd, "-t", table, "-S", check=False).stdout
            for line in out.splitlines():
                parts = line.split()
                if len(parts) >= 2 and parts[0] == "-N" and parts[1].startswith("KUBE-"):
                    found.add((cmd, table, parts[1]))
    return found


def remove_kube_chains(keep: set[tuple[str, str, str]]) -> None:
    """Remove the KUBE-* chains not in ``keep`` and every rule jumping to them (the kubelet leaves
    KUBE-FIREWALL, KUBE-KUBELET-CANARY and KUBE-IPTABLES-HINT behind when it stops)."""
    made = kube_chains() - keep
    for cmd, table in {(c, t) for c, t, _ in made}:
        chains = {chain for c, t, chain in made if (c, t) == (cmd, table)}
        for line in _run(cmd, "-t", table, "-S", check=False).stdout.splitlines():
            parts = line.split()
            if parts[:1] == ["-A"] and "-j" in parts and parts[parts.index("-j") + 1] in chains:
                _run(cmd, "-t", table, "-D", *parts[1:], check=False)
        for chain in chains:
            _run(cmd, "-t", table, "-F", chain, check=False)
        for chain in chains:
            _run(cmd, "-t", table, "-X", chain, check=False)
