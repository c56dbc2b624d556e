"""Names and networks for processes that run without pods.

- ``HostsFile``: the cluster DNS of the e2e tier. katib-controller, the collector and every "pod"
  process run in a mount namespace of their own in which this file is bind-mounted over /etc/hosts
  (``in_mount_namespace``), never the machine's /etc/hosts. Each Service name maps to its loopback
  address; the file is rewritten in place (same inode), so a bind mount sees every new name.
- ``podnet``: a pod network namespace for programs that bind a fixed wildcard address (Katib's goptuna
  suggestion binds ``0.0.0.0:6789``, cmd/suggestion/goptuna/v1beta1/main.go ``address``): the program
  runs in a fresh network namespace and a relay, which opened its listener on the pod's loopback address
  before leaving the host's namespace, carries each connection to it (``python -m tests.e2e.podnet``).
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path

from tests.katibmodel.network import ClusterDNS


class HostsFile:
    def __init__(self, path: Path, dns: ClusterDNS) -> None:
        self.path, self.dns = path, dns
        self._lock = threading.Lock()
        self._written = ""
        path.write_text("127.0.0.1 localhost\n")

    def sync(self) -> None:
        """Write every name the cluster DNS knows (in place: the bind mounts keep the inode)."""
        names = self.dns.names()
        text = "127.0.0.1 localhost\n" + "".join(f"{ip} {name}\n" for name, ip in sorted(names.items()))
        with self._lock:
            if text != self._written:
                with self.path.open("r+") as f:
                    f.write(text)
                    f.truncate()
                self._written = text

    def add(self, name: str, ip: str | None = None) -> str:
        if ip is None:
            ip = self.dns.ip(name)
        else:
            self.dns.register(name, ip)
        self.sync()
        return ip


def in_mount_namespace(argv: Sequence[str], binds: Sequence[tuple[Path, str]]) -> list[str]:
    """``argv`` in a private mount namespace with each ``(source, target)`` bind-mounted."""
    mounts = " && ".join(f'mount --bind "{src}" "{dst}"' for src, dst in binds)
    script = f'{mounts} && exec "$@"' if mounts else 'exec "$@"'
    return ["unshare", "--mount", "--propagation", "private", "--", "sh", "-c", script, "sh", *argv]
