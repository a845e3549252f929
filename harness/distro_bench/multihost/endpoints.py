"""The rendezvous address of a multi-host run: `--rdzv HOST:PORT` parsed, the address node-rank 0 serves on, and
torchrun's c10d rendezvous store served there alone."""

from __future__ import annotations

import socket

from distro_bench.errors import HarnessError, InputError


def parse_endpoint(text: str) -> tuple[str, int]:
    host, sep, port = text.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise InputError(f"--rdzv: {text!r} is not HOST:PORT (e.g. --rdzv 10.0.0.1:29400)")
    return host.strip("[]"), int(port)


def bind_address(host: str) -> str:
    """The address HOST names (its first IPv4 one, else IPv6): what node-rank 0's stores listen on, alone."""
    try:
        infos = socket.getaddrinfo(host, None, proto=socket.IPPROTO_TCP)
    except socket.gaierror as e:
        raise InputError(f"--rdzv: {host!r} does not resolve ({e.strerror})") from None
    infos.sort(key=lambda ai: ai[0] != socket.AF_INET)
    return str(infos[0][4][0])


def _local_addresses() -> set[str]:
    from pyroute2 import IPRoute

    with IPRoute() as ipr:
        return {a.get_attr("IFA_LOCAL") or a.get_attr("IFA_ADDRESS") for a in ipr.get_addr()} - {None}


def is_local_host(host: str) -> bool:
    """Whether HOST names this machine (an address of one of its interfaces, or loopback)."""
    try:
        addrs = {str(ai[4][0]) for ai in socket.getaddrinfo(host, None, proto=socket.IPPROTO_TCP)}
    except socket.gaierror:
        return False
    return any(a.startswith("127.") or a == "::1" for a in addrs) or bool(addrs & _local_addresses())


def serve_rendezvous(addr: str, port: int, timeout_s: float):
    """torchrun's c10d rendezvous store, served by node 0's agent on `addr` alone: TCPStore listens on every
    address unless handed a socket (`master_listen_fd`), which torchrun never does. torch cannot authenticate
    it (docs/scaling-out.md says what is exposed there and what limits it)."""
    from datetime import timedelta

    from torch.distributed import TCPStore

    sock = socket.socket(socket.AF_INET6 if ":" in addr else socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((addr, port))
        sock.listen(128)
        # The store owns the descriptor from here on (it closes it when it ends).
        return TCPStore(addr, port, is_master=True, wait_for_workers=False, multi_tenant=True,
                        timeout=timedelta(seconds=timeout_s), master_listen_fd=sock.detach())
    except OSError as e:
        sock.close()
        raise HarnessError(f"node-rank 0: cannot serve the rendezvous at {addr}:{port} ({e.strerror}); is the port "
                           "free?") from None
