"""Plotly figures of a Report: curves, parameter views, cost and ETA accuracy."""

from __future__ import annotations

import math
from collections.abc import Sequence

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from katib_progress.report._params import ParamAxis, param_axes
from katib_progress.report.analysis import Report
from katib_progress.report.model import TrialRecord, TrialStatus

_COLORS = {
    TrialStatus.SUCCEEDED: "#4c78a8",
    TrialStatus.PRUNED: "#f58518",
    TrialStatus.RUNNING: "#54a24b",
    TrialStatus.PENDING: "#9d9d9d",
    TrialStatus.FAILED: "#e45756",
    TrialStatus.METRICS_UNAVAILABLE: "#b279a2",
    TrialStatus.KILLED: "#8c564b",
    TrialStatus.INTERRUPTED: "#bcbd22",
}
_BEST = "#d62728"


def _layout(fig: go.Figure, title: str, x: str, y: str) -> go.Figure:
    fig.update_layout(
        title=title, xaxis_title=x, yaxis_title=y, template="plotly_white", height=460, hovermode="closest"
    )
    return fig


def _line(trial: TrialRecord, metric: str) -> tuple[list[float], list[float]]:
    """(progress, value) pairs; a point without progress takes the last progress reported before it."""
    xs, ys = [], []
    last: float | None = None
    for point in trial.curve:
        if point.progress is not None:
            last = point.progress
        value = point.metrics.get(metric)
        if last is not None and value is not None and math.isfinite(value):
            xs.append(last)
            ys.append(value)
    return xs, ys


def wants_log_axis(values: Sequence[float | None]) -> bool:
    """A log y-axis when every value is positive and they span two decades or more.

    Losses of diverging trials dwarf the good ones; on a linear axis the curves that matter flatten.
    """
    finite = [v for v in values if v is not None and math.isfinite(v)]
    return bool(finite) and min(finite) > 0 and max(finite) / min(finite) >= 100


def curves(report: Report, metric: str) -> go.Figure:
    """``metric`` vs progress %, every trial overlaid: one trace per status (gaps between trials)."""
    fig = go.Figure()
    best = report.best.trial if report.best else None
    stops_x: list[float] = []
    stops_y: list[float] = []
    stops_text: list[str] = []
    for status in TrialStatus:
        xs: list[float | None] = []
        ys: list[float | None] = []
        text: list[str | None] = []
        for trial in report.experiment.trials:
            if trial.status is not status or trial.name == best:
                continue
            tx, ty = _line(trial, metric)
            if not tx:
                continue
            xs += [*tx, None]
            ys += [*ty, None]
            text += [trial.name] * len(tx) + [None]
            if status is TrialStatus.PRUNED:
                stops_x.append(tx[-1])
                stops_y.append(ty[-1])
                stops_text.append(f"{trial.name} pruned: {trial.reason or trial.message or '-'}")
        if xs:
            fig.add_trace(
                go.Scatter(
                    x=xs,
                    y=ys,
                    mode="lines",
                    name=status.value,
                    line={"color": _COLORS[status], "width": 1},
                    opacity=0.6,
                    text=text,
                    hovertemplate="%{text}<br>progress %{x}%<br>" + metric + " %{y}<extra></extra>",
                )
            )
    if stops_x:
        fig.add_trace(
            go.Scatter(
                x=stops_x,
                y=stops_y,
                mode="markers",
                name="pruned here",
                marker={"symbol": "x", "size": 9, "color": _COLORS[TrialStatus.PRUNED]},
                text=stops_text,
                hovertemplate="%{text}<br>progress %{x}%<br>" + metric + " %{y}<extra></extra>",
            )
        )
    if best is not None:
        _best_trace(fig, report, best, metric)
    _layout(fig, f"{metric} vs progress", "progress %", metric)
    values = [y for trace in fig.data for y in (trace.y or ())]
    if wants_log_axis(values):
        fig.update_yaxes(type="log", title=f"{metric} (log scale)")
    return fig


def _best_trace(fig: go.Figure, report: Report, best: str, metric: str) -> None:
    trial = next(t for t in report.experiment.trials if t.name == best)
    bx, by = _line(trial, metric)
    if bx:
        fig.add_trace(
            go.Scatter(
                x=bx,
                y=by,
                mode="lines+markers",
                name=f"best: {best}",
                line={"color": _BEST, "width": 3},
                hovertemplate=best + "<br>progress %{x}%<br>" + metric + " %{y}<extra></extra>",
            )
        )


def _objectives(report: Report) -> list[float | None]:
    by_name = {r.trial: r.objective for r in report.leaderboard}
    return [by_name[t.name] for t in report.experiment.trials]


