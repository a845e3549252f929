"""What this host offers, probed once per process into one typed result, `HostInfo`: root, kernel,
network namespaces, the qdiscs the kernel accepts (tried for real on a veth in a throwaway namespace,
removed after), the binaries and Python modules present, the userspace delay line, a Docker engine
and the GPUs. Read by `distro-bench doctor`, the preflight (harness/distro_bench/run/preflight.py), the backends and
the environment record; nothing else probes the host.

GPUs are enumerated here only (`gpus()`): through torch when the caller's torch is what will use them
(or torch is imported already), else through `nvidia-smi -L`, so `doctor` never pays a torch import.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import platform
import shutil
import subprocess
import sys
from dataclasses import asdict, dataclass, field
from functools import lru_cache

from distro_bench.net import naming, owner
from distro_bench.net import ns as net_ns  # called through the module: tests wrap its functions
from distro_bench.net.ns import NetCommandError
from distro_bench.scenario.timeouts import timeout_scale

# Arguments that make each qdisc valid on its own at the root (tbf, for one, refuses to exist without a rate).
QDISC_TRIALS: dict[str, list[str]] = {
    "pfifo": [],
    "tbf": ["rate", "1mbit", "burst", "6056", "limit", "60000"],
    "htb": ["default", "1"],
    "netem": ["delay", "1ms"],
    "fq_codel": [],
    "fq": [],
    "sfq": [],
    "prio": [],
    "cake": [],
}

# Binaries the harness may run, and the Debian/Ubuntu package that has each. Only `tc` (iproute2) is
# needed by an emulating run; iperf3 (`links` goodput, else a Python probe) and nvidia-smi (the GPU
# list) are used where present. Namespaces, links, offloads and entering a namespace with capabilities
# dropped are pyroute2 and harness/distro_bench/net/enter.py: no ip, ethtool, nsenter or setpriv.
BINARIES: dict[str, str] = {
    "tc": "iproute2",
    "iperf3": "iperf3",
    "nvidia-smi": "the NVIDIA driver",
    "docker": "docker.io",
}
# Recorded in HostInfo (environment.json) for the record only; no run needs them.
RECORDED_ONLY = ("nsenter", "ping", "ethtool")

# Python modules (import name -> distribution) some path needs; torch is checked without importing it.
MODULES: dict[str, str] = {
    "pyroute2": "pyroute2",
    "docker": "docker",
    "torch": "torch",
}


# What tc prints when the kernel lacks a qdisc kind (a module not loaded, a config without it): then the
# qdisc is missing. Any other failure of a trial is the host's, and its own words are the cause (issue 38).
QDISC_UNKNOWN = ("qdisc kind is unknown", "Specified qdisc not found", "Unknown qdisc", "No such file or directory")


@dataclass(frozen=True)
class TcFailure:
    """A qdisc trial that failed for another reason than a missing qdisc: tc's own error and its fix."""

    stderr: str
    cause: str
    fix: str


def diagnose_tc(stderr: str) -> TcFailure | None:
    """Why a `tc [-n NS] qdisc add` failed, from its stderr; None when the kernel lacks the qdisc kind."""
    text = " ".join(stderr.split())
    if not text:
        return None
    if "mount of /sys failed" in text:
        # Entering a named namespace, iproute2 mounts that namespace's sysfs on /sys (seen in a chroot without one).
        return TcFailure(stderr=text, cause="`tc -n` cannot enter a network namespace here: it mounts a sysfs on "
                                            "/sys and could not",
                         fix="give the root a /sys folder (`mkdir /sys`; in a chroot, inside its folder) and "
                             "run as root with mounts allowed (a container needs --privileged)")
    if any(m in text for m in QDISC_UNKNOWN):
        return None
    if '"mount --make-rslave /" failed' in text:
        # iproute2 enters a named namespace with a mount namespace of its own whose / it makes a slave:
        # impossible where / is not a mount point (a chroot). Tried: binding / onto itself from inside does not
        # help (the chroot's root stays the covered directory); making the folder a mount point first does.
        return TcFailure(stderr=text, cause="`tc -n` cannot enter a network namespace here: / is not a mount point "
                                            "(a chroot?), so its mounts cannot be made slaves",
                         fix="enter the chroot with its folder made a mount point, in a private mount namespace: "
                             "`unshare -m sh -c 'mount --rbind DIR DIR && exec chroot DIR distro-bench ...'` "
                             "(or `mount --rbind DIR DIR` before `chroot DIR`); `mount --bind / /` from inside "
                             "does not help")
    return TcFailure(stderr=text, cause=f"tc failed: {text}",
                     fix="not a missing qdisc: tc's own error above is the cause; reproduce it with "
                         "`ip netns add t && tc -n t qdisc add dev lo root handle 1: pfifo; ip netns del t`")


