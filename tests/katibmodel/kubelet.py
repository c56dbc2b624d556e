"""Deployments -> one pod of real processes (ReplicaSet + scheduler + kubelet, reduced).

For each Deployment the model runs one pod: every container is a local process (``images.py``)
started with the pod's loopback IP as its network (``network.py``), restarted with CrashLoopBackOff
when it exits, probed as the kubelet probes (gRPC health Check on the probe's port and service;
readiness gates the pod's Ready condition, liveness restarts the container), and the Deployment's
``Available`` condition follows the pod. Two containers of a pod listening on one address are
allowed when they share a uid (SO_REUSEPORT: the kernel splits connections) and otherwise the later
binder is killed as its bind would have failed with EADDRINUSE.
"""

from __future__ import annotations

import contextlib
import logging
import os
import secrets
import signal
import subprocess
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from tests.katibmodel import images
from tests.katibmodel._controller import Cache, Controller, Key, Timing, Watch, for_object, for_owner
from tests.katibmodel._kube import DEPLOYMENTS, OK, PODS, Kube, Result, now, owner_reference
from tests.katibmodel._proc import die_with_parent
from tests.katibmodel.network import ClusterDNS, listeners

_log = logging.getLogger(__name__)


def grpc_probe(address: str, service: str, timeout: float) -> bool:
    """The kubelet's gRPC probe: success iff Check returns SERVING (a fresh connection each time)."""
    with grpc.insecure_channel(address) as channel:
        try:
            reply = health_pb2_grpc.HealthStub(channel).Check(
                health_pb2.HealthCheckRequest(service=service), timeout=timeout
            )
        except grpc.RpcError:
            return False
    return bool(reply.status == health_pb2.HealthCheckResponse.SERVING)


@dataclass
class Probe:
    spec: Mapping[str, Any]
    next_at: float = 0.0
    failures: int = 0
    ok: bool = False


@dataclass
class Container:
    spec: dict[str, Any]
    log: Path
    image: images.Image | None = None
    image_error: str = ""
    proc: subprocess.Popen[bytes] | None = None
    started: float = 0.0
    restarts: int = 0
    backoff: float = 0.0
    next_start: float = 0.0
    last_exit: str = ""
    readiness: Probe | None = None
    liveness: Probe | None = None
    bound_at: dict[tuple[str, int], float] = field(default_factory=dict)

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    @property
    def ready(self) -> bool:
        return self.running and (self.readiness is None or self.readiness.ok)


@dataclass
class Pod:
    name: str
    namespace: str
    ip: str
    containers: list[Container]
    status: dict[str, Any] = field(default_factory=dict)

    @property
    def ready(self) -> bool:
        return all(c.ready for c in self.containers)


