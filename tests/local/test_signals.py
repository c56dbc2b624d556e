"""Signals and a closed output: the sweep stops cleanly or goes on, and no trial process (nor any of its
children) outlives the sweep by more than the grace period, even when the sweep is SIGKILLed."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from katib_progress.local._process import stop_orphan
from katib_progress.local.summary import read_summary

from .conftest import experiment_doc, write_experiment

MODE = "--mode=${trialParameters.mode}"
GRACE_S = 2.0


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def _gone_within(pids: list[int], seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not any(_alive(p) for p in pids):
            return True
        time.sleep(0.05)
    return False


def _cli(path: Path, run_dir: Path, **popen: Any) -> subprocess.Popen[str]:
    argv = [sys.executable, "-m", "katib_progress.cli", "sweep", str(path), "--workdir", str(run_dir)]
    popen.setdefault("stdout", subprocess.PIPE)
    return subprocess.Popen(
        [*argv, "--plain", "--grace", str(GRACE_S)], stderr=subprocess.PIPE, text=True, **popen
    )


def _family_sweep(tmp_path: Path, run_dir: Path) -> tuple[subprocess.Popen[str], Path, list[int]]:
    """A sweep whose one trial holds with a child process; returns (sweep, hold file, [trial, child])."""
    hold = tmp_path / "hold"
    hold.touch()
    doc = experiment_doc(
        [MODE, f"--hold-file={hold}", "--steps=2"],
        parameters=[{"name": "mode", "parameterType": "categorical", "feasibleSpace": {"list": ["family"]}}],
        algorithm={"algorithmName": "grid"},
        maxTrialCount=1,
        parallelTrialCount=1,
    )
    path = write_experiment(tmp_path / "e.yaml", doc)
    proc = _cli(path, run_dir, stdout=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        logs = list((run_dir / "trials").glob("*/stdout.log")) if (run_dir / "trials").exists() else []
        words = logs[0].read_text().split() if logs else []
        if "child" in words:
            pids = [int(words[words.index("pid") + 1]), int(words[words.index("child") + 1])]
            time.sleep(0.5)  # the trial reported once and holds
            return proc, path, pids
        time.sleep(0.05)
    proc.kill()
    pytest.fail(f"the trial never started its child: {proc.communicate()}")


def test_sigkill_of_the_sweep_stops_the_trial_and_its_children(tmp_path: Path, run_dir: Path) -> None:
    proc, path, pids = _family_sweep(tmp_path, run_dir)
    assert all(_alive(p) for p in pids)
    proc.kill()  # no clean-up code of the sweep runs
    proc.communicate(timeout=30)
    assert _gone_within(pids, GRACE_S + 3), "a trial process outlived the SIGKILLed sweep"
    # the same command resumes: the interrupted trial runs again under the same name
    (tmp_path / "hold").unlink()
    again = _cli(path, run_dir)
    _, err = again.communicate(timeout=60)
    assert again.returncode == 0, err
    summary = read_summary(run_dir)
    assert summary is not None and summary.trials[0].status == "Succeeded"
    assert summary.trials[0].attempts == 2


@pytest.mark.parametrize("sig", [signal.SIGHUP, signal.SIGTERM])
def test_sighup_and_sigterm_stop_the_sweep_like_ctrl_c(tmp_path: Path, run_dir: Path, sig: int) -> None:
    proc, _, pids = _family_sweep(tmp_path, run_dir)
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 130, err
    summary = read_summary(run_dir)
    assert summary is not None and (summary.status, summary.reason) == ("Interrupted", "SweepInterrupted")
    assert summary.trials[0].status == "Interrupted"
    assert _gone_within(pids, 1.0)


def test_a_closed_stdout_does_not_stop_the_sweep(tmp_path: Path, run_dir: Path) -> None:
    doc = experiment_doc(["--x=${trialParameters.x}", "--steps=3", "--sleep=0.3"], maxTrialCount=3)
    path = write_experiment(tmp_path / "e.yaml", doc)
    proc = _cli(path, run_dir)  # as in `katib-progress sweep e.yaml | head -1`
    assert proc.stdout is not None
    assert proc.stdout.readline().startswith("katib-progress sweep")
    proc.stdout.close()
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    summary = read_summary(run_dir)
    assert summary is not None and summary.status == "Succeeded"
    assert [t.status for t in summary.trials] == ["Succeeded"] * 3
    assert "output stream closed" in (run_dir / "sweep.log").read_text()


def test_resume_stops_a_trial_group_left_running_in_its_directory(tmp_path: Path) -> None:
    """The last line of defence (sweep and watchdog both killed): the resumed sweep stops the group."""
    trial_dir = tmp_path / "trials" / "t"
    trial_dir.mkdir(parents=True)
    code = (
        "import subprocess, sys, time; "
        "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)']); time.sleep(600)"
    )
    leader = subprocess.Popen([sys.executable, "-c", code], cwd=trial_dir, start_new_session=True)
    try:
        time.sleep(0.5)
        group = [int(p) for p in os.listdir("/proc") if p.isdigit() and _pgid(int(p)) == leader.pid]
        assert len(group) == 2
        assert not stop_orphan(leader.pid, tmp_path / "trials" / "other", 1.0)  # another directory: untouched
        assert _alive(leader.pid)
        assert stop_orphan(leader.pid, trial_dir, 1.0)
        leader.wait(timeout=5)
        assert _gone_within(group, 3)
    finally:
        leader.kill()
        leader.wait()


def _pgid(pid: int) -> int | None:
    try:
        return os.getpgid(pid)
    except OSError:
        return None
