"""Render a Report in one of the supported formats."""

from __future__ import annotations

from katib_progress.report import _text
from katib_progress.report.analysis import Report

FORMATS = ("html", "md", "csv", "json")


def render(report: Report, fmt: str) -> str:
    """The report as text in ``fmt`` (html, md, csv or json)."""
    if fmt == "html":
        from katib_progress.report._html import render_html

        return render_html(report)
    if fmt == "md":
        return _text.to_markdown(report)
    if fmt == "csv":
        return _text.to_csv(report)
    if fmt == "json":
        return _text.to_json(report)
    raise ValueError(f"format must be one of {', '.join(FORMATS)}, got {fmt!r}")
