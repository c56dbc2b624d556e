"""Our live ``medianstop`` against Katib's own medianstop service, on the same trial histories.

For each seed and direction, Katib's ``MedianStopService`` (pkg/earlystopping/v1beta1/medianstop/
service.py, run from a Katib checkout with Katib's Python environment: ``run_katib_medianstop.py``, a
fresh process per experiment as Katib runs one per Experiment) and our early-stopping server get the
same GetEarlyStoppingRules requests, Katib's reading the trials' logs from a DB manager served here;
each trial created after a call carries Katib's rule, applied to its reports as Katib's sidecar
applies it (main.go ``updateStopRules``, tests/katibmodel/metricscollector.py ``_Watch``), while the
same reports go to our Pruning API as the collector sends TrainJob progress. The loop is the one of
tests/suggestion/test_katib_medianstop.py (``_run``: random settings, overlapping trials, noisy
curves); it stops at the first difference (the rule returned, or a stop decision). Prints one line
per experiment and a total:

    .venv/bin/python benchmarks/medianstop_compare.py --seeds 20 \\
        --katib-cmd "$KATIB_VENV/bin/python benchmarks/run_katib_medianstop.py $KATIB {address}"
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import grpc
from kubeflow.katib import katib_api_pb2_grpc

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.suggestion_services import baseline_spec, log_dir, running
from katib_progress.suggestion.server import create_early_stopping_server
from tests.suggestion.test_katib_medianstop import _run, serve_db


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--katib-cmd", required=True, help="command starting Katib's service ({address})")
    parser.add_argument("--seeds", type=int, default=20)
    args = parser.parse_args(argv)
    ours = create_early_stopping_server(["127.0.0.1:0"])
    ours.start()
    trials = stopped = 0
    try:
        with (
            log_dir() as logs,
            serve_db() as db,
            grpc.insecure_channel(ours.bound_addresses[0]) as channel,
        ):
            stub = katib_api_pb2_grpc.EarlyStoppingStub(channel)
            for seed in range(args.seeds):
                for maximize in (False, True):
                    with (
                        running(baseline_spec(args.katib_cmd, None), logs) as address,
                        grpc.insecure_channel(address) as katib_channel,
                    ):
                        katib = katib_api_pb2_grpc.EarlyStoppingStub(katib_channel)
                        stops = _run(stub, ours.bound_addresses[0], db, seed, maximize, stock=katib)
                    trials += len(stops)
                    stopped += sum(s is not None for s in stops)
                    direction = "maximize" if maximize else "minimize"
                    print(
                        f"seed {seed} {direction}: {len(stops)} trials, "
                        f"{sum(s is not None for s in stops)} stopped, same rules and stops",
                        flush=True,
                    )
    finally:
        ours.stop(0)
    print(f"{2 * args.seeds} experiments, {trials} trials, {stopped} stopped: every rule and stop the same")
    return 0


if __name__ == "__main__":
    sys.exit(main())
