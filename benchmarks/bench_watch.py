"""The collector under load through the real watch path: N running TrainJobs, each updating every 5 s.

Run: .venv/bin/python benchmarks/bench_watch.py [--sink embedded|katib] [--jobs 1000,10000,20000]
     [--seconds 60] [--quick] [--json]

Three real processes per N, each started through its command line:

- ``python -m benchmarks.watchload.apiserver``: a lean Kubernetes API stand-in (LIST/WATCH/GET of TrainJobs,
  GET of Trials and Experiments; watch cache history, slow-watcher termination and 410 as the API server
  does; see benchmarks/watchload/feed.py). It holds N Trial-owned TrainJobs with managedFields, labels and
  ownerReferences (one sample is validated against the real TrainJob CRD at start) and publishes one
  trainerStatus update per job every 5 s (phases spread evenly: N / 5 snapshots per second offered).
- the sink: ``katib-progress db serve``, the embedded DB manager on an SQLite file (``--sink embedded``,
  the default), or Katib v0.19.0's own ``katib-db-manager`` on MariaDB (``--sink katib``; both started as
  the end-to-end tier starts them, tests/e2e/katib.py; built by scripts/e2e_build.sh, MariaDB installed by
  scripts/e2e_deps.sh; see benchmarks/watchload/katibsink.py).
- ``katib-progress collector run --kubeconfig K --db-manager A``: the collector, pinned to one core.

Sequence per N: start the store, the stand-in and the collector; activate the stand-in (every TrainJob
appears and starts updating); wait until every job's first row is stored (initial sync: each job's
first delivery reads the trial's rows back); then wait until the pipeline has caught up with what
piled up meanwhile - three consecutive one-second slices of updates all stored within 1 s of being
published (``--caught-up-ms``, ``--caught-up-slices``; ``--catch-up-timeout``, default 120 s, after
which the window opens anyway with a note). The table's "catch-up s" column is the time from
activation to the start of the first of those slices ("never" = timed out), so a slow drain is
shown, not hidden. The measurement window (``--seconds``) opens ``--settle`` seconds (default 10, two
update rounds) later: at the check, the slices' last second was still draining.

Measured in the window: end-to-end latency (update published by the stand-in -> the snapshot's
``trainjob/seq`` row visible in the SQLite file or the MariaDB table, polled every 5 ms), sustained
snapshots stored per second, snapshots lost (published in the window, never stored), collector CPU in cores
(utime + stime from /proc), collector RSS growth per tracked job, and the CPU of the stand-in, the store,
this driver and everything else on the machine (with ``--sink katib``: ``katib-db-manager`` as the store and
MariaDB's server as the database). Outside it: time from process start to the first WATCH request (empty
cluster, and after a restart with N jobs present), duplicate rows, and the rows counted in the database at
the end (all, ``trainjob/seq`` rows, distinct snapshots among them). Katib's alternative reserves 50m CPU
and 10Mi per trial pod (its metrics-collector sidecar's default requests); the ratios compare N of those
with what the collector used.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.watchload.measure import (  # noqa: E402
    SEQ_METRIC,
    RowPoller,
    Sample,
    duplicate_rows,
    load_average,
    percentile,
    pin,
    rss_kib,
)
from benchmarks.watchload.objects import fleet  # noqa: E402

PERIOD_S = 5.0
SIDECAR_CPU_CORES, SIDECAR_MEM_MIB = 0.050, 10.0
CLI = (sys.executable, "-m", "katib_progress.cli")  # the `katib-progress` command line
ENV = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONUNBUFFERED": "1"}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_for(what: str, check: Any, timeout: float, interval: float = 0.05) -> float:
    """Seconds until ``check()`` is true; raises TimeoutError naming ``what``."""
    start = time.monotonic()
    while not check():
        if time.monotonic() - start > timeout:
            raise TimeoutError(f"{what} not within {timeout:.0f}s")
        time.sleep(interval)
    return time.monotonic() - start


class Api:
    """The stand-in process and its control endpoints."""

    def __init__(self, jobs: int, log: Path) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "benchmarks.watchload.apiserver", "--jobs", str(jobs)],
            cwd=ROOT,
            env=ENV,
            stdout=subprocess.PIPE,
            stderr=log.open("wb"),
        )
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline().decode()
        if "listening on" not in line:
            raise RuntimeError(f"API stand-in did not start: {line!r}; see {log}")
        self.url = "http://" + line.rsplit(" ", 1)[1].strip()

    def call(self, path: str, method: str = "GET") -> Any:
        request = urllib.request.Request(self.url + path, method=method)
        with urllib.request.urlopen(request, timeout=120) as response:
            return json.loads(response.read())

    def kubeconfig(self, path: Path) -> Path:
        path.write_text(
            json.dumps(
                {
                    "apiVersion": "v1",
                    "kind": "Config",
                    "clusters": [{"name": "bench", "cluster": {"server": self.url}}],
                    "users": [{"name": "bench", "user": {"token": "bench"}}],
                    "contexts": [{"name": "bench", "context": {"cluster": "bench", "user": "bench"}}],
                    "current-context": "bench",
                }
            )
        )
        return path


def start_store(tmp: Path) -> tuple[subprocess.Popen[bytes], str, Path]:
    import grpc

    port = free_port()
    db = tmp / "observations.sqlite"
    proc = subprocess.Popen(
        [*CLI, "db", "serve", "--address", f"127.0.0.1:{port}", "--db", str(db)],
        cwd=ROOT,
        env=ENV,
        stdout=subprocess.DEVNULL,
        stderr=(tmp / "store.log").open("wb"),
    )
    address = f"127.0.0.1:{port}"

    def ready() -> bool:
        with grpc.insecure_channel(address) as channel:
            try:
                grpc.channel_ready_future(channel).result(timeout=0.5)
            except grpc.FutureTimeoutError:
                return False
        return True

    wait_for("db serve", ready, 60)
    return proc, address, db


class EmbeddedSink:
    """``katib-progress db serve`` on an SQLite file (``--sink embedded``)."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.proc: subprocess.Popen[bytes] | None = None
        self.address = ""
        self.db = tmp / "observations.sqlite"

    def start(self) -> EmbeddedSink:
        self.proc, self.address, self.db = start_store(self.tmp)
        return self

    @property
    def pids(self) -> dict[str, int]:
        assert self.proc is not None
        return {"store": self.proc.pid}

    def pin(self, cpu: int) -> bool:
        from benchmarks.watchload.katibsink import pin_all

        return pin_all(self.pids["store"], cpu)

    def poller(self, index_of: dict[str, int]) -> RowPoller:
        return RowPoller(self.db, index_of)

    def duplicates(self) -> int:
        return duplicate_rows(self.db)

    def counts(self) -> tuple[int, int, int]:
        import sqlite3

        conn = sqlite3.connect(f"file:{self.db}?mode=ro", uri=True, timeout=30)
        try:
            row = conn.execute(
                "SELECT COUNT(*), COALESCE(SUM(metric_name = ?), 0), (SELECT COUNT(*) FROM (SELECT DISTINCT"
                " trial_name, time_us FROM observation_logs WHERE metric_name = ?)) FROM observation_logs",
                (SEQ_METRIC, SEQ_METRIC),
            ).fetchone()
        finally:
            conn.close()
        return int(row[0]), int(row[1]), int(row[2])

    def stop(self) -> None:
        stop(self.proc)


