"""Kubeflow Trainer v2.3.0's own ``trainer-controller-manager`` on the e2e control plane, and the JobSet
level it drives, played.

Real (read from the Go module cache, never from the repo; scripts/e2e_build.sh ``trainer``):

- the binary, ``cmd/trainer-controller-manager`` (TrainJob, TrainingRuntime, ClusterTrainingRuntime
  controllers, its admission webhooks, and with feature gate ``TrainJobStatus`` the status server);
- Trainer's CRDs (``manifests/base/crds``), the ``torch-distributed`` ClusterTrainingRuntime
  (``manifests/base/runtimes/torch_distributed.yaml``), its webhooks
  (``manifests/base/webhook/manifests.yaml``, each ``clientConfig.service`` replaced by a ``url`` and our
  CA, named as cmd/trainer-controller-manager/main.go names them), and JobSet's CRD
  (sigs.k8s.io/jobset ``config/components/crd/bases``, the version Trainer's go.mod requires);
- its configuration: the stock ``manifests/base/manager/controller_manager_config.yaml`` with free
  loopback ports, leader election off, ``certManagement.enable: false`` (main.go: "certificates must be
  provided externally") and ``featureGates: {TrainJobStatus: true}``.

What the pod would give it, given here (the process runs in a mount namespace of its own,
tests/e2e/netns.py): the serving certificate in ``/tmp/k8s-webhook-server/serving-certs``
(pkg/util/cert/cert.go ``certDir``, read by the webhook server and by ``SetupTLSConfig`` for the status
server) and a ServiceAccount token in ``/var/run/secrets/kubernetes.io/serviceaccount``
(pkg/statusserver/auth.go ``getClusterOIDCIssuerURL`` reads the issuer from it;
pkg/util/cert/cert.go ``GetOperatorNamespace`` reads ``namespace``). The Secret
``kubeflow-system/kubeflow-trainer-webhook-cert`` holds our CA as ``ca.crt``: with cert management off
it is what cert-manager would have written, and pkg/runtime/framework/plugins/trainjobstatus
``buildStatusServerCaCrtConfigMap`` copies it into each TrainJob's ``<name>-tls-config`` ConfigMap.

Played (no JobSet controller, kube-controller-manager, scheduler or kubelet runs): ``JobSetPlayer``.
For each JobSet Trainer creates it runs the trainer pod's ``node`` container as a local process, as
a kubelet would: its command and args, its env (``KUBEFLOW_TRAINER_SERVER_*`` as Trainer injected
them), the projected volume (a TokenRequest token with the audience the volume asks for, and the
ConfigMap's ``ca.crt``) bind-mounted at its mountPath, and the e2e cluster DNS as /etc/hosts. When
the process exits, the JobSet's status is set as the JobSet controller sets it; ``spec.suspend`` kills
the process. Each rule cites its upstream source.
"""

from __future__ import annotations

import base64
import contextlib
import json
import shutil
import socket
import ssl
import sys
import threading
import time
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from kubernetes import client

from tests.e2e.controlplane import binary, free_port
from tests.e2e.katib import CRDS, MUTATING, NAMESPACES, ROOT, VALIDATING, load_all, module_dir
from tests.e2e.netns import HostsFile
from tests.e2e.pki import Pki
from tests.katibmodel._kube import CONFIGMAPS, GVR, TRAINJOBS, Kube, has_condition
from tests.katibmodel.harness import Process
from tests.katibmodel.trainer import set_status_condition

SECRETS = GVR("", "v1", "secrets")
SERVICEACCOUNTS = GVR("", "v1", "serviceaccounts")
JOBSETS = GVR("jobset.x-k8s.io", "v1alpha2", "jobsets")
CLUSTER_RUNTIMES = GVR("trainer.kubeflow.org", "v1alpha1", "clustertrainingruntimes")

