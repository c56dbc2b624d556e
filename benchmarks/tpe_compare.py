"""Tabulate JSON lines of ``tpe_defaults.py`` / ``tpe_service.py``: median best per function and
per-seed better / tie / worse against a reference label, over the seeds the reference has. Lines
with the same label (runs over different seeds) are joined.

    python benchmarks/tpe_compare.py --ref katib-mv katib_10_39.jsonl katib_40_69.jsonl ours.jsonl
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path


def load(paths: list[Path]) -> dict[str, dict[str, dict[int, float]]]:
    """label -> function -> seed -> best found."""
    out: dict[str, dict[str, dict[int, float]]] = {}
    for path in paths:
        for line in path.read_text().splitlines():
            if not line.strip():
                continue
            row = json.loads(line)
            for function, values in row["best"].items():
                cell = out.setdefault(row["label"], {}).setdefault(function, {})
                cell.update(zip(row["seeds"], values, strict=True))
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ref", required=True, help="reference label (e.g. Katib's)")
    parser.add_argument("files", nargs="+", type=Path)
    args = parser.parse_args(argv)
    rows = load(args.files)
    ref = rows[args.ref]
    functions = list(ref)
    seeds = sorted(set.intersection(*(set(ref[f]) for f in functions)))
    print(f"seeds {seeds[0]}-{seeds[-1]} ({len(seeds)}); median best (better / tie / worse than {args.ref})")
    print("| label | " + " | ".join(functions) + " |")
    print("|---" * (len(functions) + 1) + "|")
    for label, by_function in rows.items():
        cells = []
        for function in functions:
            mine = by_function.get(function, {})
            if not all(s in mine for s in seeds):
                cells.append("-")
                continue
            ours = [mine[s] for s in seeds]
            base = [ref[function][s] for s in seeds]
            median = f"{statistics.median(ours):.4f}"
            if label == args.ref:
                cells.append(median)
                continue
            better = sum(o < b for o, b in zip(ours, base, strict=True))
            worse = sum(o > b for o, b in zip(ours, base, strict=True))
            cells.append(f"{median} ({better}/{len(seeds) - better - worse}/{worse})")
        print(f"| {label} | " + " | ".join(cells) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