class KatibDBSink:
    """Katib's ``katib-db-manager`` on MariaDB (``--sink katib``; benchmarks/watchload/katibsink.py)."""

    def __init__(self, tmp: Path) -> None:
        from benchmarks.watchload.katibsink import KatibSink

        self.sink = KatibSink(tmp)
        self.address = self.sink.address

    def start(self) -> KatibDBSink:
        self.sink.start()
        return self

    @property
    def pids(self) -> dict[str, int]:
        return self.sink.pids

    def pin(self, cpu: int) -> bool:
        return self.sink.pin(cpu)

    def poller(self, index_of: dict[str, int]) -> RowPoller:
        from benchmarks.watchload.katibsink import MariaClient, MariaRowPoller

        # its own client: the poller's 5 ms queries must not wait behind the counting queries
        return MariaRowPoller(MariaClient(self.sink.db.socket, self.sink.password), index_of)

    def duplicates(self) -> int:
        from benchmarks.watchload import katibsink

        assert self.sink.client is not None
        return katibsink.duplicate_rows(self.sink.client)

    def counts(self) -> tuple[int, int, int]:
        from benchmarks.watchload import katibsink

        assert self.sink.client is not None
        return katibsink.row_counts(self.sink.client)

    def stop(self) -> None:
        self.sink.stop()


