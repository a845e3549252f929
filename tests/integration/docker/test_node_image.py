"""The node image of `distro-bench export k8s` (`distro-bench image build --node`): it has the `distro-bench`
command, tc, and the agent's way of starting workers without NET_ADMIN works in it. Skipped without a
Docker engine (the `engine` fixture says why)."""

from __future__ import annotations

import pytest

from distro_bench import __version__
from distro_bench.backends.docker import node_image

pytestmark = [pytest.mark.docker, pytest.mark.slow]
CAP_NET_ADMIN = 12


def _run(engine, tag: str, argv: list[str], **kw) -> str:
    return engine.containers.run(tag, argv, remove=True, network_disabled=True,
                                 labels={"distro-bench": "1", "distro-bench.role": "test"}, **kw).decode()


def _has_net_admin(status: str) -> bool:
    eff = next(line for line in status.splitlines() if line.startswith("CapEff:"))
    return bool(int(eff.split()[1], 16) >> CAP_NET_ADMIN & 1)


def test_node_image_has_the_command_tc_and_drops_net_admin_for_workers(engine, built_image):
    r = node_image.build_node_image(offline=True, worker_tag=built_image.tag, docker_client=engine)
    assert r.tag == node_image.default_node_tag()
    assert _run(engine, r.tag, ["distro-bench", "--version"]).strip().endswith(__version__)
    assert "iproute2" in _run(engine, r.tag, ["tc", "-V"])
    # As in the pod: root with NET_ADMIN added; what the agent runs through enter.py has none.
    enter = "/opt/distro-bench/distro_bench/net/enter.py"
    agent = _run(engine, r.tag, ["cat", "/proc/self/status"], cap_add=["NET_ADMIN"], user="0")
    worker = _run(engine, r.tag, ["/opt/venv/bin/python", "-I", enter, "--drop-caps", "net_admin,sys_admin", "--",
                                  "cat", "/proc/self/status"], cap_add=["NET_ADMIN"], user="0")
    assert _has_net_admin(agent) and not _has_net_admin(worker)
