"""GetSuggestions latency of the suggestion service over real gRPC (loopback).

For tpe, multivariate-tpe and random: a history of N completed trials (named as this service
names them, parameters drawn at random, objective from a formula) is sent the way Katib sends
it; the service then answers repeated requests, each reporting the previous suggestion as done.
Also timed: the first call after a restart at the largest N (the study is rebuilt from the
request). Run: ``.venv/bin/python benchmarks/bench_suggestion.py [--quick]``.
"""

from __future__ import annotations

import argparse
import math
import random
import statistics
import sys
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from katib_progress.suggestion._names import trial_name
from katib_progress.suggestion.server import create_server
from tests.suggestion.katib_fake import Cond, FakeKatib, FakeTrial, default_objective, experiment

SEED = 7


def history(name: str, n: int) -> list[FakeTrial]:
    rng = random.Random(n)
    trials = []
    for k in range(n):
        params = (
            ("lr", repr(10 ** rng.uniform(-4, -1))),
            ("layers", str(rng.randint(1, 8))),
            ("optimizer", rng.choice(["sgd", "adam", "rmsprop"])),
        )
        trial = FakeTrial(trial_name(name, SEED, k), params, Cond.SUCCEEDED)
        trial.metrics["loss"] = repr(default_objective(dict(params)))
        trials.append(trial)
    return trials


def timed_ask(katib: FakeKatib) -> float:
    """One GetSuggestions round trip in ms (the request is built before the clock starts)."""
    request = katib.request(1)
    t0 = time.perf_counter()
    reply = katib.stub.GetSuggestions(request, timeout=120)
    elapsed = (time.perf_counter() - t0) * 1000
    for pa in reply.parameter_assignments:
        katib.trials.append(FakeTrial(pa.trial_name, tuple((a.name, a.value) for a in pa.assignments)))
    return elapsed


def measure(algorithm: str, n: int, calls: int) -> tuple[float, list[float]]:
    """(first call, steady calls) in milliseconds, each on a fresh server."""
    name = f"bench-{algorithm}-{n}"
    server = create_server(["127.0.0.1:0"])
    server.start()
    try:
        katib = FakeKatib(
            server.bound_addresses[0],
            experiment(name=name, algorithm=algorithm, settings={"random_state": str(SEED)}),
        )
        katib.trials = history(name, n)
        first = timed_ask(katib)  # the first request rebuilds the study (as after a restart)
        steady = []
        for _ in range(calls):
            katib.finish(katib.running()[0])
            steady.append(timed_ask(katib))
        katib.close()
        return first, steady
    finally:
        server.stop(0)


def p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, math.ceil(0.95 * len(ordered)) - 1)]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smoke run: small histories, few calls")
    args = parser.parse_args()
    sizes = [10, 100] if args.quick else [10, 100, 500, 1000]
    calls = 5 if args.quick else 30
    algorithms = ["tpe", "multivariate-tpe", "random"]
    console = Console()
    table = Table(title=f"GetSuggestions latency over gRPC ({calls} calls per row, 1 suggestion per call)")
    for col in ("algorithm", "completed trials", "median ms", "p95 ms"):
        table.add_column(col, justify="right" if col != "algorithm" else "left")
    restart = Table(title=f"First GetSuggestions after a restart at {sizes[-1]} trials (study rebuilt)")
    restart.add_column("algorithm")
    restart.add_column("first call ms", justify="right")
    for algorithm in algorithms:
        for n in sizes:
            first, steady = measure(algorithm, n, calls)
            table.add_row(algorithm, str(n), f"{statistics.median(steady):.1f}", f"{p95(steady):.1f}")
            if n == sizes[-1]:
                restart.add_row(algorithm, f"{first:.0f}")
    console.print(table)
    console.print(restart)
    return 0


if __name__ == "__main__":
    sys.exit(main())
