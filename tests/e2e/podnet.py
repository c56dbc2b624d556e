"""Run a program in a network namespace of its own, reachable on one host address (see netns.py).

    python -m tests.e2e.podnet --listen IP:PORT [--listen IP:PORT ...] -- PROGRAM ARGS...

The relay binds each ``--listen`` address in the host's network namespace, then moves itself into a
new network namespace (unshare(2) CLONE_NEWNET, loopback brought up) and starts PROGRAM there; each
connection accepted on IP:PORT is relayed to 127.0.0.1:PORT inside. SIGTERM reaches PROGRAM; the
relay exits with PROGRAM's exit code.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import signal
import socket
import subprocess
import sys
import threading

CLONE_NEWNET = 0x40000000


def _pipe(src: socket.socket, dst: socket.socket) -> None:
    with contextlib.suppress(OSError):
        while data := src.recv(65536):
            dst.sendall(data)
    with contextlib.suppress(OSError):
        dst.shutdown(socket.SHUT_WR)


def _serve(listener: socket.socket, port: int) -> None:
    while True:
        conn, _ = listener.accept()
        try:
            inner = socket.create_connection(("127.0.0.1", port), timeout=5)
        except OSError:
            conn.close()
            continue
        inner.settimeout(None)
        for a, b in ((conn, inner), (inner, conn)):
            threading.Thread(target=_pipe, args=(a, b), daemon=True).start()


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="podnet")
    parser.add_argument("--listen", action="append", required=True)
    parser.add_argument("program", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    program = args.program[1:] if args.program[:1] == ["--"] else args.program
    listeners = []
    for address in args.listen:
        host, _, port = address.rpartition(":")
        s = socket.socket()
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind((host, int(port)))
        s.listen(64)
        listeners.append((s, int(port)))
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.unshare(CLONE_NEWNET) != 0:
        raise OSError(ctypes.get_errno(), "unshare(CLONE_NEWNET)")
    subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
    child = subprocess.Popen(program)
    signal.signal(signal.SIGTERM, lambda *_: child.send_signal(signal.SIGTERM))
    for s, port in listeners:
        threading.Thread(target=_serve, args=(s, port), daemon=True).start()
    code = child.wait()
    return code if code >= 0 else 128 - code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
