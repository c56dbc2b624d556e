"""Katib v0.19.0 installed on the e2e control plane, from the Go module cache (never from the repo).

- CRDs: Katib's ``manifests/v1beta1/components/crd`` and Trainer's TrainJob CRD
  (``manifests/base/crds`` of github.com/kubeflow/trainer/v2), read where ``go mod download`` put them.
- katib-config: Katib's ``installs/katib-standalone/katib-config.yaml`` (``stock_config`` says what the
  e2e tier changes) stored as ConfigMap ``kubeflow/katib-config``, then our
  ``katib-progress katib-config merge`` run on the live ConfigMap and applied, as docs/deploy.md says.
- Webhooks: Katib's ``components/webhook/webhooks.yaml`` with each ``clientConfig.service`` replaced by a
  ``url`` on the controller's webhook port and our CA bundle.
- MariaDB (Debian) as Katib's MySQL backend, Katib's ``katib-db-manager`` on it, and
  ``katib-controller`` in its own mount namespace: /etc/hosts is the e2e cluster DNS and /tmp/cert
  (consts.CertDir) holds the webhook certificate.
"""

from __future__ import annotations

import base64
import shutil
import socket
import subprocess
import time
from pathlib import Path
from typing import Any

import grpc
import yaml
from kubeflow.katib import katib_api_pb2, katib_api_pb2_grpc

from tests.e2e.controlplane import binary, free_port
from tests.e2e.netns import HostsFile, in_mount_namespace
from tests.katibmodel._kube import CONFIGMAPS, GVR, Kube
from tests.katibmodel.harness import KATIB_PROGRESS, Process

ROOT = Path(__file__).resolve().parents[2]
BUILD = ROOT / "scripts" / "e2e_build.sh"
CRDS = GVR("apiextensions.k8s.io", "v1", "customresourcedefinitions")
NAMESPACES = GVR("", "v1", "namespaces")
VALIDATING = GVR("admissionregistration.k8s.io", "v1", "validatingwebhookconfigurations")
MUTATING = GVR("admissionregistration.k8s.io", "v1", "mutatingwebhookconfigurations")
KATIB_NS = "kubeflow"
DB_SERVICE = "katib-db-manager.kubeflow"
GOPTUNA_IMAGE = "ghcr.io/kubeflow/katib/suggestion-goptuna"
STOCK_CONFIG = "manifests/v1beta1/installs/katib-standalone/katib-config.yaml"
DB_PASSWORD = "e2e-katib"


def module_dir(target: str) -> Path:
    """Katib's or Trainer's module source in the Go module cache (scripts/e2e_build.sh)."""
    out = subprocess.run([str(BUILD), target], check=True, capture_output=True, text=True).stdout
    return Path(out.strip())


def load_all(path: Path) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


def install_crds(kube: Kube, katib_src: Path, trainer_src: Path) -> None:
    files = sorted((katib_src / "manifests/v1beta1/components/crd").glob("*.yaml"))
    files = [f for f in files if f.name != "kustomization.yaml"]
    files.append(trainer_src / "manifests/base/crds/trainer.kubeflow.org_trainjobs.yaml")
    names = []
    for f in files:
        for doc in load_all(f):
            kube.create(CRDS, None, doc)
            names.append(doc["metadata"]["name"])
    deadline = time.monotonic() + 60
    for name in names:
        while True:
            crd = kube.get(CRDS, None, name) or {}
            conds = (crd.get("status") or {}).get("conditions") or []
            if any(c["type"] == "Established" and c["status"] == "True" for c in conds):
                break
            if time.monotonic() > deadline:
                raise RuntimeError(f"CRD {name} not established")
            time.sleep(0.2)


#: Katib's experiment validating webhook refuses Experiments in a namespace without this label, Push
#: collector or not (pkg/webhook/v1beta1/experiment/validation_webhook.go ``Handle``)
INJECTION_LABEL = {"katib.kubeflow.org/metrics-collector-injection": "enabled"}


def ensure_namespace(kube: Kube, name: str, labels: dict[str, str] | None = None) -> None:
    if kube.get(NAMESPACES, None, name) is None:
        meta = {"name": name, "labels": dict(labels or {})}
        kube.create(NAMESPACES, None, {"apiVersion": "v1", "kind": "Namespace", "metadata": meta})


def stock_config(katib_src: Path, webhook_port: int, metrics_port: int, healthz_port: int) -> str:
    """Katib's standalone katib-config with the e2e tier's changes: the cert generator off (we issue
    the webhook certificate), the controller's ports on free loopback ports, and ``random``/``tpe`` on
    Katib's goptuna image (its stock hyperopt image is Python: it cannot be built from Go modules)."""
    doc = yaml.safe_load((katib_src / STOCK_CONFIG).read_text())
    doc["init"]["certGenerator"] = {"enable": False}
    ctrl = doc["init"]["controller"]
    ctrl["webhookPort"] = webhook_port
    ctrl["metricsAddr"] = f"127.0.0.1:{metrics_port}"
    ctrl["healthzAddr"] = f"127.0.0.1:{healthz_port}"
    for entry in doc["runtime"]["suggestions"]:
        if entry["algorithmName"] in ("random", "tpe"):
            entry["image"] = f"{GOPTUNA_IMAGE}:v0.19.0"
    return yaml.safe_dump(doc, sort_keys=False)


