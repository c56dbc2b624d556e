"""The committed curve banks (benchmarks/data/): valid, from different families, each regenerable by a
committed script, and one of them judged by Katib's ``latest`` metric strategy (issue 12)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from katib_progress.bench import Bank, load_bank

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "benchmarks" / "data"
BANKS = sorted(DATA.glob("*.json.gz"))


@pytest.fixture(scope="module")
def banks() -> dict[str, Bank]:
    return {path.name: load_bank(path) for path in BANKS}


def test_at_least_ten_banks_with_distinct_names(banks: dict[str, Bank]) -> None:
    assert len(banks) >= 10  # issue 24: at least ten families
    names = [b.name for b in banks.values()]
    assert len(set(names)) == len(names)
    for file, bank in banks.items():
        assert file == f"{bank.name}.json.gz", "a bank file is named after the bank it holds"


def test_every_bank_names_a_committed_generator(banks: dict[str, Bank]) -> None:
    for file, bank in banks.items():
        scripts = re.findall(r"benchmarks/curvebank/(\w+\.py)", bank.description)
        assert scripts, f"{file}: the description names no generator script"
        for script in scripts:
            assert (ROOT / "benchmarks" / "curvebank" / script).is_file(), f"{file}: {script} is missing"


def test_banks_cover_both_directions_and_every_metric_strategy(banks: dict[str, Bank]) -> None:
    assert {b.direction for b in banks.values()} == {"minimize", "maximize"}
    assert {b.strategy for b in banks.values()} == {"min", "max", "latest"}


def test_every_bank_holds_enough_trials_with_a_finite_final(banks: dict[str, Bank]) -> None:
    for file, bank in banks.items():
        assert len(bank.trials) >= 100, file
        assert bank.median != bank.best_final, f"{file}: median and best final coincide, regret is undefined"
