"""Every bad-input corpus entry (tests/corpus/*.json, format in tests/corpus/_generate.py) through:

(a) the parser (``parse_trainer_status``) and the strict CRD model (``TrainerStatus``);
(b) the whole pipeline (``SnapshotProcessor`` -> ``DBManagerSink`` -> gRPC -> SQLite store);
(c) the local TrainJob status endpoint (HTTP 200 or a 4xx ``Status`` naming the field) and the API
    stand-in (422 exactly when the CRD rejects it);
(d) the pruning engine, fed the ProgressPoints the pipeline emitted;
(e) the suggestion service, which gets the entry's trial as Succeeded with its raw objective text.

No crash, a reason recorded for everything dropped, the rest of the snapshot kept, and no poisoned
study: after the bad input a good trial still gets the same sensible decisions and the service
still suggests.
"""

from __future__ import annotations

import dataclasses
import json
import math
import urllib.error
import urllib.request
from collections import Counter
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import grpc
import pytest
from kubeflow.katib import katib_api_pb2 as pb
from kubeflow.katib import katib_api_pb2_grpc as pb_grpc
from kubernetes.client import ApiException
from pydantic import ValidationError

from katib_progress.collector.backoff import BackoffSettings
from katib_progress.collector.katib.dbmanager import DBManagerSettings, DBManagerSink
from katib_progress.collector.pipeline import JobRef, SnapshotProcessor
from katib_progress.collector.rows import RESERVED_PREFIX, SEQ_METRIC
from katib_progress.collector.store import StoreServer, start_store_server
from katib_progress.core.status import StatusError, TrainerStatus, parse_trainer_status
from katib_progress.core.timefmt import format_rfc3339nano, parse_rfc3339
from katib_progress.core.types import ProgressPoint, Verdict
from katib_progress.local.endpoint import StatusEndpoint
from katib_progress.suggestion.pruning import PruningConfig, PruningEngine
from katib_progress.suggestion.server import SuggestionServer, create_server
from tests.kubestandin import KubeStandin
from tests.kubestandin.objects import Objects
from tests.suggestion.katib_fake import Cond, FakeKatib, experiment

CORPUS = Path(__file__).resolve().parent / "corpus"
ENTRIES = sorted(CORPUS.glob("*.json"))
TOKEN = "corpus-token"


def _load(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text())


def _encodable(value: Any) -> bool:
    try:
        json.dumps(value, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


# --------------------------------------------------------------------------- module fixtures


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StoreServer]:
    server = start_store_server(tmp_path_factory.mktemp("corpus") / "observations.sqlite")
    yield server
    server.stop(0)


@pytest.fixture(scope="module")
def sink(store: StoreServer) -> Iterator[DBManagerSink]:
    s = DBManagerSink(
        store.address,
        settings=DBManagerSettings(backoff=BackoffSettings(initial_s=0.01, max_s=5.0), close_timeout_s=5),
    )
    yield s
    s.close()


@pytest.fixture(scope="module")
def points() -> dict[str, list[ProgressPoint]]:
    return {}


@pytest.fixture(scope="module")
def processor(sink: DBManagerSink, points: dict[str, list[ProgressPoint]]) -> SnapshotProcessor:
    return SnapshotProcessor(sink, on_point=lambda p: points.setdefault(p.trial, []).append(p))


@pytest.fixture(scope="module")
def endpoint() -> Iterator[StatusEndpoint]:
    ep = StatusEndpoint(lambda ns, name, status: None, max_body=1 << 20).start()
    ep.register("default", "corpus-job", TOKEN)
    yield ep
    ep.stop()


@pytest.fixture(scope="module")
def standin() -> Iterator[Objects]:
    with KubeStandin() as kube:
        objs = Objects(kube.api_client(retries=0))
        objs.trial_job("corpus-job", "corpus")
        yield objs


@pytest.fixture(scope="module")
def katib() -> Iterator[tuple[SuggestionServer, FakeKatib]]:
    server = create_server(["127.0.0.1:0"])
    server.start()
    fake = FakeKatib(server.bound_addresses[0], experiment(name="corpus", max_trials=10_000, parallel=1))
    yield server, fake
    fake.close()
    server.stop(0)


# --------------------------------------------------------------------------- (a) parser