def configmap_yaml(kube: Kube) -> str:
    """``kubectl -n kubeflow get cm katib-config -o yaml``: the live object as YAML."""
    live = kube.get(CONFIGMAPS, KATIB_NS, "katib-config")
    assert live is not None, "no katib-config ConfigMap"
    return yaml.safe_dump(live, sort_keys=False)


def katib_config_command(verb: str, live_yaml: str) -> tuple[str, str]:
    """``katib-progress katib-config merge|remove --input - --output -``: (stdout, stderr)."""
    done = subprocess.run(
        [KATIB_PROGRESS, "katib-config", verb, "--input", "-", "--output", "-"],
        input=live_yaml, check=True, capture_output=True, text=True,
    )  # fmt: skip
    return done.stdout, done.stderr


def apply_configmap(kube: Kube, text: str) -> dict[str, Any]:
    """``kubectl apply -f -`` of a ConfigMap document (replaces data, keeps the live object's rest)."""
    doc = yaml.safe_load(text)
    live = kube.get(CONFIGMAPS, KATIB_NS, "katib-config")
    assert live is not None
    return kube.update(CONFIGMAPS, {**live, "data": doc["data"]})


def config_data(kube: Kube) -> str:
    live = kube.get(CONFIGMAPS, KATIB_NS, "katib-config") or {}
    return str((live.get("data") or {}).get("katib-config.yaml", ""))


def install_configmap(kube: Kube, text: str) -> None:
    """ConfigMap ``kubeflow/katib-config`` holding ``text`` (key ``katib-config.yaml``), as Katib's
    kustomization generates it."""
    body = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "katib-config", "namespace": KATIB_NS},
        "data": {"katib-config.yaml": text},
    }
    kube.create(CONFIGMAPS, KATIB_NS, body)


def install_webhooks(kube: Kube, katib_src: Path, port: int, ca: Path) -> None:
    bundle = base64.b64encode(ca.read_bytes()).decode()
    for doc in load_all(katib_src / "manifests/v1beta1/components/webhook/webhooks.yaml"):
        for hook in doc["webhooks"]:
            path = hook["clientConfig"]["service"]["path"]
            hook["clientConfig"] = {"url": f"https://127.0.0.1:{port}{path}", "caBundle": bundle}
        gvr = VALIDATING if doc["kind"] == "ValidatingWebhookConfiguration" else MUTATING
        kube.create(gvr, None, doc)


class MariaDB:
    """Debian's MariaDB server on a loopback port, data in the work dir (Katib's MySQL backend)."""

    def __init__(self, workdir: Path) -> None:
        self.dir = workdir / "mariadb"
        self.port = free_port()
        self.socket = self.dir / "mysqld.sock"
        self.proc: Process | None = None

    def start(self) -> MariaDB:
        installer = shutil.which("mariadb-install-db") or shutil.which("mysql_install_db")
        server = shutil.which("mariadbd") or "/usr/sbin/mariadbd"
        if installer is None or not Path(server).exists():
            raise FileNotFoundError("MariaDB is not installed (apt-get install mariadb-server)")
        if not (self.dir / "mysql").exists():
            self.dir.mkdir(parents=True, exist_ok=True)
            subprocess.run(
                [installer, f"--datadir={self.dir / 'data'}", "--user=root",
                 "--auth-root-authentication-method=normal", "--skip-test-db"],
                check=True, capture_output=True,
            )  # fmt: skip
        argv = [
            server, "--no-defaults", f"--datadir={self.dir / 'data'}", "--user=root",
            f"--socket={self.socket}", f"--port={self.port}", "--bind-address=127.0.0.1",
            f"--pid-file={self.dir / 'mysqld.pid'}", "--skip-log-bin",
            "--innodb-flush-log-at-trx-commit=2",
        ]  # fmt: skip
        self.proc = Process(argv, self.dir / "mariadb.log")
        deadline = time.monotonic() + 60
        while self.sql("SELECT 1").returncode != 0:
            if self.proc.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"MariaDB did not start\n{self.proc.tail()}")
            time.sleep(0.3)
        self.sql(f"ALTER USER 'root'@'localhost' IDENTIFIED BY '{DB_PASSWORD}'; "
                 f"CREATE USER IF NOT EXISTS 'root'@'127.0.0.1' IDENTIFIED BY '{DB_PASSWORD}'; "
                 "GRANT ALL ON *.* TO 'root'@'127.0.0.1'; CREATE DATABASE IF NOT EXISTS katib;",
                 check=True)  # fmt: skip
        return self

    def sql(self, statement: str, *, check: bool = False) -> subprocess.CompletedProcess[str]:
        client = shutil.which("mariadb") or shutil.which("mysql") or "mysql"
        args = [client, f"--socket={self.socket}", "-uroot", "-N", "-B", "-e", statement]
        with_password = [*args[:3], f"-p{DB_PASSWORD}", *args[3:]]
        result = subprocess.run(with_password, capture_output=True, text=True, check=False)
        if result.returncode != 0:  # before the password is set
            result = subprocess.run(args, capture_output=True, text=True, check=False)
        if check and result.returncode != 0:
            raise RuntimeError(f"mariadb: {statement}: {result.stderr}")
        return result

    def observation_rows(self, trial: str | None = None) -> list[tuple[str, str, str, str]]:
        """Katib's observation_logs table as stored: (trial_name, time, metric_name, value)."""
        where = f" WHERE trial_name = '{trial}'" if trial else ""
        out = self.sql(
            f"SELECT trial_name, time, metric_name, value FROM katib.observation_logs{where} ORDER BY id",
            check=True,
        ).stdout
        return [tuple(line.split("\t")) for line in out.splitlines() if line]  # type: ignore[misc]

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.stop()


