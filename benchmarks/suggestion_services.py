"""Suggestion services as real processes, and a Katib-like driver for them (benchmark helpers).

A service is started from a command, listens on a loopback port, and is always stopped (SIGTERM,
then SIGKILL) when the ``with`` block ends. The driver talks to it exactly as Katib's suggestion
controller does (``tests/suggestion/katib_fake.py``: whole trial list in every request, the
experiment's objective copied into each trial).
"""

from __future__ import annotations

import os
import shlex
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.suggestion_functions import KINDS, LEVELS
from tests.suggestion.katib_fake import Cond, FakeKatib, FakeTrial, experiment, param

_READY_TIMEOUT_S = 120.0
_CALL_TIMEOUT_S = 300.0


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def ours_command(address: str) -> list[str]:
    return [sys.executable, "-m", "katib_progress.cli", "suggestion", "serve", "--address", address]


@dataclass
class ServiceSpec:
    """How to start a Katib-compatible suggestion service: ``command`` may hold ``{address}`` or
    ``{port}``; without either, the service is expected on ``address`` (e.g. Katib's main.py, which
    always binds 0.0.0.0:6789)."""

    label: str
    command: Sequence[str]
    address: str | None = None

    def resolve(self) -> tuple[list[str], str]:
        text = " ".join(self.command)
        if "{address}" in text or "{port}" in text:
            port = free_port()
            address = f"127.0.0.1:{port}"
            return [c.format(address=address, port=port) for c in self.command], address
        return list(self.command), self.address or "127.0.0.1:6789"


def baseline_spec(command: str, address: str | None) -> ServiceSpec:
    return ServiceSpec("katib", shlex.split(command), address)


@contextmanager
def running(spec: ServiceSpec, logdir: Path) -> Iterator[str]:
    """Start ``spec``'s process, wait until its port accepts gRPC, yield the address; always stop it."""
    command, address = spec.resolve()
    log = (logdir / f"{spec.label}-{time.monotonic_ns()}.log").open("w")
    proc = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        channel = grpc.insecure_channel(address)
        try:
            grpc.channel_ready_future(channel).result(timeout=_READY_TIMEOUT_S)
        except grpc.FutureTimeoutError:
            raise RuntimeError(f"{spec.label}: no gRPC server on {address} (command {command})") from None
        finally:
            channel.close()
        if proc.poll() is not None:
            raise RuntimeError(f"{spec.label}: exited with {proc.returncode}; see {log.name}")
        yield address
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


@contextmanager
def log_dir() -> Iterator[Path]:
    with tempfile.TemporaryDirectory(prefix="bench-suggestion-") as tmp:
        yield Path(tmp)


def space(algorithm: str) -> tuple[Any, ...]:
    """The benchmark's 5-parameter space; grid gets steps on the doubles (Katib's grid needs them)."""
    grid = algorithm == "grid"
    return (
        param("x", "double", lo="0", hi="1", step="0.05" if grid else ""),
        param("scale", "double", lo="0.00001", hi="1", dist="logUniform", step="0.1" if grid else ""),
        param("k", "int", lo="1", hi="16"),
        param("kind", "categorical", values=KINDS),
        param("level", "discrete", values=LEVELS),
    )


@dataclass
class Driver:
    """One experiment on one service, driven as Katib does."""

    address: str
    name: str
    algorithm: str
    settings: Mapping[str, str]
    max_trials: int
    katib: FakeKatib = field(init=False)

    def __post_init__(self) -> None:
        exp = experiment(
            name=self.name,
            algorithm=self.algorithm,
            settings=dict(self.settings),
            params=space(self.algorithm),
            max_trials=self.max_trials,
            parallel=3,
        )
        self.katib = FakeKatib(self.address, exp)

    def ask(self, count: int) -> tuple[float, list[FakeTrial]]:
        """One GetSuggestions call: (seconds, new trials). The request is built before timing."""
        request = self.katib.request(count)
        start = time.perf_counter()
        reply = self.katib.stub.GetSuggestions(request, timeout=_CALL_TIMEOUT_S)
        elapsed = time.perf_counter() - start
        new = []
        for i, pa in enumerate(reply.parameter_assignments):
            name = pa.trial_name or f"{self.name}-{len(self.katib.trials) + i:05d}"
            new.append(FakeTrial(name, tuple((a.name, a.value) for a in pa.assignments)))
        self.katib.trials.extend(new)
        return elapsed, new

    def succeed(self, trial: FakeTrial, value: float) -> None:
        trial.condition = Cond.SUCCEEDED
        trial.metrics[self.katib.metric] = repr(value)

    def close(self) -> None:
        self.katib.close()


def load_text() -> str:
    load1, load5, _ = os.getloadavg()
    return f"load average {load1:.1f} (1 min), {load5:.1f} (5 min) on {os.cpu_count()} CPUs"
