"""Test trial that reports by raw POST (no SDK throttle).

Modes: ok, diverge (loss NaN from step 2, then keeps running), crash (exit 3 at step 2), nometric,
hold (after the first report, waits while --hold-file exists), family (hold, plus a child process in
the trial's process group that prints its pid and sleeps), nanlast (the last report's loss is NaN),
interrupt (on its first attempt only: reports once, then sends SIGINT to the sweep and waits),
probe (first POSTs with a wrong token and prints the answer), thirdbad (ok, but 10x the loss when it is
the third trial of the sweep: the third trial directory).
Each report is one POST of {"trainerStatus": ...}.
"""

import argparse
import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from datetime import UTC, datetime


def post(status: dict, token: str | None = None) -> tuple[int, str]:
    url = os.environ["KUBEFLOW_TRAINER_SERVER_URL"]
    if token is None:
        with open(os.environ["KUBEFLOW_TRAINER_SERVER_TOKEN"]) as handle:
            token = handle.read().strip()
    body = json.dumps({"trainerStatus": status}).encode()
    request = urllib.request.Request(
        url,
        data=body,
        method="POST",
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=5) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--x", type=float, default=0.5)
    parser.add_argument("--mode", default="ok")
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--sleep", type=float, default=0.05)
    parser.add_argument("--hold-file", default="")
    args = parser.parse_args()
    print(f"pid {os.getpid()} mode {args.mode}", flush=True)
    if args.mode == "family":
        code = "import os, time; print('child', os.getpid(), flush=True); time.sleep(600)"
        subprocess.Popen([sys.executable, "-c", code])
    if args.mode == "probe":
        now = datetime.now(UTC).isoformat()
        code, body = post({"progressPercentage": 1, "lastUpdatedTime": now}, token="not-my-token")
        print(f"probe {code} {body}", flush=True)
    steps = 400 if args.mode == "diverge" else args.steps
    for step in range(1, steps + 1):
        loss = (args.x - 0.3) ** 2 + 1.0 / step
        if args.mode == "diverge" and step >= 2:
            loss = float("nan")
        if args.mode == "thirdbad" and len(os.listdir(os.path.dirname(os.getcwd()))) >= 3:
            loss *= 10
        if args.mode == "nanlast" and step == steps:
            loss = float("nan")
        if args.mode == "crash" and step == 2:
            print("boom: simulated crash", file=sys.stderr, flush=True)
            return 3
        metrics = [] if args.mode == "nometric" else [{"name": "loss", "value": f"{loss:.6g}"}]
        metrics.append({"name": "step", "value": str(step)})
        status = {
            "progressPercentage": int(100 * step / steps),
            "estimatedRemainingSeconds": int(args.sleep * (steps - step)) + 1,
            "metrics": metrics,
            "lastUpdatedTime": datetime.now(UTC).isoformat(),
        }
        code, body = post(status)
        if code != 200:
            print(f"status update rejected: {code} {body}", file=sys.stderr, flush=True)
            return 4
        if args.mode == "interrupt" and not os.path.exists("interrupted-once"):
            open("interrupted-once", "w").close()  # the trial directory is kept across attempts
            time.sleep(1.5)  # the other trials finish first
            os.kill(os.getppid(), signal.SIGINT)
            time.sleep(60)
        if args.mode.startswith("hold") or args.mode == "family":
            while os.path.exists(args.hold_file):
                time.sleep(0.05)
        time.sleep(args.sleep)
    return 0


if __name__ == "__main__":
    sys.exit(main())
