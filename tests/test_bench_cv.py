"""``bench pruning --cv``: leave-one-family-out choice of the default (issue 24 item 3)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from katib_progress.bench import parse_bank
from katib_progress.bench._cv import CANDIDATES, choose, cross_validate, cv_markdown
from katib_progress.bench._run import BankResult, PolicySummary
from katib_progress.bench._sim import ReplayResult, TrialOutcome
from katib_progress.cli import main
from tests.test_bench_replay import synthetic_bank


def _summary(policy: str, compute: float, regrets: list[float], stock: bool = False) -> PolicySummary:
    runs = tuple(
        ReplayResult(
            policy=policy,
            mode="pruning",
            seed=k,
            outcomes=(TrialOutcome("t", 0, "complete", 1, 100.0, compute, 1.0, 0.1),),
            best_found=0.1,
            replay_best=0.1,
            regret=r,
            makespan_s=1.0,
        )
        for k, r in enumerate(regrets)
    )
    return PolicySummary("pruning", policy, runs, stock=stock)


def _result(name: str, cheap_regrets: list[float]) -> BankResult:
    doc = synthetic_bank() | {"name": name}
    summaries = (
        _summary("none", 1.0, [0.0, 0.0], stock=True),
        _summary("optuna-median", 0.5, [0.0, 0.0], stock=True),
        _summary("cheap", 0.3, cheap_regrets),
        _summary("safe", 0.45, [0.0, 0.004]),
    )
    return BankResult(parse_bank(doc), summaries, (), 0.01)


def test_choice_is_safety_first_then_compute() -> None:
    easy = _result("easy", [0.0, 0.0])
    hard = _result("hard", [0.0, 0.2])  # mean 0.1, worst seed 0.2: unsafe
    assert choose([easy], ["cheap", "safe"], 0.01) == "cheap"
    assert choose([easy, hard], ["cheap", "safe"], 0.01) == "safe"
    # a mean within target but one seed past 0.05 is unsafe too
    spiky = _result("spiky", [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.06])
    assert choose([spiky], ["cheap", "safe"], 0.01) == "safe"


def test_each_bank_is_judged_by_the_choice_made_on_the_others() -> None:
    easy, hard = _result("easy", [0.0, 0.0]), _result("hard", [0.0, 0.2])
    cv = cross_validate(
        [easy, hard], seeds=range(2), trials=4, regret_target=0.01, candidates=["cheap", "safe"]
    )
    rows = {r.bank: r for r in cv.rows}
    assert rows["easy"].chosen == "safe"  # chosen on "hard", where cheap loses the best
    assert rows["hard"].chosen == "cheap"  # chosen on "easy" alone: out of sample it fails
    assert not rows["hard"].safe and rows["easy"].safe
    assert rows["easy"].reference == "optuna-median" and rows["easy"].cell.ratio == pytest.approx(0.9)
    assert rows["easy"].cheap and rows["hard"].cheap
    assert cv.default == "safe"
    assert 0 < rows["easy"].oracle <= 1
    text = cv_markdown(cv)
    assert "| hard | min | cheap |" in text and "the folds chose safe, cheap" in text


def test_cli_cv_prints_the_table_and_refuses_policies(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    banks = []
    for name in ("fam-a", "fam-b"):
        path = tmp_path / f"{name}.json"
        path.write_text(json.dumps(synthetic_bank() | {"name": name}))
        banks += ["--bank", str(path)]
    assert main(["bench", "pruning", "--cv", *banks, "--seeds", "2", "--trials", "4"]) == 0
    out = capsys.readouterr().out
    assert "| fam-a | min | C" in out and "| fam-b | min | C" in out
    assert "chosen on all banks (the default)" in out and "(on the banks chosen on: 0.5 x both)" in out
    args = ["bench", "pruning", "--cv", *banks, "--seeds", "1", "--trials", "4", "--workers", "2"]
    assert main([*args, "--cv-margin", "1"]) == 0
    out = capsys.readouterr().out
    assert "(on the banks chosen on: 1 x both)" in out and "4-trial draws, 2 in parallel" in out
    assert CANDIDATES[0] in out or any(c in out for c in CANDIDATES)
    assert main(["bench", "pruning", "--cv", *banks, "--policy", "none"]) == 2
    assert main(["bench", "pruning", "--cv", banks[0], banks[1]]) == 2


def test_the_training_margin_decides_edge_cases() -> None:
    edge = _result("edge", [0.0] * 9 + [0.04])  # worst seed 0.04: safe, but not within half of 0.05
    assert choose([edge], ["cheap", "safe"], 0.01) == "safe"
    assert choose([edge], ["cheap", "safe"], 0.01, margin=1.0) == "cheap"


def test_the_hindsight_envelope_picks_each_banks_cheapest_safe_policy_on_that_bank() -> None:
    easy, hard = _result("easy", [0.0, 0.0]), _result("hard", [0.0, 0.2])
    ugly_summaries = (
        _summary("none", 1.0, [0.0, 0.0], stock=True),
        _summary("optuna-median", 0.5, [0.0, 0.0], stock=True),
        _summary("cheap", 0.3, [0.3, 0.0]),
        _summary("safe", 0.45, [0.0, 0.2]),
    )
    ugly = BankResult(parse_bank(synthetic_bank() | {"name": "ugly"}), ugly_summaries, (), 0.01)
    cv = cross_validate(
        [easy, hard, ugly], seeds=range(2), trials=4, regret_target=0.01, candidates=["cheap", "safe"]
    )
    only = cv.hindsight(with_stock=False)
    assert only["easy"] is not None and only["easy"][0] == "cheap"  # 0.3 / 0.5
    assert only["hard"] is not None and only["hard"][0] == "safe"  # cheap loses the best there
    assert only["ugly"] is None  # no candidate is safe there
    both = cv.hindsight(with_stock=True)
    assert both["ugly"] is not None and both["ugly"][0] == "optuna-median"
    text = cv_markdown(cv)
    # candidates: sqrt(0.6 x 0.9) over two banks; with the stock policies: (0.6 x 0.9 x 1.0) ** (1/3)
    assert "each bank's cheapest of the candidates safe there" in text
    assert "x ref 0.735 over 2 banks (none safe on ugly); at most 1 on every bank" in text
    assert "the candidates and the stock policies safe there, chosen on that bank itself: geometric " in text
    assert "mean of x ref 0.814; at most 1 on every bank" in text
    assert cv.as_dict()["hindsight"]["with_stock"]["ugly"]["policy"] == "optuna-median"
