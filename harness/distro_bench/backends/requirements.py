"""What a run needs of the host, as data. Each backend declares its pieces (`Backend.requirements(needs)`:
root, kernel features, binaries, Python modules, a Docker engine, a link engine for delay), each link
engine its own (ENGINE_REQUIREMENTS), and every run torch (RUN_REQUIREMENTS). A Requirement checks
itself against the host probe (harness/distro_bench/net/host.py HostInfo) and carries the one line that fixes it;
harness/distro_bench/run/preflight.py evaluates the chosen backend's list without a branch on its name.

A kernel feature is only judged where the probe could try it (namespaces and qdiscs need root; tbf a
namespace and `tc`): where it could not, the piece that stopped the probe is what gets reported.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from distro_bench.net.engines import directions
from distro_bench.net.host import BINARIES, HostInfo

if TYPE_CHECKING:
    from distro_bench.scenario.model import Scenario

# The one line that installs each piece (Debian/Ubuntu; docs/host-requirements.md gives others).
INSTALL: dict[str, str] = {
    **{name: f"apt-get install {pkg}" for name, pkg in BINARIES.items() if not pkg.startswith("the ")},
    "pyroute2": "pip install pyroute2",
    "docker-sdk": "pip install docker",
    "torch": "pip install torch --index-url https://download.pytorch.org/whl/cpu  (CPU build; see docs/host-requirements.md for CUDA)",
    "root": "run as root (sudo -E env PATH=$PATH distro-bench ...)",
    "netns": "a kernel with network namespaces and veth (CONFIG_NET_NS, CONFIG_VETH); in a container, run it with --privileged",
    "tbf": "modprobe sch_tbf (a kernel with CONFIG_NET_SCH_TBF)",
    "netem": "modprobe sch_netem (Debian: it is in the stock kernel; Ubuntu: apt-get install linux-modules-extra-$(uname -r))",
    "engine": "start a Docker engine: containers/start-engine.sh (or apt-get install docker.io && dockerd &)",
    "gpu": "install the NVIDIA driver and a CUDA build of torch (pip install torch --index-url https://download.pytorch.org/whl/cu124), or set the hardware's device to auto or cpu",
    "packet": "a kernel with AF_PACKET sockets (CONFIG_PACKET)",
}

LINK_ENGINES = ("tc", "userspace")


@dataclass(frozen=True)
class Problem:
    what: str  # the missing piece
    needed_for: str
    fix: str  # the install line or action

    def line(self) -> str:
        return f"{self.what}: needed for {self.needed_for}. Fix: {self.fix}"


@dataclass(frozen=True)
class Needs:
    """What a scenario asks of the host, independent of which host."""

    shaped: bool = False  # some link has a rate
    impaired: bool = False  # some link has delay, jitter or loss
    cuda: bool = False  # some worker asks for a CUDA device explicitly
    links: tuple[str, ...] = field(default=())  # names of the impaired links, for messages
    traces: tuple[str, ...] = field(default=())  # names of the links whose rate follows a trace

    @classmethod
    def of(cls, scenario: Scenario) -> Needs:
        shaped = impaired = False
        impaired_links: list[str] = []
        for n in scenario.nodes():
            for d in directions(n.link):
                shaped |= bool(d.rate_bps)
                if d.impaired:
                    impaired = True
                    label = n.link_name or "inline"
                    if label not in impaired_links:
                        impaired_links.append(label)
        cuda = any(n.hardware.device.startswith("cuda") for n in scenario.nodes())
        traces = tuple(dict.fromkeys(n.link_name or "inline" for n in scenario.nodes()
                                     if n.link is not None and (n.link.up_trace or n.link.down_trace)))
        return cls(shaped=shaped, impaired=impaired, cuda=cuda, links=tuple(impaired_links), traces=traces)


@dataclass(frozen=True, kw_only=True)
class Requirement(ABC):
    needed_for: str  # what the piece is for, in the problem's words
    # Part of the emulation: --allow-unemulated runs without it (the run folder says what was not emulated).
    emulation: bool = False

    @abstractmethod
    def problems(self, host: HostInfo, link_engine: str = "auto") -> list[Problem]:
        """What this host lacks of it ([] when it is there)."""


@dataclass(frozen=True, kw_only=True)
class Root(Requirement):
    def problems(self, host: HostInfo, link_engine: str = "auto") -> list[Problem]:
        return [] if host.root else [Problem("root", self.needed_for, INSTALL["root"])]


@dataclass(frozen=True, kw_only=True)
class PythonModule(Requirement):
    module: str
    install: str = ""  # INSTALL key; default: the module's name

    def problems(self, host: HostInfo, link_engine: str = "auto") -> list[Problem]:
        if host.has_module(self.module):
            return []
        return [Problem(f"Python module {self.module}", self.needed_for, INSTALL[self.install or self.module])]


@dataclass(frozen=True, kw_only=True)
class Binary(Requirement):
    name: str  # a key of harness/distro_bench/net/host.py BINARIES

    def problems(self, host: HostInfo, link_engine: str = "auto") -> list[Problem]:
        if host.has_binary(self.name):
            return []
        return [Problem(f"`{self.name}` ({BINARIES[self.name]})", self.needed_for, INSTALL[self.name])]


@dataclass(frozen=True, kw_only=True)
class NetworkNamespaces(Requirement):
    def problems(self, host: HostInfo, link_engine: str = "auto") -> list[Problem]:
        if not host.root or host.netns:  # only root can try
            return []
        return [Problem("network namespaces", f"{self.needed_for} ({host.netns_error})", INSTALL["netns"])]


@dataclass(frozen=True, kw_only=True)
class Qdisc(Requirement):
    kind: str  # a key of harness/distro_bench/net/host.py QDISC_TRIALS
    # Report it even where the probe could not try it (no root, namespace or `tc`), saying so.
    when_untried: bool = False

    def problems(self, host: HostInfo, link_engine: str = "auto") -> list[Problem]:
        if host.has_qdisc(self.kind):
            return []
        if failure := host.qdisc_failure(self.kind):  # tc failed on this host, not for want of the qdisc
            return [Problem(f"`tc` in a network namespace (the {self.kind} qdisc could not be tried)",
                            f"{self.needed_for}; {failure.cause}; tc said: {failure.stderr}", failure.fix)]
        tc = host.has_binary("tc")
        if not self.when_untried and not (host.root and host.netns and tc):
            return []
        untried = "" if tc else " (not tried: `tc` is missing)"
        return [Problem(f"the {self.kind} qdisc", self.needed_for + untried, INSTALL[self.kind])]


@dataclass(frozen=True, kw_only=True)
class DelayLine(Requirement):
    def problems(self, host: HostInfo, link_engine: str = "auto") -> list[Problem]:
        if not host.root or host.delayline:  # AF_PACKET needs root to try
            return []
        return [Problem("the userspace delay line", f"{self.needed_for}: {host.delayline_detail}", INSTALL["packet"])]


@dataclass(frozen=True, kw_only=True)
class DockerEngine(Requirement):
    def problems(self, host: HostInfo, link_engine: str = "auto") -> list[Problem]:
        if host.docker is not False:  # None: not probed
            return []
        return [Problem("a Docker engine", f"{self.needed_for} ({host.docker_detail})", INSTALL["engine"])]


@dataclass(frozen=True, kw_only=True)
class CudaGpu(Requirement):
    def problems(self, host: HostInfo, link_engine: str = "auto") -> list[Problem]:
        return [] if host.gpus else [Problem("a CUDA GPU usable by torch", self.needed_for, INSTALL["gpu"])]


@dataclass(frozen=True, kw_only=True)
class Unsupported(Requirement):
    """Something this backend cannot do at all: always a problem, fixed by another choice."""

    what: str
    fix: str

    def problems(self, host: HostInfo, link_engine: str = "auto") -> list[Problem]:
        return [Problem(self.what, self.needed_for, self.fix)]


USERSPACE_ENGINE = "the userspace link engine (delay line)"

# What each link engine needs for delay, jitter and loss (harness/distro_bench/net/engines.py).
ENGINE_REQUIREMENTS: dict[str, tuple[Requirement, ...]] = {
    "tc": (Qdisc(kind="netem", needed_for="delay, jitter and loss with the tc link engine", when_untried=True),),
    "userspace": (Root(needed_for=USERSPACE_ENGINE + " (AF_PACKET sockets, entering namespaces)"),
                  DelayLine(needed_for=USERSPACE_ENGINE)),
}


def engine_problems(host: HostInfo, engine: str) -> list[Problem]:
    """What the link engine `engine` (tc | userspace) lacks on this host; [] when it works."""
    return [p for r in ENGINE_REQUIREMENTS[engine] for p in r.problems(host)]


@dataclass(frozen=True, kw_only=True)
class LinkEngine(Requirement):
    """Delay, jitter and loss through a link engine: the one passed (--link-engine), or with `auto` either."""

    links: tuple[str, ...] = ()  # the impaired links, for messages
    emulation: bool = True

    def problems(self, host: HostInfo, link_engine: str = "auto") -> list[Problem]:
        links = ("link " + ", ".join(repr(x) for x in self.links)) if self.links else "a delayed link"
        missing = {e: engine_problems(host, e) for e in LINK_ENGINES}
        if link_engine == "auto":
            if not all(missing.values()):
                return []
            # Neither works: what each lacks, the userspace engine's pieces first (installable on any kernel).
            return [Problem(p.what, f"{p.needed_for} (delay, jitter or loss of {links}; --link-engine auto "
                                    f"needs netem or the delay line)", p.fix)
                    for e in ("userspace", "tc") for p in missing[e]]
        # Advice never names the engine passed; the other only where it would work here.
        alt = "".join(f", or --link-engine {e} (works here)" for e in LINK_ENGINES
                      if e != link_engine and not missing[e])
        return [Problem(p.what, f"{p.needed_for} ({links}, --link-engine {link_engine})", p.fix + alt)
                for p in missing[link_engine]]


def run_requirements(needs: Needs) -> list[Requirement]:
    """What every run needs, whatever its backend."""
    out: list[Requirement] = [PythonModule(module="torch", needed_for="training (every run)")]
    if needs.cuda:
        out.append(CudaGpu(needed_for="a worker whose hardware asks for device cuda"))
    return out


def emulation_requirements(needs: Needs, where: str, *, namespaces: bool) -> list[Requirement]:
    """What shaping and impairing links from the host needs: root, pyroute2, `tc` and tbf for rates, a link
    engine for delay; `namespaces`: the backend creates network namespaces itself (and reads back its qdiscs
    with `tc` even without rates)."""
    out: list[Requirement] = [Root(needed_for=where),
                              PythonModule(module="pyroute2", needed_for=where + " (namespaces, links, offloads)")]
    if namespaces:
        out.append(NetworkNamespaces(needed_for=where))
    if needs.shaped or namespaces:
        out.append(Binary(name="tc", needed_for="link rates (tbf) and reading back what was applied"))
    if needs.shaped:
        out.append(Qdisc(kind="tbf", needed_for="link rates (up/down)"))
    if needs.impaired:
        out.append(LinkEngine(needed_for="delay, jitter and loss", links=needs.links))
    return out


def uses_link_engine(requirements: list[Requirement]) -> bool:
    """Whether a backend with these requirements puts delay through a link engine (doctor lists each)."""
    return any(isinstance(r, LinkEngine) for r in requirements)
