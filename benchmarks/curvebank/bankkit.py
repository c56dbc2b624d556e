"""Shared helpers of the curve-bank generators (scripts in this folder, not package code).

- :func:`sample_configs`: configurations drawn uniformly from a Katib-style search space (log-uniform
  where ``log``), with a seed.
- :class:`RunClock`: the deterministic wall-clock model every generator uses. Metrics are real; the
  seconds are not measured (they would depend on the machine and its load) but computed from the work a
  run does: a start-up time, a cost per unit of work (an optimiser step, a boosting round) that the
  generator derives from the model's size, a cost per evaluation, and a seeded +-10 % lognormal
  throughput jitter drawn afresh for every report interval. ``eta_s`` is the run's own estimate, the way
  a trainer computes it: its training speed so far times the work left, plus the evaluations left.
- :func:`run_configs`: trains every configuration, in order or in a small process pool (one BLAS/torch
  thread per process); the result does not depend on the number of workers.
- :func:`write_bank`: validates against curve-bank.schema.json and writes gzip with mtime 0, so a bank
  is byte-for-byte reproducible from its seed on the same software stack.
"""

from __future__ import annotations

import argparse
import contextlib
import gzip
import json
import math
import os
import resource
import sys
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from functools import partial
from pathlib import Path
from typing import Any

# One BLAS/OpenMP thread per process: the machine is shared, and results must not depend on threads.
for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import numpy as np  # noqa: E402

SCHEMA = Path(__file__).resolve().parents[2] / "katib_progress" / "bench" / "curve-bank.schema.json"


def sample_configs(parameters: Sequence[dict[str, Any]], n: int, seed: int) -> list[dict[str, Any]]:
    """``n`` configurations, each parameter drawn independently (log-uniform where ``log``)."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        cfg: dict[str, Any] = {}
        for p in parameters:
            if p["type"] in ("discrete", "categorical"):
                cfg[p["name"]] = p["list"][int(rng.integers(len(p["list"])))]
                continue
            lo, hi = float(p["min"]), float(p["max"])
            if p["type"] == "int":
                # Draw over [lo - 0.5, hi + 0.5) so the end points are as likely as inner integers.
                lo, hi = lo - 0.5, hi + 0.5
                v = math.exp(rng.uniform(math.log(lo), math.log(hi))) if p.get("log") else rng.uniform(lo, hi)
                cfg[p["name"]] = int(min(max(round(v), p["min"]), p["max"]))
            else:
                v = math.exp(rng.uniform(math.log(lo), math.log(hi))) if p.get("log") else rng.uniform(lo, hi)
                cfg[p["name"]] = float(f"{v:.6g}")
        out.append(cfg)
    return out


def fmt(v: float) -> float | str:
    """A metric value as the bank stores it: 6 significant digits, or "nan"/"inf"/"-inf"."""
    v = float(v)
    if math.isnan(v):
        return "nan"
    if math.isinf(v):
        return "inf" if v > 0 else "-inf"
    return float(f"{v:.6g}")


def finite(*values: float) -> bool:
    return all(math.isfinite(float(v)) for v in values)


class RunClock:
    """Deterministic elapsed time and the run's own ETA (see the module docstring)."""

    def __init__(self, rng: np.random.Generator, *, startup_s: float, eval_s: float, total_units: float):
        self._rng = rng
        self.elapsed = startup_s
        self.train_elapsed = 0.0
        self.done_units = 0.0
        self.total_units = total_units
        self.eval_s = eval_s
        self._jitter = float(rng.lognormal(0.0, 0.1))

    def work(self, units: float, cost_per_unit: float) -> None:
        """``units`` of training work (steps, rounds) at ``cost_per_unit`` seconds each."""
        dt = units * cost_per_unit * self._jitter
        self.elapsed += dt
        self.train_elapsed += dt
        self.done_units += units

    def report(self, progress: float, metrics: dict[str, Any], evals_left: int) -> dict[str, Any]:
        """One trainerStatus snapshot after an evaluation; ``evals_left`` counts those still to come."""
        self.elapsed += self.eval_s * self._jitter
        rate = self.train_elapsed / self.done_units if self.done_units else 0.0
        eta = rate * max(self.total_units - self.done_units, 0.0) + self.eval_s * evals_left
        self._jitter = float(self._rng.lognormal(0.0, 0.1))
        return {
            "progress": round(progress),
            "elapsed_s": round(self.elapsed, 1),
            "eta_s": round(eta),
            "metrics": metrics,
        }


def report_schedule(total_units: int, reports: int) -> dict[int, int]:
    """Map unit count -> report number k (1..reports), evenly spread, the last at ``total_units``."""
    return {max(1, round(total_units * k / reports)): k for k in range(1, reports + 1)}


def _init_worker() -> None:
    try:
        import torch
    except ImportError:
        return
    torch.set_num_threads(1)
    with contextlib.suppress(RuntimeError):  # already set in this process (or inherited through fork)
        torch.set_num_interop_threads(1)


def run_configs(
    train: Callable[..., dict[str, Any]], configs: list[dict[str, Any]], workers: int, label: str, **kw: Any
) -> list[dict[str, Any]]:
    """``train(index, cfg, **kw)`` for every configuration, results in configuration order."""
    from rich.progress import Progress

    fn = partial(train, **kw)
    results: list[dict[str, Any]] = []
    with Progress(transient=False) as bar:
        task = bar.add_task(label, total=len(configs))
        if workers <= 1:
            _init_worker()
            for i, cfg in enumerate(configs):
                results.append(fn(i, cfg))
                bar.advance(task)
        else:
            with ProcessPoolExecutor(max_workers=workers, initializer=_init_worker) as pool:
                for res in pool.map(fn, range(len(configs)), configs, chunksize=1):
                    results.append(res)
                    bar.advance(task)
    return results


def standard_args(description: str, default_configs: int, default_seed: int) -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=description)
    ap.add_argument("--configs", type=int, default=default_configs, help="number of configurations")
    ap.add_argument("--seed", type=int, default=default_seed, help="seed of the search and of every run")
    ap.add_argument("--workers", type=int, default=1, help="process pool workers (be frugal: 1 or 2)")
    ap.add_argument("--out", type=Path, required=True, help="output file, .json or .json.gz")
    return ap


def write_bank(out: Path, bank: dict[str, Any], started: float) -> None:
    """Validate ``bank`` against the schema and write it byte-stably (gzip mtime 0, no file name)."""
    import jsonschema

    jsonschema.validate(bank, json.loads(SCHEMA.read_text()), cls=jsonschema.Draft202012Validator)
    payload = json.dumps(bank, separators=(",", ":"), allow_nan=False).encode()
    out.parent.mkdir(parents=True, exist_ok=True)
    if out.suffix == ".gz":
        with open(out, "wb") as fh, gzip.GzipFile(filename="", fileobj=fh, mode="wb", mtime=0) as gz:
            gz.write(payload)
    else:
        out.write_bytes(payload)
    trials = bank["trials"]
    failed = sum(t["status"] == "failed" for t in trials)
    cpu = sum(
        u.ru_utime + u.ru_stime
        for u in map(resource.getrusage, (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN))
    )
    print(
        f"wrote {out} ({out.stat().st_size / 1e6:.2f} MB): {len(trials)} trials, {failed} failed, "
        f"wall {time.monotonic() - started:.0f} s, CPU {cpu:.0f} s",
        file=sys.stderr,
    )
