"""Fixtures of the Docker tests: the engine, the worker image (built only when missing or stale), and a
tracker that fails a test leaving containers or networks of its backends behind (after removing them)."""

from __future__ import annotations

import pytest

from distro_bench.backends.docker import DockerBackend, image, remove_labelled
from distro_bench.errors import CapabilityError
from tests.helpers import missing_tools, ours


@pytest.fixture(scope="module")
def engine():
    try:
        client = image.client(timeout=5.0)
    except CapabilityError as e:
        pytest.skip(f"no Docker engine on this host ({e}); .ci/run starts one with containers/start-engine.sh")
    yield client
    client.close()


@pytest.fixture(scope="module")
def built_image(engine):
    """The worker image, built here only if missing or stale (CI builds it before the tests)."""
    import docker

    try:
        engine.images.get(image.OFFLINE_BASE)
    except docker.errors.ImageNotFound:
        if missing_tools("debootstrap"):
            pytest.skip("no base image and no debootstrap to build one (apt-get install debootstrap)")
    return image.build_image(offline=True, docker_client=engine)


@pytest.fixture
def worker_image(built_image, engine):
    """Re-checked per test: in a shared work tree the harness source may change during the module,
    and the backend refuses an image built from other source (rebuilding then takes seconds)."""
    if image.image_status(engine, built_image.tag).problem:
        return image.build_image(offline=True, docker_client=engine)
    return built_image


@pytest.fixture
def tracked(engine):
    """Backends a test creates; after the test, none of their containers or networks may remain
    (they are removed here in any case, so a failing test leaves nothing behind)."""
    backends: list[DockerBackend] = []
    yield backends
    left = [name for b in backends for name in ours(engine, b.run_id)]
    for b in backends:
        remove_labelled(engine, b.run_id)
    assert not left, f"left behind: {left}"
