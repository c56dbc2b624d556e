"""Benchmark: time to build a report of N synthetic trials (records -> figures -> HTML/MD/CSV/JSON).

Run: .venv/bin/python benchmarks/bench_report.py [--trials 1000] [--points 20]
Prints a table of seconds per stage and the HTML size.
"""

from __future__ import annotations

import argparse
import random
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from katib_progress.report import (
    CurvePoint,
    ExperimentRecord,
    Objective,
    ParameterSpec,
    TrialRecord,
    TrialStatus,
    build_report,
    render,
)


def synthetic(trials: int, points: int, seed: int = 0) -> ExperimentRecord:
    rng = random.Random(seed)
    t0 = datetime(2026, 1, 1, tzinfo=UTC)
    records = []
    for i in range(trials):
        lr = 10 ** rng.uniform(-4, -1)
        layers = rng.randint(1, 8)
        opt = rng.choice(["sgd", "adam", "adamw"])
        floor = 0.1 + abs(lr - 0.01) * 5 + 0.02 * layers
        roll = rng.random()
        status = (
            TrialStatus.PRUNED
            if roll < 0.5
            else TrialStatus.FAILED
            if roll < 0.55
            else TrialStatus.RUNNING
            if roll < 0.6
            else TrialStatus.SUCCEEDED
        )
        stop = points if status is TrialStatus.SUCCEEDED else rng.randint(2, points)
        start = t0 + timedelta(minutes=i)
        step = 60.0 * rng.uniform(0.8, 1.2)
        curve = []
        for k in range(1, stop + 1):
            progress = 100.0 * k / points
            elapsed = k * step
            loss = floor + 2.0 * (1 - k / points) ** 2 + rng.gauss(0, 0.01)
            curve.append(
                CurvePoint(
                    timestamp=start + timedelta(seconds=elapsed),
                    progress=progress,
                    elapsed_s=elapsed,
                    eta_s=(points - k) * step * rng.uniform(0.8, 1.2),
                    metrics={"loss": loss, "accuracy": 1 - loss / 3},
                )
            )
        ended = start + timedelta(seconds=stop * step) if status.terminal else None
        records.append(
            TrialRecord(
                name=f"trial-{i:05d}",
                params={"lr": f"{lr:.6g}", "layers": str(layers), "optimizer": opt},
                status=status,
                reason="median rule: worse than median at 40%" if status is TrialStatus.PRUNED else "",
                started=start,
                ended=ended,
                accelerators=float(rng.choice([1, 2, 4, 8])),
                accelerators_known=True,
                curve=tuple(curve),
            )
        )
    return ExperimentRecord(
        name="bench",
        objective=Objective(metric="loss", direction="minimize", additional_metrics=("accuracy",)),
        trials=tuple(records),
        parameters=(
            ParameterSpec("lr", "double", 1e-4, 1e-1),
            ParameterSpec("layers", "int", 1, 8),
            ParameterSpec("optimizer", "categorical", choices=("sgd", "adam", "adamw")),
        ),
        source="synthetic",
        observed_at=t0 + timedelta(days=2),
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--trials", type=int, default=1000)
    parser.add_argument("--points", type=int, default=20)
    args = parser.parse_args()
    t = time.perf_counter()
    record = synthetic(args.trials, args.points)
    stages = [("synthesize records", time.perf_counter() - t)]
    for importance in ("ped-anova", "fanova"):
        t = time.perf_counter()
        report = build_report(record, gpu_hour_price=2.5, importance=importance)
        stages.append((f"analysis (importance {importance})", time.perf_counter() - t))
    sizes = {}
    for fmt in ("html", "md", "csv", "json"):
        t = time.perf_counter()
        text = render(report, fmt)
        stages.append((f"render {fmt}", time.perf_counter() - t))
        sizes[fmt] = len(text.encode())
    with tempfile.TemporaryDirectory() as tmp:
        Path(tmp, "report.html").write_text(render(report, "html"), encoding="utf-8")
    print(f"report of {args.trials} trials x {args.points} points")
    print(f"{'stage':<36} {'seconds':>8}")
    for name, sec in stages:
        print(f"{name:<36} {sec:>8.2f}")
    total = sum(s for n, s in stages if n != "synthesize records" and "ped-anova" not in n)
    print(f"{'total (fanova + all formats)':<36} {total:>8.2f}")
    print("sizes: " + ", ".join(f"{k} {v / 1e6:.2f} MB" for k, v in sizes.items()))


if __name__ == "__main__":
    main()
