"""``RealKatib``: Katib's own controllers, DB manager and Go suggestion service on a real API server.

Real: etcd, kube-apiserver, Katib's CRDs, katib-controller (experiment, suggestion and trial
controllers, admission webhooks), katib-db-manager on MariaDB, Katib's goptuna suggestion binary, and
all of ours (collector, suggestion and early-stopping images' commands). Played (no kubelet, scheduler,
kube-controller-manager or Trainer controller runs): the suggestion Deployment's pod (the Katib model's
kubelet, tests/katibmodel/kubelet.py, runs each container as a local process on the Service's loopback
address and marks the Deployment Available) and Kubeflow Trainer (tests/katibmodel/trainer.py: the
TrainJob's conditions as Trainer's controller sets them, the training as a scripted curve posted to
``status.trainerStatus``). docs/cluster.md lists each with the reason.

The interface is the Katib model's (``KatibModel``): ``submit``, ``experiment``, ``trial_list``,
``rows``, ``wait_finished``, ``describe``, so one scenario runs against both.

``RealKatib(..., trainer="real")`` runs Kubeflow Trainer's own controller manager instead of the
played Trainer, and plays only the JobSet level below it (tests/e2e/trainer.py).
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from kubeflow.katib import katib_api_pb2
from kubernetes import client

from tests.e2e import katib
from tests.e2e import trainer as real_trainer
from tests.e2e.controlplane import ControlPlane, binary, free_port
from tests.e2e.netns import HostsFile, in_mount_namespace
from tests.katibmodel import images
from tests.katibmodel._controller import Controller, Timing
from tests.katibmodel._kube import EXPERIMENTS, TRAINJOBS, Kube
from tests.katibmodel.harness import KATIB_PROGRESS, ExperimentWaits, Process, describe_lines
from tests.katibmodel.kubelet import Kubelet
from tests.katibmodel.network import ClusterDNS
from tests.katibmodel.scenarios import always, converging
from tests.katibmodel.trainer import Curve, Point, Script, TrainerController, hyperparameters

Key = tuple[str, str]

pb: Any = katib_api_pb2
ROOT = Path(__file__).resolve().parents[2]


class SyncedDNS(ClusterDNS):
    """The model's loopback DNS, written to the hosts file whenever a name is added."""

    def __init__(self, hosts_path: Path) -> None:
        super().__init__()
        self.hosts = HostsFile(hosts_path, self)

    def ip(self, name: str, probe_port: int = 6789) -> str:
        found = super().ip(name, probe_port)
        self.hosts.sync()
        return found


def resolve_image(image: str) -> images.Image:
    """The Katib model's image map plus Katib's goptuna suggestion, built from Go modules; it binds
    the fixed wildcard ``0.0.0.0:6789``, so it runs in a network namespace of its own
    (tests/e2e/podnet.py) reached on the pod's address."""
    name = image.rsplit(":", 1)[0]
    if name == katib.GOPTUNA_IMAGE:
        relay = (sys.executable, "-m", "tests.e2e.podnet", "--listen", "0.0.0.0:6789", "--")
        return images.Image((*relay, str(binary("goptuna-suggestion"))), (), 0, "Katib's goptuna")
    return images.resolve(image)


