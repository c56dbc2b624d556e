"""The ceiling of a sink: ReportObservationLog per second that Katib v0.19.0's ``katib-db-manager`` on MariaDB
(``--sink katib``) or our ``katib-progress db serve`` (``--sink embedded``) sustains here, driven by ghz (a Go
gRPC load generator), no collector involved.

Run: .venv/bin/python benchmarks/bench_sink.py [--sink katib|embedded] [--seconds 20] [--concurrency 8,32]
     [--rates 2000,3000] [--no-pin] [--json]

Starts the sink as benchmarks/bench_watch.py does (Katib's: MariaDB and ``katib-db-manager`` as the
end-to-end tier starts them, tests/e2e/katib.py through benchmarks/watchload/katibsink.py;
scripts/e2e_deps.sh installs MariaDB, scripts/e2e_build.sh builds the DB manager), then runs ``ghz`` against
it with Katib's own ``api.proto`` (read from the Go module cache). Each request has the benchmark's snapshot
shape (benchmarks/bench_watch.py): one trial, 10 metric logs at one timestamp (six Hugging Face metrics plus
progress, ETA, elapsed and seq); trials are distinct per request.

- ``--concurrency C``: closed loop, C requests in flight (the collector's sink keeps at most 8), as fast as
  the DB manager answers: the highest rate it sustains, i.e. its ceiling;
- ``--rates R``: open loop at R requests/s (ghz ``--rps``, 64 workers), to see the latency below the ceiling.

Per run: requests answered OK per second, latency p50 / p99, the CPU of the DB manager (``katib-db-manager``
or ``db serve``), of MariaDB's server and of ghz (cores over the run, and ms per request), and the rows the
database gained against 10 x OK answers (nothing lost, nothing added). By default the sink (DB manager and
MariaDB, every thread) is pinned to CPU 0 and ghz to CPU 1, the layout of bench_watch.py (the sink and the
API stand-in on CPU 0, the collector on CPU 1). ghz comes from ``go install
github.com/bojand/ghz/cmd/ghz@v0.93.0`` (``--ghz``, or found on PATH or in the e2e cache as ``ghz/ghz``;
``scripts/e2e_build.sh ghz`` puts it there).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.bench_watch import EmbeddedSink, KatibDBSink  # noqa: E402
from benchmarks.watchload.measure import cpu_s, load_average  # noqa: E402

NAMES = ("loss", "grad_norm", "learning_rate", "epoch", "eval_loss", "eval_accuracy")
RESERVED = ("trainjob/progress", "trainjob/eta_seconds", "trainjob/elapsed_seconds", "trainjob/seq")
ROWS = len(NAMES) + len(RESERVED)
GHZ_MODULE = "github.com/bojand/ghz/cmd/ghz@v0.93.0"


def find_ghz(given: str | None) -> str:
    from tests.e2e.controlplane import cache_dir

    for candidate in (given, shutil.which("ghz"), str(cache_dir() / "ghz" / "ghz")):
        if candidate and Path(candidate).exists():
            return candidate
    raise SystemExit(
        f"ghz not found: run scripts/e2e_build.sh ghz (go install {GHZ_MODULE}), or pass --ghz PATH"
    )


def katib_proto() -> Path:
    from tests.e2e.katib import module_dir

    return module_dir("katib-source") / "pkg/apis/manager/v1beta1/api.proto"


def request_template(run: int) -> dict[str, Any]:
    """One snapshot's report: a fresh trial per request (ghz fills in the request number, which starts at 0
    in every run, hence the run's number in the name: ``db serve`` skips rows it already holds)."""
    stamp = "2026-12-04T06:00:00Z"
    values = [f"0.{n:06d}" for n in range(len(NAMES))] + ["42", "310", "227", "17"]
    logs = [
        {"time_stamp": stamp, "metric": {"name": name, "value": value}}
        for name, value in zip((*NAMES, *RESERVED), values, strict=True)
    ]
    return {"trial_name": f"bench-{run}-{{{{.RequestNumber}}}}", "observation_log": {"metric_logs": logs}}


@dataclass
class Run:
    mode: str  # "closed, 8 in flight" or "open, 2,000/s"
    seconds: float
    ok: int
    errors: int
    rate: float
    p50_ms: float
    p99_ms: float
    cores: dict[str, float]
    ms_per_request: dict[str, float]
    rows_added: int
    load_avg: tuple[float, float]
    error_kinds: dict[str, int]