#: pkg/util/cert/cert.go ``defaultNamespace`` / GetOperatorNamespace
TRAINER_NS = "kubeflow-system"
#: apis/config/v1alpha1/defaults.go: CertManagement.WebhookServiceName / WebhookSecretName
SERVICE = "kubeflow-trainer-controller-manager"
SECRET = "kubeflow-trainer-webhook-cert"
#: the TrainJobStatus plugin's status URL host (trainjobstatus.go ``createEnvVars``)
SERVICE_DNS = f"{SERVICE}.{TRAINER_NS}.svc"
#: cmd/trainer-controller-manager/main.go (what cert rotation would patch)
WEBHOOK_NAMES = {
    "ValidatingWebhookConfiguration": "validator.trainer.kubeflow.org",
    "MutatingWebhookConfiguration": "defaulter.trainer.kubeflow.org",
}
CERT_DIR = "/tmp/k8s-webhook-server/serving-certs"  # pkg/util/cert/cert.go certDir
SA_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"
#: trainer.kubeflow.org/trainjob-ancestor-step: the trainer's replicated job (pkg/constants)
ANCESTOR_LABEL = "trainer.kubeflow.org/trainjob-ancestor-step"


def in_pod_namespace(argv: list[str], binds: list[tuple[Path, str]]) -> list[str]:
    """``argv`` in a private mount namespace, as in a pod: a fresh tmpfs on /run (so /var/run/secrets/...
    mount points are made there, never on the machine, whose Python Kubernetes clients take an existing
    /var/run/secrets/kubernetes.io/serviceaccount for in-cluster), then each ``(source, target)``
    bind-mounted; targets under /run are created first."""
    steps = ["mount -t tmpfs tmpfs /run"]
    for src, dst in binds:
        if dst.startswith(("/run/", "/var/run/")):
            steps.append(f'mkdir -p "{dst}"')
        steps.append(f'mount --bind "{src}" "{dst}"')
    script = " && ".join(steps) + ' && exec "$@"'
    return ["unshare", "--mount", "--propagation", "private", "--", "sh", "-c", script, "sh", *argv]


def manager_binary() -> Path:
    """``trainer-<version>/trainer-controller-manager`` in the e2e cache (scripts/e2e_build.sh trainer)."""
    return binary("trainer-controller-manager")


source = module_dir
_load_all = load_all


