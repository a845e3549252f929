"""One preflight: everything a run needs on this host (root, kernel pieces, binaries, Python modules, a
Docker engine, GPUs) for its backend and link engine, checked before anything is created, and ALL
problems reported in one CapabilityError, each with the exact line that fixes it.

Advice never names the flag the user already passed, and only names another flag when it would
work here (`--link-engine tc` only on a kernel with netem, say).

What each path needs, from the code as it is (docs/host-requirements.md is the table for users):
- every run: torch;
- netns backend: root, pyroute2, network namespaces + veth in the kernel, `tc` (iproute2) and the
  tbf qdisc for rates; workers start through distro_bench/net/enter.py (setns, capabilities dropped);
- docker backend: the docker SDK and a reachable engine; for shaped links also root, pyroute2 and
  `tc` (the host-side veth is found over netlink);
- delay/jitter/loss: the netem qdisc (link engine tc) or the userspace delay line (AF_PACKET, root;
  entered through distro_bench/net/enter.py, offloads off and the docker splice through pyroute2).
No run needs ip, ethtool, nsenter, setpriv, iperf3 or ping: pyroute2, distro_bench/net/enter.py and Python
TCP probes do their jobs.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from distro_bench.errors import CapabilityError
from distro_bench.net.host import BINARIES, HostInfo

# The one line that installs each piece (Debian/Ubuntu; the docs give others).
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
}


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
    def of(cls, scenario) -> Needs:
        from distro_bench.net.engines import directions

        shaped = impaired = False
        impaired_links = []
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


def _binary(host: HostInfo, name: str, needed_for: str) -> list[Problem]:
    return [] if host.has_binary(name) else [Problem(f"`{name}` ({BINARIES[name]})", needed_for, INSTALL[name])]


def _module(host: HostInfo, name: str, needed_for: str, install_key: str | None = None) -> list[Problem]:
    return [] if host.has_module(name) else [Problem(f"Python module {name}", needed_for, INSTALL[install_key or name])]


def engine_problems(host: HostInfo, backend: str, engine: str) -> list[Problem]:
    """What the link engine `engine` (tc | userspace) lacks on this host for `backend`; [] when it works."""
    if engine == "tc":
        if host.netem:
            return []
        untried = "" if host.has_binary("tc") else " (not tried: `tc` is missing)"
        return [Problem("the netem qdisc", "delay, jitter and loss with the tc link engine" + untried, INSTALL["netem"])]
    out = []
    why = "the userspace link engine (delay line)"
    if not host.root:
        out.append(Problem("root", why + " (AF_PACKET sockets, entering namespaces)", INSTALL["root"]))
    elif not host.delayline:
        out.append(Problem("the userspace delay line", f"{why}: {host.delayline_detail}",
                           "a kernel with AF_PACKET sockets (CONFIG_PACKET)"))
    return out


def problems(host: HostInfo, backend: str, needs: Needs, *, link_engine: str = "auto",
             allow_unemulated: bool = False) -> list[Problem]:
    """Every problem a run of `backend` with `link_engine` would hit here; [] when it can run."""
    out = _module(host, "torch", "training (every run)")
    if needs.cuda and not host.gpus:
        out.append(Problem("a CUDA GPU usable by torch", "a worker whose hardware asks for device cuda", INSTALL["gpu"]))
    emulating = backend == "netns" or (backend == "docker" and (needs.shaped or needs.impaired))
    if backend == "docker":
        out += _module(host, "docker", "the docker backend", "docker-sdk")
        if host.docker is False:
            out.append(Problem("a Docker engine", f"the docker backend ({host.docker_detail})", INSTALL["engine"]))
    if emulating:
        where = "the netns backend" if backend == "netns" else "shaping containers' links from the host"
        if not host.root:
            out.append(Problem("root", where, INSTALL["root"]))
        out += _module(host, "pyroute2", where + " (namespaces, links, offloads)")
        if backend == "netns":
            if host.root and not host.netns:
                out.append(Problem("network namespaces", f"{where} ({host.netns_error})", INSTALL["netns"]))
        if needs.shaped or backend == "netns":
            out += _binary(host, "tc", "link rates (tbf) and reading back what was applied")
        if needs.shaped and host.root and host.netns and host.has_binary("tc") and not host.rate_shaping:
            out.append(Problem("the tbf qdisc", "link rates (up/down)", INSTALL["tbf"]))
    if needs.impaired and emulating and not allow_unemulated:
        out += _impairment_problems(host, backend, needs, link_engine)
    if needs.traces and backend == "local" and not allow_unemulated:
        # A trace is all a trace scenario measures; loopback cannot shape, so the run would measure nothing of it.
        out.append(Problem("shaped links (the netns or docker backend)",
                           f"the bandwidth trace of link {', '.join(repr(x) for x in needs.traces)} (the local "
                           "backend runs on loopback and cannot shape)",
                           "--backend netns (as root)" + _or_unemulated()))
    # One line per piece: a binary two paths need is listed once (its first reason; one install fixes both).
    seen, unique = set(), []
    for p in out:
        if p.what not in seen:
            seen.add(p.what)
            unique.append(p)
    return unique


def _impairment_problems(host: HostInfo, backend: str, needs: Needs, link_engine: str) -> list[Problem]:
    links = ("link " + ", ".join(repr(x) for x in needs.links)) if needs.links else "a delayed link"
    ok = {e: not engine_problems(host, backend, e) for e in ("tc", "userspace")}
    if link_engine == "auto":
        if ok["tc"] or ok["userspace"]:
            return []
        # Neither works: what each lacks, the userspace engine's pieces first (installable on any kernel).
        return [Problem(p.what, f"{p.needed_for} (delay, jitter or loss of {links}; --link-engine auto "
                                f"needs netem or the delay line)", p.fix + _or_unemulated())
                for p in engine_problems(host, backend, "userspace") + engine_problems(host, backend, "tc")]
    missing = engine_problems(host, backend, link_engine)
    other = "userspace" if link_engine == "tc" else "tc"
    alt = f", or --link-engine {other} (works here)" if ok.get(other) else ""
    return [Problem(p.what, f"{p.needed_for} ({links}, --link-engine {link_engine})", p.fix + alt + _or_unemulated())
            for p in missing]


def _or_unemulated() -> str:
    return ", or --allow-unemulated (run without them; the run folder says what was not emulated)"


def format_problems(items: list[Problem], *, backend: str, link_engine: str) -> str:
    head = (f"this host cannot run the scenario with --backend {backend}"
            + (f" --link-engine {link_engine}" if link_engine != "auto" else "")
            + f": {len(items)} problem{'s' if len(items) != 1 else ''}")
    return head + "\n" + "\n".join(f"  - {p.line()}" for p in items)


class PreflightError(CapabilityError):
    """Everything this host lacks for a run, each problem with its fix."""

    def __init__(self, items: list[Problem], *, backend: str, link_engine: str):
        self.problems = items
        super().__init__(format_problems(items, backend=backend, link_engine=link_engine))


def host_for(backend: str, needs: Needs) -> HostInfo:
    """The host probe with just the slow parts this backend needs (cached per process)."""
    from distro_bench.net import host

    info = host.probe(docker=backend == "docker", gpus=False)
    if needs.cuda:
        import dataclasses

        info = dataclasses.replace(info, gpus=host.gpus(use_torch=True))
    return info


def check(backend: str, scenario, *, link_engine: str = "auto", allow_unemulated: bool = False,
          host: HostInfo | None = None) -> HostInfo:
    """Raise PreflightError listing every problem, or return the host probe the run can go on with.
    `backend` is a concrete one (local | netns | docker), after `auto` was resolved."""
    needs = Needs.of(scenario)
    info = host or host_for(backend, needs)
    found = problems(info, backend, needs, link_engine=link_engine, allow_unemulated=allow_unemulated)
    if found:
        raise PreflightError(found, backend=backend, link_engine=link_engine)
    return info


def check_options(backend: str, scenario, options) -> HostInfo:
    """`check` with a BackendOptions (what the runner holds)."""
    return check(backend, scenario, link_engine=options.link_engine, allow_unemulated=options.allow_unemulated)


def select_and_check(backend: str, scenario, options):
    """`select_backend` and then `check` for the backend chosen: (backend class, why). An explicit backend
    is checked first, so every missing piece is listed, not only the first one its probe meets."""
    from distro_bench.backends import select_backend

    if backend != "auto":
        from distro_bench.backends import BACKENDS

        if backend in BACKENDS:
            check_options(backend, scenario, options)
    cls, why = select_backend(backend, scenario)
    check_options(cls.name, scenario, options)
    return cls, why
