"""Docker backend and worker image, the parts that need no engine: placement of GPUs/CPUs/memory,
image checks and their messages, build inputs, the Dockerfile's contract, CLI wiring."""

from __future__ import annotations

import re

import pytest

import distro_bench
from distro_bench import paths
from distro_bench.backends.docker import DockerBackend, Placement, device_requests, image, place
from distro_bench.errors import CapabilityError
from distro_bench.scenario.model import scenario_from_dict
from tests.helpers import REPO, tiny_scenario_dict


def nodes_with(hardware: dict, count: int = 2):
    return scenario_from_dict(tiny_scenario_dict(workers=[{"count": count, "hardware": hardware}])).nodes()


# ---- placement -------------------------------------------------------------------------------

def test_cpu_node_gets_cpu_and_memory_limits_and_no_gpu():
    (n, _) = nodes_with({"device": "cpu", "cpus": 1.5, "memory": "2GiB"})
    p = place(n, n_gpus=4)
    assert p == Placement(gpus=(), nano_cpus=1_500_000_000, mem_bytes=2 * 2**30)
    assert device_requests(p) == []


def test_explicit_gpu_is_visible_under_its_host_number():
    (n, _) = nodes_with({"device": "cuda:2", "memory": "24GiB"})
    p = place(n, n_gpus=4)
    # GPUs 0..2 visible so that cuda:2 inside is host GPU 2; GPU memory is not a RAM limit.
    assert p.gpus == (0, 1, 2) and p.mem_bytes is None
    (req,) = device_requests(p)
    assert req["DeviceIDs"] == ["0", "1", "2"] and req["Capabilities"] == [["gpu"]]


def test_auto_device_sees_all_gpus_or_none():
    (n, _) = nodes_with({"device": "auto"})
    assert place(n, n_gpus=2).gpus == (0, 1)
    assert place(n, n_gpus=0).gpus == ()


def test_gpu_asked_but_absent_is_a_capability_error():
    (n, _) = nodes_with({"device": "cuda:1"})
    with pytest.raises(CapabilityError, match=r"cuda:1.*1 GPU"):
        place(n, n_gpus=1)
    (n, _) = nodes_with({"device": "cuda"})
    with pytest.raises(CapabilityError, match="has none"):
        place(n, n_gpus=0)


def test_worker_env_binds_and_counts_eth0_and_keeps_nccl_on_the_link():
    s = scenario_from_dict(tiny_scenario_dict())
    env = DockerBackend(s, REPO / "results" / "unused").worker_env(0)
    assert env["GLOO_SOCKET_IFNAME"] == env["DISTRO_BENCH_WIRE_IFACE"] == env["NCCL_SOCKET_IFNAME"] == "eth0"
    assert env["NCCL_P2P_DISABLE"] == env["NCCL_SHM_DISABLE"] == "1"


# ---- the image's identity ----------------------------------------------------------------------

def test_image_status_problems_say_how_to_build():
    missing = image.ImageStatus(tag=image.default_tag(), exists=False)
    assert "distro-bench image build --offline" in missing.problem
    old = image.ImageStatus(tag=image.default_tag(), exists=True, version="0.0.1", source=image.source_hash())
    assert "holds harness 0.0.1" in old.problem and distro_bench.__version__ in old.problem
    stale = image.ImageStatus(tag=image.default_tag(), exists=True, version=distro_bench.__version__, source="0" * 16)
    assert "other harness source" in stale.problem
    ok = image.ImageStatus(tag=image.default_tag(), exists=True, version=distro_bench.__version__, source=image.source_hash())
    assert ok.problem is None
    other = image.ImageStatus(tag="me/worker:x", exists=False)
    assert "--tag me/worker:x" in other.problem


def test_default_tag_carries_the_harness_version():
    assert image.default_tag() == f"distro-bench-worker:{distro_bench.__version__}"


def test_source_hash_is_stable_and_sees_changes(tmp_path, monkeypatch):
    pkg = tmp_path / "distro_bench"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("__version__ = '9'\n")
    (pkg / "__pycache__").mkdir()
    (pkg / "__pycache__" / "x.pyc").write_bytes(b"junk")
    monkeypatch.setattr(paths, "PACKAGE_DIR", pkg)
    a = image.source_hash()
    (pkg / "__pycache__" / "y.pyc").write_bytes(b"more junk")
    assert image.source_hash() == a  # bytecode is not source
    (pkg / "worker.py").write_text("print(1)\n")
    assert image.source_hash() != a