def parallel(report: Report, axes: Sequence[ParamAxis]) -> go.Figure:
    """Parallel coordinates over the parameters, coloured by objective (trials with an objective)."""
    trials = report.experiment.trials
    objectives = _objectives(report)
    keep = [i for i, v in enumerate(objectives) if v is not None and math.isfinite(v)]
    dims = []
    for axis in axes:
        values = [axis.coordinate(trials[i].params.get(axis.name)) for i in keep]
        dim: dict[str, object] = {
            "label": axis.name,
            "values": [math.nan if v is None else v for v in values],
        }
        if axis.log_scale:  # parcoords has no log axis: log10 coordinates, ticks labelled in values
            dim.update(_log_dimension(axis.name, [v for v in values if v is not None]))
            dim["values"] = [math.nan if v is None else math.log10(v) for v in values]
        if not axis.numeric:
            dim["tickvals"] = list(range(len(axis.choices)))
            dim["ticktext"] = list(axis.choices)
        dims.append(dim)
    metric = report.experiment.objective.metric
    obj_values = [objectives[i] for i in keep]
    dims.append({"label": metric, "values": obj_values})
    reverse = report.experiment.objective.direction == "minimize"
    line = {"color": obj_values, "colorscale": "Viridis", "reversescale": reverse, "showscale": True}
    fig = go.Figure(go.Parcoords(dimensions=dims, line=line))
    fig.update_layout(title="Parameters and objective", template="plotly_white", height=460)
    return fig


def _log_dimension(name: str, values: Sequence[float]) -> dict[str, object]:
    """Label and ticks of a log10 parallel-coordinates axis: one tick per decade (1, 2, 5 when narrow)."""
    out: dict[str, object] = {"label": f"{name} (log)"}
    if not values:
        return out
    low, high = math.floor(math.log10(min(values))), math.ceil(math.log10(max(values)))
    steps = (1.0,) if high - low >= 3 else (1.0, 2.0, 5.0)
    ticks = [m * 10.0**e for e in range(low, high + 1) for m in steps]
    ticks = [t for t in ticks if min(values) / 1.0001 <= t <= max(values) * 1.0001] or [
        min(values),
        max(values),
    ]
    out["tickvals"] = [math.log10(t) for t in ticks]
    out["ticktext"] = [f"{t:g}" for t in ticks]
    return out


def importance(report: Report) -> go.Figure:
    items = sorted(report.importance.items(), key=lambda kv: kv[1])
    fig = go.Figure(go.Bar(x=[v for _, v in items], y=[k for k, _ in items], orientation="h"))
    return _layout(fig, f"Parameter importance ({report.importance_note})", "importance", "parameter")


def slices(report: Report, axes: Sequence[ParamAxis]) -> go.Figure:
    """Objective against each parameter (one panel per parameter), coloured by status."""
    cols = min(3, max(1, len(axes)))
    rows = max(1, math.ceil(len(axes) / cols))
    fig = make_subplots(rows=rows, cols=cols, subplot_titles=[a.name for a in axes])
    trials = report.experiment.trials
    objectives = _objectives(report)
    for n, axis in enumerate(axes):
        row, col = divmod(n, cols)
        for status in TrialStatus:
            idx = [i for i, t in enumerate(trials) if t.status is status and objectives[i] is not None]
            if not idx:
                continue
            xs = [
                trials[i].params.get(axis.name)
                if not axis.numeric
                else axis.coordinate(trials[i].params.get(axis.name))
                for i in idx
            ]
            fig.add_trace(
                go.Scatter(
                    x=xs,
                    y=[objectives[i] for i in idx],
                    mode="markers",
                    name=status.value,
                    legendgroup=status.value,
                    showlegend=n == 0,
                    marker={"color": _COLORS[status], "size": 7},
                    text=[trials[i].name for i in idx],
                    hovertemplate="%{text}<br>" + axis.name + " %{x}<br>objective %{y}<extra></extra>",
                ),
                row=row + 1,
                col=col + 1,
            )
    for n, axis in enumerate(axes):
        if axis.log_scale:
            row, col = divmod(n, cols)
            fig.update_xaxes(type="log", title_text=f"{axis.name} (log scale)", row=row + 1, col=col + 1)
    fig.update_layout(
        title=f"Slices: {report.experiment.objective.metric} per parameter",
        template="plotly_white",
        height=360 * rows,
    )
    return fig


def cost(report: Report) -> go.Figure:
    rows = report.leaderboard
    names = [r.trial for r in rows]
    fig = go.Figure()
    unit = f"{report.experiment.accelerator}-hours"
    fig.add_trace(go.Bar(x=names, y=[r.gpu_hours for r in rows], name=f"{unit} used"))
    fig.add_trace(
        go.Bar(
            x=names,
            y=[report.cost.saved_by_trial.get(r.trial, 0.0) for r in rows],
            name=f"{unit} saved by pruning",
            marker={"color": _COLORS[TrialStatus.PRUNED]},
        )
    )
    fig.update_layout(barmode="stack")
    return _layout(fig, f"{unit} per trial (leaderboard order)", "trial", unit)


def eta_errors(report: Report) -> go.Figure:
    xs: list[float | None] = []
    ys: list[float | None] = []
    text: list[str | None] = []
    for acc in report.eta:
        for sample in acc.samples:
            if sample.progress is None:
                continue
            xs.append(sample.progress)
            ys.append(sample.error_s)
            text.append(acc.trial)
        xs.append(None)
        ys.append(None)
        text.append(None)
    fig = go.Figure(
        go.Scatter(
            x=xs,
            y=ys,
            mode="lines+markers",
            text=text,
            hovertemplate="%{text}<br>progress %{x}%<br>error %{y:.0f} s<extra></extra>",
            name="reported ETA - real remaining",
        )
    )
    fig.add_hline(y=0, line={"color": "#888", "dash": "dot"})
    return _layout(
        fig, "ETA error along the way (finished trials)", "progress %", "ETA error, s (+ = too late)"
    )


def all_axes(report: Report) -> tuple[ParamAxis, ...]:
    return param_axes(report.experiment)
