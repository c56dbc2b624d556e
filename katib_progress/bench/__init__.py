"""Replay learning-curve banks to compare pruning policies (``katib-progress bench pruning``).

Public API:
- ``load_bank(path) -> Bank`` / ``parse_bank(document) -> Bank``: read and validate a bank
  (curve-bank.schema.json; ``.json`` or ``.json.gz``).
- ``replay(bank, decider, source, *, workers=4, ...) -> ReplayResult``: one event-driven replay.
- ``run_bench(bank, BenchSettings(...)) -> list[PolicySummary]``: every policy x seed x mode.
- ``Decider``: the protocol a pruning policy implements for the bench.
"""

from katib_progress.bench._bank import Bank, BankParameter, BankPoint, BankTrial, load_bank, parse_bank
from katib_progress.bench._deciders import Decider, KatibMedianStop, NoPruning, Objective, TrialEnd
from katib_progress.bench._optuna import OptunaPrunerDecider
from katib_progress.bench._run import (
    BUILTIN_POLICIES,
    MODES,
    BenchSettings,
    PolicySummary,
    Spread,
    default_policies,
    make_decider,
    run_bench,
)
from katib_progress.bench._sim import ReplayResult, TrialOutcome, TrialSource, replay
from katib_progress.bench._sources import NearestConfig, RandomOrder

__all__ = [
    "BUILTIN_POLICIES",
    "MODES",
    "Bank",
    "BankParameter",
    "BankPoint",
    "BankTrial",
    "BenchSettings",
    "Decider",
    "KatibMedianStop",
    "NearestConfig",
    "NoPruning",
    "Objective",
    "OptunaPrunerDecider",
    "PolicySummary",
    "RandomOrder",
    "ReplayResult",
    "Spread",
    "TrialEnd",
    "TrialOutcome",
    "TrialSource",
    "default_policies",
    "load_bank",
    "make_decider",
    "parse_bank",
    "replay",
    "run_bench",
]
