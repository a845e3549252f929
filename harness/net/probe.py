"""What this host can emulate: root, iproute2, network namespaces, which qdiscs the kernel offers (tried
for real in a throwaway namespace, removed after), iperf3/ping/ethtool, a Docker engine, GPUs, and
the userspace delay line. `Capabilities` is shared by the backends and `distro-bench doctor`."""

from __future__ import annotations

import importlib
import os
import platform
import shutil
from dataclasses import asdict, dataclass
from functools import lru_cache

from harness.net import naming
from harness.net.ns import NetCommandError, NetnsRef, run, run_in

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


@dataclass(frozen=True)
class Capabilities:
    root: bool
    kernel: str
    iproute2: str | None  # `ip -V`, None when ip/tc are missing
    nsenter: bool
    netns: bool  # a namespace and a veth pair could be created (and were removed)
    netns_error: str | None
    qdiscs: tuple[str, ...]  # kinds that could be installed, from QDISC_TRIALS
    iperf3: bool
    ping: bool
    ethtool: bool
    delayline: bool
    delayline_detail: str
    docker: bool | None  # None: not probed
    docker_detail: str = ""
    gpus: tuple[str, ...] | None = None  # None: not probed

    def has_qdisc(self, kind: str) -> bool:
        return kind in self.qdiscs

    @property
    def netem(self) -> bool:
        return self.has_qdisc("netem")

    @property
    def rate_shaping(self) -> bool:
        return self.has_qdisc("tbf")

    @property
    def userspace_engine(self) -> bool:
        return self.delayline and self.ethtool and self.netns

    def to_dict(self) -> dict:
        return asdict(self)


def _iproute2() -> str | None:
    if not (shutil.which("ip") and shutil.which("tc")):
        return None
    try:
        out = run(["ip", "-V"], check=False).stdout.strip()
    except NetCommandError:
        return None
    return out.split(",")[1].strip() if "," in out else out or "unknown"


def probe_qdiscs() -> tuple[bool, str | None, tuple[str, ...]]:
    """(namespaces work, why not, qdisc kinds the kernel accepts), tried on a veth in a throwaway namespace."""
    name = f"{naming.run_prefix(naming.new_run_id())}probe"
    ns = NetnsRef.named(name)
    try:
        run(["ip", "netns", "add", name])
    except NetCommandError as e:
        return False, str(e), ()
    try:
        run_in(ns, ["ip", "link", "add", "t0", "type", "veth", "peer", "name", "t1"])
        run_in(ns, ["ip", "link", "set", "t0", "up"])
        ok = []
        for kind, args in QDISC_TRIALS.items():
            run_in(ns, ["tc", "qdisc", "del", "dev", "t0", "root"], check=False)
            if run_in(ns, ["tc", "qdisc", "add", "dev", "t0", "root", "handle", "1:", kind, *args], check=False).returncode == 0:
                ok.append(kind)
        return True, None, tuple(ok)
    except NetCommandError as e:
        return False, str(e), ()
    finally:
        run(["ip", "netns", "del", name], check=False)


def probe_delayline() -> tuple[bool, str]:
    try:
        mod = importlib.import_module("harness.net.delayline")
        mod.DelayLine, mod.Impairment  # noqa: B018 - the contract this harness uses
    except ImportError as e:
        return False, f"harness.net.delayline not importable ({e})"
    except AttributeError as e:
        return False, f"harness.net.delayline lacks the expected API ({e})"
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
        return False, "docker SDK not installed"
    try:
        client = docker.from_env(timeout=timeout)
        client.ping()
        version = client.version().get("Version", "?")
        client.close()
        return True, f"engine {version}"
    except Exception as e:  # any failure means "no engine reachable"; say which
        return False, f"no engine reachable ({type(e).__name__}: {str(e)[:120]})"


def probe_gpus() -> tuple[str, ...]:
    try:
        import torch
    except ImportError:
        return ()
    if not torch.cuda.is_available():
        return ()
    return tuple(torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count()))


@lru_cache(maxsize=4)
def probe(*, docker: bool = True, gpus: bool = True) -> Capabilities:
    """Probe once per process (cached); `docker`/`gpus` False skips the slow parts a backend does not need."""
    root = os.geteuid() == 0
    iproute2 = _iproute2()
    has_nsenter = shutil.which("nsenter") is not None
    if root and iproute2 and has_nsenter:
        netns_ok, netns_err, qdiscs = probe_qdiscs()
    else:
        why = "needs root" if not root else ("iproute2 (ip, tc) missing" if not iproute2 else "nsenter missing")
        netns_ok, netns_err, qdiscs = False, why, ()
    dl_ok, dl_why = probe_delayline()
    dk_ok, dk_why = probe_docker() if docker else (None, "not probed")
    return Capabilities(
        root=root, kernel=platform.release(), iproute2=iproute2, nsenter=has_nsenter,
        netns=netns_ok, netns_error=netns_err, qdiscs=qdiscs,
        iperf3=shutil.which("iperf3") is not None, ping=shutil.which("ping") is not None,
        ethtool=shutil.which("ethtool") is not None, delayline=dl_ok, delayline_detail=dl_why,
        docker=dk_ok, docker_detail=dk_why, gpus=probe_gpus() if gpus else None,
    )
