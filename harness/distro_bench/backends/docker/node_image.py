"""The node image of a Kubernetes run (`distro-bench image build --node`): the worker image plus what the
per-host agent needs, the CLI's Python deps, the `distro-bench` command, tc and modprobe
(containers/Dockerfile.node). `distro-bench export k8s` names it by default.

The worker image is built (or found up to date) first, by image.build_image with the same options; the
node image is built FROM it, so both hold the same harness source and the worker image's labels
(version, source hash) hold for it too. Skipped when an image with the same build key exists.
"""

from __future__ import annotations

import hashlib
import re
import shutil
import tempfile
import time
from importlib import metadata
from pathlib import Path

import distro_bench
from distro_bench.backends.docker import image
from distro_bench.errors import InputError

NODE_REPO = "distro-bench-node"
LABEL_NODE_KEY = "distro-bench.node-build-key"
DOCKERFILE = "Dockerfile.node"


def default_node_tag() -> str:
    return f"{NODE_REPO}:{distro_bench.__version__}"


def node_requirements(offline: bool) -> list[str]:
    """The project's own dependencies that the worker image lacks (the CLI's), as pyproject states them;
    offline builds pin the host's versions (the wheelhouse then holds what runs here)."""
    reqs = []
    for spec in metadata.requires("distro-bench") or []:
        if ";" in spec:  # an extra's dependency (dev, mlflow, ...): not the agent's
            continue
        name = re.split(r"[<>=!~ \[]", spec, maxsplit=1)[0].strip()
        if name.lower() in image.WORKER_REQUIREMENTS:
            continue
        reqs.append(image.host_pin(name) if offline else spec)
    return reqs


def node_build_key(worker_id: str, reqs: list[str], wheelhouse: Path | None, offline: bool) -> str:
    h = hashlib.sha256()
    h.update((image.containers_dir() / DOCKERFILE).read_bytes())
    h.update(f"{worker_id}\n{offline}\n{chr(10).join(reqs)}\n".encode())
    if wheelhouse is not None:
        h.update("\n".join(sorted(p.name for p in wheelhouse.glob("*.whl"))).encode())
    return h.hexdigest()[:16]


def build_node_image(*, offline: bool = False, base: str | None = None, tag: str | None = None,
                     worker_tag: str | None = None, force: bool = False, no_cache: bool = False,
                     progress: image.Progress = image._quiet, docker_client=None) -> image.BuildResult:
    """Build (or find up to date) the worker image, then the node image on top of it."""
    t0 = time.monotonic()
    dc = docker_client or image.client()
    tag = tag or default_node_tag()
    if ":" not in tag.rsplit("/", 1)[-1]:
        raise InputError(f"--tag {tag!r}: give a name and a tag, e.g. {default_node_tag()}")
    worker = image.build_image(offline=offline, base=base, tag=worker_tag, force=force, no_cache=no_cache,
                               progress=progress, docker_client=dc)
    reqs = node_requirements(offline)
    wheelhouse = None
    if offline:
        info = image.probe_base(dc, worker.tag)  # the worker image's python, for the wheels' ABI
        wheelhouse = image.build_wheelhouse(reqs, info.python_version, progress)
    key = node_build_key(worker.id, reqs, wheelhouse, offline)
    if not (force or no_cache):
        try:
            img = dc.images.get(tag)
        except Exception:  # docker.errors.ImageNotFound: build it
            img = None
        if img is not None and (img.labels or {}).get(LABEL_NODE_KEY) == key:
            progress(f"{tag} is up to date (build key {key})")
            return image.BuildResult(tag, img.id, worker.tag, True, time.monotonic() - t0, wheelhouse,
                                     img.attrs.get("Size", 0))
    buildargs = {"WORKER_IMAGE": worker.tag, "PIP_ARGS": "--no-index --find-links /tmp/deps" if offline else "",
                 "OFFLINE": "1" if offline else "", "DB_KEY": key}
    with tempfile.TemporaryDirectory(prefix="distro-bench-node-image.") as tmp:
        ctx = Path(tmp)
        shutil.copy2(image.containers_dir() / DOCKERFILE, ctx / "Dockerfile")
        (ctx / "deps").mkdir()
        (ctx / "deps" / "requirements.txt").write_text("\n".join(reqs) + "\n")
        for whl in wheelhouse.glob("*.whl") if wheelhouse else []:
            image._link_or_copy(whl, ctx / "deps" / whl.name)
        progress(f"docker build -t {tag} (FROM {worker.tag}{', offline: --network none' if offline else ''})")
        image_id = image._stream_build(dc, ctx, tag, buildargs, "none" if offline else None, no_cache, progress)
    img = dc.images.get(image_id)
    progress(f"built {tag} ({img.short_id}, {img.attrs.get('Size', 0) / 1e6:.0f} MB) in {time.monotonic() - t0:.0f}s")
    return image.BuildResult(tag, img.id, worker.tag, False, time.monotonic() - t0, wheelhouse,
                             img.attrs.get("Size", 0))