@pytest.mark.parametrize("path", ENTRIES, ids=lambda p: p.stem)
def test_parser(path: Path) -> None:
    entry = _load(path)
    for raw, expect in zip(entry["sequence"], entry["expect"], strict=True):
        if expect["outcome"] == "invalid":
            with pytest.raises(StatusError):
                parse_trainer_status(raw)
        elif expect["outcome"] == "written":
            parsed = parse_trainer_status(raw)
            assert Counter(r.reason.value for r in parsed.rejections) == Counter(expect.get("reasons", {}))
            assert all(r.detail or r.reason for r in parsed.rejections)  # every drop says why
            if "kept" in expect:
                assert dict(parsed.texts) == expect["kept"]
            assert sorted(parsed.non_finite) == sorted(expect.get("non_finite", []))
            assert all(math.isfinite(v) for v in parsed.values.values())
    if entry["crd_valid"] is True:
        for raw in entry["sequence"]:
            TrainerStatus.model_validate(raw)
    else:
        with pytest.raises(ValidationError):
            TrainerStatus.model_validate(entry["sequence"][0])


# --------------------------------------------------------------------------- (b) + (d) pipeline, pruning


def _later(raw: Any) -> datetime:
    try:
        moment = parse_rfc3339(raw.get("lastUpdatedTime"), field="t")  # type: ignore[union-attr]
    except (ValueError, AttributeError, TypeError):
        return datetime(2026, 3, 1, 13, tzinfo=UTC)
    return moment + timedelta(seconds=1) if moment.year < 9999 else moment


def _read(store: StoreServer, trial: str) -> list[tuple[str, str, str]]:
    with grpc.insecure_channel(store.address) as channel:
        reply = pb_grpc.DBManagerStub(channel).GetObservationLog(
            pb.GetObservationLogRequest(trial_name=trial), timeout=5
        )
    return [(m.time_stamp, m.metric.name, m.metric.value) for m in reply.observation_log.metric_logs]


@pytest.mark.parametrize("path", ENTRIES, ids=lambda p: p.stem)
def test_pipeline_store_and_pruning(
    path: Path,
    processor: SnapshotProcessor,
    sink: DBManagerSink,
    store: StoreServer,
    points: dict[str, list[ProgressPoint]],
) -> None:
    entry = _load(path)
    trial = f"corpus-{path.stem}"
    job = JobRef("default", trial, f"uid-{path.stem}", "corpus", trial)
    written: list[dict[str, str]] = []
    for raw, expect in zip(entry["sequence"], entry["expect"], strict=True):
        outcome = processor.process(job, raw)
        assert outcome.kind.value == expect["outcome"], outcome
        if outcome.kind.value == "invalid":
            assert outcome.error  # the reason is recorded
        if outcome.kind.value == "written":
            assert Counter(r.reason.value for r in outcome.rejections) == Counter(expect.get("reasons", {}))
            written.append(expect.get("kept", {}))
    # The job is not poisoned: a good snapshot afterwards is written with the next seq.
    when = _later(entry["sequence"][-1])
    good = {"lastUpdatedTime": format_rfc3339nano(when), "metrics": [{"name": "loss", "value": "0.25"}]}
    if when.year < 9999:
        after = processor.process(job, good)
        assert after.kind.value == "written" and after.seq == len(written), after
        written.append({"loss": "0.25"})
    assert sink.flush(10)

    rows = _read(store, trial)
    groups: dict[datetime, dict[str, str]] = {}
    for stamp, name, value in rows:
        group = groups.setdefault(parse_rfc3339(stamp, field="t"), {})
        assert name not in group, f"duplicate row {name} at {stamp}"
        group[name] = value
    ordered = [groups[k] for k in sorted(groups)]
    assert [int(g[SEQ_METRIC]) for g in ordered] == list(range(len(written)))
    user = [{k: v for k, v in g.items() if not k.startswith(RESERVED_PREFIX)} for g in ordered]
    if all("kept" in e for e in entry["expect"] if e["outcome"] == "written"):
        assert user == written

    _check_pruning(points.get(trial, []))


def _curve(engine: PruningEngine, trial: str, scale: float, n: int = 20) -> list[Verdict]:
    t0 = datetime(2026, 3, 1, tzinfo=UTC)
    out = []
    for i in range(n):
        point = ProgressPoint(
            "corpus",
            trial,
            i,
            t0 + timedelta(seconds=10 * i),
            progress=(i + 1) * 100 / n,
            elapsed_s=10.0 * i,
            eta_s=10.0 * (n - i),
            metrics={"loss": scale * (2.3 * math.exp(-i / 5) + 0.1)},
        )
        out.append(engine.decide(point).verdict)
    return out


