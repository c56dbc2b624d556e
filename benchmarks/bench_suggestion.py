"""Suggestion service benchmark: latency and search quality against a baseline service, over gRPC.

Both services run as separate processes on loopback and are driven the way Katib's suggestion
controller drives them (whole trial list in every request). Calls alternate between the two
services so machine load hits both alike.

Latency: per algorithm, one experiment per service grows to 1,000 trials with 3 suggestions per
call, every suggestion reported Succeeded (the ``ml`` function) before the next call. Median and
p95 of the calls that start at 10, 100, 300 and 1,000 trials; then "first call after a restart":
a fresh process of our service gets the whole history at that size (the baseline cannot: Katib's
stock service only knows trials it issued itself in the same process).

Quality: per algorithm, function and seed (``random_state``), a 60-trial sequential loop (one
suggestion per call); "best" is the noise-free value of the trial with the best observed value
(what Katib reports as the best trial). Per-seed wins compare the two services on the same seed.

The baseline is Katib's stock Optuna suggestion service, built by the reader from Katib's source
(docs/suggestion.md). Katib's service serves one experiment per process (its first request fixes
the study), so the benchmark starts it anew for every experiment from ``--baseline-cmd``.

    python benchmarks/bench_suggestion.py --baseline-cmd '/path/run-katib-optuna.sh {address}'
"""

from __future__ import annotations

import argparse
import json
import math
import shlex
import statistics
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import numpy as np
from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.suggestion_functions import FUNCTIONS, ml, typed
from benchmarks.suggestion_services import (
    Driver,
    ServiceSpec,
    baseline_spec,
    load_text,
    log_dir,
    ours_command,
    running,
)

BOTH = ("tpe", "multivariate-tpe", "cmaes", "random", "grid")
OURS_ONLY = ("gp", "qmc")
QUALITY_ALGORITHMS = ("tpe", "multivariate-tpe", "cmaes", "random", "tuned-tpe")
SIZES = (10, 100, 300, 1000)
PER_CALL = 3
LATENCY_SEED = 7


def p95(values: Sequence[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, math.ceil(0.95 * len(ordered)) - 1)]


def _settings(algorithm: str, seed: int) -> dict[str, str]:
    settings = {"random_state": str(seed)}
    if algorithm == "hyperband":
        settings.update({"resource_name": "k", "r_l": "16"})
    return settings


@contextmanager
def _service(spec: ServiceSpec | None, logs: Path) -> Iterator[str | None]:
    if spec is None:
        yield None
        return
    with running(spec, logs) as address:
        yield address


def _complete(driver: Driver, trials: Sequence[Any], seed: int) -> None:
    for trial in trials:
        index = len(driver.katib.trials)
        value = ml(typed(dict(trial.assignments)), np.random.default_rng([seed, index]))
        driver.succeed(trial, value)


def latency(
    algorithm: str,
    ours: ServiceSpec,
    baseline: ServiceSpec | None,
    calls: int,
    sizes: Sequence[int],
    logs: Path,
    per_call: int = PER_CALL,
) -> dict[str, Any]:
    """Steady-state latency per size for both services, and our first call after a restart."""
    name = f"lat-{algorithm}"
    max_trials = sizes[-1] + per_call * calls + 10
    out: dict[str, Any] = {"ours": {}, "baseline": {}, "restart": {}}
    histories: dict[int, list[Any]] = {}
    with ExitStack() as stack:
        addresses = {"ours": stack.enter_context(_service(ours, logs))}
        addresses["baseline"] = stack.enter_context(_service(baseline, logs))
        drivers = {
            label: Driver(address, name, algorithm, _settings(algorithm, LATENCY_SEED), max_trials)
            for label, address in addresses.items()
            if address is not None
        }
        ends = [*sizes[1:], sizes[-1] + per_call * calls + 1]
        windows = {n: range(n, min(n + per_call * calls, end)) for n, end in zip(sizes, ends, strict=True)}
        step = 0
        while (n := len(drivers["ours"].katib.trials)) < sizes[-1] + per_call * calls:
            size = next((s for s, w in windows.items() if n in w), None)
            count = per_call if size is not None else min(per_call, min(s for s in sizes if s > n) - n)
            if size is not None and size not in histories:
                histories[size] = [t.to_proto() for t in drivers["ours"].katib.trials]
            order = list(drivers) if step % 2 == 0 else list(reversed(drivers))
            for label in order:
                elapsed, new = drivers[label].ask(count)
                _complete(drivers[label], new, LATENCY_SEED)
                if size is not None:
                    out[label].setdefault(size, []).append(elapsed)
            step += 1
        for driver in drivers.values():
            driver.close()
    for size, history in histories.items():
        with _service(ours, logs) as address:
            assert address is not None
            driver = Driver(address, name, algorithm, _settings(algorithm, LATENCY_SEED), max_trials)
            request = driver.katib.request(per_call)
            del request.trials[:]
            request.trials.extend(history)
            request.total_request_number = len(history) + per_call
            stub = driver.katib.stub
            start = time.perf_counter()
            stub.GetSuggestions(request, timeout=300)
            out["restart"][size] = time.perf_counter() - start
            driver.close()
    return out


