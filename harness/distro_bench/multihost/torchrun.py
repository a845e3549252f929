"""`python -m distro_bench.multihost.torchrun ARGS`: torchrun (torch.distributed.run) with one change: the store
its rank-0 agent serves to the workers (their process group's rendezvous, `MASTER_ADDR:MASTER_PORT`) listens on
the agent's address (`--local-addr`) alone, not on every address as TCPStore does unless it is handed a socket.

torch's dynamic rendezvous makes that store in `DynamicRendezvousHandler._create_tcp_store_server`, with no
option for the address; this module replaces that one method. Where a torch release no longer has it, the
run goes on with torch's own store and the first line of the torchrun log says so.
"""

from __future__ import annotations

import socket
import sys

import torch.distributed as dist
from torch.distributed.elastic.rendezvous import dynamic_rendezvous
from torch.distributed.run import main as torchrun_main


def _bound_store_server(self, master_addr: str, master_port: int):
    family = socket.AF_INET6 if ":" in master_addr else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((master_addr, master_port))
    sock.listen(128)
    port = sock.getsockname()[1]
    # The store owns the descriptor from here on.
    return dist.TCPStore(host_name=master_addr, port=port, is_master=True, multi_tenant=True,
                         master_listen_fd=sock.detach())


def main() -> None:
    handler = dynamic_rendezvous.DynamicRendezvousHandler
    if hasattr(handler, "_create_tcp_store_server"):
        handler._create_tcp_store_server = _bound_store_server  # type: ignore[method-assign]
    else:
        print("distro_bench.multihost.torchrun: this torch has no DynamicRendezvousHandler._create_tcp_store_server; "
              "the workers' store listens on every address", file=sys.stderr, flush=True)
    torchrun_main()


if __name__ == "__main__":
    main()