class Kubelet(Controller):
    name = "kubelet"

    def __init__(
        self,
        kube: Kube,
        timing: Timing,
        dns: ClusterDNS,
        workdir: Path,
        env: Mapping[str, str],
        *,
        resolve_image: Callable[[str], images.Image] = images.resolve,
        wrap: Callable[[list[str]], list[str]] | None = None,
    ) -> None:
        super().__init__(kube, timing)
        self.dns = dns
        self.workdir = workdir
        self.env = dict(env)
        self.pods: dict[Key, Pod] = {}
        #: the image map (the e2e tier adds Katib's goptuna binary) and a wrapper around every
        #: container's argv (the e2e tier: a mount namespace whose /etc/hosts is the cluster DNS)
        self.resolve_image = resolve_image
        self.wrap = wrap

    def watches(self) -> list[Watch]:
        return [Watch(DEPLOYMENTS, for_object), Watch(PODS, for_owner("Deployment"))]

    def reconcile(self, key: Key, cache: Cache) -> Result:
        deployment = cache.get(DEPLOYMENTS, key)
        pod = self.pods.get(key)
        if deployment is None or deployment["metadata"].get("deletionTimestamp"):
            if pod is not None:
                self._terminate(pod)
                self.kube.delete(PODS, pod.namespace, pod.name)
                del self.pods[key]
            return OK
        if pod is None:
            self.pods[key] = self._create(deployment)
        return OK

    def step(self) -> None:
        super().step()
        for key, pod in list(self.pods.items()):
            self._sync(key, pod)

    # -- pods ------------------------------------------------------------------------------------

    def _create(self, deployment: Mapping[str, Any]) -> Pod:
        meta = deployment["metadata"]
        template = deployment["spec"]["template"]
        name = f"{meta['name']}-{secrets.token_hex(5)}"
        ip = self.dns.ip(f"{meta['name']}.{meta['namespace']}")  # the Service named like the Deployment
        containers = []
        for spec in template["spec"]["containers"]:
            c = Container(spec=spec, log=self.workdir / f"{name}.{spec['name']}.log")
            try:
                c.image = self.resolve_image(spec["image"])
            except images.ImageNotModelled as exc:
                c.image_error = str(exc)
            c.readiness = Probe(spec["readinessProbe"]) if spec.get("readinessProbe") else None
            c.liveness = Probe(spec["livenessProbe"]) if spec.get("livenessProbe") else None
            containers.append(c)
        body = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": name,
                "namespace": meta["namespace"],
                "labels": dict(template["metadata"].get("labels") or {}),
                "ownerReferences": [owner_reference(deployment)],
            },
            "spec": template["spec"],
        }
        self.kube.create(PODS, meta["namespace"], body)
        pod = Pod(name, meta["namespace"], ip, containers)
        for c in containers:
            self._start(pod, c)
        return pod

    def _start(self, pod: Pod, c: Container) -> None:
        if c.image is None:
            return
        argv = images.in_pod_network(c.image.argv(c.spec), pod.ip)
        if self.wrap is not None:
            argv = self.wrap(argv)
        env = {
            **os.environ,
            **self.env,  # KUBECONFIG: the in-cluster config of a real pod, pointing at the stand-in
            "POD_NAME": pod.name,
            "POD_NAMESPACE": pod.namespace,  # the downward API's usual name
            "KATIBMODEL_NAMESPACE": pod.namespace,  # the service-account namespace file upstream reads
        }
        env.update({e["name"]: str(e.get("value", "")) for e in c.spec.get("env") or () if "name" in e})
        with c.log.open("ab") as out:
            out.write(f"--- start {' '.join(argv)} (uid {c.image.uid})\n".encode())
            out.flush()
            c.proc = subprocess.Popen(
                argv,
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                preexec_fn=die_with_parent,  # noqa: PLW1509 - only prctl(2) on a preloaded libc
            )
        c.started = time.monotonic()
        c.bound_at.clear()
        for probe in (c.readiness, c.liveness):
            if probe is not None:
                probe.next_at = c.started + float(probe.spec.get("initialDelaySeconds", 0))
                probe.failures, probe.ok = 0, False

    def _kill(self, c: Container, reason: str) -> None:
        if c.proc is not None and c.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(c.proc.pid, signal.SIGKILL)
            c.proc.wait(5)
        c.last_exit = reason
        with c.log.open("ab") as out:
            out.write(f"--- killed by the kubelet model: {reason}\n".encode())

    def _terminate(self, pod: Pod) -> None:
        for c in pod.containers:
            if c.proc is not None and c.proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(c.proc.pid, signal.SIGTERM)
        for c in pod.containers:
            if c.proc is None:
                continue
            try:
                c.proc.wait(5)
            except subprocess.TimeoutExpired:
                self._kill(c, "terminationGracePeriod expired")

    def _sync(self, key: Key, pod: Pod) -> None:
        now_ = time.monotonic()
        for c in pod.containers:
            if c.proc is not None and c.proc.poll() is not None and c.next_start <= c.started:
                code = c.proc.returncode
                c.last_exit = c.last_exit or f"exit code {code}"
                c.restarts += 1  # restartPolicy Always; CrashLoopBackOff 10 s doubling to 300 s
                t = self.timing
                c.backoff = min(t.crashloop_max_s, c.backoff * 2) if c.backoff else t.crashloop_initial_s
                c.next_start = now_ + c.backoff
            elif c.proc is not None and c.proc.poll() is not None and now_ >= c.next_start:
                c.last_exit = ""
                self._start(pod, c)
        self._enforce_bind_rule(pod, now_)
        for c in pod.containers:
            self._probe(pod, c, now_)
        self._publish(key, pod)

    def _enforce_bind_rule(self, pod: Pod, now_: float) -> None:
        running = [c for c in pod.containers if c.running and c.proc is not None]
        table = listeners(c.proc.pid for c in running if c.proc is not None)
        holders: dict[tuple[str, int], list[Container]] = {}
        for c in running:
            assert c.proc is not None
            for addr in table.get(c.proc.pid, ()):
                if addr[0] == pod.ip:
                    c.bound_at.setdefault(addr, now_)
                    holders.setdefault(addr, []).append(c)
        for addr, cs in holders.items():
            if len(cs) < 2 or len({c.image.uid for c in cs if c.image}) < 2:
                continue  # same uid: SO_REUSEPORT shares the port, connections are split
            first = min(cs, key=lambda c: (c.bound_at[addr], c.started))
            for loser in cs:
                if loser is not first:
                    self._kill(
                        loser,
                        f"bind {addr[0]}:{addr[1]}: address already in use (container "
                        f"{first.spec['name']} holds it as uid {first.image.uid if first.image else '?'}; "
                        "SO_REUSEPORT sharing needs the same uid)",
                    )

    def _probe(self, pod: Pod, c: Container, now_: float) -> None:
        for probe, live in ((c.readiness, False), (c.liveness, True)):
            if probe is None or not c.running or now_ < probe.next_at:
                continue
            grpc_spec = probe.spec.get("grpc") or {}
            ok = grpc_probe(
                f"{pod.ip}:{grpc_spec.get('port')}",
                str(grpc_spec.get("service") or ""),
                self.timing.probe_timeout_s,
            )
            probe.next_at = now_ + float(probe.spec.get("periodSeconds", 10))
            probe.failures = 0 if ok else probe.failures + 1
            threshold = int(probe.spec.get("failureThreshold", 3))
            if ok:
                probe.ok = True
            elif probe.failures >= threshold:
                probe.ok = False
                if live:
                    self._kill(c, f"liveness probe failed {probe.failures} times")

    # -- status ------------------------------------------------------------------------------------

    def _container_status(self, c: Container) -> dict[str, Any]:
        status: dict[str, Any] = {"name": c.spec["name"], "image": c.spec["image"], "ready": c.ready}
        status["restartCount"] = c.restarts
        if c.image is None:
            status["state"] = {"waiting": {"reason": "ErrImagePull", "message": c.image_error}}
        elif c.running:
            status["state"] = {"running": {}}
        else:
            status["state"] = {"waiting": {"reason": "CrashLoopBackOff", "message": c.last_exit}}
        if c.last_exit:
            status["lastState"] = {"terminated": {"reason": "Error", "message": c.last_exit}}
        return status

    def _publish(self, key: Key, pod: Pod) -> None:
        ready = "True" if pod.ready else "False"
        status = {
            "phase": "Running" if any(c.running for c in pod.containers) else "Pending",
            "podIP": pod.ip,
            "conditions": [{"type": "Ready", "status": ready}, {"type": "ContainersReady", "status": ready}],
            "containerStatuses": [self._container_status(c) for c in pod.containers],
        }
        if status != pod.status:
            self.kube.patch(PODS, pod.namespace, pod.name, {"status": status}, status=True)
            pod.status = status
            available = 1 if pod.ready else 0
            cond = (
                ("True", "MinimumReplicasAvailable", "Deployment has minimum availability.")
                if available
                else ("False", "MinimumReplicasUnavailable", "Deployment does not have minimum availability.")
            )
            body = {
                "status": {
                    "replicas": 1,
                    "readyReplicas": available,
                    "availableReplicas": available,
                    "unavailableReplicas": 1 - available,
                    "conditions": [
                        {
                            "type": "Available",
                            "status": cond[0],
                            "reason": cond[1],
                            "message": cond[2],
                            "lastUpdateTime": now(),
                            "lastTransitionTime": now(),
                        }
                    ],
                }
            }
            self.kube.patch(DEPLOYMENTS, key[0], key[1], body, status=True)

    def stop(self, timeout: float = 10.0) -> None:
        super().stop(timeout)
        for pod in self.pods.values():
            self._terminate(pod)
