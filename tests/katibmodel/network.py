"""The model's network: one loopback IP per Service/pod, and who listens where.

Every Service name (``<name>.<namespace>``) gets its own address in 127.0.0.0/8, and the pod behind
it binds that address: the containers of one pod share it (one network namespace), so two of them
binding the same port really meet, while pods never collide with each other or with other tests.
gRPC servers set SO_REUSEPORT, so on Linux a second bind of the same address succeeds when both
sockets belong to the same effective uid (the kernel then splits connections between them) and
fails with EADDRINUSE otherwise. All processes here run as one uid, so ``listeners`` lets the
kubelet model enforce the uid rule itself.
"""

from __future__ import annotations

import contextlib
import ipaddress
import os
import random
import socket
import threading
from collections.abc import Iterable
from pathlib import Path

_LISTEN = "0A"


class ClusterDNS:
    """Service name -> a free loopback IP (the Service's ClusterIP, also its one pod's IP)."""

    def __init__(self, seed: int | None = None) -> None:
        self._rng = random.Random(seed)
        self._names: dict[str, str] = {}
        self._lock = threading.Lock()

    def ip(self, name: str, probe_port: int = 6789) -> str:
        with self._lock:
            found = self._names.get(name)
            if found is None:
                found = self._names[name] = self._free_ip(probe_port)
            return found

    def register(self, name: str, ip: str) -> None:
        with self._lock:
            self._names[name] = ip

    def names(self) -> dict[str, str]:
        with self._lock:
            return dict(self._names)

    def resolve(self, address: str) -> str:
        """``host:port`` with a known Service host replaced by its IP (unknown hosts unchanged)."""
        host, _, port = address.rpartition(":")
        with self._lock:
            ip = self._names.get(host)
        return f"{ip}:{port}" if ip else address

    def _free_ip(self, port: int) -> str:
        taken = set(self._names.values())
        for _ in range(200):
            ip = f"127.{self._rng.randint(16, 254)}.{self._rng.randint(0, 255)}.{self._rng.randint(1, 254)}"
            if ip in taken:
                continue
            with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
                try:
                    probe.bind((ip, port))
                except OSError:
                    continue  # someone (another test run) uses it
            return ip
        raise RuntimeError("no free loopback address found")


def _proc_net() -> dict[int, tuple[str, int]]:
    """Listening TCP sockets of this network namespace: inode -> (ip, port)."""
    found: dict[int, tuple[str, int]] = {}
    for name in ("tcp", "tcp6"):
        try:
            lines = Path(f"/proc/net/{name}").read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if len(fields) < 10 or fields[3] != _LISTEN:
                continue
            addr_hex, port_hex = fields[1].split(":")
            found[int(fields[9])] = (_address(addr_hex), int(port_hex, 16))
    return found


def _address(hex_addr: str) -> str:
    raw = bytes.fromhex(hex_addr)
    # /proc prints each 32-bit word in host (little-endian) order
    data = b"".join(raw[i : i + 4][::-1] for i in range(0, len(raw), 4))
    if len(data) == 4:
        return str(ipaddress.IPv4Address(data))
    v6 = ipaddress.IPv6Address(data)
    return str(v6.ipv4_mapped) if v6.ipv4_mapped else str(v6)


def _socket_inodes(pid: int) -> set[int]:
    inodes: set[int] = set()
    with contextlib.suppress(OSError):
        for fd in os.listdir(f"/proc/{pid}/fd"):
            with contextlib.suppress(OSError):
                target = os.readlink(f"/proc/{pid}/fd/{fd}")
                if target.startswith("socket:["):
                    inodes.add(int(target[8:-1]))
    return inodes


def _children(pid: int) -> list[int]:
    kids: list[int] = []
    with contextlib.suppress(OSError):
        for task in os.listdir(f"/proc/{pid}/task"):
            with contextlib.suppress(OSError):
                kids += [int(p) for p in Path(f"/proc/{pid}/task/{task}/children").read_text().split()]
    return kids


def listeners(pids: Iterable[int]) -> dict[int, set[tuple[str, int]]]:
    """For each pid (with its descendants): the (ip, port) pairs it listens on."""
    table = _proc_net()
    result: dict[int, set[tuple[str, int]]] = {}
    for pid in pids:
        tree, todo = set(), [pid]
        while todo:
            p = todo.pop()
            if p not in tree:
                tree.add(p)
                todo += _children(p)
        inodes = set().union(*(_socket_inodes(p) for p in tree))
        result[pid] = {table[i] for i in inodes if i in table}
    return result