def start_collector(kubeconfig: Path, address: str, log: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [*CLI, "collector", "run", "--kubeconfig", str(kubeconfig), "--db-manager", address],
        cwd=ROOT,
        env=ENV,
        stdout=subprocess.DEVNULL,
        stderr=log.open("ab"),
    )


def stop(proc: subprocess.Popen[bytes] | None, timeout: float = 60.0) -> bool:
    """SIGTERM, wait; True when it exited by itself (else it is killed)."""
    if proc is None or proc.poll() is not None:
        return True
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout)
        return True
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        return False


@dataclass
class Result:
    jobs: int
    offered_per_s: float
    window_s: float = 0.0
    stored_per_s: float = 0.0
    published: int = 0
    delivered: int = 0
    lost: int = 0
    p50_ms: float = float("nan")
    p99_ms: float = float("nan")
    max_ms: float = float("nan")
    cores: dict[str, float] = field(default_factory=dict)
    rss_start_mib: float = 0.0
    rss_end_mib: float = 0.0
    tracked: int = 0
    sync_s: float = float("nan")
    catch_up_s: float = float("nan")
    first_watch_empty_s: float = float("nan")
    first_watch_restart_s: float = float("nan")
    duplicates: int = 0
    final_stored: int = 0  # jobs whose last published snapshot was stored after the updates stopped
    final_jobs: int = 0
    final_s: float = float("nan")
    read_ms: float = float("nan")  # one GetObservationLog at the end (the table full)
    sink: str = "embedded"
    rows: tuple[int, int, int] = (0, 0, 0)  # rows in the database: all, trainjob/seq, distinct snapshots
    api_stats: dict[str, Any] = field(default_factory=dict)
    load_avg: tuple[float, float] = (0.0, 0.0)
    pinned: bool = False
    notes: list[str] = field(default_factory=list)

    @property
    def rss_per_job_kib(self) -> float:
        return (self.rss_end_mib - self.rss_start_mib) * 1024 / max(1, self.tracked)

    @property
    def collector_cores(self) -> float:
        return self.cores.get("collector", float("nan"))

    @property
    def cpu_ms_per_snapshot(self) -> float:
        """The collector's CPU per stored snapshot in the window."""
        return self.collector_cores * 1000 / self.stored_per_s if self.stored_per_s else float("nan")


def first_watch_after(api: Api, moment: float, timeout: float) -> float:
    """Seconds from ``moment`` to the first WATCH request the stand-in received after it."""
    found: list[float] = []

    def seen() -> bool:
        found[:] = [t for t in api.call("/_bench/stats")["watch_starts"] if t > moment]
        return bool(found)

    wait_for("first watch", seen, timeout, 0.1)
    return min(found) - moment


class Published:
    """The stand-in's publication log (job index, lastUpdatedTime second, monotonic time)."""

    def __init__(self, api: Api, start: int) -> None:
        self.api, self.cursor = api, start
        self.i: list[int] = []
        self.sec: list[int] = []
        self.t: list[float] = []

    def fetch(self) -> None:
        got = self.api.call(f"/_bench/published?from={self.cursor}")
        self.i += got["i"]
        self.sec += got["sec"]
        self.t += got["t"]
        self.cursor += len(got["t"])