def quality_loop(drivers: dict[str, Driver], function: str, seed: int, trials: int) -> dict[str, float]:
    """Sequential loops on every driver, calls alternating; the noise-free value of each best trial."""
    func = FUNCTIONS[function]
    best: dict[str, tuple[float, float]] = {label: (math.inf, math.inf) for label in drivers}
    for i in range(trials):
        order = list(drivers) if i % 2 == 0 else list(reversed(drivers))
        for label in order:
            driver = drivers[label]
            _, (trial,) = driver.ask(1)
            params = typed(dict(trial.assignments))
            observed = func(params, np.random.default_rng([seed, i]))
            driver.succeed(trial, observed)
            if observed < best[label][0]:
                best[label] = (observed, func(params, None))
    return {label: value for label, (_, value) in best.items()}


def quality(
    algorithm: str,
    ours: ServiceSpec,
    baseline: ServiceSpec | None,
    seeds: int,
    trials: int,
    logs: Path,
    baseline_algorithm: str | None = None,
) -> dict[str, dict[str, list[float]]]:
    """``baseline_algorithm``: the name the baseline is asked for (default: ``algorithm``), e.g.
    ``tuned-tpe`` against Katib's ``tpe``."""
    out: dict[str, dict[str, list[float]]] = {}
    with running(ours, logs) as ours_address:
        for function in FUNCTIONS:
            results: dict[str, list[float]] = {"ours": [], "baseline": []}
            for seed in range(seeds):
                name = f"q-{algorithm}-{function}-{seed}"
                with _service(baseline, logs) as base_address:
                    addresses = {"ours": ours_address, "baseline": base_address}
                    names = {"ours": algorithm, "baseline": baseline_algorithm or algorithm}
                    drivers = {
                        label: Driver(address, name, names[label], _settings(algorithm, seed), trials)
                        for label, address in addresses.items()
                        if address is not None
                    }
                    best = quality_loop(drivers, function, seed, trials)
                    for driver in drivers.values():
                        driver.close()
                for label, value in best.items():
                    results[label].append(value)
            out[function] = results
    return out


def _ratio(ours: float, base: float | None) -> str:
    return "-" if base is None or base == 0 else f"{ours / base:.2f}"


def latency_table(
    results: dict[str, Any], sizes: Sequence[int], calls: int, per_call: int = PER_CALL
) -> Table:
    table = Table(
        title=f"GetSuggestions latency, ms ({per_call} suggestions per call, {calls} calls per cell)"
    )
    for col in (
        "algorithm",
        "trials",
        "ours median",
        "ours p95",
        "katib median",
        "katib p95",
        "median ratio",
        "p95 ratio",
        "ours first call after restart",
    ):
        table.add_column(col, justify="left" if col == "algorithm" else "right")
    for algorithm, res in results.items():
        for n in sizes:
            ours = [1000 * v for v in res["ours"].get(n, [])]
            base = [1000 * v for v in res["baseline"].get(n, [])]
            om, op = statistics.median(ours), p95(ours)
            bm, bp = (statistics.median(base), p95(base)) if base else (None, None)
            restart = res["restart"].get(n)
            table.add_row(
                algorithm,
                str(n),
                f"{om:.1f}",
                f"{op:.1f}",
                "-" if bm is None else f"{bm:.1f}",
                "-" if bp is None else f"{bp:.1f}",
                _ratio(om, bm),
                _ratio(op, bp),
                "-" if restart is None else f"{1000 * restart:.0f}",
            )
    return table