def run_ghz(
    ghz: str, proto: Path, sink: EmbeddedSink | KatibDBSink, tmp: Path, args: Any, *, conc: int, rps: int
) -> Run:
    run = len(list(tmp.glob("request-*.json")))
    data = tmp / f"request-{run}.json"
    data.write_text(json.dumps(request_template(run)))
    argv = [
        ghz, "--insecure", "--proto", str(proto), "--import-paths", str(proto.parent),
        "--call", "api.v1.beta1.DBManager.ReportObservationLog", "--data-file", str(data),
        "--concurrency", str(conc), "--connections", "1", "--duration", f"{args.seconds}s",
        "--cpus", "1", "--timeout", "20s", "--format", "json", sink.address,
    ]  # fmt: skip
    if rps:
        argv[argv.index("--duration") : argv.index("--duration")] = ["--rps", str(rps)]
    pids = sink.pids
    rows0 = sink.counts()[0]
    before = {name: cpu_s(pid) for name, pid in pids.items()}
    children0 = resource.getrusage(resource.RUSAGE_CHILDREN)  # ghz is the only child reaped meanwhile
    load0, t0 = load_average(), time.monotonic()
    pin = None if args.no_pin else (lambda: os.sched_setaffinity(0, {1 % (os.cpu_count() or 1)}))
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, preexec_fn=pin)  # noqa: PLW1509
    out, err = proc.communicate()
    children1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    wall = time.monotonic() - t0
    after = {name: cpu_s(pid) for name, pid in pids.items()}
    if proc.returncode not in (0, 1):  # ghz exits 1 when some requests failed
        raise RuntimeError(f"ghz failed ({proc.returncode}): {err.decode()[-2000:]}")
    report = json.loads(out)
    time.sleep(0.5)
    rows1 = sink.counts()[0]
    codes = report.get("statusCodeDistribution") or {}
    ok = int(codes.get("OK", 0))
    window = float(report["total"]) / 1e9
    used = {name: after[name] - before[name] for name in pids}
    used["ghz"] = (children1.ru_utime + children1.ru_stime) - (children0.ru_utime + children0.ru_stime)
    lat = {int(d["percentage"]): d["latency"] / 1e6 for d in report.get("latencyDistribution") or []}
    return Run(
        mode=f"open, {rps:,}/s" if rps else f"closed, {conc} in flight",
        seconds=window,
        ok=ok,
        errors=int(report["count"]) - ok,
        rate=ok / window,
        p50_ms=lat.get(50, float("nan")),
        p99_ms=lat.get(99, float("nan")),
        cores={k: v / wall for k, v in used.items()},
        ms_per_request={k: 1000 * v / max(1, ok) for k, v in used.items()},
        rows_added=rows1 - rows0,
        load_avg=(load0, load_average()),
        error_kinds={str(k): int(v) for k, v in (report.get("errorDistribution") or {}).items()},
    )


def render(runs: list[Run], sink: str) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console(width=200)
    names = {
        "katib": "katib-db-manager (Katib v0.19.0) on MariaDB",
        "embedded": "katib-progress db serve (SQLite)",
    }
    table = Table(title=f"{names[sink]}, driven by ghz: 10 metric logs per report")
    for col in (
        "load", "OK/s", "errors", "p50 / p99 ms", "DB manager cores", "MariaDB cores", "ghz cores",
        "CPU ms/request: DB manager / MariaDB / ghz", "rows added / 10 x OK", "load avg",
    ):  # fmt: skip
        table.add_column(col, justify="right")
    for r in runs:
        ms = r.ms_per_request
        table.add_row(
            r.mode,
            f"{r.rate:,.0f}",
            f"{r.errors:,}",
            f"{r.p50_ms:.1f} / {r.p99_ms:.1f}",
            f"{r.cores['store']:.2f}",
            f"{r.cores['database']:.2f}" if "database" in r.cores else "-",
            f"{r.cores['ghz']:.2f}",
            " / ".join(f"{ms[k]:.3f}" if k in ms else "-" for k in ("store", "database", "ghz")),
            f"{r.rows_added:,} / {ROWS * r.ok:,}",
            f"{r.load_avg[0]:.1f}-{r.load_avg[1]:.1f}",
        )
    console.print(table)
    console.print(
        "errors: requests ghz itself cancels in flight when its duration ends (the kinds below); their rows "
        "may be stored, so rows added can exceed 10 x OK by 10 x errors. CPU: utime + stime from /proc "
        "(ghz: its rusage), cores = CPU seconds / wall seconds of the run."
    )
    for r in runs:
        for kind, n in r.error_kinds.items():
            console.print(f"{r.mode}: {n:,} x {kind}")
    closed = [r for r in runs if r.mode.startswith("closed")]
    if closed:
        best = max(closed, key=lambda r: r.rate)
        console.print(f"ceiling: {best.rate:,.0f} ReportObservationLog/s ({best.mode})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sink", choices=("katib", "embedded"), default="katib")
    parser.add_argument("--seconds", type=float, default=20.0, help="length of each run")
    parser.add_argument(
        "--concurrency", default="8", help="closed-loop runs: requests in flight, comma-separated"
    )
    parser.add_argument("--rates", default="", help="open-loop runs: requests/s, comma-separated")
    parser.add_argument("--warmup", type=float, default=3.0, help="an unmeasured closed-loop run first")
    parser.add_argument("--ghz", default=None, help="path of the ghz binary")
    parser.add_argument("--no-pin", action="store_true", help="do not pin the sink to CPU 0 and ghz to CPU 1")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--keep", type=Path, default=None, help="keep MariaDB's files and logs here")
    args = parser.parse_args()
    ghz, proto = find_ghz(args.ghz), katib_proto()
    with tempfile.TemporaryDirectory(prefix="bench-katib-sink-") as tmpdir:
        tmp = args.keep or Path(tmpdir)
        tmp.mkdir(parents=True, exist_ok=True)
        sink = (KatibDBSink if args.sink == "katib" else EmbeddedSink)(tmp).start()
        try:
            if not args.no_pin:
                sink.pin(0)
            runs = []
            if args.warmup:
                warm = argparse.Namespace(**{**vars(args), "seconds": args.warmup})
                run_ghz(ghz, proto, sink, tmp, warm, conc=8, rps=0)
            for conc in [int(c) for c in args.concurrency.split(",") if c]:
                runs.append(run_ghz(ghz, proto, sink, tmp, args, conc=conc, rps=0))
            for rate in [int(r) for r in args.rates.split(",") if r]:
                runs.append(run_ghz(ghz, proto, sink, tmp, args, conc=64, rps=rate))
        finally:
            sink.stop()
    if args.json:
        print(json.dumps([asdict(r) for r in runs], indent=2))
    else:
        render(runs, args.sink)


if __name__ == "__main__":
    from benchmarks.watchload.measure import interrupt_on_termination

    interrupt_on_termination()  # kill / a closed terminal: stop what was started, as Ctrl-C does
    main()
