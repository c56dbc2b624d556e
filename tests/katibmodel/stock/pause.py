"""Stand-in for ``registry.k8s.io/pause`` (and our early-stopping image's ``/pause``): open no
port, sleep until SIGTERM/SIGINT, exit 0."""

from __future__ import annotations

import signal
import sys


def main() -> int:
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: sys.exit(0))
    while True:
        signal.pause()


if __name__ == "__main__":
    sys.exit(main())
