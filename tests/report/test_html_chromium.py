"""The HTML report opens offline in headless Chromium without console errors; a screenshot is kept.

Needs the Debian ``chromium`` package (``apt-get install -y chromium``); skipped with the reason
printed where it is absent. The screenshot goes to $REPORT_TEST_ARTIFACTS (if set) or tmp_path.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from katib_progress.report import build_report, render
from katib_progress.report.sources.local import load_local
from tests.report._chromium import chromium_binary, load_page
from tests.report._fixture import NOW, make_workdir

BINARY = chromium_binary()
pytestmark = pytest.mark.skipif(
    BINARY is None, reason="chromium not installed (Debian: apt-get install -y chromium); HTML not loaded"
)


def _artifact_dir(tmp_path: Path) -> Path:
    target = Path(os.environ.get("REPORT_TEST_ARTIFACTS", tmp_path))
    target.mkdir(parents=True, exist_ok=True)
    return target


def test_report_loads_without_console_errors(tmp_path: Path) -> None:
    assert BINARY is not None
    workdir = make_workdir(tmp_path)
    report = build_report(load_local(workdir), now=NOW, gpu_hour_price=3.0, importance="ped-anova")
    page = tmp_path / "report.html"
    page.write_text(render(report, "html"), encoding="utf-8")
    shot = _artifact_dir(tmp_path) / "report-local-sweep.png"
    result = load_page(BINARY, page, tmp_path / "profile", shot)
    print(f"screenshot: {shot}")
    assert result.errors == []
    assert result.external_requests == []
    assert result.title == "katib-progress report: fx"
    # every plot div was drawn by plotly.js (curve, parallel, slices, importance, cost, ETA)
    assert result.plots == 6
    assert result.plots_drawn >= result.plots
    assert shot.stat().st_size > 10_000


def test_broken_page_is_caught(tmp_path: Path) -> None:
    """The checker itself must see errors: a page with a thrown exception and console.error fails."""
    assert BINARY is not None
    page = tmp_path / "bad.html"
    page.write_text(
        "<!DOCTYPE html><html><head><title>bad</title></head><body>"
        "<script>console.error('boom'); undefinedFunction();</script></body></html>",
        encoding="utf-8",
    )
    result = load_page(BINARY, page, tmp_path / "profile", tmp_path / "bad.png", settle_s=0.5)
    assert any("boom" in e for e in result.errors)
    assert any("undefinedFunction" in e for e in result.errors)
    shutil.rmtree(tmp_path / "profile", ignore_errors=True)
