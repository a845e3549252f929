"""Docker backend and worker image, the parts that need no engine: placement of GPUs/CPUs/memory,
image checks and their messages, build inputs, the Dockerfile's contract, CLI wiring."""

from __future__ import annotations

import re

import pytest

import distro_bench
from distro_bench import paths
from distro_bench.backends.docker import DockerBackend, Placement, device_requests, image, place
from distro_bench.errors import CapabilityError, InputError
from distro_bench.scenario.loading import scenario_from_dict
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


# ---- `clean` judges a run's liveness from the owner on its labels (issue 39, item 4) -----------------------

class _FakeObj:
    def __init__(self, kind: str, name: str, labels: dict[str, str], engine: _FakeEngine):
        self.name, self.kind, self.engine = name, kind, engine
        self.attrs = {"Config": {"Labels": labels}, "State": {}} if kind == "container" else {"Labels": labels}

    def remove(self, force: bool = False):
        self.engine.removed.append(f"{self.kind} {self.name}")


class _FakeList:
    def __init__(self, engine: _FakeEngine, kind: str):
        self.engine, self.kind = engine, kind

    def list(self, all: bool = False, filters: dict | None = None):
        key, _, value = (filters or {}).get("label", "").partition("=")
        return [o for o in self.engine.objects if o.kind == self.kind and o.attrs.get("Labels", o.attrs.get(
            "Config", {}).get("Labels", {})).get(key) == value and f"{o.kind} {o.name}" not in self.engine.removed]


class _FakeEngine:
    """What remove_labelled asks of a docker client: containers and networks listed by label, removed."""

    def __init__(self):
        self.objects: list[_FakeObj] = []
        self.removed: list[str] = []
        self.containers, self.networks = _FakeList(self, "container"), _FakeList(self, "network")

    def add_run(self, run_id: str, labels: dict[str, str]):
        self.objects += [_FakeObj("container", f"distro-bench-{run_id}-node0", labels, self),
                         _FakeObj("network", f"distro-bench-{run_id}", labels, self)]


@pytest.fixture
def no_claims(monkeypatch, tmp_path):
    """This host's claim files out of sight, as from another mount namespace or a user without /run."""
    monkeypatch.setattr("distro_bench.net.owner.runtime_dir", lambda: tmp_path)
    return tmp_path


def _dead_pid() -> int:
    import subprocess

    p = subprocess.Popen(["true"])
    p.wait()
    return p.pid


def test_clean_keeps_a_live_runs_containers_whose_claim_it_cannot_see(no_claims):
    from distro_bench.backends.docker.leftovers import owner_labels, remove_labelled

    engine = _FakeEngine()
    engine.add_run("live", owner_labels("live"))  # made by this (live) process; no claim file in sight
    removed, problems = remove_labelled(engine, include_live=False)
    assert removed == [] and engine.removed == [] and problems == []


def test_clean_removes_what_a_proven_dead_owner_left(no_claims):
    from distro_bench.backends.docker.leftovers import LABEL_OWNER_PREFIX, owner_labels, remove_labelled

    engine = _FakeEngine()
    dead = owner_labels("dead")
    dead[LABEL_OWNER_PREFIX + "pid"] = str(_dead_pid())
    recycled = owner_labels("recycled")
    recycled[LABEL_OWNER_PREFIX + "start"] = "1"  # our pid, another start time: the pid was reused
    rebooted = owner_labels("rebooted")
    rebooted[LABEL_OWNER_PREFIX + "boot"] = "0000-another-boot"
    for run_id, labels in (("dead", dead), ("recycled", recycled), ("rebooted", rebooted)):
        engine.add_run(run_id, labels)
    removed, problems = remove_labelled(engine, include_live=False)
    assert problems == [] and sorted(removed) == sorted(engine.removed) and len(removed) == 6


def test_clean_never_removes_what_it_cannot_prove_dead(no_claims):
    from distro_bench.backends.docker.leftovers import (
        LABEL_OWNER,
        LABEL_OWNER_PREFIX,
        LABEL_RUN,
        owner_labels,
        remove_labelled,
    )

    engine = _FakeEngine()
    elsewhere = owner_labels("elsewhere")
    elsewhere[LABEL_OWNER_PREFIX + "host"] = "another-host"
    elsewhere[LABEL_OWNER_PREFIX + "pid"] = str(_dead_pid())  # dead here, but the pid is another host's
    other_ns = owner_labels("otherns")
    other_ns[LABEL_OWNER_PREFIX + "pidns"] = "1"
    engine.add_run("elsewhere", elsewhere)
    engine.add_run("otherns", other_ns)
    engine.add_run("old", {LABEL_OWNER: "1", LABEL_RUN: "old"})  # an older harness: no owner at all
    removed, problems = remove_labelled(engine, include_live=False)
    assert removed == [] and engine.removed == []
    assert len(problems) == 6 and all("cannot prove" in p and "--force" in p for p in problems), problems
    assert any("another-host" in p for p in problems) and any("older distro-bench" in p for p in problems)


