"""Leave-one-family-out cross-validation of the pruning default (``bench pruning --cv``).

Every bank is one model family. The candidate engine settings (:data:`CANDIDATES`) and the stock
policies are replayed on every bank with the same seeds. For each bank in turn, a candidate is
**chosen on the other banks only** (:func:`choose`) and measured on the held-out bank; the table shows
what the held-out bank saw. The project's default is the candidate chosen on all banks, and the table
says whether every fold chose it too.

The choice, safety first: a candidate is *safe* on a bank when its mean regret is at most
``regret_target`` (0.01) and its worst seed at most ``max_regret_target`` (0.05); on the banks it is
chosen on it must be safe within ``TRAIN_MARGIN`` (half) of both targets. Among candidates so safe on
every training bank, the one with the lowest geometric mean, over those banks, of its compute
divided by the cheapest safe stock policy's (``BankResult.reference``) wins; when none is safe on every
training bank, the one unsafe on the fewest, then the lowest geometric mean. Ties: list order.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from katib_progress.bench._oracle import oracle_bound
from katib_progress.bench._policies import STOCK_POLICIES
from katib_progress.bench._run import BankResult, PolicySummary

#: Worst-seed regret a safe policy may reach on a bank (issue 24: "its worst seed at most 0.05").
MAX_REGRET_TARGET = 0.05
#: Progress (percent) at which the oracle bound stops every trial but the drawn best.
ORACLE_AT = 10.0
#: Safety margin of the choice: on the banks it is chosen on, a candidate counts as safe only within
#: this share of the targets (mean regret <= 0.005, worst seed <= 0.025). A candidate that just
#: passes in sample tends to fail out of sample (docs/benchmarks.md, "Cross-validated default").
TRAIN_MARGIN = 0.5

_TH = (
    "engine:divergence,trend_halving|trend_rho={rho}|trend_rho_confidence={conf}|trend_rho_min_finished={mf}"
    "|trend_noise={noise}|trend_smooth={smooth}"
)


_ADAPT = "|trend_adapt_top={top}|trend_adapt_margin={margin}|trend_adapt_min={floor}"


_PR = (
    "|predict_top={top}|predict_p={p}|predict_calibration={cal}|predict_min_finished=4"
    "|predict_min_progress=10|predict_min_points=4|predict_prior=2"
)


def _pr(top: int, p: float, cal: str, *, th: str = "") -> str:
    """A predictive candidate; with ``th`` (a trend-halving candidate) added to that policy."""
    knobs = _PR.format(top=top, p=p, cal=cal)
    if th:
        return (
            th.replace("engine:divergence,trend_halving|", "engine:divergence,trend_halving,predictive|")
            + knobs
        )
    return "engine:divergence,predictive" + knobs


def _th(rho: float, conf: float, mf: int, noise: float, smooth: bool, *, extra: str = "") -> str:
    return _TH.format(rho=rho, conf=conf, mf=mf, noise=noise, smooth=str(smooth).lower()) + extra


#: The candidate defaults: every rule and setting tried for issue 24, each tuned knob spelled out (so a
#: candidate means the same whatever the engine's defaults are). The first is issue 12's default.
CANDIDATES: tuple[str, ...] = (
    _th(0, 1, 4, 0, False),
    _th(0.5, 1, 4, 0, False),
    _th(0.8, 1, 4, 0, False),
    _th(0, 1, 4, 1, True),
    _th(0, 1, 4, 2, True),
    _th(0.3, 1, 4, 1, True),
    _th(0.5, 1, 4, 1, True),
    _th(0.5, 1, 4, 2, True),
    _th(0.8, 1, 4, 1, True),
    _th(0.8, 1, 4, 1, True, extra="|trend_rungs=10,20,40|trend_keep=50,33,25"),
    _th(0.8, 1, 4, 1, True, extra="|trend_rungs=20,40|trend_keep=50,50"),
    _th(0.8, 0, 3, 1, True),
    _th(0.5, 0.5, 4, 1, True),
    _th(0.5, 0, 4, 1, True),
    _th(0.5, 0, 3, 1, True),
    _th(0.3, 0, 4, 1, True),
    _th(0.3, 0, 3, 1, True),
    _th(0.5, 0, 4, 0.5, True),
    _th(0.5, 0, 3, 0.5, True),
    _th(0.5, 0, 4, 1, True, extra="|trend_keep=33,25,25,25"),
    _th(0.5, 0, 3, 1, True, extra="|trend_keep=33,25,25,25"),
    _th(0.3, 0, 3, 1, True, extra="|trend_keep=33,25,25,25"),
    _th(0.5, 0, 4, 1, True, extra="|trend_keep=33,33,25,25"),
    _th(0.5, 0, 4, 1, True, extra="|trend_rungs=5,10,20,40,80|trend_keep=50,50,33,25,25"),
    "engine:divergence,stall,percentile",
    "engine:divergence,adaptive",
    "engine:divergence,median",
    # issue 24 item 5 (compute): data-driven keep, each rung keeps the share of peers that were ahead of
    # the best completed trials there, plus a margin (trend_adapt_*), with the gates above
    _th(0.5, 0, 3, 1, True, extra=_ADAPT.format(top=2, margin=10, floor=10)),
    _th(0.5, 0, 3, 1, True, extra=_ADAPT.format(top=3, margin=15, floor=15)),
    _th(0.5, 0, 4, 1, True, extra=_ADAPT.format(top=3, margin=10, floor=10)),
    _th(0.5, 1, 4, 1, True, extra=_ADAPT.format(top=2, margin=10, floor=10)),
    _th(
        0.5,
        0,
        3,
        1,
        True,
        extra="|trend_rungs=5,10,20,40,80|trend_keep=50,50,33,25,25"
        + _ADAPT.format(top=2, margin=10, floor=10),
    ),
    # ... and as the only gate: every rung shut (99 %) until trend_adapt_top trials completed
    _th(0, 0, 3, 1, True, extra="|trend_keep=99,99,99,99" + _ADAPT.format(top=3, margin=15, floor=15)),
    # ... more conservative: more of the best completed trials, a larger margin and floor
    _th(0.5, 0, 3, 1, True, extra=_ADAPT.format(top=4, margin=20, floor=20)),
    _th(0.5, 1, 4, 1, True, extra=_ADAPT.format(top=3, margin=15, floor=15)),
    _th(0.5, 0, 4, 1, True, extra=_ADAPT.format(top=4, margin=15, floor=15)),
    # issue 36: the predictive rule (a calibrated learning-curve ensemble; prune when P(final reaches the
    # top-k) < predict_p), alone with divergence and added to the default (C7); every one tried is kept
    _pr(1, 0.05, "event"),
    _pr(1, 0.1, "event"),
    _pr(1, 0.02, "event"),
    _pr(3, 0.05, "event"),
    _pr(1, 0.05, "pit"),
    _pr(1, 0.05, "none"),
    _pr(1, 0.05, "event", th=_th(0.5, 1, 4, 1, True)),
)


def cv_policies() -> list[str]:
    """What ``--cv`` replays: the stock policies and every candidate."""
    return [*STOCK_POLICIES, *CANDIDATES]


@dataclass(frozen=True, slots=True)
class Cell:
    """One policy on one bank."""

    compute: float
    regret: float
    max_regret: float
    hit_rate: float
    ratio: float  # compute / the cheapest safe stock policy's

    def safe(self, regret_target: float, max_regret_target: float) -> bool:
        return self.regret <= regret_target and self.max_regret <= max_regret_target


def cell(result: BankResult, summary: PolicySummary) -> Cell:
    ref = result.reference("pruning")
    compute = summary.spread("compute_fraction").mean
    ref_compute = ref.spread("compute_fraction").mean if ref is not None else 1.0
    regret = summary.spread("regret")
    return Cell(compute, regret.mean, regret.max, summary.spread("hit").mean, compute / ref_compute)


def _summary(result: BankResult, policy: str) -> PolicySummary:
    for s in result.summaries:
        if s.mode == "pruning" and s.policy == policy:
            return s
    raise KeyError(f"{policy} was not replayed on {result.bank.name}")


def choose(
    results: Sequence[BankResult],
    candidates: Sequence[str],
    regret_target: float,
    max_regret_target: float = MAX_REGRET_TARGET,
    margin: float = TRAIN_MARGIN,
) -> str:
    """The candidate chosen on ``results`` (module docstring), safe within ``margin`` x the targets."""

    def key(item: tuple[int, str]) -> tuple[int, float, int]:
        i, name = item
        cells = [cell(r, _summary(r, name)) for r in results]
        unsafe = sum(not c.safe(margin * regret_target, margin * max_regret_target) for c in cells)
        geo = _geo([c.ratio for c in cells]) if cells else 1.0
        return unsafe, geo, i

    return min(enumerate(candidates), key=key)[1]


@dataclass(frozen=True, slots=True)
class CvRow:
    bank: str
    strategy: str
    chosen: str
    cell: Cell
    reference: str
    reference_compute: float
    oracle: float
    safe: bool  # item 4: mean regret <= 0.01 and worst seed <= 0.05
    cheap: bool  # item 5: compute <= the cheapest safe stock policy's


@dataclass(frozen=True, slots=True)
class CvResult:
    rows: tuple[CvRow, ...]
    default: str  # chosen on every bank
    regret_target: float
    max_regret_target: float
    seeds: int
    margin: float
    trials: int | None
    workers: int
    #: every replayed policy on every bank: {bank: {policy: Cell}}
    grid: dict[str, dict[str, Cell]]

    @property
    def geo_ratio(self) -> float:
        return _geo([r.cell.ratio for r in self.rows])

    def hindsight(self, *, with_stock: bool) -> dict[str, tuple[str, Cell] | None]:
        """Each bank's cheapest replayed policy (by compute over the bank's reference) that is safe
        there by the targets themselves, chosen **on that bank itself**: the candidates, and with
        ``with_stock`` the stock policies too; None where none is. Not a policy anyone could run (it
        knows every bank's results); a bound on what choosing among these rules can reach (issue 24
        item 5: a single default must beat this envelope's geometric mean to reach the goal)."""
        out: dict[str, tuple[str, Cell] | None] = {}
        for bank, cells in self.grid.items():
            safe = [
                (c.ratio, i, name, c)
                for i, (name, c) in enumerate(cells.items())
                if (with_stock or name not in STOCK_POLICIES)
                and c.safe(self.regret_target, self.max_regret_target)
            ]
            best = min(safe, default=None, key=lambda s: (s[0], s[1]))
            out[bank] = None if best is None else (best[2], best[3])
        return out

    def as_dict(self) -> dict[str, object]:
        return {
            "default": self.default,
            "geometric_mean_ratio": self.geo_ratio,
            "regret_target": self.regret_target,
            "max_regret_target": self.max_regret_target,
            "margin": self.margin,
            "table": cv_markdown(self),
            "hindsight": {
                key: {
                    bank: None if b is None else {"policy": b[0], **_cell_dict(b[1])}
                    for bank, b in self.hindsight(with_stock=stock).items()
                }
                for key, stock in (("candidates", False), ("with_stock", True))
            },
            "grid": {
                bank: {name: _cell_dict(c) for name, c in cells.items()} for bank, cells in self.grid.items()
            },
            "rows": [
                {
                    "bank": r.bank,
                    "strategy": r.strategy,
                    "chosen_on_others": r.chosen,
                    "compute": r.cell.compute,
                    "regret": r.cell.regret,
                    "max_regret": r.cell.max_regret,
                    "hit_rate": r.cell.hit_rate,
                    "ratio": r.cell.ratio,
                    "reference": r.reference,
                    "reference_compute": r.reference_compute,
                    "oracle": r.oracle,
                    "safe": r.safe,
                    "cheap": r.cheap,
                }
                for r in self.rows
            ],
        }


def cross_validate(
    results: Sequence[BankResult],
    *,
    seeds: Sequence[int],
    trials: int | None,
    regret_target: float,
    max_regret_target: float = MAX_REGRET_TARGET,
    candidates: Sequence[str] = CANDIDATES,
    workers: int = 4,
    margin: float = TRAIN_MARGIN,
) -> CvResult:
    """Leave one bank out: choose on the others, measure on it (module docstring)."""
    if len(results) < 2:
        raise ValueError("cross-validation needs at least two banks")
    rows = []
    for i, held in enumerate(results):
        others = [r for j, r in enumerate(results) if j != i]
        chosen = choose(others, candidates, regret_target, max_regret_target, margin)
        c = cell(held, _summary(held, chosen))
        ref = held.reference("pruning")
        ref_name = ref.policy if ref is not None else "none"
        ref_compute = ref.spread("compute_fraction").mean if ref is not None else 1.0
        rows.append(
            CvRow(
                bank=held.bank.name,
                strategy=held.bank.strategy,
                chosen=chosen,
                cell=c,
                reference=ref_name,
                reference_compute=ref_compute,
                oracle=oracle_bound(held.bank, seeds, trials, ORACLE_AT),
                safe=c.safe(regret_target, max_regret_target),
                cheap=c.compute <= ref_compute + 1e-12,
            )
        )
    default = choose(results, candidates, regret_target, max_regret_target, margin)
    grid = {r.bank.name: {s.policy: cell(r, s) for s in r.summaries if s.mode == "pruning"} for r in results}
    return CvResult(
        tuple(rows), default, regret_target, max_regret_target, len(seeds), margin, trials, workers, grid
    )


def _geo(ratios: Sequence[float]) -> float:
    return math.exp(sum(math.log(max(x, 1e-9)) for x in ratios) / len(ratios)) if ratios else math.nan


def _hindsight_line(cv: CvResult, *, with_stock: bool) -> str:
    best = cv.hindsight(with_stock=with_stock)
    found = {bank: b for bank, b in best.items() if b is not None}
    above = [f"{bank} {short_name(name)} {c.ratio:.2f}" for bank, (name, c) in found.items() if c.ratio > 1]
    none = [bank for bank, b in best.items() if b is None]
    what = "the candidates and the stock policies" if with_stock else "the candidates"
    return (
        f"in hindsight, each bank's cheapest of {what} safe there, chosen on that bank itself: geometric "
        f"mean of x ref {_geo([c.ratio for _, c in found.values()]):.3f}"
        + (f" over {len(found)} banks (none safe on {', '.join(none)})" if none else "")
        + (f"; above 1 on {', '.join(above)}" if above else "; at most 1 on every bank")
    )


def _cell_dict(c: Cell) -> dict[str, float]:
    return {
        "compute": c.compute,
        "regret": c.regret,
        "max_regret": c.max_regret,
        "hit_rate": c.hit_rate,
        "ratio": c.ratio,
    }


def short_name(policy: str) -> str:
    """A candidate's label in the table: its index in :data:`CANDIDATES` (``C1``...)."""
    return f"C{CANDIDATES.index(policy) + 1}" if policy in CANDIDATES else policy


def cv_markdown(cv: CvResult) -> str:
    """The cross-validated table (markdown), then the legend of the candidates chosen."""
    lines = [
        f"leave-one-family-out: each bank's candidate chosen on the other {len(cv.rows) - 1} banks; "
        f"{cv.seeds} seeds of {cv.trials or 'all'}-trial draws, {cv.workers} in parallel; "
        f"safe = mean regret <= {cv.regret_target:g} and worst seed <= {cv.max_regret_target:g} "
        f"(on the banks chosen on: {cv.margin:g} x both)",
        "",
        "| bank | strategy | chosen on the others | compute | regret [max] | hit rate "
        "| cheapest safe stock (compute) | x ref | oracle@10% | safe | <= ref |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in cv.rows:
        c = r.cell
        lines.append(
            f"| {r.bank} | {r.strategy} | {short_name(r.chosen)} | {c.compute:.3f} | "
            f"{c.regret:.4f} [{c.max_regret:.3f}] | {c.hit_rate:.2f} | "
            f"{r.reference} ({r.reference_compute:.3f}) | {c.ratio:.2f} | {r.oracle:.3f} | "
            f"{'yes' if r.safe else 'NO'} | {'yes' if r.cheap else 'NO'} |"
        )
    chosen = dict.fromkeys(r.chosen for r in cv.rows)
    same = all(r.chosen == cv.default for r in cv.rows)
    lines += [
        "",
        f"geometric mean of x ref: {cv.geo_ratio:.3f}; safe on {sum(r.safe for r in cv.rows)} of "
        f"{len(cv.rows)} banks, compute <= ref on {sum(r.cheap for r in cv.rows)} of {len(cv.rows)}",
        _hindsight_line(cv, with_stock=False),
        _hindsight_line(cv, with_stock=True),
        f"chosen on all banks (the default): {short_name(cv.default)}; "
        + ("every fold chose it" if same else "the folds chose " + ", ".join(short_name(c) for c in chosen)),
    ]
    for name in dict.fromkeys([*chosen, cv.default]):
        lines.append(f"  {short_name(name)} = {name}")
    return "\n".join(lines)
