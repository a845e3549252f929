"""The worker image: what it must contain, whether the one present matches this harness, and building it.

`build_image` prepares a context (containers/Dockerfile, the worker's requirements, a wheelhouse for
offline builds, the harness source), skips the build when an image with the same build key exists,
and otherwise streams `docker build` with progress. Offline builds install only from a wheelhouse
downloaded on the host (containers cannot reach PyPI here) and run with `--network none`.

Labels on the image say what it holds; the docker backend refuses an image whose harness version or
source differs from the installed one, and says how to rebuild it. A method from another distribution
(docs/extending.md) goes in with `--with PATH` (the package's folder or a wheel): built into a wheel here,
installed into the image, and listed in its `distro-bench.plugins` label, which the backend checks a scenario's
methods against before it starts a container.
"""

from __future__ import annotations

import configparser
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path

import distro_bench
from distro_bench import paths
from distro_bench.errors import CapabilityError, HarnessError, InputError
from distro_bench.scenario import methods

IMAGE_REPO = "distro-bench-worker"
OFFLINE_BASE = "distro-bench-base:bookworm"
# GPU users: torch and CUDA come from this image, and the Dockerfile installs no torch on top.
DEFAULT_BASE = "pytorch/pytorch:2.5.1-cuda12.4-cudnn9-runtime"
IMAGE_PYTHON = "/opt/venv/bin/python"

LABEL_KIND = "distro-bench.image"
LABEL_VERSION = "distro-bench.version"
LABEL_SOURCE = "distro-bench.source-hash"
LABEL_KEY = "distro-bench.build-key"
LABEL_BASE = "distro-bench.base"
LABEL_PYTHON = "distro-bench.python"
# What `--with` put in, comma-separated (a Dockerfile LABEL strips quotes, so no JSON): the top-level modules
# and the names registered in the entry-point group distro_bench.optimizers
LABEL_PLUGIN_MODULES = "distro-bench.plugin-modules"
LABEL_PLUGIN_METHODS = "distro-bench.plugin-methods"

# What `python -m distro_bench.train.worker` imports, by distribution name (psutil: its liveness reads).
# Offline builds pin the host's versions (the wheelhouse then holds exactly what runs here); online builds use the project's floors.
WORKER_REQUIREMENTS = {"torch": ">=2.4", "numpy": "", "pydantic": ">=2.6", "pyyaml": ">=6", "psutil": ">=5.9"}

# Progress lines: our own messages, and the engine's output indented by two spaces.
Progress = Callable[[str], None]


def default_tag() -> str:
    return f"{IMAGE_REPO}:{distro_bench.__version__}"


def _quiet(_: str) -> None:
    pass


def containers_dir() -> Path:
    """containers/ of the source tree this harness runs from (the Dockerfile and the base builder)."""
    tree = paths.source_tree()
    d = (tree or paths.IMPORT_ROOT) / "containers"
    if tree is None or not (d / "Dockerfile").is_file():
        raise InputError(f"{d / 'Dockerfile'} not found: building the worker image needs the distro-bench "
                         "source tree (git clone, then `pip install -e .`)")
    return d


def _package_files() -> list[Path]:
    root = paths.PACKAGE_DIR
    return sorted(p for p in root.rglob("*")
                  if p.is_file() and "__pycache__" not in p.parts and p.suffix not in (".pyc", ".pyo"))


def _project_file() -> Path | None:
    """pyproject.toml of the tree this harness runs from: the image carries it, since the one registry of
    methods (its entry-point group, harness/distro_bench/scenario/methods.py) is read from it there."""
    tree = paths.source_tree()
    return tree / "pyproject.toml" if tree is not None else None


def source_hash() -> str:
    """A digest of the harness package as installed here (and of pyproject.toml, its methods' registry): an
    image built from other source differs."""
    root = paths.PACKAGE_DIR
    h = hashlib.sha256()
    for p in _package_files():
        h.update(str(p.relative_to(root)).encode() + b"\0" + p.read_bytes() + b"\0")
    project = _project_file()
    if project is not None:
        h.update(b"pyproject.toml\0" + project.read_bytes())
    return h.hexdigest()[:16]


def client(timeout: float = 10.0):
    """A docker SDK client for the engine in the environment (DOCKER_HOST or the local socket), pinged."""
    try:
        import docker
    except ImportError:
        raise CapabilityError("the docker Python SDK is not installed (pip install docker)") from None
    try:
        c = docker.from_env(timeout=timeout)
        c.ping()
        return c
    except Exception as e:
        raise CapabilityError(f"no Docker engine reachable ({type(e).__name__}: {_short(e)}); "
                              "start one (e.g. containers/start-engine.sh, or `sudo systemctl start docker`)") from None