def test_clean_force_removes_a_live_run_and_tells_it(no_claims):
    from distro_bench.backends.docker.leftovers import owner_labels, remove_labelled
    from distro_bench.net import owner

    engine = _FakeEngine()
    engine.add_run("live", owner_labels("live"))
    removed, problems = remove_labelled(engine, include_live=True)
    assert problems == [] and len(removed) == 2
    note = owner.ended_by_clean()  # what the live run's lifecycle reads when it finishes
    assert note == "container distro-bench-live-node0, network distro-bench-live"
    assert owner.ended_by_clean() is None  # read once


def test_containers_and_network_carry_their_owner():
    from distro_bench.backends.docker.backend import DROPPED_CAPS, _owner_labels
    from distro_bench.backends.docker.leftovers import LABEL_OWNER_PREFIX
    from distro_bench.net import owner

    labels = _owner_labels("r1")
    rec = {k: labels[LABEL_OWNER_PREFIX + k] for k in owner.OWNER_KEYS}
    assert rec == owner.record() and rec["pid"] == str(__import__("os").getpid())
    assert DROPPED_CAPS == ["ALL"]


def test_the_image_carries_the_methods_registry_and_with_packages(tmp_path):
    # Issue 47: pyproject.toml (the entry-point group the shipped methods register in) goes beside the package,
    # where scenario/methods.py reads it inside the image; `--with` wheels go to deps/extra/.
    extra = tmp_path / "mine-1-py3-none-any.whl"
    extra.write_bytes(b"zip")
    ctx = tmp_path / "ctx"
    ctx.mkdir()
    image._prepare_context(ctx, ["numpy==1"], None, [extra])
    assert (ctx / "src" / "pyproject.toml").read_bytes() == (REPO / "pyproject.toml").read_bytes()
    assert (ctx / "deps" / "extra" / extra.name).exists()
    text = (REPO / "containers" / "Dockerfile").read_text()
    assert "/tmp/deps/extra/*.whl" in text and 'distro-bench.plugin-modules="$DB_PLUGIN_MODULES"' in text


def test_a_with_package_becomes_a_wheel_whose_modules_and_methods_are_labelled(tmp_path):
    wheels = image.build_extra_wheels([REPO / "examples" / "signvote"], tmp_path / "w")
    assert len(wheels) == 1 and wheels[0].suffix == ".whl"
    assert image.wheel_plugins(wheels) == {"distributions": ["distro_bench_signvote"], "modules": ["signvote"],
                                           "methods": ["signvote"]}
    with pytest.raises(InputError, match="not a wheel"):
        image.build_extra_wheels([tmp_path], tmp_path / "w2")


def test_a_method_the_image_lacks_is_refused_with_the_line_that_builds_it_in():
    s = scenario_from_dict(tiny_scenario_dict(optimizers={
        "adamw": {"lr": 1e-3}, "mine": {"type": "distro_bench.train.optim.distro:DisTrO", "lr": 1e-3}}))
    bare = image.ImageStatus(tag=image.default_tag(), exists=True)
    assert image.method_problems(bare, s) == []  # an import path to a shipped method is shipped

    class Plugin:
        type = "signvote.method:SignVote"

    s2 = s.model_copy(update={"optimizers": {**s.optimizers, "sv": Plugin()}})
    [problem] = image.method_problems(bare, s2)
    assert "optimizers.sv" in problem and "'signvote'" in problem and "image build --offline --with" in problem
    built = image.ImageStatus(tag=image.default_tag(), exists=True, plugins={"modules": ["signvote"], "methods": []})
    assert image.method_problems(built, s2) == []


def test_a_model_factory_the_image_lacks_is_refused_with_the_line_that_builds_it_in():
    s = scenario_from_dict(tiny_scenario_dict(model={"factory": "tinymlp:build"}))
    bare = image.ImageStatus(tag=image.default_tag(), exists=True)
    [problem] = image.method_problems(bare, s)
    assert "model.factory tinymlp:build" in problem and "'tinymlp'" in problem and "--with PATH" in problem
    built = image.ImageStatus(tag=image.default_tag(), exists=True, plugins={"modules": ["tinymlp"], "methods": []})
    assert image.method_problems(built, s) == []
