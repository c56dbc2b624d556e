"""Start one trial command so that it cannot outlive the sweep (run as a script, standard library only).

``python -I -S _exec.py PARENT_PID STATUS_FD ARGV...``: asks Linux to SIGKILL this process when its
parent (the sweep) dies (``prctl(PR_SET_PDEATHSIG)``, kept across ``execve``), checks that the parent
is still the sweep (it may have died before the request), then ``execvp`` s the trial command in place.
An ``execvp`` failure is written to STATUS_FD as ``errno:message`` (exit 127); a successful ``execvp``
closes it (close-on-exec), so the sweep reads EOF. Grandchildren are stopped by the sweep's watchdog.
"""

import ctypes
import os
import signal
import sys

_PR_SET_PDEATHSIG = 1


def main() -> int:
    parent, status_fd, argv = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3:]
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):  # not Linux: the watchdog alone stops the trial
        pass
    if os.getppid() != parent:  # the sweep died before prctl took effect
        return 137
    os.set_inheritable(status_fd, False)
    try:
        os.execvp(argv[0], argv)
    except OSError as exc:
        os.write(status_fd, f"{exc.errno}:{exc.strerror}".encode())
    return 127


if __name__ == "__main__":
    sys.exit(main())
