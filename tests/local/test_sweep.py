"""End-to-end local sweeps: real trial processes, real HTTP status endpoint, real gRPC store and
suggestion/pruning services."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import grpc
import pytest
from kubeflow.katib import katib_api_pb2, katib_api_pb2_grpc

from katib_progress.local.summary import read_summary

from .conftest import experiment_doc, sweep, write_experiment

X = "--x=${trialParameters.x}"
MODE = "--mode=${trialParameters.mode}"


def _modes(*modes: str) -> list[dict[str, Any]]:
    return [{"name": "mode", "parameterType": "categorical", "feasibleSpace": {"list": list(modes)}}]


def _alive(pid: int) -> bool:
    """Running (a zombie waiting for a reaper counts as gone)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def test_short_sweep_completes(tmp_path: Path, run_dir: Path) -> None:
    path = write_experiment(tmp_path / "e.yaml", experiment_doc([X, "--steps=4"], maxTrialCount=3))
    result, out = sweep(path, run_dir)
    assert result.exit_code == 0, out
    summary = result.summary
    assert (summary.status, summary.reason) == ("Succeeded", "MaxTrialsReached")
    assert [t.status for t in summary.trials] == ["Succeeded"] * 3
    for trial in summary.trials:
        x = float(trial.params["x"])
        # metricStrategies default for minimize is min: the last of 4 steps has the smallest loss
        assert trial.objective == pytest.approx((x - 0.3) ** 2 + 0.25, rel=1e-5)
        assert trial.progress == 100.0 and trial.elapsed_s > 0 and trial.ended_at and trial.started_at
        trial_dir = run_dir / "trials" / trial.name
        assert "mode ok" in (trial_dir / "stdout.log").read_text()
        assert oct((trial_dir / "token").stat().st_mode & 0o777) == "0o600"
    best = min(summary.trials, key=lambda t: t.objective or 0)
    assert summary.best is not None and summary.best.trial == best.name
    assert "Best trial" in out
    on_disk = json.loads((run_dir / "summary.json").read_text())
    assert on_disk["status"] == "Succeeded" and len(on_disk["trials"]) == 3
    # the rows really are in the SQLite store (served again over gRPC by a fresh store server)
    from katib_progress.collector.store import start_store_server

    store = start_store_server(str(run_dir / "observations.sqlite"))
    try:
        with grpc.insecure_channel(store.address) as channel:
            stub = katib_api_pb2_grpc.DBManagerStub(channel)
            reply = stub.GetObservationLog(
                katib_api_pb2.GetObservationLogRequest(trial_name=best.name, metric_name="loss"), timeout=10
            )
        assert len(reply.observation_log.metric_logs) == 4
    finally:
        store.stop()


def test_diverging_trial_is_pruned_and_its_process_group_stopped(tmp_path: Path, run_dir: Path) -> None:
    doc = experiment_doc(
        [MODE, "--steps=6", "--sleep=0.1"],
        parameters=_modes("ok", "diverge"),
        algorithm={"algorithmName": "grid"},
        early_stopping={
            "algorithmName": "katib-progress",
            "algorithmSettings": [{"name": "policy", "value": "divergence"}],
        },
    )
    path = write_experiment(tmp_path / "e.yaml", doc)
    result, out = sweep(path, run_dir)
    assert result.exit_code == 0, out
    by_mode = {t.params["mode"]: t for t in result.summary.trials}
    pruned = by_mode["diverge"]
    assert pruned.status == "EarlyStopped" and pruned.reason == "TrialEarlyStopped"
    assert "diverged" in pruned.message and pruned.policy == "divergence"
    assert pruned.progress is not None and pruned.progress < 10  # 400 steps planned, stopped early
    assert pruned.eta_at_prune_s is not None and pruned.eta_at_prune_s > 0
    assert result.summary.compute_saved_s == pytest.approx(pruned.eta_at_prune_s)
    assert by_mode["ok"].status == "Succeeded"
    pid = int((run_dir / "trials" / pruned.name / "stdout.log").read_text().split()[1])
    assert not _alive(pid)
    assert f"prune {pruned.name}" in out


def test_crashing_trial_fails_the_experiment_past_max_failed(tmp_path: Path, run_dir: Path) -> None:
    doc = experiment_doc(
        [MODE],
        parameters=_modes("crash", "nometric"),
        algorithm={"algorithmName": "grid"},
        maxFailedTrialCount=1,
    )
    path = write_experiment(tmp_path / "e.yaml", doc)
    result, _out = sweep(path, run_dir)
    assert result.exit_code == 1
    assert (result.summary.status, result.summary.reason) == ("Failed", "MaxFailedTrialsReached")
    by_mode = {t.params["mode"]: t for t in result.summary.trials}
    assert by_mode["crash"].status == "Failed" and by_mode["crash"].exit_code == 3
    assert "exit code 3" in by_mode["crash"].message and "boom" in by_mode["crash"].message
    assert by_mode["nometric"].status == "MetricsUnavailable"


