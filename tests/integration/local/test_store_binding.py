"""The rendezvous store (rank 0's c10d TCPStore) listens on MASTER_ADDR only, not on every interface (issue 39,
item 6): with --backend local, loopback. torch's env:// rendezvous bound `*:MASTER_PORT`, unauthenticated."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time

import pytest

from distro_bench.backends.base import free_port

# A worker's process group as the loop starts it (train/distributed.py), world 1, held open until stdin closes.
WORKER = """
import sys, torch
from distro_bench.train.distributed import init_process_group
init_process_group(torch.device("cpu"), 0, 1)
print("ready", flush=True)
sys.stdin.read()
"""


def _connects(addr: str, port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(5)
        try:
            s.connect((addr, port))
        except OSError:
            return False
        return True


def test_rank0_store_answers_on_master_addr_only():
    port = free_port()
    env = {**os.environ, "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port), "WORLD_SIZE": "1", "RANK": "0",
           "DISTRO_BENCH_TIMEOUT_S": "60"}
    proc = subprocess.Popen([sys.executable, "-c", WORKER], env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline()
        assert line.strip() == "ready", proc.stderr.read()
        assert _connects("127.0.0.1", port)
        # 127.0.0.2 is this host too (all of 127/8 is loopback): a socket bound to * answers there, one bound
        # to MASTER_ADDR does not. The same holds for the host's external addresses.
        assert not _connects("127.0.0.2", port)
        external = _external_address()
        if external:
            assert not _connects(external, port), f"the store answered on {external}"
    finally:
        proc.stdin.close()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _external_address() -> str | None:
    """An address of this host that is not loopback, if it has one (the address a default route would use)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        try:
            s.connect(("192.0.2.1", 9))  # TEST-NET-1: connect() on UDP sends nothing
            addr = s.getsockname()[0]
        except OSError:
            return None
    return None if addr.startswith("127.") else addr


@pytest.mark.slow
def test_two_ranks_still_rendezvous_through_the_bound_store():
    port = free_port()
    code = """
import os, sys, torch, torch.distributed as dist
from distro_bench.train.distributed import init_process_group, close_process_group
rank = int(sys.argv[1])
init_process_group(torch.device("cpu"), rank, 2)
t = torch.tensor([rank + 1.0]); dist.all_reduce(t); print(t.item(), flush=True)
close_process_group()
"""
    env = {**os.environ, "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port), "WORLD_SIZE": "2", "DISTRO_BENCH_TIMEOUT_S": "60",
           "GLOO_SOCKET_IFNAME": "lo"}
    procs = [subprocess.Popen([sys.executable, "-c", code, str(r)], env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for r in (0, 1)]
    deadline = time.monotonic() + 300
    outs = []
    for p in procs:
        out, err = p.communicate(timeout=max(1, deadline - time.monotonic()))
        assert p.returncode == 0, err[-2000:]
        outs.append(out.strip())
    assert outs == ["3.0", "3.0"]
