"""Replay learning-curve banks to compare pruning policies (``katib-progress bench pruning``).

Public API:
- ``load_bank(path) -> Bank`` / ``parse_bank(document) -> Bank``: read and validate a bank
  (curve-bank.schema.json; ``.json`` or ``.json.gz``).
- ``replay(bank, decider, source, *, workers=4, ...) -> ReplayResult``: one event-driven replay.
- ``run_bench(bank, BenchSettings(...)) -> BankResult``: every policy x seed x mode on one bank.
- ``Decider``: the protocol a pruning policy implements for the bench.
"""

from katib_progress.bench._bank import Bank, BankParameter, BankPoint, BankTrial, load_bank, parse_bank
from katib_progress.bench._deciders import Decider, KatibMedianStop, NoPruning, Objective, TrialEnd
from katib_progress.bench._optuna import OptunaPrunerDecider
from katib_progress.bench._policies import (
    STOCK_POLICIES,
    PolicySpec,
    default_policies,
    make_decider,
    parse_policy,
)
from katib_progress.bench._run import MODES, BankResult, BenchSettings, PolicySummary, Spread, run_bench
from katib_progress.bench._sim import ReplayResult, TrialOutcome, TrialSource, replay
from katib_progress.bench._sources import NearestConfig, RandomOrder
from katib_progress.bench._stall import StallProfile, StallSummary, lone_replay, profile

__all__ = [
    "MODES",
    "STOCK_POLICIES",
    "Bank",
    "BankParameter",
    "BankPoint",
    "BankResult",
    "BankTrial",
    "BenchSettings",
    "Decider",
    "KatibMedianStop",
    "NearestConfig",
    "NoPruning",
    "Objective",
    "OptunaPrunerDecider",
    "PolicySpec",
    "PolicySummary",
    "RandomOrder",
    "ReplayResult",
    "Spread",
    "StallProfile",
    "StallSummary",
    "TrialEnd",
    "TrialOutcome",
    "TrialSource",
    "default_policies",
    "load_bank",
    "lone_replay",
    "make_decider",
    "parse_bank",
    "parse_policy",
    "profile",
    "replay",
    "run_bench",
]