def test_sdk_and_raw_post_trials(tmp_path: Path, run_dir: Path) -> None:
    doc = experiment_doc(
        [X],
        script="sdk_trial.py",
        maxTrialCount=1,
        parallelTrialCount=1,
        objective={"type": "minimize", "objectiveMetricName": "loss", "additionalMetricNames": ["accuracy"]},
    )
    path = write_experiment(tmp_path / "e.yaml", doc)
    result, out = sweep(path, run_dir)
    assert result.exit_code == 0, out
    (trial,) = result.summary.trials
    x = float(trial.params["x"])
    assert trial.status == "Succeeded"
    assert trial.objective == pytest.approx((x - 0.3) ** 2)
    assert trial.observation["accuracy"] == 0.5
    assert "sent=True" in (run_dir / "trials" / trial.name / "stdout.log").read_text()


def test_a_trial_cannot_use_a_wrong_token(tmp_path: Path, run_dir: Path) -> None:
    doc = experiment_doc(
        [MODE],
        parameters=_modes("probe"),
        algorithm={"algorithmName": "grid"},
        maxTrialCount=1,
        parallelTrialCount=1,
    )
    path = write_experiment(tmp_path / "e.yaml", doc)
    result, out = sweep(path, run_dir)
    assert result.exit_code == 0, out
    (trial,) = result.summary.trials
    stdout = (run_dir / "trials" / trial.name / "stdout.log").read_text()
    line = next(ln for ln in stdout.splitlines() if ln.startswith("probe "))
    code, body = line.split(" ", 2)[1:]
    assert code == "401" and json.loads(body)["reason"] == "Unauthorized"
    assert trial.status == "Succeeded"  # its own token still works


def test_goal_reached_kills_running_trials(tmp_path: Path, run_dir: Path) -> None:
    doc = experiment_doc(
        [MODE, "--steps=3"],
        parameters=_modes("ok", "diverge"),
        algorithm={"algorithmName": "grid"},
        objective={"type": "minimize", "objectiveMetricName": "loss", "goal": 10.0},
        maxTrialCount=2,
    )
    path = write_experiment(tmp_path / "e.yaml", doc)
    result, out = sweep(path, run_dir)
    assert result.exit_code == 0, out
    assert result.summary.reason == "GoalReached"
    by_mode = {t.params["mode"]: t for t in result.summary.trials}
    assert by_mode["ok"].status == "Succeeded"
    assert by_mode["diverge"].status == "Killed"


