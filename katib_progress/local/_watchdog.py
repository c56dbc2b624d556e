"""The sweep's watchdog (run as a script, standard library only): stops every trial process group
when the sweep dies, however it dies (SIGKILL included).

``python -I -S _watchdog.py GRACE_S`` in its own session, reading lines from the sweep on stdin:
``+PGID`` (a trial started), ``-PGID`` (it ended). At end of input (the sweep exited or was killed:
the kernel closes its end of the pipe) every group still registered gets SIGTERM, then SIGKILL after
GRACE_S seconds. A clean sweep unregisters every group first, so its exit stops nothing.
"""

import contextlib
import os
import signal
import sys
import time


def _alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _signal(groups: set[int], sig: signal.Signals) -> None:
    for pgid in groups:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, sig)


def main() -> int:
    grace = float(sys.argv[1])
    groups: set[int] = set()
    for line in sys.stdin:
        text = line.strip()
        if text[:1] == "+" and text[1:].isdigit():
            groups.add(int(text[1:]))
        elif text[:1] == "-" and text[1:].isdigit():
            groups.discard(int(text[1:]))
    groups = {g for g in groups if _alive(g)}
    if not groups:
        return 0
    _signal(groups, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline and any(_alive(g) for g in groups):
        time.sleep(0.05)
    _signal({g for g in groups if _alive(g)}, signal.SIGKILL)
    return 0


if __name__ == "__main__":
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a terminal's Ctrl-C is for the sweep, not for us
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    sys.exit(main())
