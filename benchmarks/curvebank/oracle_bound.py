"""A lower bound on the compute any pruning rule needs on a bank: an oracle that knows every final.

For the same draws as ``katib-progress bench pruning`` (``RandomOrder(bank, seed, trials)``: seeds
``--seed`` .. ``--seed + --seeds - 1``), the oracle runs the drawn best trial (best final among the
drawn trials that did not fail) to its end and stops every other trial at its first report at or past
``p`` percent of progress (``p = 0``: at its first report). Its regret is 0 by construction; its compute
(accelerator-seconds used / running every drawn trial to its end, as the bench counts it) is what any
rule that needs ``p`` percent of a run to judge it must spend at least, even if it knew which trials
cross. Also printed: the median share of a run's compute spent by its first report (start-up and the
first interval), which no rule that waits for one report can save.

Usage:
    .venv/bin/python benchmarks/curvebank/oracle_bound.py benchmarks/data/*.json.gz [--seeds 30] [--seed 0]
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

from katib_progress.bench import load_bank
from katib_progress.bench._oracle import first_report_share, oracle_compute


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("banks", nargs="+", type=Path)
    parser.add_argument("--seeds", type=int, default=30)
    parser.add_argument("--seed", type=int, default=0, help="first seed (default 0)")
    parser.add_argument("--trials", type=int, default=40)
    parser.add_argument(
        "--at", default="0,5,10,20", help="comma list of progress percents (default 0,5,10,20)"
    )
    args = parser.parse_args(argv)
    points = [float(v) for v in args.at.split(",")]
    seeds = range(args.seed, args.seed + args.seeds)
    print(
        f"oracle compute, seeds {seeds.start}-{seeds.stop - 1}, {args.trials}-trial draws (mean over seeds)"
    )
    header = ["bank", "first report (median share of a run)", *(f"stop at >= {p:g} %" for p in points)]
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    for path in args.banks:
        bank = load_bank(path)
        cells = [f"`{bank.name}`", f"{first_report_share(bank):.3f}"]
        for p in points:
            cells.append(f"{statistics.mean(oracle_compute(bank, s, args.trials, p) for s in seeds):.3f}")
        print("| " + " | ".join(cells) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