def _wait_established(kube: Kube, names: list[str], timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    for name in names:
        while True:
            crd = kube.get(CRDS, None, name) or {}  # type: ignore[arg-type]
            conds = (crd.get("status") or {}).get("conditions") or []
            if any(c["type"] == "Established" and c["status"] == "True" for c in conds):
                break
            if time.monotonic() > deadline:
                raise RuntimeError(f"CRD {name} not established")
            time.sleep(0.2)


def install_crds(kube: Kube, trainer_src: Path, jobset_src: Path) -> None:
    """Trainer's runtime CRDs (the TrainJob CRD is installed with Katib's, tests/e2e/katib.py) and
    JobSet's."""
    files = [
        trainer_src / "manifests/base/crds/trainer.kubeflow.org_clustertrainingruntimes.yaml",
        trainer_src / "manifests/base/crds/trainer.kubeflow.org_trainingruntimes.yaml",
        jobset_src / "config/components/crd/bases/jobset.x-k8s.io_jobsets.yaml",
    ]
    names = []
    for f in files:
        for doc in _load_all(f):
            kube.create(CRDS, None, doc)  # type: ignore[arg-type]
            names.append(doc["metadata"]["name"])
    _wait_established(kube, names)


def ensure_namespace(kube: Kube, name: str) -> None:
    if kube.get(NAMESPACES, None, name) is None:  # type: ignore[arg-type]
        body = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
        kube.create(NAMESPACES, None, body)  # type: ignore[arg-type]


def ensure_service_account(kube: Kube, namespace: str, name: str) -> None:
    """No kube-controller-manager runs, so no ``default`` ServiceAccount appears by itself."""
    if kube.get(SERVICEACCOUNTS, namespace, name) is None:
        body = {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": name}}
        kube.create(SERVICEACCOUNTS, namespace, body)


def request_token(core: client.CoreV1Api, namespace: str, sa: str, audiences: list[str] | None,
                  seconds: int = 3600) -> str:  # fmt: skip
    """The TokenRequest API (what the kubelet calls for a projected serviceAccountToken volume)."""
    spec = client.V1TokenRequestSpec(audiences=audiences or [], expiration_seconds=seconds)
    reply = core.create_namespaced_service_account_token(
        sa, namespace, client.AuthenticationV1TokenRequest(spec=spec)
    )
    return str(reply.status.token)


def config_yaml(trainer_src: Path, webhook_port: int, status_port: int, health_port: int) -> str:
    """The stock manager config with the e2e tier's changes (see the module docstring)."""
    doc = yaml.safe_load((trainer_src / "manifests/base/manager/controller_manager_config.yaml").read_text())
    doc["health"]["healthProbeBindAddress"] = f"127.0.0.1:{health_port}"
    doc["metrics"] = {"bindAddress": "0"}  # controller-runtime: "0" disables the metrics server
    doc["webhook"] = {"port": webhook_port, "host": "127.0.0.1"}
    doc["leaderElection"] = {"leaderElect": False}
    doc["certManagement"]["enable"] = False
    doc["statusServer"]["port"] = status_port
    doc["featureGates"] = {"TrainJobStatus": True}
    return yaml.safe_dump(doc, sort_keys=False)


def install_webhooks(kube: Kube, trainer_src: Path, port: int, ca: Path) -> None:
    bundle = base64.b64encode(ca.read_bytes()).decode()
    for doc in _load_all(trainer_src / "manifests/base/webhook/manifests.yaml"):
        doc["metadata"]["name"] = WEBHOOK_NAMES[doc["kind"]]
        for hook in doc["webhooks"]:
            path = hook["clientConfig"]["service"]["path"]
            hook["clientConfig"] = {"url": f"https://127.0.0.1:{port}{path}", "caBundle": bundle}
        gvr = VALIDATING if doc["kind"] == "ValidatingWebhookConfiguration" else MUTATING
        kube.create(gvr, None, doc)  # type: ignore[arg-type]


class TrainerControllerManager:
    """Trainer's controller manager process, its certificates and token mounted as in its pod."""

    def __init__(self, workdir: Path, kube: Kube, core: client.CoreV1Api, kubeconfig: Path,
                 pki: Pki, hosts: HostsFile) -> None:  # fmt: skip
        self.workdir, self.kube, self.core, self.kubeconfig = workdir / "trainer", kube, core, kubeconfig
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.pki, self.hosts = pki, hosts
        self.src = source("trainer-source")
        self.webhook_port, self.status_port, self.health_port = free_port(), free_port(), free_port()
        self.proc: Process | None = None
        self.starts = 0

    def install(self) -> None:
        """Everything but the runtime (whose validating webhook needs the controller up)."""
        install_crds(self.kube, self.src, source("jobset-source"))
        ensure_namespace(self.kube, TRAINER_NS)
        # the serving certificate for the webhooks (127.0.0.1) and the status server (its Service name)
        self.pki.issue("trainer", f"/CN={SERVICE}", f"IP:127.0.0.1,DNS:{SERVICE_DNS},DNS:localhost")
        certs = self.workdir / "serving-certs"
        certs.mkdir(exist_ok=True)
        shutil.copy(self.pki.cert("trainer"), certs / "tls.crt")
        shutil.copy(self.pki.key("trainer"), certs / "tls.key")
        self.certs = certs
        data = {
            "ca.crt": self.pki.ca.read_bytes(),
            "tls.crt": self.pki.cert("trainer").read_bytes(),
            "tls.key": self.pki.key("trainer").read_bytes(),
        }
        secret = {
            "apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/tls",
            "metadata": {"name": SECRET, "namespace": TRAINER_NS},
            "data": {k: base64.b64encode(v).decode() for k, v in data.items()},
        }  # fmt: skip
        self.kube.create(SECRETS, TRAINER_NS, secret)
        # the pod's ServiceAccount token directory (auth.go reads the issuer from its token)
        ensure_service_account(self.kube, TRAINER_NS, SERVICE)
        sa = self.workdir / "serviceaccount"
        sa.mkdir(exist_ok=True)
        (sa / "token").write_text(request_token(self.core, TRAINER_NS, SERVICE, None))
        (sa / "namespace").write_text(TRAINER_NS)
        shutil.copy(self.pki.ca, sa / "ca.crt")
        self.sa_dir = sa
        self.config = self.workdir / "controller_manager_config.yaml"
        self.config.write_text(config_yaml(self.src, self.webhook_port, self.status_port, self.health_port))
        install_webhooks(self.kube, self.src, self.webhook_port, self.pki.ca)
        # the status server's Service: its name on the loopback address the server listens on
        self.hosts.add(SERVICE_DNS, "127.0.0.1")

    def start(self) -> None:
        Path(CERT_DIR).mkdir(parents=True, exist_ok=True)  # a mount point (the machine's stays empty)
        argv = in_pod_namespace(
            [str(manager_binary()), f"--config={self.config}"],
            [(self.hosts.path, "/etc/hosts"), (self.certs, CERT_DIR), (self.sa_dir, SA_DIR)],
        )
        self.starts += 1
        env = {"KUBECONFIG": str(self.kubeconfig)}
        self.proc = Process(argv, self.workdir / f"trainer-controller-manager.{self.starts}.log", env)
        self.wait_ready()

    def wait_ready(self, timeout: float = 90.0) -> None:
        """Its ``/readyz`` (main.go setupProbeEndpoints: the webhook server has started), then a TLS
        handshake with the status server that verifies its certificate for the Service name."""
        assert self.proc is not None
        deadline = time.monotonic() + timeout
        ctx = ssl.create_default_context(cafile=str(self.pki.ca))
        while not (self._ready() and self._status_server_up(ctx)):
            if self.proc.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"trainer-controller-manager not ready\n{self.proc.tail(30)}")
            time.sleep(0.3)

    def _ready(self) -> bool:
        url = f"http://127.0.0.1:{self.health_port}/readyz"
        try:
            with urllib.request.urlopen(url, timeout=2) as reply:
                return bool(reply.status == 200)
        except OSError:
            return False

    def _status_server_up(self, ctx: ssl.SSLContext) -> bool:
        try:
            with (
                socket.create_connection(("127.0.0.1", self.status_port), timeout=2) as raw,
                ctx.wrap_socket(raw, server_hostname=SERVICE_DNS),
            ):
                return True
        except OSError:
            return False

    def install_runtime(self) -> None:
        """The stock ``torch-distributed`` ClusterTrainingRuntime, through Trainer's webhook."""
        for doc in _load_all(self.src / "manifests/base/runtimes/torch_distributed.yaml"):
            self.kube.create(CLUSTER_RUNTIMES, None, doc)  # type: ignore[arg-type]

    def stop(self) -> None:
        if self.proc is not None:
            # its graceful shutdown waits on runnables for up to 15 s here; nothing of it is kept
            self.proc.stop(timeout=3)


# -- the JobSet level, played ------------------------------------------------------------------------

#: what a trial's process is told by the harness (its "image"): env added per JobSet by ``env_for``
EnvFor = Callable[[int, Mapping[str, Any]], Mapping[str, str]]


@dataclass
class Pod:
    """The trainer pod of one JobSet (the node replicated job, one replica)."""

    uid: str
    index: int
    proc: Process | None = None
    exit_code: int | None = None
    reported: str = ""  # the JobSet status last written by the player
    ends: list[str] = field(default_factory=list)  # how each run ended: exit N, or why it was killed
    log: Path = field(default_factory=Path)


_true = has_condition
_set_condition = set_status_condition


def trainer_container(jobset: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(pod spec, ``node`` container) of the replicated job labelled as the trainer ancestor."""
    for rjob in jobset["spec"]["replicatedJobs"]:
        template = rjob["template"]
        if ANCESTOR_LABEL in ((template.get("metadata") or {}).get("labels") or {}):
            pod = template["spec"]["template"]["spec"]
            for c in pod["containers"]:
                if c["name"] == "node":
                    return pod, c
    raise ValueError(f"JobSet {jobset['metadata']['name']} has no trainer node container")


class JobSetPlayer(threading.Thread):
    """The JobSet controller, Job controller and kubelet for the trainer pods of Trainer's JobSets."""

    def __init__(self, kube: Kube, core: client.CoreV1Api, workdir: Path, hosts: HostsFile,
                 env_for: EnvFor, interval_s: float = 0.25) -> None:  # fmt: skip
        super().__init__(name="jobset-player", daemon=True)
        self.kube, self.core, self.hosts, self.env_for = kube, core, hosts, env_for
        self.workdir = workdir / "pods"
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.interval_s = interval_s
        self.pods: dict[tuple[str, str], Pod] = {}
        self.started = 0  # JobSets met so far: each one's index, in order
        self._lock = threading.Lock()  # ``pods`` is read by the test's thread
        self.errors: list[str] = []
        self.stopping = threading.Event()

    # -- the loop ----------------------------------------------------------------------------------
    def run(self) -> None:
        while not self.stopping.wait(self.interval_s):
            try:
                self.sync()
            except Exception as exc:  # a controller retries; the error is kept
                self.errors.append(repr(exc))

    def sync(self) -> None:
        jobsets = self.kube.list(JOBSETS)
        trainjobs = {
            (t["metadata"]["namespace"], t["metadata"]["name"]): t for t in self.kube.list(TRAINJOBS)
        }
        for js in jobsets:
            key = (js["metadata"]["namespace"], js["metadata"]["name"])
            with self._lock:
                pod = self.pods.get(key)
                if pod is None or pod.uid != js["metadata"]["uid"]:
                    pod = self.pods[key] = Pod(js["metadata"]["uid"], self.started)
                    self.started += 1
                self.sync_one(key, js, pod, trainjobs.get(key))

    def sync_one(self, key: tuple[str, str], js: dict[str, Any], pod: Pod,
                 owner: Mapping[str, Any] | None) -> None:  # fmt: skip
        status = js.get("status") or {}
        if status.get("terminalState"):
            return
        # kube-controller-manager's garbage collector: a TrainJob being deleted (Katib deletes it with
        # foreground propagation, trial_controller.go) takes its JobSet's pods with it
        owner_gone = owner is None or bool(owner["metadata"].get("deletionTimestamp"))
        suspend = bool((js.get("spec") or {}).get("suspend"))
        if pod.proc is not None and pod.exit_code is None:
            code = pod.proc.proc.poll()
            if suspend or owner_gone:
                # JobSet controller (jobset_controller.go suspendJobs): a suspended JobSet suspends its
                # Jobs, whose pods are deleted (SIGTERM, then SIGKILL after the grace period)
                pod.proc.stop(timeout=5)
                pod.proc = None
                self.end(pod, "killed: JobSet suspended" if suspend else "killed: TrainJob deleted")
            elif code is not None:
                pod.exit_code = code
                self.end(pod, f"exit {code}")
        elif pod.proc is None and pod.exit_code is None and not suspend and not owner_gone:
            pod.proc = self.start_pod(key, js, pod)
        self.write_status(key, js, pod, suspend)

    def end(self, pod: Pod, how: str) -> None:
        pod.ends.append(how)
        with pod.log.open("a") as log:
            log.write(json.dumps({"ended": how}) + "\n")

    def ends(self, name: str) -> list[str]:
        """How each run of TrainJob ``name``'s trainer pod ended, in order."""
        with self._lock:
            return [how for (_, job), pod in self.pods.items() if job == name for how in pod.ends]

    # -- the kubelet: one pod as a local process ---------------------------------------------------
    def start_pod(self, key: tuple[str, str], js: Mapping[str, Any], pod: Pod) -> Process:
        ns, name = key
        spec, container = trainer_container(js)
        env = {e["name"]: str(e.get("value", "")) for e in container.get("env") or () if "value" in e}
        mounts = self.project_volumes(ns, spec, container, self.workdir / f"{name}.{pod.index}")
        argv = [*container.get("command", ()), *container.get("args", ())]
        if argv and argv[0] in ("python", "python3"):
            argv[0] = sys.executable  # the image's interpreter: ours, with the Kubeflow SDK installed
        env.update(self.env_for(pod.index, js))
        for proxy in ("http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY"):
            env.pop(proxy, None)
        pod.log = self.workdir / f"{name}.{pod.index}.log"
        wrapped = in_pod_namespace(argv, [(self.hosts.path, "/etc/hosts"), *mounts])
        return Process(wrapped, pod.log, {**env, "PYTHONPATH": str(ROOT)})

    def project_volumes(self, ns: str, spec: Mapping[str, Any], container: Mapping[str, Any],
                        root: Path) -> list[tuple[Path, str]]:  # fmt: skip
        """The kubelet's projected volumes: serviceAccountToken (TokenRequest with the volume's audience
        and expiry, for the pod's ServiceAccount) and configMap items; bind mounts at each mountPath."""
        volumes = {v["name"]: v for v in spec.get("volumes") or ()}
        sa = spec.get("serviceAccountName") or "default"
        binds = []
        for mount in container.get("volumeMounts") or ():
            projected = (volumes.get(mount["name"]) or {}).get("projected")
            if projected is None:
                continue
            d = root / mount["name"]
            d.mkdir(parents=True, exist_ok=True)
            for src in projected.get("sources") or ():
                if "serviceAccountToken" in src:
                    t = src["serviceAccountToken"]
                    ensure_service_account(self.kube, ns, sa)
                    aud = [t["audience"]] if t.get("audience") else None
                    token = request_token(self.core, ns, sa, aud, int(t.get("expirationSeconds", 3600)))
                    (d / t["path"]).write_text(token)
                if "configMap" in src:
                    cm = self.kube.get(CONFIGMAPS, ns, src["configMap"]["name"])
                    if cm is None:
                        raise RuntimeError(f"ConfigMap {ns}/{src['configMap']['name']} not found")
                    for item in src["configMap"].get("items") or ():
                        (d / item["path"]).write_text(cm["data"][item["key"]])
            binds.append((d, mount["mountPath"]))
        return binds

    # -- the JobSet controller's status --------------------------------------------------------------
    def write_status(self, key: tuple[str, str], js: dict[str, Any], pod: Pod, suspend: bool) -> None:
        status = dict(js.get("status") or {})
        conds = [dict(c) for c in status.get("conditions") or ()]
        terminal = None
        if suspend:
            # jobset_controller.go setJobSetSuspendedCondition (constants.JobSetSuspendedReason/Message)
            _set_condition(conds, "Suspended", "True", "SuspendedJobs", "jobset is suspended")
        elif _true(js, "Suspended"):
            # setJobSetResumedCondition (constants.JobSetResumedReason/Message)
            _set_condition(conds, "Suspended", "False", "ResumeJobs", "jobset is resumed")
        if pod.exit_code == 0:
            # jobset_controller.go setJobSetCompletedCondition: Completed/AllJobsCompleted, terminalState
            _set_condition(conds, "Completed", "True", "AllJobsCompleted", "jobset completed successfully")
            terminal = "Completed"
        elif pod.exit_code is not None:
            # failure_policy.go setJobSetFailedCondition: no failurePolicy in torch-distributed, so the
            # first failed Job fails the JobSet (constants.FailedJobsReason/Message)
            _set_condition(conds, "Failed", "True", "FailedJobs",
                           "jobset failed due to one or more job failures")  # fmt: skip
            terminal = "Failed"
        running = pod.proc is not None and pod.exit_code is None
        replicated = [{
            "name": rjob["name"],
            "ready": int(running), "active": int(running),
            "succeeded": int(pod.exit_code == 0), "failed": int(pod.exit_code not in (None, 0)),
            "suspended": int(suspend),
        } for rjob in js["spec"]["replicatedJobs"]]  # fmt: skip
        new = {**status, "conditions": conds, "replicatedJobsStatus": replicated}
        if terminal:
            new["terminalState"] = terminal
        digest = json.dumps(new, sort_keys=True)
        if digest == pod.reported:
            return
        self.kube.patch(JOBSETS, key[0], key[1], {"status": new}, status=True)
        pod.reported = digest

    def sent(self, name: str, metric: str) -> list[str]:
        """Values of ``metric`` in the statuses TrainJob ``name``'s processes sent (SDK returned True),
        in order, over every run of its pods."""
        values = []
        with self._lock:
            pods = sorted(self.pods.items(), key=lambda kv: kv[1].index)
        for (_, job), pod in pods:
            if job != name:
                continue
            for entry in sent_statuses(pod.log):
                if entry.get("sent") is True and metric in entry.get("metrics", {}):
                    values.append(str(entry["metrics"][metric]))
        return values

    def running(self) -> int:
        with self._lock:
            return sum(1 for p in self.pods.values() if p.proc is not None and p.exit_code is None)

    def stop(self) -> None:
        self.stopping.set()
        if self.is_alive():
            self.join(10)
        with self._lock:
            pods = list(self.pods.values())
        for pod in pods:
            if pod.proc is not None:
                with contextlib.suppress(OSError):
                    pod.proc.stop(timeout=5)


def sent_statuses(log: Path) -> list[dict[str, Any]]:
    """The trainer statuses a trial's process reported as sent (tests/e2e/trial.py prints them)."""
    found = []
    with contextlib.suppress(OSError):
        for line in log.read_text(errors="replace").splitlines():
            if line.startswith("{"):
                with contextlib.suppress(ValueError):
                    found.append(json.loads(line))
    return found
