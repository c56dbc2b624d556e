"""Every cross-validation candidate on every bank, from ``katib-progress bench pruning --cv --json``.

The ``--cv`` table shows only the candidate each fold chose. This prints, for the candidates named
(default: every candidate), one row per candidate: its compute over the bank's cheapest safe stock policy
(``x ref``) on each bank, marked ``*`` where it is unsafe there (mean regret above 0.01 or a seed above
0.05), the geometric mean of ``x ref`` and the number of banks it is safe on; then, per bank, compute,
mean regret and worst seed of each candidate named. No candidate is chosen here: these are the replays of
the ``--cv`` run, candidate by candidate.

Usage:
    katib-progress bench pruning --cv --seeds 20 --json --bank ... > cv.json
    .venv/bin/python benchmarks/cv_candidates.py cv.json [--match predictive] [--also C7]
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

from katib_progress.bench._cv import CANDIDATES, short_name


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("cv_json", type=Path)
    ap.add_argument("--match", default="", help="only candidates whose setting string contains this")
    ap.add_argument("--also", action="append", default=[], help="a candidate label to add (e.g. C7)")
    args = ap.parse_args(argv)
    doc = json.loads(args.cv_json.read_text())
    grid: dict[str, dict[str, dict[str, float]]] = doc["grid"]
    regret_target, max_target = doc["regret_target"], doc["max_regret_target"]
    names = [c for c in CANDIDATES if short_name(c) in args.also or (args.match and args.match in c)]
    if not args.match and not args.also:
        names = list(CANDIDATES)
    banks = list(grid)

    def safe(cell: dict[str, float]) -> bool:
        return cell["regret"] <= regret_target and cell["max_regret"] <= max_target

    print("| candidate | " + " | ".join(banks) + " | geo x ref | safe on |")
    print("|---" * (len(banks) + 3) + "|")
    for name in names:
        cells = [grid[b][name] for b in banks]
        geo = math.exp(sum(math.log(max(c["ratio"], 1e-9)) for c in cells) / len(cells))
        shown = [f"{c['ratio']:.2f}{'' if safe(c) else '*'}" for c in cells]
        print(f"| {short_name(name)} | " + " | ".join(shown) + f" | {geo:.3f} | {sum(map(safe, cells))} |")
    print()
    print("x ref per bank; * = unsafe there (mean regret > 0.01 or a seed > 0.05)")
    print()
    print("| bank | " + " | ".join(f"{short_name(n)} compute, regret [max]" for n in names) + " |")
    print("|---" * (len(names) + 1) + "|")
    for b in banks:
        row = [
            f"{grid[b][n]['compute']:.3f}, {grid[b][n]['regret']:.4f} [{grid[b][n]['max_regret']:.3f}]"
            for n in names
        ]
        print(f"| {b} | " + " | ".join(row) + " |")
    print()
    for name in names:
        print(f"  {short_name(name)} = {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
