"""Live and one-shot tables of an experiment's trials (shared by ``watch`` and ``status``).

``trial_rows`` and ``live_table`` take an ExperimentRecord, so any source (a cluster snapshot or a
local sweep's workdir) can be shown the same way.
"""

from __future__ import annotations

import logging
import math
import threading
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from rich.console import Console, Group
from rich.live import Live
from rich.progress_bar import ProgressBar
from rich.table import Table
from rich.text import Text

from katib_progress.core.errors import TemporaryError
from katib_progress.report import _extract as ex
from katib_progress.report import _format as fmt
from katib_progress.report.analysis import leaderboard
from katib_progress.report.model import ExperimentRecord, TrialRecord, TrialStatus

_log = logging.getLogger(__name__)
MIN_INTERVAL_S = 1.0
_STYLE = {
    TrialStatus.SUCCEEDED: "green",
    TrialStatus.PRUNED: "yellow",
    TrialStatus.RUNNING: "cyan",
    TrialStatus.PENDING: "dim",
    TrialStatus.FAILED: "red",
    TrialStatus.METRICS_UNAVAILABLE: "magenta",
    TrialStatus.KILLED: "magenta",
    TrialStatus.INTERRUPTED: "magenta",
}


@dataclass(frozen=True, slots=True)
class TrialRow:
    name: str
    status: TrialStatus
    progress: float | None
    eta_s: float | None
    objective: float | None
    reason: str
    params: dict[str, str]

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "status": self.status.value,
            "progress": self.progress,
            "eta_s": self.eta_s,
            "objective": self.objective if self.objective is None or math.isfinite(self.objective) else None,
            "reason": self.reason,
            "params": self.params,
        }


def latest_objective(trial: TrialRecord, metric: str) -> float | None:
    """The most recently reported objective value (Katib's observation when nothing was reported)."""
    for point in reversed(trial.curve):
        if metric in point.metrics:
            return point.metrics[metric]
    return trial.observation.get(metric)


def trial_rows(record: ExperimentRecord) -> list[TrialRow]:
    metric = record.objective.metric
    out = []
    for trial in record.trials:
        live = not trial.status.terminal
        eta = None
        if live:
            last = trial.curve[-1] if trial.curve else None
            eta = last.eta_s if last is not None else None
        out.append(
            TrialRow(
                name=trial.name,
                status=trial.status,
                progress=ex.progress_now(trial),
                eta_s=eta,
                objective=latest_objective(trial, metric),
                reason=trial.reason or trial.message if trial.status.terminal else "",
                params=dict(trial.params),
            )
        )
    return out


def totals(record: ExperimentRecord, now: datetime) -> dict[str, Any]:
    board = leaderboard(record, now)
    counts = {s.value: 0 for s in TrialStatus}
    for row in board:
        counts[row.status.value] += 1
    best = next((r for r in board if r.best), None)
    running = [t for t in record.trials if t.status is TrialStatus.RUNNING]
    return {
        "experiment": record.name,
        "namespace": record.namespace,
        "counts": counts,
        "best": None if best is None else {"trial": best.trial, "objective": best.objective},
        "running_accelerators": sum(t.accelerators for t in running),
        "gpu_hours": sum(r.gpu_hours for r in board),
    }


def live_table(record: ExperimentRecord, now: datetime | None = None) -> Group:
    """A rich renderable: one row per trial (progress bar, ETA, latest objective) and totals."""
    when = now or datetime.now(UTC)
    obj = record.objective
    table = Table(title=f"{record.namespace + '/' if record.namespace else ''}{record.name}", expand=False)
    for column in ("TRIAL", "STATUS", "PROGRESS", "", "ETA", f"{obj.metric} ({obj.direction})", "REASON"):
        table.add_column(column, no_wrap=column != "REASON")
    for row in trial_rows(record):
        bar = ProgressBar(total=100.0, completed=row.progress or 0.0, width=20)
        table.add_row(
            row.name,
            Text(row.status.value, style=_STYLE[row.status]),
            bar,
            "-" if row.progress is None else f"{row.progress:.0f}%",
            fmt.duration(row.eta_s),
            fmt.num(row.objective, 6),
            row.reason,
        )
    t = totals(record, when)
    counts = ", ".join(f"{n} {k}" for k, n in t["counts"].items() if n) or "no trials"
    best = "-" if t["best"] is None else f"{t['best']['trial']} = {fmt.num(t['best']['objective'], 6)}"
    footer = Text(
        f"{counts} | best {best} | accelerators in use {t['running_accelerators']:g} | "
        f"{record.accelerator}-hours so far {t['gpu_hours']:.2f} | updated {when.strftime('%H:%M:%S')}Z"
    )
    return Group(table, footer)


def status_lines(record: ExperimentRecord, *, wide: bool = False) -> str:
    """``kubectl get``-style plain columns: NAME STATUS PROGRESS ETA OBJECTIVE REASON; ``wide``
    (``-o wide``) adds PARAMETERS (``name=value,...``) before REASON."""
    params = ["PARAMETERS"] if wide else []
    header = ["NAME", "STATUS", "PROGRESS", "ETA", "OBJECTIVE", *params, "REASON"]
    rows = [
        [
            r.name,
            r.status.value.replace(" ", "-"),
            "-" if r.progress is None else f"{r.progress:.0f}%",
            fmt.duration(r.eta_s),
            fmt.num(r.objective, 6),
            *([",".join(f"{k}={v}" for k, v in r.params.items()) or "-"] if wide else []),
            r.reason or "-",
        ]
        for r in trial_rows(record)
    ]
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(header)]
    lines = [
        "   ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in [header, *rows]
    ]
    return "\n".join(lines) + "\n"


def watch(
    load: Callable[[], ExperimentRecord],
    *,
    console: Console,
    interval_s: float = 5.0,
    done: Callable[[ExperimentRecord], bool] | None = None,
    stop: threading.Event | None = None,
    _iterations: int | None = None,
) -> ExperimentRecord | None:
    """Refresh a Live table from ``load()`` every ``interval_s`` until ``done(record)`` or ``stop``.

    A failing refresh (e.g. the API server briefly unavailable) is logged and retried at the next
    tick; the last good table stays on screen. Returns the last record loaded.
    """
    if not (interval_s >= MIN_INTERVAL_S):
        raise ValueError(f"interval must be >= {MIN_INTERVAL_S} s, got {interval_s}")
    halt = stop or threading.Event()
    record: ExperimentRecord | None = None
    n = 0
    with Live(Text("loading..."), console=console, auto_refresh=False, transient=False) as live:
        while not halt.is_set() and (_iterations is None or n < _iterations):
            n += 1
            try:
                record = load()
            except TemporaryError as exc:
                _log.warning("refresh failed, retrying in %.0f s: %s", interval_s, exc)
            else:
                live.update(live_table(record), refresh=True)
                if done is not None and done(record):
                    break
            if _iterations is not None and n >= _iterations:
                break
            halt.wait(interval_s)
    return record