@dataclass(frozen=True)
class HostInfo:
    root: bool
    kernel: str
    iproute2: str | None  # `tc -V` version, None when tc is missing
    nsenter: bool  # recorded only (RECORDED_ONLY)
    netns: bool  # a namespace and a veth pair could be created (and were removed)
    netns_error: str | None
    qdiscs: tuple[str, ...]  # kinds that could be installed, from QDISC_TRIALS
    iperf3: bool
    ping: bool  # recorded only
    ethtool: bool  # recorded only
    delayline: bool
    delayline_detail: str
    docker: bool | None  # None: not probed
    docker_detail: str = ""
    gpus: tuple[str, ...] | None = None  # None: not probed
    binaries: dict[str, str | None] = field(default_factory=dict)  # name -> path, None when absent
    modules: dict[str, str | None] = field(default_factory=dict)  # import name -> version, None when absent
    python: str = field(default_factory=lambda: sys.version.split()[0])
    qdisc_errors: dict[str, str] = field(default_factory=dict)  # kind -> tc's stderr where its trial failed

    def has_qdisc(self, kind: str) -> bool:
        return kind in self.qdiscs

    def qdisc_failure(self, kind: str) -> TcFailure | None:
        """Why the trial of `kind` failed when it was not for lack of the qdisc (tc's own error), else None."""
        if kind in self.qdiscs or kind not in self.qdisc_errors:
            return None
        return diagnose_tc(self.qdisc_errors[kind])

    def qdisc_missing(self, kind: str) -> str:
        """Why `kind` cannot be used, in words: tc's own failure where there is one, else the kernel's lack."""
        failure = self.qdisc_failure(kind)
        return failure.cause if failure else f"the kernel has no {kind} qdisc"

    def has_binary(self, name: str) -> bool:
        if name in self.binaries:
            return self.binaries[name] is not None
        return shutil.which(name) is not None

    def has_module(self, name: str) -> bool:
        if name in self.modules:
            return self.modules[name] is not None
        return importlib.util.find_spec(name) is not None

    @property
    def netem(self) -> bool:
        return self.has_qdisc("netem")

    @property
    def rate_shaping(self) -> bool:
        return self.has_qdisc("tbf")

    @property
    def userspace_engine(self) -> bool:
        # Offloads are turned off through pyroute2 (harness/distro_bench/net/ns.py): no ethtool binary needed.
        return self.delayline and self.netns

    def to_dict(self) -> dict:
        return asdict(self)


# The name the backends and link engines have always used.
Capabilities = HostInfo