def _short(e: BaseException, limit: int = 200) -> str:
    s = str(e).replace("\n", " ")
    return s if len(s) <= limit else s[:limit] + "..."


# ---- checking the image a run will use -------------------------------------------------------

@dataclass(frozen=True)
class ImageStatus:
    tag: str
    exists: bool
    id: str | None = None
    version: str | None = None
    source: str | None = None
    python: str = IMAGE_PYTHON
    plugins: dict = field(default_factory=dict)  # {"modules": [...], "methods": [...]}: what `--with` put in

    @property
    def problem(self) -> str | None:
        """Why a run cannot use this image, with what to do; None when it matches this harness."""
        build = f"build it with `distro-bench image build --offline`{'' if self.tag == default_tag() else f' --tag {self.tag}'}"
        if not self.exists:
            return f"worker image {self.tag} not found; {build} (or without --offline where images can be pulled)"
        if self.version != distro_bench.__version__:
            return f"worker image {self.tag} holds harness {self.version or 'unknown'}, installed is {distro_bench.__version__}; re{build}"
        if self.source != source_hash():
            return f"worker image {self.tag} was built from other harness source than the installed one; re{build}"
        return None


def image_status(docker_client, tag: str | None = None) -> ImageStatus:
    import docker

    tag = tag or default_tag()
    try:
        img = docker_client.images.get(tag)
    except docker.errors.ImageNotFound:
        return ImageStatus(tag=tag, exists=False)
    labels = img.labels or {}
    plugins = {key: [x for x in (labels.get(label) or "").split(",") if x]
               for key, label in (("modules", LABEL_PLUGIN_MODULES), ("methods", LABEL_PLUGIN_METHODS))}
    return ImageStatus(tag=tag, exists=True, id=img.id, version=labels.get(LABEL_VERSION),
                       source=labels.get(LABEL_SOURCE), python=labels.get(LABEL_PYTHON, IMAGE_PYTHON),
                       plugins=plugins)


def method_problems(status: ImageStatus, scenario) -> list[str]:
    """The scenario's methods and model factory from other distributions (or import paths) whose module the image
    lacks, each with the line that builds it in. The shipped methods and models are always there."""
    have = set(status.plugins.get("modules") or [])
    problems = []
    for name, cfg in scenario.optimizers.items():
        if methods.is_shipped(cfg.type):
            continue
        try:
            module = methods.top_module(cfg.type)
        except methods.MethodError as e:
            problems.append(f"optimizers.{name}: {e}")
            continue
        if module not in have:
            problems.append(f"optimizers.{name} (type {cfg.type}) needs the module {module!r}, which worker image "
                            f"{status.tag} does not hold; build it in: distro-bench image build --offline --with "
                            "PATH (the folder with the package's pyproject.toml, or its wheel; repeat --with for more)")
    factory = scenario.model.factory  # a model from another distribution (docs/models-and-data.md): the same rule
    if factory and (module := factory.partition(":")[0].split(".")[0]) not in have:
        problems.append(f"model.factory {factory} needs the module {module!r}, which worker image {status.tag} does "
                        "not hold; build it in: distro-bench image build --offline --with PATH (the folder with the "
                        "package's pyproject.toml, or its wheel)")
    return problems


def matching_images(docker_client) -> list[ImageStatus]:
    """Every tagged worker image that holds this harness (version and source)."""
    found = []
    for img in docker_client.images.list(filters={"label": f"{LABEL_KIND}=worker"}):
        for tag in img.tags:
            status = image_status(docker_client, tag)
            if status.problem is None:
                found.append(status)
    return found


def require_image(docker_client, tag: str | None = None) -> ImageStatus:
    status = image_status(docker_client, tag)
    if status.problem:
        raise CapabilityError(status.problem)
    return status


# ---- building ----------------------------------------------------------------------------------

@dataclass(frozen=True)
class BaseInfo:
    image: str
    id: str
    python_version: str  # "3.11"
    torch: str | None


@dataclass(frozen=True)
class BuildResult:
    tag: str
    id: str
    base: str
    cached: bool  # True: an image with the same build key existed and nothing was built
    seconds: float
    wheelhouse: Path | None
    size_bytes: int


def host_pin(dist: str) -> str:
    """`dist==VERSION`, the version installed here: what an offline build pins (its wheelhouse holds what runs here)."""
    try:
        # `==2.13.0` also matches a local build such as 2.13.0+cpu, so drop the local part.
        return f"{dist}=={metadata.version(dist).split('+')[0]}"
    except metadata.PackageNotFoundError:
        raise HarnessError(f"--offline pins the host's packages, but {dist} is not installed here") from None


