"""``KatibModel``: the API stand-in plus Katib's controllers (experiment, suggestion, trial), a
kubelet and Kubeflow Trainer, run against our real processes: ``katib-progress db serve`` as
Katib's DB manager, the suggestion/early-stopping images of katib-config as pods, and
``katib-progress collector run`` as the collector. See docs/katib-model.md.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import grpc
from kubeflow.katib import katib_api_pb2, katib_api_pb2_grpc

from tests.katibmodel import images, katibconfig, rules, webhook
from tests.katibmodel._controller import Controller, Timing
from tests.katibmodel._kube import EXPERIMENTS, PODS, TRAINJOBS, TRIALS, Kube, register_types
from tests.katibmodel._proc import die_with_parent
from tests.katibmodel.experiment import ExperimentController
from tests.katibmodel.expstatus import is_completed
from tests.katibmodel.kubelet import Kubelet
from tests.katibmodel.metricscollector import FileMetricsCollector
from tests.katibmodel.network import ClusterDNS
from tests.katibmodel.suggestion import SuggestionController
from tests.katibmodel.suggestionclient import Client
from tests.katibmodel.trainer import Point, Reporter, Script, TrainerController
from tests.katibmodel.trial import DBManager, TrialController
from tests.kubestandin import KubeStandin

ROOT = Path(__file__).resolve().parents[2]
KATIB_PROGRESS = str(Path(sys.executable).with_name("katib-progress"))
pb: Any = katib_api_pb2
DB_SERVICE = "katib-db-manager.kubeflow"  # GetDBManagerAddr(): katib-db-manager.<katib ns>:6789


def default_pruning_template(flag: str = "pruning_address_template") -> str:
    """The collector's default ``--pruning-address-template`` (the early-stopping container) or
    ``--suggestion-address-template`` (the suggestion container), read from the real CLI parser."""
    from katib_progress.cli import build_parser

    args = build_parser().parse_args(["collector", "run", "--db-manager=unused:1"])
    return str(getattr(args, flag))


SUGGESTION_FLAG = "suggestion_address_template"


class Process:
    """One of our processes, its output in a log file; stopped with SIGTERM (then SIGKILL)."""

    def __init__(self, argv: list[str], log: Path, env: Mapping[str, str] | None = None) -> None:
        self.argv, self.log = argv, log
        with log.open("ab") as out:
            self.proc = subprocess.Popen(
                argv,
                cwd=ROOT,
                env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})},
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                preexec_fn=die_with_parent,  # noqa: PLW1509 - only prctl(2) on a preloaded libc
            )

    def stop(self, timeout: float = 15.0) -> int | None:
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(5)
        return self.proc.returncode

    def tail(self, lines: int = 15) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""


def start_db_manager(address: str, workdir: Path) -> Process:
    """``katib-progress db serve`` as Katib's DB manager (the katib-db-manager Service)."""
    argv = [KATIB_PROGRESS, "db", "serve", "--address", address, "--db", str(workdir / "katib-db.sqlite")]
    return Process(argv, workdir / "db-manager.log")


def wait_db_manager(address: str, proc: Process, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            with grpc.insecure_channel(address) as channel:
                katib_api_pb2_grpc.DBManagerStub(channel).GetObservationLog(
                    pb.GetObservationLogRequest(trial_name="probe"), timeout=2
                )
            return
        except grpc.RpcError as exc:
            if proc.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"db serve did not come up: {exc}\n{proc.tail()}") from exc
            time.sleep(0.2)


def wait_experiment(
    read: Callable[[], dict[str, Any]],
    describe: Callable[[], str],
    *,
    timeout: float = 180.0,
    stall_s: float = 10.0,
    startup_s: float = 45.0,
) -> dict[str, Any]:
    """The Experiment once it Succeeded or Failed. AssertionError (with ``describe``) when it stalls:
    no active trial and nothing changed for ``stall_s`` (``startup_s`` before the first trial,
    which waits for the suggestion pod), or when ``timeout`` passes."""
    deadline = time.monotonic() + timeout
    last, since = "", time.monotonic()
    while True:
        exp = read()
        if is_completed(exp):
            return exp
        status = exp.get("status") or {}
        active = int(status.get("trialsRunning") or 0) + int(status.get("trialsPending") or 0)
        fingerprint = json.dumps([status.get("trials"), active, status.get("trialsEarlyStopped")])
        if fingerprint != last:
            last, since = fingerprint, time.monotonic()
        quiet = stall_s if status.get("trials") else startup_s
        name = exp.get("metadata", {}).get("name")
        if active == 0 and time.monotonic() - since > quiet:
            raise AssertionError(f"experiment {name} stalled with no active trial\n{describe()}")
        if time.monotonic() > deadline:
            raise AssertionError(f"experiment {name} not finished in {timeout}s\n{describe()}")
        time.sleep(0.2)