class KatibDBManager:
    """Katib's ``katib-db-manager`` (cmd/db-manager/v1beta1) on MariaDB, at the Service's address."""

    def __init__(self, workdir: Path, db: MariaDB, address: str) -> None:
        self.workdir, self.db, self.address = workdir, db, address
        self.proc: Process | None = None
        self.starts = 0

    def start(self) -> None:
        env = {
            "DB_NAME": "mysql",
            "DB_USER": "root",
            "DB_PASSWORD": DB_PASSWORD,
            "KATIB_MYSQL_DB_HOST": "127.0.0.1",
            "KATIB_MYSQL_DB_PORT": str(self.db.port),
            "KATIB_MYSQL_DB_DATABASE": "katib",
        }
        argv = [str(binary("katib-db-manager")), f"--listen-address={self.address}"]
        self.starts += 1
        self.proc = Process(argv, self.workdir / f"katib-db-manager.{self.starts}.log", env)
        deadline = time.monotonic() + 60
        while True:
            try:
                with grpc.insecure_channel(self.address) as channel:
                    katib_api_pb2_grpc.DBManagerStub(channel).GetObservationLog(
                        katib_api_pb2.GetObservationLogRequest(trial_name="probe"), timeout=2
                    )
                return
            except grpc.RpcError as exc:
                if self.proc.proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"katib-db-manager not up: {exc}\n{self.proc.tail()}") from exc
                time.sleep(0.3)

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.stop()


class KatibController:
    """Katib's ``katib-controller`` with its own /etc/hosts and /tmp/cert (a private mount namespace)."""

    def __init__(
        self, workdir: Path, kubeconfig: Path, hosts: HostsFile, cert_dir: Path, config: Path
    ) -> None:
        self.workdir, self.kubeconfig, self.hosts = workdir, kubeconfig, hosts
        self.cert_dir, self.config = cert_dir, config
        self.proc: Process | None = None
        self.starts = 0

    def start(self) -> None:
        Path("/tmp/cert").mkdir(exist_ok=True)  # the mount point (the machine's own stays empty)
        argv = in_mount_namespace(
            [str(binary("katib-controller")), f"--katib-config={self.config}"],
            [(self.hosts.path, "/etc/hosts"), (self.cert_dir, "/tmp/cert")],
        )
        self.starts += 1
        env = {"KUBECONFIG": str(self.kubeconfig), "KATIB_CORE_NAMESPACE": KATIB_NS}
        self.proc = Process(argv, self.workdir / f"katib-controller.{self.starts}.log", env)

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.stop()


def webhook_cert_dir(workdir: Path, pki_dir: Path) -> Path:
    """controller-runtime's webhook server reads tls.crt / tls.key from its CertDir."""
    d = workdir / "webhook-cert"
    d.mkdir(exist_ok=True)
    shutil.copy(pki_dir / "webhook.crt", d / "tls.crt")
    shutil.copy(pki_dir / "webhook.key", d / "tls.key")
    return d


def wait_webhook(port: int, proc: Process, timeout: float = 90.0) -> None:
    deadline = time.monotonic() + timeout
    while True:
        with socket.socket() as s:
            s.settimeout(1)
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        if (proc.proc.poll() is not None) or time.monotonic() > deadline:
            raise RuntimeError(f"katib-controller webhook not listening on {port}\n{proc.tail(30)}")
        time.sleep(0.3)
