"""Trial comparison reports (HTML, Markdown, CSV, JSON) and the live experiment view.

Public surface: the Katib-free data model (``ExperimentRecord``, ``TrialRecord``, ...),
``build_report`` and ``render`` (any format), and the source adapters in
``katib_progress.report.sources``.
"""

from __future__ import annotations

from katib_progress.report.analysis import Report, build_report
from katib_progress.report.model import (
    CurvePoint,
    ExperimentRecord,
    Objective,
    ParameterSpec,
    TrialRecord,
    TrialStatus,
)
from katib_progress.report.render import FORMATS, render

__all__ = [
    "FORMATS",
    "CurvePoint",
    "ExperimentRecord",
    "Objective",
    "ParameterSpec",
    "Report",
    "TrialRecord",
    "TrialStatus",
    "build_report",
    "render",
]