def caught_up_slice(pub: Published, poller: RowPoller, now: float, bound_s: float) -> bool:
    """True when every update published between 2 s and 1 s before ``now`` is stored and the slowest of
    them took at most ``bound_s`` (published -> stored)."""
    slowest = 0.0
    count = 0
    for i, sec, t in zip(pub.i, pub.sec, pub.t, strict=True):
        if now - 2.0 <= t < now - 1.0:
            count += 1
            seen = poller.seen.get(RowPoller.key(i, sec))
            if seen is None:
                return False
            slowest = max(slowest, seen - t)
    return count > 0 and slowest <= bound_s


def wait_caught_up(res: Result, api: Api, poller: RowPoller, started: float, args: Any) -> None:
    """Hold the window until the pipeline has drained what piled up during the initial sync: the updates
    of ``args.caught_up_slices`` consecutive one-second slices all stored within ``args.caught_up_ms``.
    ``res.catch_up_s`` is the time from ``started`` (the stand-in starts publishing) to the start of the
    first of those slices (from then on every update was on time); on timeout it stays NaN, a note
    says so and the window opens anyway."""
    pub = Published(api, api.call("/_bench/stats")["published"])
    deadline = time.monotonic() + args.catch_up_timeout
    good = 0
    while time.monotonic() < deadline:
        time.sleep(1.0)
        pub.fetch()
        now = time.monotonic()
        good = good + 1 if caught_up_slice(pub, poller, now, args.caught_up_ms / 1000) else 0
        if good >= args.caught_up_slices:  # on time since the first of these slices began
            res.catch_up_s = now - 2.0 - (args.caught_up_slices - 1) - started
            return
        cut = next((k for k, t in enumerate(pub.t) if t >= now - 2.0), len(pub.t))
        del pub.i[:cut], pub.sec[:cut], pub.t[:cut]
    res.notes.append(
        f"not caught up within {args.catch_up_timeout:.0f} s of the initial sync (no {args.caught_up_slices}"
        f" consecutive 1 s slices stored within {args.caught_up_ms:.0f} ms); window measured anyway"
    )


def measure_window(res: Result, api: Api, poller: RowPoller, pids: dict[str, int], args: Any) -> None:
    pub_from = api.call("/_bench/stats")["published"]
    rows0, before = len(poller.seen), Sample.take(pids)
    load0 = load_average()
    time.sleep(args.seconds)
    after = Sample.take(pids)
    rows1, pub_to = len(poller.seen), api.call("/_bench/stats")["published"]
    res.window_s = after.at - before.at
    res.cores = after.cores_since(before)
    res.stored_per_s = (rows1 - rows0) / res.window_s
    res.rss_end_mib = rss_kib(pids["collector"]) / 1024
    res.load_avg = (load0, load_average())
    time.sleep(args.grace)  # let snapshots of the window land before counting losses
    published = api.call(f"/_bench/published?from={pub_from}")
    count = pub_to - pub_from
    latencies: list[float] = []
    for i, sec, t in zip(
        published["i"][:count], published["sec"][:count], published["t"][:count], strict=True
    ):
        seen = poller.seen.get(RowPoller.key(i, sec))
        if seen is not None:
            latencies.append(seen - t)
    res.published, res.delivered = count, len(latencies)
    res.lost = count - len(latencies)
    res.p50_ms = percentile(latencies, 0.50) * 1000
    res.p99_ms = percentile(latencies, 0.99) * 1000
    res.max_ms = max(latencies, default=float("nan")) * 1000
    res.tracked = poller.tracked()


def read_ms(address: str, trial: str, repeat: int = 3) -> float:
    """Milliseconds of one ``GetObservationLog`` of a trial's ``trainjob/seq`` rows through the sink's gRPC
    API at the end of the run (the read a restarted collector makes per job; best of ``repeat``)."""
    import grpc
    from kubeflow.katib import katib_api_pb2, katib_api_pb2_grpc

    pb: Any = katib_api_pb2  # the generated stubs carry no type information
    best = float("inf")
    with grpc.insecure_channel(address) as channel:
        stub = katib_api_pb2_grpc.DBManagerStub(channel)
        request = pb.GetObservationLogRequest(trial_name=trial, metric_name=SEQ_METRIC)
        for _ in range(repeat):
            start = time.monotonic()
            stub.GetObservationLog(request, timeout=120)
            best = min(best, time.monotonic() - start)
    return best * 1000