def describe_lines(kube: Kube, namespace: str, name: str) -> list[str]:
    """The Experiment's conditions and counts, each trial's True conditions and observation, each pod's
    containers: the start of an assertion message (the Katib model's and real Katib's alike)."""
    exp = kube.get(EXPERIMENTS, namespace, name) or {}
    status = exp.get("status") or {}
    conditions = [(c["type"], c["status"], c.get("reason")) for c in status.get("conditions") or []]
    lines = [f"experiment conditions: {conditions}"]
    lines.append(f"counts: { {k: v for k, v in status.items() if k.startswith('trial')} }")
    trials = kube.list(TRIALS, namespace, labels={"katib.kubeflow.org/experiment": name})
    for t in trials:
        conds = [
            c["type"] for c in (t.get("status") or {}).get("conditions") or [] if c.get("status") == "True"
        ]
        available = rules.is_observation_available(t)
        lines.append(f"  trial {t['metadata']['name']}: {conds} observation={available}")
    for pod in kube.list(PODS, namespace):
        for cs in (pod.get("status") or {}).get("containerStatuses") or []:
            lines.append(
                f"  pod {pod['metadata']['name']}/{cs['name']}: ready={cs['ready']} "
                f"restarts={cs.get('restartCount')} state={cs['state']}"
            )
    return lines


class ExperimentWaits:
    """What the Katib model and real Katib read alike, through ``kube`` and the DB manager at
    ``db_address``: the Experiment, its trials, a trial's rows, and ``wait_finished`` (the default clock
    is the subclass's ``WAIT``: timeout, stall and start-up seconds)."""

    WAIT: tuple[float, float, float] = (180.0, 10.0, 45.0)
    kube: Kube
    db_address: str

    def experiment(self, namespace: str, name: str) -> dict[str, Any]:
        found = self.kube.get(EXPERIMENTS, namespace, name)
        assert found is not None, f"experiment {namespace}/{name} is gone"
        return found

    def trial_list(self, namespace: str, experiment: str) -> list[dict[str, Any]]:
        return self.kube.list(TRIALS, namespace, labels={"katib.kubeflow.org/experiment": experiment})

    def rows(self, trial: str, metric: str) -> list[tuple[str, str, str]]:
        """The trial's observation log for ``metric`` in Katib's DB manager: (name, value, time)."""
        with grpc.insecure_channel(self.db_address) as channel:
            reply = katib_api_pb2_grpc.DBManagerStub(channel).GetObservationLog(
                pb.GetObservationLogRequest(trial_name=trial, metric_name=metric), timeout=10
            )
        return [(m.metric.name, m.metric.value, m.time_stamp) for m in reply.observation_log.metric_logs]

    def describe(self, namespace: str, name: str) -> str:
        raise NotImplementedError

    def wait_finished(
        self,
        namespace: str,
        name: str,
        *,
        timeout: float | None = None,
        stall_s: float | None = None,
        startup_s: float | None = None,
    ) -> dict[str, Any]:
        default_timeout, default_stall, default_startup = self.WAIT
        return wait_experiment(
            lambda: self.experiment(namespace, name),
            lambda: self.describe(namespace, name),
            timeout=default_timeout if timeout is None else timeout,
            stall_s=default_stall if stall_s is None else stall_s,
            startup_s=default_startup if startup_s is None else startup_s,
        )