def requirements(offline: bool, with_torch: bool) -> list[str]:
    reqs = []
    for dist, floor in WORKER_REQUIREMENTS.items():
        if dist == "torch" and not with_torch:
            continue
        reqs.append(host_pin(dist) if offline else f"{dist}{floor}")
    return reqs


def ensure_base(docker_client, base: str, progress: Progress = _quiet) -> None:
    """The offline base is built here when missing (debootstrap); any other base must exist or be pullable."""
    import docker

    try:
        docker_client.images.get(base)
        return
    except docker.errors.ImageNotFound:
        pass
    if base != OFFLINE_BASE:
        return  # `docker build` pulls it (and fails with the engine's message where nothing can be pulled)
    script = containers_dir() / "build-base.sh"
    progress(f"base image {base} not found: building it with {script} (debootstrap, a minute or two)")
    proc = subprocess.Popen([str(script), base], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    assert proc.stdout is not None
    lines = []
    for line in proc.stdout:
        lines.append(line.rstrip())
        progress("  " + line.rstrip())
    if proc.wait() != 0:
        raise HarnessError(f"building the base image {base} failed: " + " | ".join(lines[-5:]))


def probe_base(docker_client, base: str) -> BaseInfo:
    """Which python and torch the base image has (one throwaway container, no network)."""
    import docker

    script = ('PY=$(command -v python3 || command -v python) || { echo "no python"; exit 3; }; '
              '"$PY" -c "import sys; print(\'%d.%d\' % sys.version_info[:2])"; '
              '"$PY" -c "import torch; print(torch.__version__)" 2>/dev/null || echo none')
    try:
        img = docker_client.images.get(base)
    except docker.errors.ImageNotFound:
        try:
            img = docker_client.images.pull(base)
        except docker.errors.APIError as e:
            raise CapabilityError(f"base image {base} is not here and cannot be pulled ({_short(e)}); on hosts "
                                  f"without registry access use `distro-bench image build --offline`") from None
    try:
        out = docker_client.containers.run(img.id, [script], entrypoint=["sh", "-c"], remove=True,
                                           network_disabled=True, labels={"distro-bench": "1", "distro-bench.role": "probe"})
    except docker.errors.ContainerError as e:
        raise CapabilityError(f"base image {base} has no usable python3 ({_short(e)})") from None
    lines = out.decode().split()
    return BaseInfo(image=base, id=img.id, python_version=lines[0], torch=None if lines[1] == "none" else lines[1])


def wheelhouse_dir() -> Path:
    root = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "distro-bench" / "wheelhouse"
    return root


def build_wheelhouse(reqs: list[str], python_version: str, progress: Progress = _quiet) -> Path:
    """Wheels for `reqs` and their dependencies, for CPython `python_version` on Linux, downloaded by the
    host's pip (its indexes and find-links). Cached by content: the second build reuses the folder."""
    key = hashlib.sha256(("\n".join(reqs) + f"\npy{python_version}").encode()).hexdigest()[:12]
    dest = wheelhouse_dir() / key
    if (dest / ".complete").exists():
        progress(f"wheelhouse: reusing {dest}")
        return dest
    tmp = Path(tempfile.mkdtemp(prefix=f"{key}.", dir=dest.parent if dest.parent.exists() else None))
    argv = [sys.executable, "-m", "pip", "download", "--disable-pip-version-check", "--only-binary=:all:",
            "--dest", str(tmp)]
    if python_version != f"{sys.version_info.major}.{sys.version_info.minor}":
        argv += ["--python-version", python_version]
    progress(f"wheelhouse: pip download {' '.join(reqs)}")
    proc = subprocess.run(argv + reqs, capture_output=True, text=True)
    if proc.returncode != 0:
        shutil.rmtree(tmp, ignore_errors=True)
        tail = " | ".join((proc.stderr or proc.stdout).strip().splitlines()[-4:])
        raise HarnessError(f"building the wheelhouse failed (pip download exit {proc.returncode}): {tail}")
    wheels = sorted(p.name for p in tmp.glob("*.whl"))
    (tmp / ".complete").write_text("\n".join(wheels) + "\n")
    dest.parent.mkdir(parents=True, exist_ok=True)
    if dest.exists():
        shutil.rmtree(dest)
    tmp.rename(dest)
    size = sum(p.stat().st_size for p in dest.glob("*.whl"))
    progress(f"wheelhouse: {len(wheels)} wheels, {size / 1e6:.0f} MB in {dest}")
    return dest


def _link_or_copy(src: Path, dst: Path) -> None:
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)