def _tc_version() -> str | None:
    if not shutil.which("tc"):
        return None
    try:
        out = subprocess.run(["tc", "-V"], capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.split(",")[1].strip() if "," in out else out or "unknown"


def binaries() -> dict[str, str | None]:
    return {name: shutil.which(name) for name in BINARIES}


def modules() -> dict[str, str | None]:
    """Import name -> installed version (None when absent), found without importing the module."""
    from importlib import metadata

    out: dict[str, str | None] = {}
    for mod, dist in MODULES.items():
        if importlib.util.find_spec(mod) is None:
            out[mod] = None
            continue
        try:
            out[mod] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            out[mod] = "unknown"
    return out


def probe_qdiscs(errors: dict[str, str] | None = None) -> tuple[bool, str | None, tuple[str, ...]]:
    """(namespaces work, why not, qdisc kinds the kernel accepts), tried on a veth in a throwaway namespace;
    each failed trial's stderr into `errors` (kind -> text)."""
    run_id = naming.new_run_id()
    name = f"{naming.run_prefix(run_id)}probe"
    try:  # claimed like a run's namespaces, so `clean` leaves a live doctor's or preflight's probe alone
        owner.claim(run_id)
    except OSError:
        pass  # no runtime folder: the probe still works, it is only unprotected for its second
    try:
        ns = net_ns.create_netns(name)
    except (NetCommandError, ImportError) as e:
        net_ns.delete_netns(name)
        _release(run_id)
        return False, str(e), ()
    try:
        net_ns.add_veth("t0", ns, "t1", ns)
        net_ns.configure_link(ns, "t0", no_ipv6_ll=False)
        ok = []
        if shutil.which("tc"):
            for kind, args in QDISC_TRIALS.items():
                net_ns.run_in(ns, ["tc", "qdisc", "del", "dev", "t0", "root"], check=False)
                trial = net_ns.run_in(ns, ["tc", "qdisc", "add", "dev", "t0", "root", "handle", "1:", kind, *args],
                                      check=False)
                if trial.returncode == 0:
                    ok.append(kind)
                elif errors is not None:
                    errors[kind] = (trial.stderr or trial.stdout or f"exit {trial.returncode}").strip()[:500]
        return True, None, tuple(ok)
    except NetCommandError as e:
        return False, str(e), ()
    finally:
        net_ns.delete_netns(name)
        _release(run_id)


def _release(run_id: str) -> None:
    try:
        owner.release(run_id)
    except OSError:
        pass


def probe_delayline() -> tuple[bool, str]:
    try:
        mod = importlib.import_module("distro_bench.net.delayline")
        mod.DelayLine, mod.Impairment  # noqa: B018 - the contract this harness uses
    except ImportError as e:
        return False, f"distro_bench.net.delayline not importable ({e})"
    except AttributeError as e:
        return False, f"distro_bench.net.delayline lacks the expected API ({e})"
    check = getattr(mod.DelayLine, "available", None) or getattr(mod, "available", None)
    if callable(check):
        result = check()
        ok, why = result if isinstance(result, tuple) else (bool(result), "")
        return bool(ok), why or ("available" if ok else "reports itself unavailable")
    return True, "importable"


def probe_docker(timeout: float = 2.0) -> tuple[bool, str]:
    try:
        import docker
    except ImportError:
        return False, "docker SDK not installed (pip install docker)"
    try:
        client = docker.from_env(timeout=timeout * timeout_scale())  # scaled: a busy engine is not a missing one
        client.ping()
        version = client.version().get("Version", "?")
        client.close()
        return True, f"engine {version}"
    except Exception as e:  # any failure means "no engine reachable"; say which
        return False, f"no engine reachable ({type(e).__name__}: {str(e)[:120]})"


def _nvidia_smi_gpus() -> tuple[str, ...]:
    if shutil.which("nvidia-smi") is None:
        return ()
    try:
        out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.TimeoutExpired):
        return ()
    # "GPU 0: NVIDIA H200 (UUID: GPU-...)"
    return tuple(line.split(":", 1)[1].split("(UUID")[0].strip() for line in out.splitlines()
                 if line.startswith("GPU ") and ":" in line)


def _torch_gpus() -> tuple[str, ...]:
    try:
        import torch
    except ImportError:
        return ()
    if not torch.cuda.is_available():
        return ()
    return tuple(torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count()))


@lru_cache(maxsize=2)
def gpus(use_torch: bool | None = None) -> tuple[str, ...]:
    """The host's GPU names, the one enumeration in the harness. `use_torch` True: the GPUs this torch
    can use (what a worker here gets); False: what the driver lists (`nvidia-smi -L`; what a
    container gets, whatever torch is installed here); None: torch if it is imported already, else
    the driver's list."""
    if use_torch is None:
        use_torch = "torch" in sys.modules
    return _torch_gpus() if use_torch else _nvidia_smi_gpus()


_gpu_names = gpus  # `probe`'s flag of the same name hides the function inside it


@lru_cache(maxsize=4)
def probe(*, docker: bool = True, gpus: bool = True) -> HostInfo:
    """Probe once per process (cached); `docker`/`gpus` False skip the slow parts a caller does not need."""
    root = os.geteuid() == 0
    bins = binaries()
    present = {name: shutil.which(name) is not None for name in RECORDED_ONLY}
    qdisc_errors: dict[str, str] = {}
    if root:
        netns_ok, netns_err, qdiscs = probe_qdiscs(qdisc_errors)
    else:
        netns_ok, netns_err, qdiscs = False, "needs root", ()
    dl_ok, dl_why = probe_delayline()
    dk_ok, dk_why = probe_docker() if docker else (None, "not probed")
    return HostInfo(
        root=root, kernel=platform.release(), iproute2=_tc_version(), nsenter=present["nsenter"],
        netns=netns_ok, netns_error=netns_err, qdiscs=qdiscs,
        iperf3=bins["iperf3"] is not None, ping=present["ping"], ethtool=present["ethtool"],
        delayline=dl_ok, delayline_detail=dl_why, docker=dk_ok, docker_detail=dk_why,
        gpus=_gpu_names() if gpus else None, binaries=bins, modules=modules(), qdisc_errors=qdisc_errors,
    )