def final_snapshots(res: Result, api: Api, poller: RowPoller, jobs: int, timeout: float) -> None:
    """Stop the updates and wait until every job's last published snapshot is stored: what a collector that
    falls behind must still deliver (trainerStatus holds only the latest; intermediate ones may be skipped).
    ``res.final_stored`` jobs had it within ``timeout`` s, ``res.final_s`` after the stop."""
    api.call("/_bench/stop", "POST")
    total = api.call("/_bench/stats")["published"]
    got = api.call(f"/_bench/published?from={max(0, total - 2 * jobs)}")
    last = dict(zip(got["i"], got["sec"], strict=True))  # each job publishes once a round: its last wins
    keys = [RowPoller.key(i, sec) for i, sec in last.items()]

    def stored() -> int:
        return sum(1 for k in keys if k in poller.seen)

    try:
        res.final_s = wait_for("last snapshots", lambda: stored() == len(keys), timeout, 0.2)
    except TimeoutError:
        res.notes.append(
            f"last snapshot of {len(keys) - stored():,} jobs not stored {timeout:.0f} s after the stop"
        )
    res.final_stored = stored()
    res.final_jobs = len(keys)


def check_objects() -> str:
    """Validate one TrainJob of the stream against the real CRD (tests/kubestandin/crds is a copy of
    /work/shared/reference/crds): nothing pruned, defaults present, schema and metadata valid."""
    import re

    from benchmarks.watchload.objects import UpdateEncoder, rfc3339
    from tests.kubestandin._resources import load_crd, validate_metadata

    _, jobs = fleet(1)
    encoder = UpdateEncoder(jobs, rfc3339(time.time() - 3600))
    encoder.self_check()
    obj = encoder.full(0, 1_000_001, 7, int(time.time()))
    (rtype,) = load_crd(ROOT / "tests/kubestandin/crds/trainer.kubeflow.org_trainjobs.yaml")
    assert rtype.schema is not None
    pruned, dropped = rtype.schema.prune(obj)
    problems = [f"pruned {d}" for d in dropped]
    if rtype.schema.apply_defaults(pruned) != obj:
        problems.append("CRD defaults missing")
    problems += [c.message for c in rtype.schema.validate(obj, None)]
    problems += [c.message for c in validate_metadata(obj["metadata"], namespaced=True)]
    # The two CEL rules the stand-in's evaluator does not cover (rtype.schema.unsupported_rules):
    name = obj["metadata"]["name"]
    if not re.fullmatch(r"[a-z]([-a-z0-9]*[a-z0-9])?", name) or len(name) > 63:
        problems.append(f"metadata.name {name!r} breaks the CRD's CEL rules")
    if problems:
        raise AssertionError("sample TrainJob rejected by the CRD: " + "; ".join(problems))
    return f"sample TrainJob valid against the CRD ({len(json.dumps(obj, separators=(',', ':')))} bytes)"


