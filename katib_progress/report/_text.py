"""Markdown, CSV and JSON renderings of a Report (for CI logs and notebooks)."""

from __future__ import annotations

import csv
import io
import json
import math
from typing import Any

from katib_progress.report import _format as f
from katib_progress.report.analysis import LeaderboardRow, Report


def _finite(value: float | None) -> float | None:
    return value if value is not None and math.isfinite(value) else None


def to_dict(report: Report) -> dict[str, Any]:
    """A JSON-ready dict of every figure of the report."""
    exp = report.experiment
    cost = report.cost
    return {
        "experiment": exp.name,
        "namespace": exp.namespace,
        "source": exp.source,
        "status": exp.status or None,
        "reason": exp.reason or None,
        "message": exp.message or None,
        "accelerator": exp.accelerator,
        "generated_at": report.generated_at.isoformat(),
        "objective": {
            "metric": exp.objective.metric,
            "direction": exp.objective.direction,
            "strategy": exp.objective.strategy(exp.objective.metric),
            "goal": exp.objective.goal,
        },
        "counts": report.counts(),
        "best": report.best.trial if report.best else None,
        "leaderboard": [_row_dict(r) for r in report.leaderboard],
        "cost": {
            "total_gpu_hours": cost.total_gpu_hours,
            "saved_gpu_hours": cost.saved_gpu_hours,
            "saved_by_trial": dict(cost.saved_by_trial),
            "gpu_hour_price": cost.gpu_hour_price,
            "total_cost": cost.total_cost,
            "saved_cost": cost.saved_cost,
            "accelerators_assumed": list(cost.accelerators_assumed),
            "pruned_without_eta": list(cost.pruned_without_eta),
        },
        "eta_accuracy": [
            {
                "trial": e.trial,
                "samples": len(e.samples),
                "mean_abs_error_s": e.mean_abs_error_s,
                "max_abs_error_s": e.max_abs_error_s,
                "mean_abs_rel_error": e.mean_abs_rel_error,
            }
            for e in report.eta
        ],
        "incidents": [
            {"trial": i.trial, "kind": i.kind, "summary": i.summary, "evidence": dict(i.evidence)}
            for i in report.incidents
        ],
        "importance": dict(report.importance),
        "importance_note": report.importance_note,
        "notes": list(exp.notes),
    }


def _row_dict(r: LeaderboardRow) -> dict[str, Any]:
    return {
        "rank": r.rank,
        "trial": r.trial,
        "params": dict(r.params),
        "objective": _finite(r.objective),
        "status": r.status.value,
        "reason": r.reason,
        "progress": r.progress,
        "progress_at_prune": r.progress_at_prune,
        "eta_at_prune_s": r.eta_at_prune_s,
        "duration_s": r.duration_s,
        "accelerators": r.accelerators,
        "gpu_hours": r.gpu_hours,
        "best": r.best,
    }


def to_json(report: Report) -> str:
    return json.dumps(to_dict(report), indent=2, sort_keys=False) + "\n"


def to_csv(report: Report) -> str:
    """The leaderboard, one row per trial; parameters as ``param.<name>`` columns."""
    names = list(dict.fromkeys(n for r in report.leaderboard for n in r.params))
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(
        [
            "rank",
            "trial",
            *(f"param.{n}" for n in names),
            "objective",
            "status",
            "reason",
            "progress_at_prune",
            "duration_s",
            "accelerators",
            "gpu_hours",
            "saved_gpu_hours",
            "best",
        ]
    )
    for r in report.leaderboard:
        writer.writerow(
            [
                r.rank,
                r.trial,
                *(r.params.get(n, "") for n in names),
                "" if r.objective is None else repr(r.objective),
                r.status.value,
                r.reason,
                "" if r.progress_at_prune is None else r.progress_at_prune,
                "" if r.duration_s is None else round(r.duration_s, 3),
                r.accelerators,
                round(r.gpu_hours, 6),
                round(report.cost.saved_by_trial.get(r.trial, 0.0), 6),
                str(r.best).lower(),
            ]
        )
    return buf.getvalue()


def _md_cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def to_markdown(report: Report) -> str:
    exp = report.experiment
    cost = report.cost
    counts = ", ".join(f"{n} {k}" for k, n in report.counts().items() if n)
    lines = [
        f"# Experiment `{exp.name}`" + (f" (namespace `{exp.namespace}`)" if exp.namespace else ""),
        "",
        f"- source: {exp.source or '-'}; generated {report.generated_at.isoformat()}",
        f"- status: {f.experiment_state(report)}",
        f"- objective: {f.objective_header(report)}; trials: {counts or 'none'}",
        f"- best: {report.best.trial + ' = ' + f.num(report.best.objective) if report.best else '-'}",
        f"- {f.hours_unit(report)}: {cost.total_gpu_hours:.3f} used, "
        f"{cost.saved_gpu_hours:.3f} saved by pruning"
        + (
            f"; cost {f.money(cost.total_cost)}, saved {f.money(cost.saved_cost)}"
            if cost.gpu_hour_price is not None
            else ""
        ),
        "",
        "## Leaderboard",
        "",
        f"| rank | trial | parameters | {f.objective_header(report)} | status | duration | "
        f"{f.hours_unit(report)} |",
        "|---:|---|---|---:|---|---:|---:|",
    ]
    for r in report.leaderboard:
        name = f"**{r.trial}**" if r.best else r.trial
        cells = [str(r.rank), name, f.params(r.params), f.num(r.objective), f.status(r)]
        cells += [f.duration(r.duration_s), f"{r.gpu_hours:.3f}"]
        lines.append("| " + " | ".join(_md_cell(c) for c in cells) + " |")
    if report.eta:
        lines += [
            "",
            "## ETA accuracy",
            "",
            "| trial | samples | mean abs error | max abs error | mean rel error |",
        ]
        lines.append("|---|---:|---:|---:|---:|")
        for e in report.eta:
            rel = "-" if e.mean_abs_rel_error is None else f"{100 * e.mean_abs_rel_error:.1f}%"
            errors = f"{e.mean_abs_error_s:.0f} s | {e.max_abs_error_s:.0f} s"
            lines.append(f"| {e.trial} | {len(e.samples)} | {errors} | {rel} |")
    lines += ["", "## Incidents", ""]
    if not report.incidents:
        lines.append("none")
    for i in report.incidents:
        evidence = "; ".join(f"{k}: {v}" for k, v in i.evidence.items() if k != "log tail")
        lines.append(f"- **{i.kind}** `{i.trial}`: {_md_cell(i.summary)} ({_md_cell(evidence)})")
    if report.importance:
        lines += ["", f"## Parameter importance ({report.importance_note})", ""]
        lines += [f"- {k}: {v:.3f}" for k, v in report.importance.items()]
    if exp.notes:
        lines += ["", "## Notes", "", *(f"- {n}" for n in exp.notes)]
    return "\n".join(lines) + "\n"
