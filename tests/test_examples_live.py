"""The cluster examples' live reporting, with the real libraries, through the local status endpoint.

Each trial here is a real process launched the way the local sweep launches one
(``katib_progress.local._process.TrialProcess``: ``KUBEFLOW_TRAINER_SERVER_URL`` pointing at
``katib_progress.local.endpoint.StatusEndpoint``, a per-trial bearer token in a file), and it reports
with the library the cluster example uses:

- hf-transformers: Transformers' own ``KubeflowCallback`` (transformers >= 5.4.0), which
  ``TrainingArguments`` adds to ``report_to`` because the URL variable is set. The example's
  ``build_trainer`` runs on a tiny randomly initialised BERT (tests/hf_trial_driver.py), on the CPU,
  with ``HF_HUB_OFFLINE=1``.
- custom-loop: the example script itself, calling ``kubeflow.trainer.update_trainjob_status``
  (Kubeflow SDK 0.5.0) with its real 5 s throttle.

Every accepted snapshot must be valid under the real TrainJob CRD schema and parse without a
rejected metric. Both libraries are in the ``dev`` extra and nothing here skips: a missing or broken
install fails (Transformers is imported in the trial process only, which keeps the suite's own
import time down; its traceback is in the failure message).
"""

from __future__ import annotations

import ast
import importlib.metadata
import json
import re
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubeflow.trainer import update_trainjob_status

from katib_progress.core.status import parse_trainer_status
from katib_progress.local._process import LaunchSpec, TrialProcess, new_token
from katib_progress.local.endpoint import StatusEndpoint
from tests.kubestandin import load_crd
from tests.test_examples import EXAMPLES, TRAINJOB_CRD

NAMESPACE = "team-a"
DRIVER = Path(__file__).resolve().parent / "hf_trial_driver.py"
# A guard against a hung child, not a speed assertion (the suite's own timeout is longer).
HANG_GUARD_S = 240.0


class _Trials:
    """The local sweep's status endpoint, with every accepted snapshot kept per trial."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.snapshots: dict[str, list[dict[str, Any]]] = {}
        self.lock = threading.Lock()
        self.endpoint = StatusEndpoint(self.record)

    def record(self, namespace: str, name: str, status: dict[str, Any]) -> None:
        with self.lock:
            self.snapshots.setdefault(name, []).append(status)

    def run(self, name: str, argv: list[str], env: dict[str, str]) -> tuple[Path, list[dict[str, Any]]]:
        """Launch one trial as the local sweep does, wait for it, return its directory and snapshots."""
        token = new_token()
        self.endpoint.register(NAMESPACE, name, token)
        workdir = self.root / name
        spec = LaunchSpec(
            argv=tuple(argv),
            workdir=workdir,
            status_url=self.endpoint.url_for(NAMESPACE, name),
            token=token,
            env=env,
        )
        proc = TrialProcess(spec)
        deadline = time.monotonic() + HANG_GUARD_S
        while (code := proc.poll()) is None:
            if time.monotonic() > deadline:
                proc.stop(grace_s=5.0)
                pytest.fail(f"trial {name} still running after {HANG_GUARD_S}s\n{_tail(workdir)}")
            time.sleep(0.1)
        self.endpoint.unregister(NAMESPACE, name)
        assert code == 0, f"trial {name} exited {code}\n{_tail(workdir)}"
        assert self.endpoint.rejections == {}, self.endpoint.rejections
        with self.lock:
            return workdir, list(self.snapshots.get(name, []))


def _tail(workdir: Path, chars: int = 4000) -> str:
    path = workdir / "stderr.log"
    return path.read_text(errors="replace")[-chars:] if path.exists() else "(no stderr.log)"


@pytest.fixture
def trials(tmp_path: Path) -> Iterator[_Trials]:
    holder = _Trials(tmp_path)
    holder.endpoint.start()
    try:
        yield holder
    finally:
        holder.endpoint.stop()


def _crd_causes(name: str, trainer_status: dict[str, Any]) -> list[Any]:
    (rtype,) = load_crd(TRAINJOB_CRD)
    assert rtype.schema is not None
    job = {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": {"runtimeRef": {"name": "torch-distributed"}},
        "status": {"trainerStatus": trainer_status},
    }
    causes: list[Any] = rtype.schema.validate(job, None)
    return causes


def _metrics(snapshot: dict[str, Any]) -> dict[str, str]:
    return {m["name"]: m["value"] for m in snapshot.get("metrics", [])}


def _check_wire(name: str, snapshots: list[dict[str, Any]]) -> None:
    """What the API server would store, and what the collector makes of it."""
    for snapshot in snapshots:
        assert _crd_causes(name, snapshot) == [], snapshot
        parsed = parse_trainer_status(snapshot)
        assert parsed.rejections == (), (parsed.rejections, snapshot)
        assert set(parsed.values) | set(parsed.non_finite) == set(_metrics(snapshot))


def _release(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in re.findall(r"\d+", version)[:3])


def _latest_before(history: list[dict[str, Any]], key: str, step: int) -> Any:
    """The latest logged value of ``key`` from a log entry written before ``step``'s status update."""
    values = [entry[key] for entry in history if key in entry and entry["step"] < step]
    return values[-1] if values else None