def run_scale(jobs: int, args: Any, tmp: Path) -> Result:
    res = Result(jobs, jobs / PERIOD_S, sink=args.sink)
    _, fleet_jobs = fleet(jobs)
    api = collector = None
    store: EmbeddedSink | KatibDBSink = (KatibDBSink if args.sink == "katib" else EmbeddedSink)(tmp)
    poller: RowPoller | None = None
    try:
        store.start()
        address = store.address
        api = Api(jobs, tmp / "apiserver.log")
        kubeconfig = api.kubeconfig(tmp / "kubeconfig")
        log = tmp / "collector.log"
        started = time.monotonic()
        collector = start_collector(kubeconfig, address, log)
        if not args.no_pin:
            res.pinned = all([pin(collector.pid, 1), pin(api.proc.pid, 0), store.pin(0), pin(os.getpid(), 0)])
        res.first_watch_empty_s = first_watch_after(api, started, 120)
        time.sleep(2.0)
        res.rss_start_mib = rss_kib(collector.pid) / 1024
        poller = store.poller({j.name: j.index for j in fleet_jobs}).start()
        activated = time.monotonic()
        api.call("/_bench/activate", "POST")
        try:
            res.sync_s = wait_for(
                "every job tracked", lambda: poller.tracked() >= jobs, args.sync_timeout, 0.2
            )
        except TimeoutError as exc:
            res.notes.append(f"{exc} ({poller.tracked()} tracked)")
        wait_caught_up(res, api, poller, activated, args)
        # The last of the caught-up slices ended a second before the check: what was behind then is still
        # draining (up to ~0.4 s late, seen in a per-snapshot dump), so the steady state is `settle` later.
        time.sleep(args.settle)
        time.sleep(max(0.0, activated + 2 * PERIOD_S - time.monotonic()))  # past the first rounds
        pids = {"collector": collector.pid, "apiserver": api.proc.pid, **store.pids}
        measure_window(res, api, poller, pids, args)
        final_snapshots(res, api, poller, jobs, args.final_timeout)
        if collector.poll() is not None:
            res.notes.append(f"collector exited with {collector.returncode} during the window; see {log}")
        if not stop(collector):
            res.notes.append("collector did not stop within 60 s of SIGTERM (killed)")
        restarted = time.monotonic()
        collector = start_collector(kubeconfig, address, log)
        if not args.no_pin:
            pin(collector.pid, 1)
        try:
            res.first_watch_restart_s = first_watch_after(api, restarted, args.restart_timeout)
        except TimeoutError as exc:
            res.notes.append(str(exc))
        time.sleep(args.grace)
        res.api_stats = api.call("/_bench/stats")
        for key in ("watch_starts", "list_starts"):
            res.api_stats[key] = len(res.api_stats[key])
        stop(collector)
        collector = None
        poller.stop()
        res.duplicates = store.duplicates()
        res.rows = store.counts()
        res.read_ms = read_ms(address, fleet_jobs[0].name)
    finally:
        if poller is not None:
            poller.stop()
        stop(collector)
        stop(api.proc if api is not None else None)
        store.stop()
    return res


