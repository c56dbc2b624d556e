"""Latency of one pruning decision of the ``predictive`` policy at scale (issue 36, item 5).

An experiment with ``--completed`` finished trials (1,000) and ``--running`` trials in flight (100) is
built in one ``PruningEngine`` (policy ``divergence,predictive``, the cost guard around it, as served).
The curves are synthetic but shaped like the banks: each trial draws a family (power law, exponential,
an overfitting U, a late drop), a level, a rate and noise, and reports ``--reports`` (25) values at
irregular progress. The completed trials are fed first; then the running trials report up to a random
progress between 10 and 85 %. Then every running trial reports its next point, round after round, and
the wall time of each ``engine.decide`` is taken (``time.perf_counter_ns``); the decisions of the first
round, which fill the calibration cache (each completed trial's refits at nine checkpoints, once per
trial for the life of the experiment), are timed apart as the warm-up.

The process is pinned to one core (``os.sched_setaffinity``) with one BLAS thread.

Usage:
    nice -n 10 .venv/bin/python benchmarks/bench_predict_latency.py [--completed 1000] [--running 100]
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse  # noqa: E402
import math  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from datetime import UTC, datetime, timedelta  # noqa: E402

import numpy as np  # noqa: E402

from katib_progress.core.types import ProgressPoint  # noqa: E402
from katib_progress.suggestion.pruning import PruningConfig, PruningEngine  # noqa: E402
from katib_progress.suggestion.pruning._build import build_policy  # noqa: E402
from katib_progress.suggestion.pruning._history import TrialState  # noqa: E402
from katib_progress.suggestion.pruning.policies.base import NopPolicy  # noqa: E402

_EPOCH = datetime(2026, 1, 1, tzinfo=UTC)


def curve(rng: np.random.Generator, reports: int) -> tuple[np.ndarray, np.ndarray]:
    """Irregular progress (percent, increasing, ending at 100) and a loss-like curve."""
    gaps = rng.uniform(0.5, 1.5, reports)
    progress = np.round(100.0 * np.cumsum(gaps) / gaps.sum(), 1)
    x = progress / 100.0
    level, gain, rate = rng.uniform(0.2, 1.0), rng.uniform(0.2, 2.0), rng.uniform(0.3, 3.0)
    shape = rng.integers(4)
    if shape == 0:
        y = level + gain * x**-rate * 0.1
    elif shape == 1:
        y = level + gain * np.exp(-3.0 * rate * x)
    elif shape == 2:  # overfits: improves, then worsens
        y = level + gain * np.exp(-5.0 * rate * x) + 0.3 * gain * x**2
    else:  # plateau, then a late drop
        y = level + gain * (1.0 / (1.0 + np.exp(12.0 * (x - rng.uniform(0.4, 0.9)))))
    return progress, y + rng.normal(0.0, 0.02 * gain, reports)


def point(trial: str, seq: int, progress: float, value: float) -> ProgressPoint:
    return ProgressPoint(
        experiment="latency",
        trial=trial,
        seq=seq,
        timestamp=_EPOCH + timedelta(seconds=seq),
        progress=float(progress),
        elapsed_s=float(progress),
        eta_s=float(100.0 - progress),
        metrics={"eval_loss": float(value)},
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--completed", type=int, default=1000)
    ap.add_argument("--running", type=int, default=100)
    ap.add_argument("--reports", type=int, default=25)
    ap.add_argument("--seed", type=int, default=36)
    ap.add_argument("--settings", default="", help="extra k=v,k=v pruning settings")
    args = ap.parse_args(argv)
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
    settings = {"policy": "divergence,predictive"}
    for pair in filter(None, args.settings.split(",")):
        key, _, value = pair.partition("=")
        settings[key] = value
    config = PruningConfig.from_settings("eval_loss", "minimize", settings)
    # The completed trials' history is loaded without judging it (as a study that ran unpruned, or a
    # restarted service's stored trials); the policy then serves the running trials.
    engine = PruningEngine(config, policy=NopPolicy())
    rng = np.random.default_rng(args.seed)
    for i in range(args.completed):
        name = f"done-{i:04d}"
        progress, values = curve(rng, args.reports)
        for k, (p, v) in enumerate(zip(progress, values, strict=True)):
            engine.decide(point(name, k, p, v))
        engine.finish(name, "complete")
    engine.policy = build_policy(config)
    running = []
    for i in range(args.running):
        name = f"run-{i:03d}"
        progress, values = curve(rng, args.reports)
        upto = int(np.searchsorted(progress, rng.uniform(10.0, 85.0)))
        running.append([name, progress, values, upto])
    # feed the running trials' past points without timing them (the calibration fills on the way)
    t0 = time.perf_counter()
    for name, progress, values, upto in running:
        for k in range(upto):
            engine.decide(point(name, k, progress[k], values[k]))
    setup_s = time.perf_counter() - t0
    warm: list[float] = []
    timed: list[float] = []
    cpu_ms: list[float] = []
    kinds: list[str] = []
    pruned = 0
    for round_ in range(1 + math.ceil(2000 / max(args.running, 1))):
        for entry in running:
            name, progress, values, upto = entry
            if upto >= len(progress) or engine.trial_state(name) is TrialState.PRUNED:
                if upto >= len(progress):
                    engine.finish(name, "complete")
                name = f"{entry[0]}-r{round_}"  # a fresh trial takes the slot
                progress, values = curve(rng, args.reports)
                entry[:] = [name, progress, values, int(np.searchsorted(progress, 10.0))]
                for k in range(entry[3]):
                    engine.decide(point(name, k, progress[k], values[k]))
                upto = entry[3]
            start, cpu = time.perf_counter_ns(), time.thread_time_ns()
            decision = engine.decide(point(name, upto, progress[upto], values[upto]))
            elapsed = (time.perf_counter_ns() - start) / 1e6
            (warm if round_ == 0 else timed).append(elapsed)
            if round_:
                cpu_ms.append((time.thread_time_ns() - cpu) / 1e6)
                kinds.append("prune" if decision.prune else "continue")
            pruned += decision.prune
            entry[3] = upto + 1
    # A trial that completes is refitted at nine checkpoints by the next decision (the calibration):
    # time that decision for 100 more completions.
    on_completion = []
    done_trials = [t for t in engine.state.trials.values() if t.state is TrialState.COMPLETE]
    best = min(done_trials, key=lambda t: t.values[-1])
    for i in range(100):
        # a clear leader: the best curve so far, lower by 10 (i + 1) at every report (never pruned)
        name = f"late-{i:03d}"
        progress, values = np.asarray(best.progress), np.asarray(best.values) - 10.0 * (i + 1)
        for k in range(len(progress) - 1):
            engine.decide(point(name, k, progress[k], values[k]))
        if engine.trial_state(name) is TrialState.PRUNED:
            continue
        engine.decide(point(name, len(progress) - 1, progress[-1], values[-1]))
        engine.finish(name, "complete")
        # the next judged decision takes the completed trial into the calibration (nine refits): a
        # probe trial (a leader, so no fit of its own) reports its fourth point at 50 %
        probe = f"probe-{i:03d}"
        for k, p in enumerate((20.0, 30.0, 40.0)):
            engine.decide(point(probe, k, p, float(values.min()) - 1.0))
        cpu = time.thread_time_ns()
        engine.decide(point(probe, 3, 50.0, float(values.min()) - 1.0))
        on_completion.append((time.thread_time_ns() - cpu) / 1e6)
    state = engine.state
    done = sum(t.state.value == "complete" for t in state.trials.values())
    print(
        f"predictive decision latency, one core: {args.completed} completed trials at the start ({done} at "
        f"the end), {args.running} running (a pruned or finished one is replaced by a new trial), "
        f"{args.reports} reports per trial; policy {settings['policy']}"
    )
    print("wall = elapsed time (the machine's load included), CPU = this thread's CPU time")
    print()
    print("| decisions | clock | p50 ms | p90 ms | p99 ms | max ms | mean ms |")
    print("|---|---|---|---|---|---|---|")
    wall, cpu_arr = np.asarray(timed), np.asarray(cpu_ms)
    is_prune = np.asarray(kinds) == "prune"
    for label, arr in (
        ("all", wall),
        ("all", cpu_arr),
        ("CONTINUE", cpu_arr[~is_prune]),
        ("PRUNE", cpu_arr[is_prune]),
    ):
        if not len(arr):
            continue
        clock = "wall" if arr is wall else "CPU (thread)"
        p50, p90, p99 = np.percentile(arr, [50, 90, 99])
        print(
            f"| {label} ({len(arr)}) | {clock} | {p50:.2f} | {p90:.2f} | {p99:.2f} | {arr.max():.2f} | "
            f"{arr.mean():.2f} |"
        )
    if on_completion:
        arr = np.asarray(on_completion)
        p50, p90, p99 = np.percentile(arr, [50, 90, 99])
        print(
            f"| first decision after a completion ({len(arr)}) | CPU (thread) | {p50:.2f} | {p90:.2f} | "
            f"{p99:.2f} | {arr.max():.2f} | {arr.mean():.2f} |"
        )
    print()
    print(
        f"pruned: {pruned}; warm-up (first round, {len(warm)} decisions, fills the calibration cache): p50 "
        f"{np.percentile(warm, 50):.2f} ms, max {max(warm):.1f} ms; feeding the running trials' past points: "
        f"{setup_s:.1f} s"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
