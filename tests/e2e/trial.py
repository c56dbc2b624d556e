"""A trial's training process under the real Kubeflow Trainer: reports progress with the Kubeflow SDK.

    python -m tests.e2e.trial --lr=0.02 --momentum=0.7

Run by the JobSet player (tests/e2e/trainer.py) as the trainer pod's ``node`` container, with the env
Trainer's TrainJobStatus plugin injected (``KUBEFLOW_TRAINER_SERVER_URL``, ``_CA_CERT``, ``_TOKEN``) and
its projected token volume mounted. Each point of its learning curve goes to Trainer's status server
through ``kubeflow.trainer.update_trainjob_status`` (kubeflow 0.5.0: at most one update per 5 s per
process, never raises, True when the server answered 200). The curve is the harness's script
(``KP_E2E_CURVE``: ``converging`` or ``diverging``, tests/katibmodel/scenarios.py, ``KP_E2E_STEPS``
points ``KP_E2E_INTERVAL`` seconds apart). Every call is printed as one JSON line
``{"sent": bool, "progress": int, "metrics": {...}}`` so the test can compare what Katib's DB holds
with what was sent. A point the SDK did not send is retried (the SDK drops it within its 5 s window).
"""

from __future__ import annotations

import json
import os
import sys
import time

from kubeflow.trainer import update_trainjob_status

from tests.katibmodel.scenarios import converging, diverging

RETRIES = 5


def main(argv: list[str]) -> int:
    params = dict(a[2:].split("=", 1) for a in argv if a.startswith("--") and "=" in a)
    steps = int(os.environ.get("KP_E2E_STEPS", "6"))
    interval = float(os.environ.get("KP_E2E_INTERVAL", "5.2"))
    shape = os.environ.get("KP_E2E_CURVE", "converging")
    curve = diverging(steps) if shape == "diverging" else converging(steps)
    print(json.dumps({"start": params, "curve": shape}), flush=True)
    for point in curve.points:
        time.sleep(interval)
        for _ in range(RETRIES):
            sent = update_trainjob_status(point.progress, point.eta, dict(point.metrics))
            call = {"sent": sent, "progress": point.progress, "metrics": point.metrics}
            print(json.dumps(call), flush=True)
            if sent:
                break
            time.sleep(interval)
    return 1 if curve.fails else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
