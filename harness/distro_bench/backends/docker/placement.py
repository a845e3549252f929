"""Where a node's container runs: GPUs, CPUs and memory from its hardware profile."""

from __future__ import annotations

from dataclasses import dataclass

from distro_bench.errors import CapabilityError
from distro_bench.net import host
from distro_bench.scenario.model import Node

SHM_SIZE = "1g"  # torch's DataLoader/gloo use /dev/shm; docker's default of 64 MB is too small


def host_gpu_count() -> int:
    """GPUs on the host as the engine sees them (the driver's list), whatever build of torch is installed here."""
    return len(host.gpus(use_torch=False))


@dataclass(frozen=True)
class Placement:
    """What one node's container is given. `gpus`: host GPU ids visible inside, numbered as on the host
    up to the one the worker uses, so `cuda:N` and the `auto` choice (rank % count) pick the same
    device as under the netns backend."""

    gpus: tuple[int, ...] = ()
    nano_cpus: int | None = None
    mem_bytes: int | None = None

    def describe(self) -> dict:
        return {"gpus": list(self.gpus), "cpus": self.nano_cpus / 1e9 if self.nano_cpus else None,
                "memory_bytes": self.mem_bytes, "shm_size": SHM_SIZE}


def place(node: Node, n_gpus: int) -> Placement:
    hw = node.hardware
    gpus: tuple[int, ...] = ()
    if hw.device.startswith("cuda:"):
        want = int(hw.device.split(":")[1])
        if want >= n_gpus:
            raise CapabilityError(f"{node.name}: hardware asks for {hw.device} but the host has {n_gpus} GPU(s)")
        gpus = tuple(range(want + 1))
    elif hw.device == "cuda" or (hw.device == "auto" and n_gpus):
        if not n_gpus:
            raise CapabilityError(f"{node.name}: hardware asks for a GPU (device: cuda) but the host has none")
        gpus = tuple(range(n_gpus))
    # A GPU profile's `memory` is device memory (the worker caps its CUDA allocator with it); only a
    # node that trains on the CPU gets it as the container's RAM limit.
    mem = hw.memory if (hw.memory and not gpus) else None
    return Placement(gpus=gpus, nano_cpus=int(hw.cpus * 1e9) if hw.cpus else None, mem_bytes=mem)


def device_requests(p: Placement) -> list:
    if not p.gpus:
        return []
    import docker

    return [docker.types.DeviceRequest(device_ids=[str(g) for g in p.gpus], capabilities=[["gpu"]])]