class KatibModel(ExperimentWaits):
    def __init__(
        self,
        kube: KubeStandin,
        workdir: Path,
        script: Script,
        *,
        timing: Timing | None = None,
        katib_config: str | None = None,
        train_interval_s: float = 0.2,
        push_to_db: bool = False,
        db_address: str | None = None,
        resolve_image: Callable[[str], images.Image] = images.resolve,
    ) -> None:
        self.standin = kube
        self.workdir = workdir
        self.timing = timing or Timing.fast()
        self.kube = Kube(kube.api_client())
        self.dns = ClusterDNS()
        self.kubeconfig = kube.write_kubeconfig(workdir / "kubeconfig")
        register_types(kube)
        katibconfig.install(
            self.kube, katib_config if katib_config is not None else katibconfig.SHIPPED.read_text()
        )
        self.init = katibconfig.InitConfig.read(self.kube)  # read once, at controller start
        self.db: Process | None = None
        if db_address is None:
            self.db_address = f"{self.dns.ip(DB_SERVICE)}:6789"
            self.db = start_db_manager(self.db_address, workdir)
        else:  # a DB manager shared with other models (Katib has one per cluster)
            self.db_address = db_address
            self.dns.register(DB_SERVICE, db_address.rpartition(":")[0])
        self.client = Client(self.timing, self.dns.resolve, self.db_address)
        self.trials = TrialController(
            self.kube, self.timing, DBManager(self.db_address, self.timing.grpc_timeout_s), self.init
        )
        self.experiments = ExperimentController(self.kube, self.timing)
        self.suggestions = SuggestionController(self.kube, self.timing, self.client, self.init)
        self.kubelet = Kubelet(
            self.kube,
            self.timing,
            self.dns,
            workdir,
            {"KUBECONFIG": str(self.kubeconfig)},
            resolve_image=resolve_image,
        )
        reporter: Reporter | None = self.report_metrics if push_to_db else None
        # Katib's file metrics collector in every trial pod whose Trial asks for StdOut/File
        self.file_collector = FileMetricsCollector(
            self.kube, self.dns.resolve, self.db_address, self.timing.grpc_timeout_s
        )
        self.trainer = TrainerController(
            self.kube, self.timing, script, train_interval_s, reporter, self.file_collector
        )
        self.collectors: list[Process] = []

    @property
    def controllers(self) -> list[Controller]:
        return [self.kubelet, self.trainer, self.trials, self.experiments, self.suggestions]

    def start(self) -> KatibModel:
        if self.db is not None:
            wait_db_manager(self.db_address, self.db)
        for c in self.controllers:
            c.start()
        return self

    def stop(self) -> None:
        for proc in self.collectors:
            proc.stop()
        for c in self.controllers:
            c.request_stop()  # all loops end together; the kubelet then terminates the pods
        for c in reversed(self.controllers):
            c.stop()
        if self.db is not None:
            self.db.stop()

    def __enter__(self) -> KatibModel:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- actions ---------------------------------------------------------------------------------

    def submit(self, experiment: Mapping[str, Any]) -> dict[str, Any]:
        """kubectl apply through Katib's admission webhooks (webhook.Rejected when denied)."""
        admitted = webhook.admit(self.kube, experiment)
        return self.kube.create(EXPERIMENTS, admitted["metadata"]["namespace"], admitted)

    def pruning_address(self, experiment: Mapping[str, Any], flag: str = "pruning_address_template") -> str:
        """Where the collector's default template points for ``experiment``, resolved by the model's DNS."""
        address = default_pruning_template(flag).format(
            experiment=experiment["metadata"]["name"],
            algorithm=experiment["spec"]["algorithm"]["algorithmName"],
            namespace=experiment["metadata"]["namespace"],
        )
        service, _, port = address.rpartition(":")
        return f"{self.dns.ip(service)}:{port}"

    def start_collector(self, experiment: Mapping[str, Any], *extra: str) -> Process:
        """``katib-progress collector run`` against the stand-in and the DB manager; its pruning
        address is the experiment's suggestion Service, resolved here (one experiment per collector)."""
        argv = [
            KATIB_PROGRESS, "--log-json", "collector", "run",
            f"--kubeconfig={self.kubeconfig}",
            f"--db-manager={self.db_address}",
            f"--pruning-address-template={self.pruning_address(experiment)}",
            f"--suggestion-address-template={self.pruning_address(experiment, SUGGESTION_FLAG)}",
            "--experiment-cache-ttl=1",
            *extra,
        ]  # fmt: skip
        proc = Process(argv, self.workdir / f"collector-{len(self.collectors)}.log")
        self.collectors.append(proc)
        return proc

    def report_metrics(self, key: tuple[str, str], point: Point) -> None:
        """What kubeflow-katib's ``report_metrics`` sends (trial name = TrainJob name, second stamps)."""
        stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        log = pb.ObservationLog(
            metric_logs=[
                pb.MetricLog(time_stamp=stamp, metric=pb.Metric(name=k, value=v))
                for k, v in point.metrics.items()
            ]
        )
        with grpc.insecure_channel(self.db_address) as channel:
            katib_api_pb2_grpc.DBManagerStub(channel).ReportObservationLog(
                pb.ReportObservationLogRequest(trial_name=key[1], observation_log=log), timeout=5
            )

    # -- reading -----------------------------------------------------------------------------------

    def describe(self, namespace: str, name: str) -> str:
        """What happened, for an assertion message."""
        lines = describe_lines(self.kube, namespace, name)
        jobs = len(self.kube.list(TRAINJOBS, namespace))
        lines.append(f"  trainjobs: {jobs}, trainer runs: {self.trainer.running()}")
        lines.append(f"  suggestion calls: {self.client.calls[-6:]}")
        for c in self.controllers:
            if c.errors:
                lines.append(f"  {c.name} errors: {list(c.errors)[-3:]}")
        for proc in self.collectors:
            lines.append(f"  collector log:\n{proc.tail(8)}")
        return "\n".join(lines)