def build_extra_wheels(sources: list[Path], dest: Path, progress: Progress = _quiet) -> list[Path]:
    """`--with` packages as wheels in `dest`: a wheel as is, a package folder built with this host's pip (`pip
    wheel --no-deps`: its dependencies must be in the image already). InputError naming a source that is neither."""
    dest.mkdir(parents=True, exist_ok=True)
    out = []
    for src in sources:
        src = Path(src).resolve()
        if src.is_file() and src.suffix == ".whl":
            shutil.copy2(src, dest / src.name)
            out.append(dest / src.name)
            continue
        if not (src.is_dir() and ((src / "pyproject.toml").is_file() or (src / "setup.py").is_file())):
            raise InputError(f"--with {src}: not a wheel (.whl) nor a package folder (with pyproject.toml)")
        before = set(dest.glob("*.whl"))
        progress(f"--with {src}: pip wheel --no-deps")
        proc = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--disable-pip-version-check",
                               "--quiet", "-w", str(dest), str(src)], capture_output=True, text=True)
        if proc.returncode != 0:
            tail = " | ".join((proc.stderr or proc.stdout).strip().splitlines()[-4:])
            raise InputError(f"--with {src}: building its wheel failed (pip wheel exit {proc.returncode}): {tail}")
        out += sorted(set(dest.glob("*.whl")) - before)
    return out


def wheel_plugins(wheels: list[Path]) -> dict:
    """LABEL_PLUGINS of these wheels: their distributions, top-level modules and `distro_bench.optimizers` names."""
    dists, modules, names = [], set(), set()
    for whl in wheels:
        with zipfile.ZipFile(whl) as z:
            files = z.namelist()
            info = next((f.split("/")[0] for f in files if f.endswith(".dist-info/METADATA")), None)
            dists.append(whl.name.split("-")[0])
            modules |= {f.split("/")[0].removesuffix(".py") for f in files
                        if not f.split("/")[0].endswith((".dist-info", ".data"))}
            if info and f"{info}/entry_points.txt" in files:
                parser = configparser.ConfigParser(delimiters=("=",))
                parser.optionxform = str  # type: ignore[assignment,method-assign]  # names keep their case
                parser.read_string(z.read(f"{info}/entry_points.txt").decode())
                if parser.has_section(methods.GROUP):
                    names |= set(parser.options(methods.GROUP))
    return {"distributions": sorted(dists), "modules": sorted(modules), "methods": sorted(names)}


def _prepare_context(ctx: Path, reqs: list[str], wheelhouse: Path | None, extra: list[Path] | None = None) -> None:
    cdir = containers_dir()
    shutil.copy2(cdir / "Dockerfile", ctx / "Dockerfile")
    (ctx / "deps").mkdir()
    (ctx / "deps" / "requirements.txt").write_text("\n".join(reqs) + "\n")
    if wheelhouse is not None:
        for whl in wheelhouse.glob("*.whl"):
            _link_or_copy(whl, ctx / "deps" / whl.name)
    src_root = paths.PACKAGE_DIR
    for p in _package_files():
        dst = ctx / "src" / "distro_bench" / p.relative_to(src_root)
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(p, dst)
    project = _project_file()
    if project is not None:  # the methods' registry (scenario/methods.py finds it beside the package)
        shutil.copy2(project, ctx / "src" / "pyproject.toml")
    (ctx / "deps" / "extra").mkdir()
    for whl in extra or []:
        _link_or_copy(whl, ctx / "deps" / "extra" / whl.name)


def build_key(base_id: str, reqs: list[str], wheelhouse: Path | None, offline: bool,
              extra: list[Path] | None = None) -> str:
    h = hashlib.sha256()
    for whl in sorted(extra or []):  # the `--with` wheels, by content: a changed plugin is a new image
        h.update(whl.name.encode() + b"\0" + hashlib.sha256(whl.read_bytes()).digest())
    h.update((containers_dir() / "Dockerfile").read_bytes())
    h.update(f"{base_id}\n{offline}\n{chr(10).join(reqs)}\n{source_hash()}\n".encode())
    if wheelhouse is not None:
        h.update("\n".join(sorted(p.name for p in wheelhouse.glob("*.whl"))).encode())
    return h.hexdigest()[:16]