# ------------------------------------------------------------------ Transformers' KubeflowCallback


def test_transformers_trainer_reports_progress_eta_and_eval_metrics(trials: _Trials) -> None:
    installed = importlib.metadata.version("transformers")
    assert _release(installed) >= (5, 4, 0), (
        f"transformers {installed} has no KubeflowCallback (needs 5.4.0+)"
    )
    out = trials.root / "result.json"
    argv = [
        sys.executable,
        str(DRIVER),
        f"--example={EXAMPLES / 'hf-transformers' / 'train.py'}",
        f"--out={out}",
        # Every step update goes out (the library waits 5 s between them) and a step takes at least
        # 0.25 s, so a run of a few seconds shows what a long one shows.
        "--min-update-interval=0",
        "--step-sleep=0.25",
        "--train-samples=64",
        "--batch-size=8",
        "--epochs=1",
        "--eval-steps=3",
    ]
    env = {
        "HF_HUB_OFFLINE": "1",
        "HF_HOME": str(trials.root / "hf-home"),
        "DISABLE_KUBEFLOW_INTEGRATION": "FALSE",
        "OMP_NUM_THREADS": "1",
    }
    _, snapshots = trials.run("hf-tiny-bert", argv, env)
    result = json.loads(out.read_text())
    assert result["transformers"] == installed
    # The example sets no report_to: the URL variable alone registered the callback.
    assert "KubeflowCallback" in result["callbacks"] and result["report_to"] == ["kubeflow"]
    history: list[dict[str, Any]] = result["log_history"]
    total = history[-1]["step"]
    assert total == 8
    _check_wire("hf-tiny-bert", snapshots)

    first, steps, last = snapshots[0], snapshots[1:-1], snapshots[-1]
    # on_train_begin: progress 0 and the step count, sent even inside the throttle window.
    assert (first.get("progressPercentage"), _metrics(first)) == (0, {"total_steps": str(total)})
    # on_step_end: one update per step here; progress is the step fraction, capped at 99 until the end.
    assert [int(_metrics(s)["current_step"]) for s in steps] == list(range(1, total + 1))
    for s in steps:
        metrics, step = _metrics(s), int(_metrics(s)["current_step"])
        assert s["progressPercentage"] == min(99, 100 * step // total)
        assert metrics["total_steps"] == str(total)
        assert isinstance(s["estimatedRemainingSeconds"], int) and s["estimatedRemainingSeconds"] >= 0
        # Logged numbers arrive with the first step update after they were logged.
        for key in ("loss", "learning_rate", "eval_loss", "eval_accuracy"):
            expected = _latest_before(history, key, step)
            assert metrics.get(key) == (None if expected is None else str(expected)), (step, key)
    # ETA = mean step time so far x steps left >= 0.25 s x (8 - step): a whole second up to step 4.
    assert all(s["estimatedRemainingSeconds"] >= 1 for s in steps[: total // 2])
    assert any("eval_accuracy" in _metrics(s) for s in steps), "no evaluation reached a step update"

    # on_train_end: progress 100, ETA 0 and the latest value of every logged number, including the
    # example's evaluation at the last step (the Katib objective).
    final_eval = result["final_evaluation"]
    assert final_eval["step"] == total
    assert (last["progressPercentage"], last["estimatedRemainingSeconds"]) == (100, 0)
    metrics = _metrics(last)
    for key in ("eval_accuracy", "eval_loss"):
        assert metrics[key] == str(final_eval[key])
    assert metrics["loss"] == str(_latest_before(history, "loss", total + 1))
    assert metrics["train_loss"] == str(history[-1]["train_loss"])
    assert parse_trainer_status(last).values["eval_accuracy"] == pytest.approx(final_eval["eval_accuracy"])


# ------------------------------------------------------------------ Kubeflow SDK update_trainjob_status


def test_custom_loop_reports_through_the_kubeflow_sdk(trials: _Trials) -> None:
    assert update_trainjob_status.__module__ == "kubeflow.trainer.backends.kubernetes.utils"
    argv = [
        sys.executable,
        str(EXAMPLES / "custom-loop" / "train.py"),
        "--epochs=2",
        "--report-every=10",
    ]
    workdir, snapshots = trials.run("custom-loop-sdk", argv, {"OMP_NUM_THREADS": "1"})
    _check_wire("custom-loop-sdk", snapshots)
    logged = re.search(r"final metrics: (\{.*\})", (workdir / "stderr.log").read_text())
    assert logged, _tail(workdir)
    final = ast.literal_eval(logged.group(1))

    # The SDK sent the first progress report and dropped the next ones inside its 5 s window; the
    # script's final report waited the window out, so it is the last snapshot.
    assert len(snapshots) >= 2
    first, last = snapshots[0], snapshots[-1]
    assert 0 < first["progressPercentage"] < 100 and first["estimatedRemainingSeconds"] >= 1
    assert set(_metrics(first)) == {"loss", "val_loss", "val_accuracy"}
    assert (last["progressPercentage"], last["estimatedRemainingSeconds"]) == (100, 0)
    assert _metrics(last) == {k: str(v) for k, v in final.items()}
