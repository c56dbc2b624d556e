"""Coverage-guided fuzzing of the trainerStatus parser and the pipeline with atheris (libFuzzer).

Run by hand (not a pytest test):

    .venv/bin/pip install atheris            # 3.0.0 was used
    .venv/bin/python tests/fuzz/atheris_status.py -atheris_runs=200000
    .venv/bin/python tests/fuzz/atheris_status.py -max_total_time=300 corpus_dir/   # keep a corpus

Each input is decoded as JSON when it parses (so libFuzzer's mutations of the seed corpus, the
tests/corpus/*.json entries, stay structured) and otherwise turned into a trainerStatus by
``atheris.FuzzedDataProvider``. Crashes are any exception other than ``StatusError`` from the
parser, and any exception from ``SnapshotProcessor.process`` (it must absorb everything).
"""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path
from typing import Any

import atheris

with atheris.instrument_imports():
    from katib_progress.collector.pipeline import JobRef, SnapshotProcessor
    from katib_progress.collector.rows import snapshot_rows
    from katib_progress.collector.testing import MemorySink
    from katib_progress.core.status import StatusError, parse_trainer_status

SINK = MemorySink()
PROCESSOR = SnapshotProcessor(SINK)
JOB = JobRef("ns", "job", "uid", "exp", "trial")


def _from_provider(data: bytes) -> Any:
    fdp = atheris.FuzzedDataProvider(data)
    status: dict[str, Any] = {}
    if fdp.ConsumeBool():
        status["lastUpdatedTime"] = fdp.ConsumeUnicodeNoSurrogates(32)
    if fdp.ConsumeBool():
        status["progressPercentage"] = fdp.ConsumeIntInRange(-(2**40), 2**40)
    if fdp.ConsumeBool():
        status["estimatedRemainingSeconds"] = fdp.ConsumeInt(8)
    metrics = []
    for _ in range(fdp.ConsumeIntInRange(0, 300)):
        if fdp.remaining_bytes() == 0:
            break
        metrics.append(
            {"name": fdp.ConsumeUnicode(fdp.ConsumeIntInRange(0, 70)), "value": fdp.ConsumeUnicode(70)}
        )
    status["metrics"] = metrics
    return status


def test_one_input(data: bytes) -> None:
    try:
        raw: Any = json.loads(data)
    except (ValueError, UnicodeDecodeError, RecursionError):
        raw = _from_provider(data)
    statuses = [raw]
    if isinstance(raw, dict) and isinstance(raw.get("sequence"), list):  # a tests/corpus entry
        statuses = raw["sequence"]
    for status in statuses:
        try:
            parsed = parse_trainer_status(status)
        except StatusError:
            parsed = None
        if parsed is not None:
            for row in snapshot_rows(parsed, stamp=parsed.last_updated, seq=0):
                row.name.encode("utf-8")  # protobuf needs valid UTF-8
        PROCESSOR.process(JOB, status)


def main() -> None:
    logging.disable(logging.CRITICAL)  # the pipeline logs every rejected snapshot; too loud here
    argv = list(sys.argv)
    corpus = Path(__file__).resolve().parents[1] / "corpus"
    if not any(a.startswith("-seed_inputs") for a in argv[1:]):
        # Seed with the bad-input corpus; as seed_inputs (not a corpus directory) nothing is written there.
        argv.append("-seed_inputs=" + ",".join(str(p) for p in sorted(corpus.glob("*.json"))))
    if not any(a.startswith("-artifact_prefix") for a in argv[1:]):
        argv.append("-artifact_prefix=/tmp/atheris-status-")  # crash files go here, not into the tree
    atheris.Setup(argv, test_one_input)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