def build_image(*, offline: bool = False, base: str | None = None, tag: str | None = None, force: bool = False,
                no_cache: bool = False, progress: Progress = _quiet, docker_client=None,
                with_packages: list[Path] | None = None) -> BuildResult:
    """Build (or find up to date) the worker image. `offline`: the debootstrap base by default, every
    package from a host-side wheelhouse, and no network during the build. `force` builds even when the
    image is up to date (layers still come from the cache unless `no_cache`). `with_packages`: distributions
    of the user's own (methods: docs/extending.md), package folders or wheels, installed into the image."""
    t0 = time.monotonic()
    dc = docker_client or client()
    tag = tag or default_tag()
    base = base or (OFFLINE_BASE if offline else DEFAULT_BASE)
    if ":" not in tag.rsplit("/", 1)[-1]:
        raise InputError(f"--tag {tag!r}: give a name and a tag, e.g. {default_tag()}")
    ensure_base(dc, base, progress)
    info = probe_base(dc, base)
    progress(f"base {base}: python {info.python_version}, " + (f"torch {info.torch} (kept)" if info.torch else "no torch"))
    reqs = requirements(offline, with_torch=info.torch is None)
    wheelhouse = build_wheelhouse(reqs, info.python_version, progress) if offline else None
    extra_dir = Path(tempfile.mkdtemp(prefix="distro-bench-with."))
    try:
        return _build(dc, tag, base, info, reqs, wheelhouse, offline, force, no_cache, progress, t0,
                      build_extra_wheels(list(with_packages or []), extra_dir, progress))
    finally:
        shutil.rmtree(extra_dir, ignore_errors=True)


def _build(dc, tag: str, base: str, info: BaseInfo, reqs: list[str], wheelhouse: Path | None, offline: bool,
           force: bool, no_cache: bool, progress: Progress, t0: float, extra: list[Path]) -> BuildResult:
    key = build_key(info.id, reqs, wheelhouse, offline, extra)
    current = image_status(dc, tag)
    if not (force or no_cache) and current.exists and (dc.images.get(tag).labels or {}).get(LABEL_KEY) == key:
        progress(f"{tag} is up to date (build key {key})")
        img = dc.images.get(tag)
        return BuildResult(tag, img.id, base, True, time.monotonic() - t0, wheelhouse, img.attrs.get("Size", 0))
    buildargs = {"BASE_IMAGE": base, "PIP_ARGS": "--no-index --find-links /tmp/deps" if offline else "",
                 "DB_VERSION": distro_bench.__version__, "DB_SOURCE": source_hash(), "DB_KEY": key, "DB_BASE": base,
                 **{f"DB_PLUGIN_{k.upper()}": ",".join(v) for k, v in wheel_plugins(extra).items() if k != "distributions"}}
    with tempfile.TemporaryDirectory(prefix="distro-bench-image.") as tmp:
        ctx = Path(tmp)
        _prepare_context(ctx, reqs, wheelhouse, extra)
        progress(f"docker build -t {tag} (base {base}{', offline: --network none' if offline else ''})")
        image_id = _stream_build(dc, ctx, tag, buildargs, "none" if offline else None, no_cache, progress)
    img = dc.images.get(image_id)
    progress(f"built {tag} ({img.short_id}, {img.attrs.get('Size', 0) / 1e6:.0f} MB) in {time.monotonic() - t0:.0f}s")
    return BuildResult(tag, img.id, base, False, time.monotonic() - t0, wheelhouse, img.attrs.get("Size", 0))


def _stream_build(dc, ctx: Path, tag: str, buildargs: dict, network_mode: str | None, no_cache: bool,
                  progress: Progress) -> str:
    import docker

    tail: list[str] = []
    image_id = None
    try:
        stream = dc.api.build(path=str(ctx), tag=tag, buildargs=buildargs, rm=True, forcerm=True,
                              decode=True, network_mode=network_mode, pull=False, nocache=no_cache)
        for chunk in stream:
            if "error" in chunk:
                raise HarnessError(f"docker build of {tag} failed: {chunk['error'].strip()}"
                                   + (" | last lines: " + " | ".join(tail[-6:]) if tail else ""))
            if "aux" in chunk and "ID" in chunk["aux"]:
                image_id = chunk["aux"]["ID"]
            for line in chunk.get("stream", "").splitlines():
                line = line.rstrip()
                if line:
                    tail.append(line)
                    del tail[:-20]
                    progress("  " + line)  # indented: the engine's output, under our own messages
    except docker.errors.APIError as e:
        raise HarnessError(f"docker build of {tag} failed: {_short(e, 400)}") from None
    if image_id is None:
        image_id = dc.images.get(tag).id
    return image_id
