"""Cell formatting shared by every output format."""

from __future__ import annotations

from collections.abc import Mapping

from katib_progress.report.analysis import LeaderboardRow, Report


def num(value: float | None, digits: int = 4) -> str:
    return "-" if value is None else f"{value:.{digits}g}"


def duration(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    total = round(seconds)
    hours, rest = divmod(total, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}"


def param_value(text: str) -> str:
    """A parameter value for people: floats to 4 significant digits (csv/json keep the exact text)."""
    if "." not in text and "e" not in text.lower():
        return text
    try:
        value = float(text)
    except ValueError:
        return text
    return f"{value:.4g}"


def params(values: Mapping[str, str]) -> str:
    return ", ".join(f"{k}={param_value(v)}" for k, v in values.items())


def status(row: LeaderboardRow) -> str:
    text = row.status.value
    if row.progress_at_prune is not None:
        text += f" at {row.progress_at_prune:g}%"
    if row.reason:
        text += f" ({row.reason})"
    return text


def objective_header(report: Report) -> str:
    obj = report.experiment.objective
    return f"{obj.metric} ({obj.direction}, {obj.strategy(obj.metric)})"


def money(value: float | None) -> str:
    return "-" if value is None else f"{value:,.2f}"


def experiment_state(report: Report) -> str:
    """``Succeeded (MaxTrialsReached): message``; "-" when the source does not say."""
    exp = report.experiment
    if not exp.status:
        return "-"
    text = exp.status + (f" ({exp.reason})" if exp.reason else "")
    return text + (f": {exp.message}" if exp.message else "")


def hours_unit(report: Report) -> str:
    return f"{report.experiment.accelerator}-hours"
