"""The docker backend: one container per worker node, links shaped from the host.

- `backend.py`: `DockerBackend` (network, node containers, splices, workers);
- `worker.py`: `ContainerWorker`, a worker exec'ed into its node container;
- `leftovers.py`: removing containers and networks labelled as ours (teardown and `clean`);
- `image.py`: the worker image (what it holds, whether it matches this harness, building it);
- `placement.py`: GPUs, CPUs and memory per node from its hardware profile.
Link emulation itself is harness/distro_bench/net/emulation.py, shared with the netns backend.
"""

from distro_bench.backends.docker.backend import LABEL_RANK, DockerBackend, host_veth
from distro_bench.backends.docker.leftovers import IFACE, LABEL_OWNER, LABEL_RUN, remove_labelled, unsplice
from distro_bench.backends.docker.placement import Placement, device_requests, host_gpu_count, place
from distro_bench.backends.docker.worker import ContainerWorker

__all__ = ["IFACE", "LABEL_OWNER", "LABEL_RANK", "LABEL_RUN", "ContainerWorker", "DockerBackend", "Placement",
           "device_requests", "host_gpu_count", "host_veth", "place", "remove_labelled", "unsplice"]
