"""One self-contained HTML report (inline plotly.js, no network) from a Report."""

from __future__ import annotations

import html
from collections.abc import Sequence

import plotly.graph_objects as go

from katib_progress.report import _figures as figs
from katib_progress.report import _format as f
from katib_progress.report.analysis import Report

_STYLE = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:24px;color:#222}
table{border-collapse:collapse;margin:8px 0 24px;font-size:13px}
th,td{border:1px solid #ddd;padding:4px 8px;text-align:left;vertical-align:top;white-space:pre-line}
th{background:#f4f4f4} td.n{text-align:right;font-variant-numeric:tabular-nums}
tr.best td{background:#fff3cd;font-weight:600}
.kv td:first-child{font-weight:600} pre{margin:0;white-space:pre-wrap;font-size:12px}
nav a{margin-right:12px}
"""


def _e(text: object) -> str:
    return html.escape(str(text))


def _table(
    headers: Sequence[str],
    rows: Sequence[Sequence[str]],
    numeric: Sequence[int] = (),
    classes: Sequence[str] = (),
) -> str:
    head = "".join(f"<th>{_e(h)}</th>" for h in headers)
    body = []
    for n, row in enumerate(rows):
        cls = f' class="{classes[n]}"' if classes and classes[n] else ""
        cells = "".join(
            f'<td class="n">{_e(c)}</td>' if i in numeric else f"<td>{_e(c)}</td>" for i, c in enumerate(row)
        )
        body.append(f"<tr{cls}>{cells}</tr>")
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def _summary(report: Report) -> str:
    exp = report.experiment
    cost = report.cost
    best = report.best
    unit = f.hours_unit(report)
    rows = [
        ("experiment", exp.name + (f" (namespace {exp.namespace})" if exp.namespace else "")),
        ("source", exp.source or "-"),
        ("status", f.experiment_state(report)),
        ("generated", report.generated_at.isoformat()),
        (
            "objective",
            f.objective_header(report)
            + (f", goal {exp.objective.goal:g}" if exp.objective.goal is not None else ""),
        ),
        ("trials", ", ".join(f"{n} {k}" for k, n in report.counts().items() if n) or "none"),
        ("best", f"{best.trial} = {f.num(best.objective)}" if best else "-"),
        (f"{unit} used", f"{cost.total_gpu_hours:.3f}"),
        (f"{unit} saved by pruning", f"{cost.saved_gpu_hours:.3f}"),
    ]
    if cost.gpu_hour_price is not None:
        per = unit.removesuffix("s")
        rows.append(("cost", f"{f.money(cost.total_cost)} at {cost.gpu_hour_price:g}/{per}"))
        rows.append(("saved", f.money(cost.saved_cost)))
    if cost.accelerators_assumed:
        rows.append(
            (
                "assumed accelerators",
                f"{len(cost.accelerators_assumed)} trial(s) state no accelerators; "
                "their default count is used",
            )
        )
    if cost.pruned_without_eta:
        rows.append(("pruned without ETA", ", ".join(cost.pruned_without_eta) + " (no savings counted)"))
    rows += [("note", n) for n in exp.notes]
    return (
        '<table class="kv">'
        + "".join(f"<tr><td>{_e(k)}</td><td>{_e(v)}</td></tr>" for k, v in rows)
        + "</table>"
    )


def _leaderboard(report: Report) -> str:
    headers = [
        "rank",
        "trial",
        "parameters",
        f.objective_header(report),
        "status",
        "duration",
        "accelerators",
        f.hours_unit(report),
        f"saved {f.hours_unit(report)}",
    ]
    rows = [
        [
            str(r.rank),
            r.trial,
            f.params(r.params),
            f.num(r.objective, 6),
            f.status(r),
            f.duration(r.duration_s),
            f"{r.accelerators:g}",
            f"{r.gpu_hours:.3f}",
            f"{report.cost.saved_by_trial.get(r.trial, 0.0):.3f}",
        ]
        for r in report.leaderboard
    ]
    return _table(
        headers, rows, numeric=(0, 3, 6, 7, 8), classes=["best" if r.best else "" for r in report.leaderboard]
    )


def _eta(report: Report) -> str:
    if not report.eta:
        return "<p>No finished trial reported an ETA.</p>"
    rows = [
        [
            e.trial,
            str(len(e.samples)),
            f"{e.mean_abs_error_s:.0f} s",
            f"{e.max_abs_error_s:.0f} s",
            "-" if e.mean_abs_rel_error is None else f"{100 * e.mean_abs_rel_error:.1f}%",
        ]
        for e in report.eta
    ]
    return _table(
        ["trial", "ETAs", "mean abs error", "max abs error", "mean rel error"], rows, numeric=(1, 2, 3, 4)
    )


def _incidents(report: Report) -> str:
    if not report.incidents:
        return "<p>No stalled, diverged or crashed trials.</p>"
    rows = []
    for i in report.incidents:
        evidence = "\n".join(f"{k}: {v}" for k, v in i.evidence.items())
        rows.append([i.kind, i.trial, i.summary, evidence])
    return _table(["kind", "trial", "summary", "evidence"], rows)


def _plot(fig: go.Figure, first: bool) -> str:
    return str(
        fig.to_html(
            full_html=False,
            include_plotlyjs=first,
            config={"displaylogo": False, "responsive": True},
        )
    )


def render_html(report: Report) -> str:
    """The report as one HTML document that opens offline (plotly.js is inlined)."""
    sections: list[tuple[str, str]] = [("Summary", _summary(report)), ("Leaderboard", _leaderboard(report))]
    plots: list[tuple[str, go.Figure]] = [(f"Curve: {m}", figs.curves(report, m)) for m in report.metrics]
    axes = figs.all_axes(report)
    if axes:
        plots.append(("Parallel coordinates", figs.parallel(report, axes)))
        plots.append(("Slices", figs.slices(report, axes)))
    if report.importance:
        plots.append(("Parameter importance", figs.importance(report)))
    plots.append(("Cost", figs.cost(report)))
    if report.eta:
        plots.append(("ETA accuracy plot", figs.eta_errors(report)))
    for n, (title, fig) in enumerate(plots):
        sections.append((title, _plot(fig, first=n == 0)))
    if not report.importance:
        sections.append(("Parameter importance", f"<p>{_e(report.importance_note)}</p>"))
    sections.append(("ETA accuracy", _eta(report)))
    sections.append(("Incidents", _incidents(report)))
    nav = "".join(f'<a href="#s{n}">{_e(t)}</a>' for n, (t, _) in enumerate(sections))
    body = "".join(
        f'<section id="s{n}"><h2>{_e(t)}</h2>{content}</section>' for n, (t, content) in enumerate(sections)
    )
    title = f"katib-progress report: {report.experiment.name}"
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>{_e(title)}</title><style>{_STYLE}</style></head>"
        f"<body><h1>{_e(title)}</h1><nav>{nav}</nav>{body}</body></html>\n"
    )
