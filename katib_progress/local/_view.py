"""What the user sees: a rich Live table on a terminal, plain lines otherwise."""

from __future__ import annotations

import contextlib
import io
import logging
import os
import sys
import time
from collections import deque
from collections.abc import Mapping
from pathlib import Path
from typing import TextIO, cast

from rich.console import Console, Group, RenderableType
from rich.live import Live as RichLive
from rich.progress_bar import ProgressBar
from rich.table import Table
from rich.text import Text

from katib_progress.local._pipeline import Live
from katib_progress.local.experiment import LocalExperiment
from katib_progress.local.summary import SweepSummary, TrialSummary

_log = logging.getLogger(__name__)

_MAX_ROWS = 24
_EVENTS = 4
_PLAIN_EVERY_S = 10.0
_STYLE = {
    "Running": "cyan",
    "Succeeded": "green",
    "EarlyStopped": "yellow",
    "Failed": "red",
    "MetricsUnavailable": "red",
    "Killed": "magenta",
    "Interrupted": "magenta",
}


def fmt_s(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    seconds = max(0.0, seconds)
    if seconds < 60:
        return f"{seconds:.0f}s"
    if seconds < 3600:
        return f"{int(seconds // 60)}m{int(seconds % 60):02d}s"
    return f"{int(seconds // 3600)}h{int(seconds % 3600 // 60):02d}m"


def format_params(params: Mapping[str, str]) -> str:
    out = []
    for key, value in params.items():
        try:
            shown = f"{float(value):.4g}"
        except ValueError:
            shown = value
        out.append(f"{key}={shown}")
    return " ".join(out)


def _cell_len(cell: object) -> int:
    if isinstance(cell, str):
        return len(cell)
    return len(getattr(cell, "plain", ""))


class SafeStream(io.TextIOBase):
    """A text stream that survives its reader going away (``sweep x.yaml | head``, a closed terminal):
    the first failed write is logged once and later output is dropped; the sweep goes on (sweep.log)."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream
        self.closed_by_reader = False

    def write(self, text: str) -> int:
        if not self.closed_by_reader:
            try:
                self._stream.write(text)
            except OSError as exc:
                self._lost(exc)
        return len(text)

    def flush(self) -> None:
        if not self.closed_by_reader:
            try:
                self._stream.flush()
            except OSError as exc:
                self._lost(exc)

    def isatty(self) -> bool:
        return not self.closed_by_reader and self._stream.isatty()

    def fileno(self) -> int:
        return self._stream.fileno()

    def _lost(self, exc: OSError) -> None:
        self.closed_by_reader = True
        _log.warning("output stream closed (%s): the sweep goes on; see sweep.log and summary.json", exc)
        with contextlib.suppress(OSError, ValueError):
            # Later writes by anyone (and the interpreter's final flush) go nowhere instead of failing.
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, self._stream.fileno())
            os.close(devnull)


class SweepView:
    def __init__(self, *, live: bool | None = None, console: Console | None = None) -> None:
        self.console = console or Console(file=cast(TextIO, SafeStream(sys.stdout)), soft_wrap=True)
        self.live_mode = self.console.is_terminal if live is None else live
        self._live: RichLive | None = None
        self._metric = ""
        self._last_plain: dict[str, tuple[float, float]] = {}
        self._recent: deque[str] = deque(maxlen=_EVENTS)

    def start(self, exp: LocalExperiment, workdir: Path) -> None:
        self._metric = exp.doc.spec.objective.objective_metric_name
        spec = exp.doc.spec
        self.console.print(
            f"[bold]katib-progress sweep[/bold] {exp.name}: {spec.objective.type} {self._metric}, "
            f"algorithm {spec.algorithm.algorithm_name}, "
            f"pruning {spec.early_stopping.algorithm_name if spec.early_stopping else 'off'}, "
            f"{spec.max_trial_count or 'unlimited'} trials, {spec.parallel_trial_count} in parallel",
            highlight=False,
        )
        self.console.print(f"work dir: {workdir}", highlight=False)
        if exp.unsupported:
            self.console.print("[yellow]not honoured locally:[/yellow]")
            for note in exp.unsupported:
                self.console.print(f"  - {note}", highlight=False, markup=False)
        if self.live_mode:
            self._live = RichLive(console=self.console, refresh_per_second=4, transient=False)
            self._live.start()

    def stop(self) -> None:
        if self._live is not None:
            self._live.stop()
            self._live = None

    def event(self, text: str) -> None:
        self._recent.append(f"{time.strftime('%H:%M:%S')} {text}")
        if self._live is None:
            self.console.print(f"{time.strftime('%H:%M:%S')} {text}", highlight=False, markup=False)

    def update(self, summary: SweepSummary, live: Mapping[str, Live | None]) -> None:
        if self._live is not None:
            self._live.update(self.render(summary, live))
            return
        now = time.monotonic()
        for name, info in live.items():
            if info is None or info.progress is None:
                continue
            last_t, last_p = self._last_plain.get(name, (0.0, -100.0))
            if now - last_t >= _PLAIN_EVERY_S and info.progress - last_p >= 5:
                self._last_plain[name] = (now, info.progress)
                value = info.metrics.get(self._metric)
                shown = f" {self._metric}={value:.4g}" if value is not None else ""
                self.event(f"  {name} {info.progress:.0f}% eta {fmt_s(info.eta_s)}{shown}")

    def header(self, summary: SweepSummary) -> Text:
        counts = summary.counts
        done = sum(v for k, v in counts.items() if k not in ("Running", "Created", "Interrupted"))
        total = summary.max_trial_count or "∞"
        text = Text()
        text.append(f"{summary.experiment} ", style="bold")
        text.append(
            f"trials {done}/{total} done · {counts.get('Running', 0)} running · "
            f"{counts.get('EarlyStopped', 0)} pruned · "
            f"{counts.get('Failed', 0) + counts.get('MetricsUnavailable', 0)} failed\n"
        )
        if summary.best is not None:
            text.append(f"best {summary.objective.metric}={summary.best.objective:.5g}", style="green")
            text.append(f" ({summary.best.trial}: {format_params(summary.best.params)})\n")
        else:
            text.append("best: none yet\n")
        text.append(
            f"wall {fmt_s(summary.wall_s)} · compute used {fmt_s(summary.compute_used_s)} · "
            f"saved by pruning ~{fmt_s(summary.compute_saved_s)}"
        )
        return text

    def render(self, summary: SweepSummary, live: Mapping[str, Live | None]) -> Group:
        trials = summary.trials
        running = [t for t in trials if t.status == "Running"]
        others = [t for t in trials if t.status != "Running"]
        shown = others[-max(0, _MAX_ROWS - len(running)) :] if len(trials) > _MAX_ROWS else others
        rows = [self._row(trial, live.get(trial.name)) for trial in [*shown, *running]]
        headers = ("trial", "params", "progress", "%", "eta", self._metric or "objective", "status", "reason")
        widths = [
            self._bar_width if col == "progress" else max([len(col), *(_cell_len(r[i]) for r in rows)])
            for i, col in enumerate(headers)
        ]
        # Fit the terminal: the reason column takes what is left, then params shrink (ellipsis).
        sep = 3 * (len(headers) - 1)
        fixed = sum(w for i, w in enumerate(widths) if headers[i] not in ("params", "reason")) + sep
        widths[1] = max(len("params"), min(widths[1], self.console.width - fixed - 24))
        widths[-1] = max(len("reason"), self.console.width - fixed - widths[1])
        table = Table(expand=False, show_edge=False, pad_edge=False)
        for col, width in zip(headers, widths, strict=True):
            table.add_column(col, no_wrap=True, overflow="ellipsis", width=width)
        for row in rows:
            table.add_row(*row)
        events = Text("\n".join(self._recent), style="dim", no_wrap=True, overflow="ellipsis")
        return Group(self.header(summary), table, events)

    @property
    def _bar_width(self) -> int:
        return 16 if self.console.width >= 130 else 8

    def _row(self, trial: TrialSummary, info: Live | None) -> list[RenderableType]:
        progress = info.progress if info is not None and info.progress is not None else trial.progress
        eta = info.eta_s if info is not None and trial.status == "Running" else None
        if trial.status == "EarlyStopped":
            eta = trial.eta_at_prune_s
        value: float | None = trial.objective
        if trial.status == "Running" and info is not None:
            value = info.metrics.get(self._metric)
        elif value is None:
            value = trial.latest_metrics.get(self._metric)
        bar = ProgressBar(total=100, completed=progress or 0, width=self._bar_width)
        return [
            trial.name.removeprefix(f"{trial.name.rsplit('-', 1)[0]}-") if "-" in trial.name else trial.name,
            format_params(trial.params),
            bar,
            f"{progress:.0f}%" if progress is not None else "-",
            ("saved " if trial.status == "EarlyStopped" and eta else "") + fmt_s(eta) if eta else "-",
            f"{value:.4g}" if value is not None else "-",
            Text(trial.status, style=_STYLE.get(trial.status, "")),
            trial.message,
        ]

    def finish(self, summary: SweepSummary, workdir: Path) -> None:
        if not self.live_mode:
            self.console.print(self.header(summary))
        style = "green" if summary.status == "Succeeded" else "red"
        self.console.print(
            Text(f"Experiment {summary.status} ({summary.reason}): {summary.message}", style=style)
        )
        if summary.best is not None:
            self.console.print(
                f"Best trial {summary.best.trial}: {summary.objective.metric}={summary.best.objective:.6g}  "
                f"{format_params(summary.best.params)}",
                highlight=False,
            )
        self.console.print(f"Summary: {workdir / 'summary.json'}", highlight=False)
