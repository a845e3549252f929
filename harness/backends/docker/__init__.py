"""The docker backend: one container per worker node, links shaped from the host.

- `backend.py`: `DockerBackend` (containers, splices, workers) and the labelled-leftover cleaner;
- `image.py`: the worker image (what it holds, whether it matches this harness, building it);
- `placement.py`: GPUs, CPUs and memory per node from its hardware profile.
Link emulation itself is harness/net/emulation.py, shared with the netns backend.
"""

from harness.backends.docker.backend import (
    IFACE,
    LABEL_OWNER,
    LABEL_RANK,
    LABEL_RUN,
    ContainerWorker,
    DockerBackend,
    host_veth,
    remove_labelled,
    unsplice,
)
from harness.backends.docker.placement import Placement, device_requests, host_gpu_count, place

__all__ = ["IFACE", "LABEL_OWNER", "LABEL_RANK", "LABEL_RUN", "ContainerWorker", "DockerBackend", "Placement",
           "device_requests", "host_gpu_count", "host_veth", "place", "remove_labelled", "unsplice"]