class Sent:
    """Every trainerStatus the played Trainer posted, per TrainJob, in order."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.points: dict[Key, list[Point]] = {}

    def __call__(self, key: Key, point: Point) -> None:
        with self._lock:
            self.points.setdefault(key, []).append(point)

    def values(self, name: str, metric: str) -> list[str]:
        with self._lock:
            for (_, job), points in self.points.items():
                if job == name:
                    return [p.metrics[metric] for p in points if metric in p.metrics]
        return []


class Scripted:
    """The Trainer script of the running test (``script``), or of one Experiment (``route``), so that
    several Experiments of one test can run side by side, each with its own training."""

    def __init__(self) -> None:
        self.script: Script = always(converging)
        self._lock = threading.Lock()
        self._routes: dict[str, tuple[Script, float | None]] = {}

    def __call__(self, index: int, params: Mapping[str, str]) -> Curve:
        return self.script(index, params)

    def route(self, experiment: str, script: Script, interval_s: float | None = None) -> None:
        """TrainJobs of ``experiment`` run ``script``, indexed in their own start order (0, 1, 2...),
        with ``interval_s`` between points (the Trainer's own when None)."""
        with self._lock:
            self._routes[experiment] = (script, interval_s)

    def routed(self, experiment: str) -> tuple[Script, float | None] | None:
        with self._lock:
            return self._routes.get(experiment)


def experiment_of(key: Key) -> str:
    """The Experiment of a Katib trial's TrainJob: trials are named ``<experiment>-<suffix>``."""
    return key[1].rsplit("-", 1)[0]


class RoutedTrainer(TrainerController):
    """The played Trainer, with each Experiment's own script where the test routed one."""

    script: Scripted

    def training(self, key: Key, index: int, job: Mapping[str, Any]) -> tuple[Curve, float]:
        experiment = experiment_of(key)
        found = self.script.routed(experiment)
        if found is None:
            return super().training(key, index, job)
        script, interval_s = found
        # its place among the Experiment's TrainJobs in the Trainer's start order (``started``)
        own = [k for k in self.started if k[0] == key[0] and experiment_of(k) == experiment]
        curve = script(own.index(key), hyperparameters(job))
        return curve, self.interval_s if interval_s is None else interval_s


def converging_trials(_index: int, _jobset: Mapping[str, Any]) -> dict[str, str]:
    """The real Trainer's trial processes (tests/e2e/trial.py): every one converges."""
    return {"KP_E2E_CURVE": "converging"}


class RealKatib(ExperimentWaits):
    WAIT = (300.0, 30.0, 90.0)  # real Katib: 10 s readiness delays, real processes

    def __init__(
        self,
        workdir: Path,
        *,
        timing: Timing | None = None,
        trainer: Literal["played", "real"] = "played",
    ) -> None:
        self.workdir = workdir
        self.trainer_mode = trainer
        workdir.mkdir(parents=True, exist_ok=True)
        self.timing = timing or Timing.fast()
        self.script = Scripted()  # set ``script.script`` per test
        self.sent = Sent()
        self.cp = ControlPlane.start(workdir / "controlplane")
        self.kubeconfig = self.cp.write_kubeconfig(workdir / "kubeconfig")
        self.kube = Kube(self.cp.api_client(self.kubeconfig))
        self.dns = SyncedDNS(workdir / "hosts")
        self.db_address = f"{self.dns.ip(katib.DB_SERVICE)}:6789"
        self.mariadb = katib.MariaDB(workdir).start()
        self.db_manager = katib.KatibDBManager(workdir, self.mariadb, self.db_address)
        self.controller: katib.KatibController | None = None
        self.collector: Process | None = None
        self.collector_starts = 0
        self.kubelet = Kubelet(
            self.kube,
            self.timing,
            self.dns,
            workdir,
            {"KUBECONFIG": str(self.kubeconfig), "PYTHONPATH": str(ROOT)},
            resolve_image=resolve_image,
            wrap=self.in_cluster,
        )
        self.trainer = RoutedTrainer(self.kube, self.timing, self.script, 0.2, reporter=self.sent)
        # trainer="real": Trainer's own controller manager, and the JobSet level played below it
        self.trial_env: real_trainer.EnvFor = converging_trials  # set per test: the trials' curves
        self.trainer_manager: real_trainer.TrainerControllerManager | None = None
        self.jobsets: real_trainer.JobSetPlayer | None = None
        if self.trainer_mode == "real":
            core = client.CoreV1Api(self.cp.api_client(self.kubeconfig))
            self.trainer_manager = real_trainer.TrainerControllerManager(
                workdir, self.kube, core, self.kubeconfig, self.cp.pki, self.dns.hosts
            )
            self.jobsets = real_trainer.JobSetPlayer(
                self.kube, core, workdir, self.dns.hosts, self._trial_env
            )

    def _trial_env(self, index: int, jobset: Mapping[str, Any]) -> Mapping[str, str]:
        return self.trial_env(index, jobset)  # read at each start: tests set ``trial_env``

    # -- set-up ----------------------------------------------------------------------------------

    def in_cluster(self, argv: list[str]) -> list[str]:
        """A process that resolves Service names as a pod would: /etc/hosts is the cluster DNS."""
        return in_mount_namespace(argv, [(self.dns.hosts.path, "/etc/hosts")])

    def install(self) -> None:
        katib_src = katib.module_dir("katib-source")
        trainer_src = katib.module_dir("trainer-source")
        katib.install_crds(self.kube, katib_src, trainer_src)
        if self.trainer_manager is not None:
            self.trainer_manager.install()
        self.cp.start_controller_manager()  # after every CRD: its garbage collector knows them at once
        katib.ensure_namespace(self.kube, katib.KATIB_NS)
        katib.ensure_namespace(self.kube, "team-a", katib.INJECTION_LABEL)
        self.webhook_port = free_port()
        #: the ConfigMap as Katib installs it, then our merge applied to the live object
        self.stock_config = katib.stock_config(katib_src, self.webhook_port, free_port(), free_port())
        katib.install_configmap(self.kube, self.stock_config)
        merged, _ = katib.katib_config_command("merge", katib.configmap_yaml(self.kube))
        katib.apply_configmap(self.kube, merged)
        config_file = self.workdir / "katib-config.yaml"  # katib-controller --katib-config (init)
        config_file.write_text(katib.config_data(self.kube))
        katib.install_webhooks(self.kube, katib_src, self.webhook_port, self.cp.pki.ca)
        cert_dir = katib.webhook_cert_dir(self.workdir, self.cp.pki.dir)
        self.controller = katib.KatibController(
            self.workdir, self.kubeconfig, self.dns.hosts, cert_dir, config_file
        )

    @property
    def controllers(self) -> list[Controller]:
        if self.trainer_mode == "real":
            return [self.kubelet]
        return [self.kubelet, self.trainer]

    def start(self) -> RealKatib:
        self.install()
        if self.trainer_manager is not None and self.jobsets is not None:
            self.trainer_manager.start()
            self.trainer_manager.install_runtime()
            self.jobsets.start()
        self.db_manager.start()
        self.start_katib_controller()
        self.start_collector()
        for c in self.controllers:
            c.start()
        return self

    def start_katib_controller(self) -> None:
        assert self.controller is not None
        self.controller.start()
        assert self.controller.proc is not None
        katib.wait_webhook(self.webhook_port, self.controller.proc)

    def start_collector(self, *extra: str) -> Process:
        """Our collector, cluster-wide, with its default pruning and suggestion address templates:
        it resolves ``<experiment>-<algorithm>.<namespace>`` through the cluster DNS."""
        argv = self.in_cluster(
            [
                KATIB_PROGRESS, "--log-json", "collector", "run",
                f"--kubeconfig={self.kubeconfig}", f"--db-manager={katib.DB_SERVICE}:6789",
                "--experiment-cache-ttl=1", *extra,
            ]
        )  # fmt: skip
        self.collector_starts += 1
        self.collector = Process(argv, self.workdir / f"collector.{self.collector_starts}.log")
        return self.collector

    def stop(self) -> None:
        for c in self.controllers:
            c.request_stop()
        for c in reversed(self.controllers):
            c.stop()
        if self.jobsets is not None:
            self.jobsets.stop()
        for proc in (self.collector, self.controller, self.trainer_manager, self.db_manager):
            if proc is not None:
                proc.stop()
        self.mariadb.stop()
        self.cp.stop()

    def __enter__(self) -> RealKatib:
        try:
            return self.start()
        except BaseException:
            self.stop()
            raise

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- actions and reading (the Katib model's interface) ----------------------------------------

    def submit(self, experiment: Mapping[str, Any]) -> dict[str, Any]:
        """kubectl create: through the API server and Katib's real admission webhooks."""
        return self.kube.create(EXPERIMENTS, experiment["metadata"]["namespace"], experiment)

    def describe(self, namespace: str, name: str) -> str:
        lines = describe_lines(self.kube, namespace, name)
        runs = self.jobsets.running() if self.jobsets is not None else self.trainer.running()
        lines.append(f"  trainjobs: {len(self.kube.list(TRAINJOBS, namespace))}, runs: {runs}")
        if self.jobsets is not None and self.jobsets.errors:
            lines.append(f"  jobset player errors: {self.jobsets.errors[-3:]}")
        if self.trainer_manager is not None and self.trainer_manager.proc is not None:
            lines.append(f"  trainer-controller-manager log:\n{self.trainer_manager.proc.tail(12)}")
        for c in self.controllers:
            if c.errors:
                lines.append(f"  {c.name} errors: {list(c.errors)[-3:]}")
        if self.controller is not None and self.controller.proc is not None:
            lines.append(f"  katib-controller log:\n{self.controller.proc.tail(12)}")
        if self.collector is not None:
            lines.append(f"  collector log:\n{self.collector.tail(8)}")
        return "\n".join(lines)