def _engine_with_peers() -> PruningEngine:
    engine = PruningEngine(PruningConfig.from_settings("loss", "minimize", {"policy": "default"}))
    for k in range(5):
        _curve(engine, f"peer{k}", 1.0 + 0.05 * k)
        engine.finish(f"peer{k}", "complete")
    return engine


def _check_pruning(bad_points: list[ProgressPoint]) -> None:
    """The bad trial's points (also re-sent at 50 % progress when they had none) and its completion
    must not change what a good and a hopeless trial are told."""
    baseline = _engine_with_peers()
    engine = _engine_with_peers()
    for point in bad_points:
        engine.decide(point)
        if point.progress is None:
            engine.decide(dataclasses.replace(point, seq=point.seq + 10_000, progress=50.0))
    engine.finish(bad_points[0].trial if bad_points else "none", "complete")
    good = _curve(engine, "good", 1.0)
    hopeless = _curve(engine, "hopeless", 10.0)
    assert good == _curve(baseline, "good", 1.0) == [Verdict.CONTINUE] * len(good)
    assert Verdict.PRUNE in hopeless and Verdict.PRUNE in _curve(baseline, "hopeless", 10.0)


# --------------------------------------------------------------------------- (c) status endpoint, stand-in


def _post(endpoint: StatusEndpoint, body: bytes) -> tuple[int, dict[str, Any]]:
    request = urllib.request.Request(
        endpoint.url_for("default", "corpus-job"),
        data=body,
        method="POST",
        headers={"Content-Type": "application/json", "Authorization": f"Bearer {TOKEN}"},
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as reply:
            return reply.status, json.loads(reply.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


@pytest.mark.parametrize("path", ENTRIES, ids=lambda p: p.stem)
def test_status_endpoint_and_standin(path: Path, endpoint: StatusEndpoint, standin: Objects) -> None:
    entry = _load(path)
    for raw in entry["sequence"][:1]:
        body = json.dumps({"trainerStatus": raw}).encode()  # ASCII escapes, lone surrogates included
        code, doc = _post(endpoint, body)
        if entry["crd_valid"] is True:
            assert code == 200, doc
            parse_rfc3339(doc["status"]["trainerStatus"]["lastUpdatedTime"], field="lastUpdatedTime")
        elif entry["crd_valid"] is None:
            assert code == 400 and doc["reason"] == "BadRequest", doc
        else:
            assert code == 422 and doc["reason"] == "Invalid", doc
            causes = doc["details"]["causes"]
            assert causes and all(c["field"].startswith("trainerStatus") for c in causes), doc
        if entry["crd_valid"] is None or not _encodable(raw):
            continue  # the stand-in keeps lone surrogates (Go's decoder would turn them into U+FFFD)
        try:
            standin.set_status("corpus-job", raw)
            accepted = True
        except ApiException as exc:
            assert exc.status == 422, exc
            accepted = False
        expected = entry.get("standin_valid", entry["crd_valid"])
        assert accepted == expected, f"stand-in accepted={accepted}, expected {expected}"


# --------------------------------------------------------------------------- (e) suggestion service


@pytest.mark.parametrize("path", ENTRIES, ids=lambda p: p.stem)
def test_suggestion_service_not_poisoned(path: Path, katib: tuple[SuggestionServer, FakeKatib]) -> None:
    entry = _load(path)
    _, fake = katib
    values = [
        m.get("value")
        for s in entry["sequence"]
        if isinstance(s, dict) and isinstance(s.get("metrics"), list)
        for m in s["metrics"]
        if isinstance(m, dict) and m.get("name") in ("loss", "bad")
    ]
    text = next(
        (v for v in reversed(values) if isinstance(v, str)), json.dumps(values[-1] if values else None)
    )
    if not _encodable(text):
        text = text.encode("utf-8", "replace").decode()  # protobuf strings must be UTF-8, as Katib's are
    (trial,) = fake.ask(1)
    trial.condition = Cond.SUCCEEDED
    trial.metrics[fake.metric] = text  # whatever Katib's observation holds, garbage included
    (nxt,) = fake.ask(1)  # the service still suggests
    assert nxt.name != trial.name and nxt.assignments
    fake.finish(nxt)