def render(results: list[Result]) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console(width=200)
    sinks = {"embedded": "db serve (SQLite)", "katib": "Katib's katib-db-manager on MariaDB"}
    title = "collector through the real watch path (updates every 5 s per TrainJob)"
    table = Table(title=f"{title}; sink: {', '.join(sorted({sinks[r.sink] for r in results}))}")
    columns = [
        "N",
        "offered/s",
        "stored/s",
        "lost",
        "catch-up s",
        "p50 / p99 ms",
        "collector cores",
        "CPU ms/snap",
        "RSS/job KiB",
        "RSS MiB",
        "first watch: empty / restart s",
        "sidecar ratio CPU / mem",
        "dup rows",
        "last snap stored (s)",
        "rows: all / seq / distinct",
        "read ms",
        "stand-in / store / db / others cores",
        "load avg",
    ]
    for col in columns:
        table.add_column(col, justify="right")
    for r in results:
        cpu_ratio = r.jobs * SIDECAR_CPU_CORES / max(r.collector_cores, 1e-9)
        mem_ratio = r.jobs * SIDECAR_MEM_MIB / max(r.rss_end_mib, 1e-9)
        table.add_row(
            f"{r.jobs:,}",
            f"{r.offered_per_s:,.0f}",
            f"{r.stored_per_s:,.0f}",
            f"{r.lost:,} of {r.published:,}",
            f"{r.catch_up_s:.1f}" if r.catch_up_s == r.catch_up_s else "never",
            f"{r.p50_ms:,.0f} / {r.p99_ms:,.0f}",
            f"{r.collector_cores:.2f}",
            f"{r.cpu_ms_per_snapshot:.2f}",
            f"{r.rss_per_job_kib:,.1f}",
            f"{r.rss_end_mib:,.0f}",
            f"{r.first_watch_empty_s:.1f} / {r.first_watch_restart_s:.1f}",
            f"{cpu_ratio:,.0f}x / {mem_ratio:,.0f}x",
            f"{r.duplicates:,}",
            f"{r.final_stored:,} of {r.final_jobs:,} ({r.final_s:.1f})",
            " / ".join(f"{n:,}" for n in r.rows),
            f"{r.read_ms:,.0f}",
            " / ".join(
                f"{r.cores[k]:.2f}" if k in r.cores else "-"
                for k in ("apiserver", "store", "database", "others")
            ),
            f"{r.load_avg[0]:.1f}-{r.load_avg[1]:.1f}",
        )
    console.print(table)
    console.print(
        f"{os.cpu_count()} CPUs; collector pinned to one core: {all(r.pinned for r in results)}. "
        "Sidecar ratio: N x (50m CPU, 10Mi) requested by Katib's per-trial sidecars / what the collector "
        "used. 'others' = machine-wide busy cores minus the processes of this run; 'db' = the MariaDB server "
        "(--sink katib). Rows: counted in the database after the run (restart included). Read ms: one "
        "GetObservationLog of a trial's trainjob/seq rows then (what a restarted collector reads per job)."
    )
    for r in results:
        for note in r.notes:
            console.print(f"N={r.jobs:,}: {note}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", default="1000,10000,20000", help="comma-separated TrainJob counts")
    parser.add_argument(
        "--seconds", type=float, default=None, help="measurement window (default 60, quick 20)"
    )
    parser.add_argument("--grace", type=float, default=10.0, help="wait for late rows after the window")
    parser.add_argument("--sync-timeout", type=float, default=120.0, help="wait for every job's first row")
    parser.add_argument("--restart-timeout", type=float, default=180.0)
    parser.add_argument(
        "--final-timeout",
        type=float,
        default=60.0,
        help="after the window: wait for every job's last snapshot",
    )
    parser.add_argument(
        "--catch-up-timeout", type=float, default=120.0, help="wait this long for the backlog to drain"
    )
    parser.add_argument(
        "--caught-up-ms", type=float, default=1000.0, help="caught up: slices stored within this latency"
    )
    parser.add_argument(
        "--caught-up-slices", type=int, default=3, help="caught up: this many consecutive 1 s slices"
    )
    parser.add_argument(
        "--settle", type=float, default=10.0, help="after catching up, wait this long before the window"
    )
    parser.add_argument(
        "--sink",
        choices=("embedded", "katib"),
        default="embedded",
        help="embedded: katib-progress db serve (SQLite); katib: Katib's katib-db-manager on MariaDB",
    )
    parser.add_argument("--quick", action="store_true", help="20 s windows")
    parser.add_argument("--no-pin", action="store_true", help="do not pin processes to cores")
    parser.add_argument("--json", action="store_true", help="print JSON instead of the table")
    parser.add_argument(
        "--keep", type=Path, default=None, help="keep logs and the SQLite file under this folder"
    )
    args = parser.parse_args()
    args.seconds = args.seconds or (20.0 if args.quick else 60.0)
    checked = check_objects()
    if not args.json:
        print(checked)
    results = []
    for jobs in [int(j) for j in args.jobs.split(",") if j]:
        if not args.json:
            print(
                f"N={jobs:,}: {jobs / PERIOD_S:,.0f} snapshots/s offered, {args.seconds:.0f} s window ...",
                flush=True,
            )
        if args.keep is not None:
            tmp = args.keep / f"n{jobs}"
            tmp.mkdir(parents=True, exist_ok=True)
            results.append(run_scale(jobs, args, tmp))
        else:
            with tempfile.TemporaryDirectory(prefix="bench-watch-") as tmpdir:
                results.append(run_scale(jobs, args, Path(tmpdir)))
    if args.json:
        extra = [
            {"rss_per_job_kib": r.rss_per_job_kib, "cpu_ms_per_snapshot": r.cpu_ms_per_snapshot}
            for r in results
        ]
        print(json.dumps([asdict(r) | e for r, e in zip(results, extra, strict=True)], indent=2))
    else:
        render(results)


if __name__ == "__main__":
    from benchmarks.watchload.measure import interrupt_on_termination

    interrupt_on_termination()  # kill / a closed terminal: stop what was started, as Ctrl-C does
    main()
