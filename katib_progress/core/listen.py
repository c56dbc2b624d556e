"""Check a server's listen address before a gRPC server binds it.

gRPC's C core prints its own error lines (``add_port.cc``) before the bind fails; a command that
checks first can say what is wrong in one line: not HOST:PORT, a host that does not resolve, a port
in use or not allowed.
"""

from __future__ import annotations

import socket

from katib_progress.core.errors import ConfigError


def split_address(address: str, field: str = "address") -> tuple[str, int]:
    """``HOST:PORT`` (``[v6]:PORT`` too) as (host, port); ``ConfigError`` otherwise."""
    host, sep, port_text = address.rpartition(":")
    if not sep or not host or not port_text.isdigit() or int(port_text) > 65535:
        raise ConfigError(field, f"expected HOST:PORT, got {address!r}")
    return host.removeprefix("[").removesuffix("]"), int(port_text)


def check_listen_address(address: str, field: str = "address") -> None:
    """Raise ``ConfigError`` naming the reason when ``address`` cannot be listened on now."""
    host, port = split_address(address, field)
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except (socket.gaierror, UnicodeError) as exc:
        raise ConfigError(field, f"cannot resolve host {host!r} of {address}: {exc}") from None
    family, kind, proto, _name, sockaddr = infos[0]
    with socket.socket(family, kind, proto) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(sockaddr)
        except OSError as exc:
            raise ConfigError(field, f"cannot listen on {address}: {exc.strerror or exc}") from None