def test_offline_requirements_pin_the_host_versions_without_local_suffix():
    reqs = image.requirements(offline=True, with_torch=True)
    names = [r.split("==")[0] for r in reqs]
    assert names == list(image.WORKER_REQUIREMENTS)
    assert all(re.fullmatch(r"[a-z]+==[0-9][0-9.]*", r) for r in reqs), reqs
    assert not any(r.startswith("torch") for r in image.requirements(offline=True, with_torch=False))
    assert "torch>=2.4" in image.requirements(offline=False, with_torch=True)


def test_build_context_layout(tmp_path):
    whl = tmp_path / "wh"
    whl.mkdir()
    (whl / "a-1-py3-none-any.whl").write_bytes(b"zip")
    ctx = tmp_path / "ctx"
    ctx.mkdir()
    image._prepare_context(ctx, ["numpy==1"], whl)
    assert (ctx / "Dockerfile").read_text() == (REPO / "containers" / "Dockerfile").read_text()
    assert (ctx / "deps" / "requirements.txt").read_text() == "numpy==1\n"
    assert (ctx / "deps" / "a-1-py3-none-any.whl").exists()
    assert (ctx / "src" / "distro_bench" / "train" / "worker.py").exists()
    assert not list((ctx / "src").rglob("__pycache__"))


def test_dockerfile_contract():
    text = (REPO / "containers" / "Dockerfile").read_text()
    assert re.search(r"^ARG BASE_IMAGE=\S+", text, re.M)
    # dependencies before source, so a source change rebuilds only the last layers
    assert text.index("COPY deps/") < text.index("COPY src/")
    assert "--system-site-packages" in text and "not installing torch" in text
    assert "distro-bench.version=$DB_VERSION" in text


def test_base_builder_uses_debootstrap_minbase_and_docker_import():
    text = (REPO / "containers" / "build-base.sh").read_text()
    assert "debootstrap --variant=minbase" in text and "docker import" in text and "iproute2" in text


# ---- CLI wiring and probing without an engine ---------------------------------------------------------

def test_image_and_clean_commands_have_help(cli):
    for args in (["image", "build", "--help"], ["clean", "--help"], ["image", "--help"]):
        r = cli(*args)
        assert r.exit_code == 0, r.output
    assert "--offline" in cli("image", "build", "--help").output


def test_no_engine_is_reported_not_raised(monkeypatch, tmp_path):
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-such.sock")
    ok, why = DockerBackend.probe(None)
    assert not ok and "no Docker engine reachable" in why
    with pytest.raises(CapabilityError, match="start-engine"):
        image.client(timeout=1)


def test_docker_backend_without_engine_exits_2(cli, write_scenario, monkeypatch, tmp_path):
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-such.sock")
    r = cli("run", write_scenario(tiny_scenario_dict()), "--backend", "docker", "--out", tmp_path / "out")
    assert r.exit_code == 2
    assert "a Docker engine: needed for the docker" in r.output and "Traceback" not in r.output


def test_clean_without_engine_touches_nothing(cli, monkeypatch, tmp_path):
    from distro_bench.backends.netns import NetnsBackend

    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-such.sock")
    monkeypatch.setattr(NetnsBackend, "clean_leftovers", classmethod(lambda cls, include_live=False: ([], [])))
    monkeypatch.setattr("distro_bench.net.owner.runtime_dir", lambda: tmp_path)  # no real run's claim (clean marks killed runs)
    r = cli("clean")
    assert r.exit_code == 0 and "nothing to clean" in r.output


def test_paths_find_the_checkout_and_refuse_an_install_without_one(tmp_path, monkeypatch):
    """harness/distro_bench/paths.py is the one place that looks at where the package lies: in a checkout the
    source tree is pyproject.toml's folder; installed (site-packages) there is none and the image build says
    it needs one."""
    from distro_bench.errors import InputError

    assert paths.source_tree() is not None and (paths.source_tree() / "containers" / "Dockerfile").is_file()
    assert paths.PACKAGE_DIR.parent == paths.IMPORT_ROOT and paths.PACKAGE_DIR.name == "distro_bench"
    site = tmp_path / "site-packages"
    (site / "distro_bench").mkdir(parents=True)
    monkeypatch.setattr(paths, "IMPORT_ROOT", site)
    assert paths.source_tree() is None
    with pytest.raises(InputError, match="source tree"):
        image.containers_dir()