def _cli(path: Path, run_dir: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "katib_progress.cli",
            "sweep",
            str(path),
            "--workdir",
            str(run_dir),
            "--plain",
            "--grace",
            "2",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_interrupt_then_resume(tmp_path: Path, run_dir: Path) -> None:
    hold = tmp_path / "hold"
    hold.touch()
    doc = experiment_doc(
        [MODE, f"--hold-file={hold}", "--steps=3"],
        parameters=_modes("ok", "hold", "hold2"),
        algorithm={"algorithmName": "grid"},
        maxTrialCount=3,
        parallelTrialCount=3,
    )
    path = write_experiment(tmp_path / "e.yaml", doc)
    # the script holds after its first report while the hold file exists, for modes "hold*"
    proc = _cli(path, run_dir)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        summary = read_summary(run_dir) if (run_dir / "summary.json").exists() else None
        states = sorted(t.status for t in summary.trials) if summary else []
        if states == ["Running", "Running", "Succeeded"] and all(
            (run_dir / "trials" / t.name / "stdout.log").read_text() for t in summary.trials
        ):
            break
        time.sleep(0.1)
    else:
        proc.kill()
        pytest.fail(f"sweep never reached 1 done + 2 held: {proc.communicate()}")
    held = {t.name: t for t in summary.trials if t.status == "Running"}
    pids = [int((run_dir / "trials" / n / "stdout.log").read_text().split()[1]) for n in held]
    time.sleep(0.5)  # let the held trials report once
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 130, err
    assert "resume" in err
    first = read_summary(run_dir)
    assert first is not None and first.status == "Interrupted"
    assert sorted(t.status for t in first.trials) == ["Interrupted", "Interrupted", "Succeeded"]
    assert not any(_alive(pid) for pid in pids)
    done_before = next(t for t in first.trials if t.status == "Succeeded")

    hold.unlink()
    proc = _cli(path, run_dir)
    _out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    second = read_summary(run_dir)
    assert second is not None and second.status == "Succeeded"
    assert len(second.trials) == 3 and all(t.status == "Succeeded" for t in second.trials)
    kept = next(t for t in second.trials if t.name == done_before.name)
    assert kept == done_before  # completed trials are kept as they were
    for name, old in held.items():
        rerun = next(t for t in second.trials if t.name == name)
        assert rerun.attempts == 2 and rerun.params == old.params
    assert second.wall_s > first.wall_s


def test_raising_max_trial_count_extends_a_finished_sweep(tmp_path: Path, run_dir: Path) -> None:
    doc = experiment_doc([X, "--steps=2"], maxTrialCount=1, parallelTrialCount=1)
    path = write_experiment(tmp_path / "e.yaml", doc)
    first, _ = sweep(path, run_dir)
    assert first.exit_code == 0 and len(first.summary.trials) == 1
    again, _ = sweep(path, run_dir)  # nothing left to do: same verdict, no new trial
    assert again.exit_code == 0 and again.summary.trials == first.summary.trials
    doc["spec"]["maxTrialCount"] = 3
    write_experiment(path, doc)
    more, out = sweep(path, run_dir)
    assert more.exit_code == 0, out
    assert [t.status for t in more.summary.trials] == ["Succeeded"] * 3
    assert more.summary.trials[0] == first.summary.trials[0]
    assert len({t.params["x"] for t in more.summary.trials}) == 3
    # a different search space is refused for this work directory
    doc["spec"]["parameters"][0]["feasibleSpace"]["max"] = "0.9"
    write_experiment(path, doc)
    from katib_progress.core.errors import ConfigError

    with pytest.raises(ConfigError, match="different search"):
        sweep(path, run_dir)


def test_invalid_pruning_setting_names_the_field(tmp_path: Path, run_dir: Path) -> None:
    doc = experiment_doc(
        [X],
        early_stopping={
            "algorithmName": "katib-progress",
            "algorithmSettings": [
                {"name": "policy", "value": "default"},
                {"name": "percentile", "value": "150"},
            ],
        },
    )
    path = write_experiment(tmp_path / "e.yaml", doc)
    proc = subprocess.run(
        [sys.executable, "-m", "katib_progress.cli", "sweep", str(path), "--workdir", str(run_dir)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 2
    assert "spec.earlyStopping.algorithmSettings[1]" in proc.stderr and "percentile" in proc.stderr
    assert not (run_dir / "trials").exists()


def test_unstartable_command_fails_the_trial(tmp_path: Path, run_dir: Path) -> None:
    doc = experiment_doc([X], maxTrialCount=1, parallelTrialCount=1, maxFailedTrialCount=0)
    doc["spec"]["trialTemplate"]["trialSpec"]["spec"]["trainer"]["command"][0] = "/nonexistent/python"
    path = write_experiment(tmp_path / "e.yaml", doc)
    result, _ = sweep(path, run_dir)
    assert result.exit_code == 1 and result.summary.reason == "MaxFailedTrialsReached"
    (trial,) = result.summary.trials
    assert (trial.status, trial.reason) == ("Failed", "StartFailed")
    assert "/nonexistent/python" in trial.message


def _wait_summary(run_dir: Path, ok: Any, timeout: float = 60) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            summary = read_summary(run_dir)
        except ValueError:  # being replaced
            summary = None
        if summary is not None and ok(summary):
            return summary
        time.sleep(0.1)
    pytest.fail("timed out waiting for the sweep's summary")


def _thirdbad(max_trials: int) -> dict[str, Any]:
    """Sequential trials; the third one reports 10x the loss of the first two at every step."""
    return experiment_doc(
        ["--mode=thirdbad", X, "--steps=10", "--sleep=0.1"],
        maxTrialCount=max_trials,
        parallelTrialCount=1,
        metricsCollectorSpec={"collector": {"kind": "Push"}},
        algorithm={"algorithmName": "random", "algorithmSettings": [{"name": "random_state", "value": "5"}]},
        early_stopping={
            "algorithmName": "katib-progress",
            "algorithmSettings": [
                {"name": "policy", "value": "percentile"},
                {"name": "startup_trials", "value": "2"},
                {"name": "min_trials", "value": "2"},
                {"name": "warmup_progress", "value": "0"},
            ],
        },
    )


def test_a_resumed_sweep_prunes_as_an_uninterrupted_one(tmp_path: Path) -> None:
    """The pruning service of a resumed sweep is rebuilt from the stored observations: the third trial
    is pruned by percentile after a resume exactly as without one (same seed, same trials)."""
    straight = write_experiment(tmp_path / "a.yaml", _thirdbad(3))
    once, out = sweep(straight, tmp_path / "a")
    assert once.exit_code == 0, out
    resumed_path = write_experiment(tmp_path / "b.yaml", _thirdbad(2))
    first, _ = sweep(resumed_path, tmp_path / "b")
    assert [t.status for t in first.summary.trials] == ["Succeeded", "Succeeded"]
    write_experiment(resumed_path, _thirdbad(3))  # raising maxTrialCount resumes the finished sweep
    second, out = sweep(resumed_path, tmp_path / "b")
    assert second.exit_code == 0, out

    def decisions(summary: Any) -> list[tuple[str, str, str]]:
        return [(t.params["x"], t.status, t.policy) for t in summary.trials]

    assert decisions(once.summary)[2][1:] == ("EarlyStopped", "percentile")
    assert decisions(second.summary) == decisions(once.summary)
    assert "pruning history of 2 finished trial(s) restored" in out
