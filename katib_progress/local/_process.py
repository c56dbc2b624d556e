"""One trial as a local process: own session (process group), own directory, captured output."""

from __future__ import annotations

import contextlib
import logging
import os
import secrets
import signal
import subprocess
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO

_log = logging.getLogger(__name__)

ENV_URL = "KUBEFLOW_TRAINER_SERVER_URL"
ENV_TOKEN = "KUBEFLOW_TRAINER_SERVER_TOKEN"
ENV_CA = "KUBEFLOW_TRAINER_SERVER_CA_CERT"


@dataclass(frozen=True, slots=True)
class LaunchSpec:
    argv: tuple[str, ...]
    workdir: Path
    status_url: str
    token: str
    env: Mapping[str, str]
    merge_stderr: bool = False  # StdOut collector: stderr into stdout.log, as Katib's ``2>&1``


def new_token() -> str:
    return secrets.token_urlsafe(32)


_HERE = Path(__file__).resolve().parent


def _spawn(
    spec: LaunchSpec, env: dict[str, str], stdout: IO[bytes], stderr: IO[bytes]
) -> subprocess.Popen[bytes]:
    """The trial in its own session, through ``_exec.py`` (parent-death signal); OSError when the
    command cannot be executed, as ``subprocess.Popen`` raises it."""
    status_r, status_w = os.pipe()
    try:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-I",
                "-S",
                str(_HERE / "_exec.py"),
                str(os.getpid()),
                str(status_w),
                *spec.argv,
            ],
            cwd=spec.workdir,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=stdout,
            stderr=stderr,
            start_new_session=True,
            pass_fds=(status_w,),
        )
    except OSError:
        os.close(status_r)
        raise
    finally:
        os.close(status_w)
    with os.fdopen(status_r, "rb") as status:
        failure = status.read().decode("utf-8", "replace")
    if failure:
        proc.wait()
        number, _, message = failure.partition(":")
        raise OSError(int(number) if number.isdigit() else 0, message)
    return proc


class Watchdog:
    """``_watchdog.py`` in its own session: stops the registered trial groups when the sweep dies."""

    def __init__(self, grace_s: float) -> None:
        self._proc = subprocess.Popen(
            [sys.executable, "-I", "-S", str(_HERE / "_watchdog.py"), str(grace_s)],
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        self.pid = self._proc.pid

    def _send(self, line: str) -> None:
        stdin = self._proc.stdin
        if stdin is None or stdin.closed:
            return
        try:
            stdin.write(line.encode() + b"\n")
            stdin.flush()
        except OSError as exc:  # the watchdog died: trials still have their parent-death signal
            _log.warning("trial watchdog unavailable: %s", exc)

    def add(self, pgid: int) -> None:
        self._send(f"+{pgid}")

    def remove(self, pgid: int) -> None:
        self._send(f"-{pgid}")

    def close(self) -> None:
        """End of input: the watchdog stops what is still registered (nothing after a clean sweep)."""
        if self._proc.stdin is not None and not self._proc.stdin.closed:
            with contextlib.suppress(OSError):
                self._proc.stdin.close()
        try:
            self._proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            _log.warning("trial watchdog %d did not exit", self.pid)


class TrialProcess:
    """A running trial. ``terminate`` signals the whole process group: SIGTERM, then SIGKILL."""

    def __init__(self, spec: LaunchSpec, watchdog: Watchdog | None = None) -> None:
        spec.workdir.mkdir(parents=True, exist_ok=True)
        token_file = spec.workdir / "token"
        fd = os.open(token_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as handle:
            handle.write(spec.token)
        env = dict(os.environ)
        env.pop(ENV_CA, None)
        env.update(spec.env)
        env[ENV_URL] = spec.status_url
        env[ENV_TOKEN] = str(token_file)
        # The trial finds this Python (and its packages) first; loopback never goes through a proxy.
        env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
        no_proxy = ",".join(x for x in (env.get("NO_PROXY", ""), "127.0.0.1,localhost") if x)
        env["NO_PROXY"] = env["no_proxy"] = no_proxy
        env.setdefault("PYTHONUNBUFFERED", "1")
        self._stdout: IO[bytes] = open(spec.workdir / "stdout.log", "ab")  # noqa: SIM115
        self._stderr: IO[bytes] = (
            self._stdout if spec.merge_stderr else open(spec.workdir / "stderr.log", "ab")  # noqa: SIM115
        )
        self.started = time.monotonic()
        self._watchdog = watchdog
        try:
            self._proc = _spawn(spec, env, self._stdout, self._stderr)
        except OSError:
            self._close_files()
            raise
        self.pid = self._proc.pid
        if watchdog is not None:
            watchdog.add(self.pid)
        self._term_sent: float | None = None
        self._killed = False

    def poll(self) -> int | None:
        code = self._proc.poll()
        if code is not None:
            self._reap_group()
            self._close_files()
            if self._watchdog is not None:
                self._watchdog.remove(self.pid)
        return code

    def terminate(self) -> None:
        """Send SIGTERM to the process group once; ``enforce`` escalates after the grace period."""
        if self._term_sent is None:
            self._term_sent = time.monotonic()
            self._signal(signal.SIGTERM)

    def enforce(self, grace_s: float) -> None:
        if self._term_sent is not None and not self._killed and time.monotonic() - self._term_sent >= grace_s:
            _log.info("trial process group %d ignored SIGTERM for %.1fs: SIGKILL", self.pid, grace_s)
            self._killed = True
            self._signal(signal.SIGKILL)

    def stop(self, grace_s: float) -> int:
        """Terminate and wait (SIGKILL after ``grace_s``); returns the exit code."""
        self.terminate()
        deadline = time.monotonic() + grace_s
        while (code := self.poll()) is None:
            if time.monotonic() >= deadline:
                self._killed = True
                self._signal(signal.SIGKILL)
                code = self._proc.wait()
                self.poll()
                return code
            time.sleep(0.05)
        return code

    @property
    def terminating(self) -> bool:
        return self._term_sent is not None

    def _signal(self, sig: signal.Signals) -> None:
        try:
            os.killpg(self.pid, sig)
        except ProcessLookupError:
            pass
        except PermissionError as exc:
            _log.warning("cannot signal process group %d: %s", self.pid, exc)

    def _reap_group(self) -> None:
        # The leader exited; leftover children of its group must not outlive the trial.
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.pid, signal.SIGKILL)

    def _close_files(self) -> None:
        for handle in (self._stdout, self._stderr):
            if not handle.closed:
                handle.close()


def stop_orphan(pid: int, workdir: Path, grace_s: float) -> bool:
    """Stop the process group of a trial left running by a sweep that died without cleaning up.

    Only when ``pid`` still runs in the trial's own directory (Linux ``/proc``), so a reused pid is
    never signalled. Returns True when a group was signalled.
    """
    try:
        cwd = os.readlink(f"/proc/{pid}/cwd")
    except OSError:
        return False
    if Path(cwd) != workdir.resolve():
        return False
    _log.warning("trial process group %d from an earlier run is still running: stopping it", pid)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline and _running(pid):
        time.sleep(0.05)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)
    return True


def _running(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"  # a zombie has exited