def quality_table(results: dict[str, Any], seeds: int, trials: int) -> Table:
    table = Table(
        title=f"Best found (noise-free value; minimised), {trials} trials x {seeds} seeds, median over seeds"
    )
    for col in (
        "algorithm",
        "function",
        "ours median",
        "katib median",
        "ours better / tie / worse (per seed)",
    ):
        table.add_column(col, justify="left" if col in ("algorithm", "function") else "right")
    for algorithm, by_function in results.items():
        for function, res in by_function.items():
            ours, base = res["ours"], res["baseline"]
            if base:
                better = sum(o < b for o, b in zip(ours, base, strict=True))
                worse = sum(o > b for o, b in zip(ours, base, strict=True))
                wins = f"{better} / {len(ours) - better - worse} / {worse}"
            table.add_row(
                algorithm,
                function,
                f"{statistics.median(ours):.4f}",
                f"{statistics.median(base):.4f}" if base else "-",
                wins if base else "-",
            )
    return table


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--baseline-cmd", help="command starting the baseline service ({address}/{port} filled in)"
    )
    parser.add_argument(
        "--ours-cmd",
        help="command starting the service measured as ours ({address}/{port} filled in; default: "
        "katib-progress suggestion serve), e.g. benchmarks/canned_suggestion.py for the gRPC floor",
    )
    parser.add_argument(
        "--baseline-address", help="where the baseline listens when its command takes no address"
    )
    parser.add_argument(
        "--baseline-algorithm", help="quality: ask the baseline for this algorithm (default: the same name)"
    )
    parser.add_argument("--part", choices=("latency", "quality", "all"), default="all")
    parser.add_argument("--algorithms", help="comma list (default: all)")
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--trials", type=int, default=60)
    parser.add_argument("--calls", type=int, default=15, help="measured calls per size")
    parser.add_argument("--sizes", help=f"comma list of trial counts (default {','.join(map(str, SIZES))})")
    parser.add_argument(
        "--per-call", type=int, default=PER_CALL, help="suggestions per call (sizes must be that far apart)"
    )
    parser.add_argument(
        "--quick", action="store_true", help="smoke run: sizes 10/100, 3 calls, 2 seeds, 20 trials"
    )
    parser.add_argument("--json", type=Path, help="also write the raw figures here")
    args = parser.parse_args(argv)
    sizes = (10, 100) if args.quick else SIZES
    if args.sizes:
        sizes = tuple(int(n) for n in args.sizes.split(","))
    calls = 3 if args.quick else args.calls
    seeds, trials = (2, 20) if args.quick else (args.seeds, args.trials)
    baseline = baseline_spec(args.baseline_cmd, args.baseline_address) if args.baseline_cmd else None
    ours = ServiceSpec("ours", shlex.split(args.ours_cmd) if args.ours_cmd else ours_command("{address}"))
    chosen = args.algorithms.split(",") if args.algorithms else [*BOTH, *OURS_ONLY]
    console = Console(width=200)
    report: dict[str, Any] = {"load_before": load_text(), "latency": {}, "quality": {}}
    console.print(f"machine: {report['load_before']}")
    with log_dir() as logs:
        if args.part in ("latency", "all"):
            for algorithm in chosen:
                base = baseline if algorithm in BOTH else None
                report["latency"][algorithm] = latency(
                    algorithm, ours, base, calls, sizes, logs, args.per_call
                )
            console.print(latency_table(report["latency"], sizes, calls, args.per_call))
        if args.part in ("quality", "all"):
            for algorithm in (a for a in chosen if a in QUALITY_ALGORITHMS):
                report["quality"][algorithm] = quality(
                    algorithm, ours, baseline, seeds, trials, logs, args.baseline_algorithm
                )
            console.print(quality_table(report["quality"], seeds, trials))
    report["load_after"] = load_text()
    console.print(f"machine: {report['load_after']}")
    if args.json:
        args.json.write_text(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    from benchmarks.watchload.measure import interrupt_on_termination

    interrupt_on_termination()  # kill / a closed terminal: stop what was started, as Ctrl-C does
    sys.exit(main())
