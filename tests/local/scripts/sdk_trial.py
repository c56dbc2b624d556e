"""Test trial using the Kubeflow SDK, unchanged training code: one report (the SDK throttles to 5 s)."""

import argparse
import sys

from kubeflow.trainer import update_trainjob_status


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--x", type=float, required=True)
    args = parser.parse_args()
    loss = (args.x - 0.3) ** 2
    sent = update_trainjob_status(
        progress_percent=100, estimated_remaining_seconds=0, metrics={"loss": loss, "accuracy": 0.5}
    )
    print(f"sent={sent} loss={loss!r}", flush=True)
    return 0 if sent else 5


if __name__ == "__main__":
    sys.exit(main())
