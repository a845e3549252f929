"""docker backend: one container per worker node, from the worker image, on a bridge network of the
run's own; links shaped from the host, wire bytes counted on each container's `eth0`.

Lifecycle: the link plan (made at preflight; CapabilityError before anything exists) -> check the
image -> a labelled network -> one labelled *node* container per rank, idling under docker's init ->
where the userspace engine is used, a delay-line hop spliced into the container's eth0 -> the
emulation (harness/distro_bench/net/emulation.py): tc on each container's eth0 (uplink, entered through
/proc/<pid>/ns/net) and on its host-side veth (downlink), both read back, and the delay lines -> a
ping between nodes -> workers -> delay lines stopped, Docker's eth0 given back, containers and
network removed, whatever happened.

Delay, jitter and loss without netem (the userspace engine): a container has no namespace between
its eth0 and the bridge, so the hop goes inside the container's own namespace, set up and run from
the host as root (harness/distro_bench/net/splice.py): Docker's eth0 becomes `b`, a new veth pair `eth0` <-> `a`
takes its address, routes and MAC, and a DelayLine forwards between `a` and `b` (a->b is the
uplink), entered through /proc/<pid>/ns/net (harness/distro_bench/net/enter.py). Rate shaping stays where it was: the
uplink tbf on the (new) eth0's egress, the downlink tbf on the host-side veth; the tbf is applied
after the splice, so the read-back is of the interface the worker uses. The worker keeps no
NET_ADMIN/NET_RAW and sees no host process: it can neither reconfigure the hop nor reach the line.

Why the containers idle and workers are `docker exec`ed into them (rather than one container per
worker run, held back by a "go" file): a container's network namespace exists only once it runs, so
shaping must follow its start, and the runner records environment.json (with the tc state applied)
right after setup, before the first worker. Node containers that outlive each optimizer's workers
are shaped once, verified once, described truthfully, and every optimizer trains on the very same
links; a worker cannot start before shaping because it is only exec'ed after setup returns. This
is the netns backend's model (namespaces persist, workers are processes in them) with containers.

Workers run without any capability (cap_drop ALL) and with no-new-privileges, in the container's own pid
namespace, so they cannot change their own shaping nor see, signal or ptrace the coordinator. A non-root
user's run has them run as that user (their files in the bind-mounted run folder belong to the user); a
root coordinator's as nobody (65534), which owns only the worker's output folder, where nobody can read
the scenario and the corpus (checked by an exec as nobody, once per folder); where it cannot, the run stops
before training and says why, unless --allow-root-workers accepts the container's root without capabilities.
"""

from __future__ import annotations

import atexit
import os
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from distro_bench.backends.base import WORKER_GID, WORKER_UID, Backend, BackendOptions, WorkerHandle, worker_reads
from distro_bench.backends.docker import image
from distro_bench.backends.docker.leftovers import IFACE, owner_labels, remove_labelled
from distro_bench.backends.docker.placement import SHM_SIZE, Placement, device_requests, host_gpu_count, place
from distro_bench.backends.docker.worker import ContainerWorker
from distro_bench.backends.requirements import DockerEngine, Needs, PythonModule, Requirement, emulation_requirements
from distro_bench.errors import CapabilityError, HarnessError
from distro_bench.net import host as net_probe
from distro_bench.net.emulation import Emulation, Endpoints, check_reachable, describe_plan, worker_env
from distro_bench.net.engines import plan_links
from distro_bench.net.ns import NetnsRef, offloads_off, peer_ifname
from distro_bench.net.splice import NODE_SIDE, SWITCH_SIDE, splice, undo
from distro_bench.scenario.model import Node, Scenario
from distro_bench.scenario.timeouts import Timeouts, timeout_scale

LABEL_RANK = "distro-bench.rank"
DROPPED_CAPS = ["ALL"]
NOBODY = f"{WORKER_UID}:{WORKER_GID}"


def container_user() -> str:
    """The node containers' user: nobody for a root coordinator, else the host user (it owns its files)."""
    return NOBODY if os.geteuid() == 0 else f"{os.getuid()}:{os.getgid()}"


def _owner_labels(run_id: str) -> dict[str, str]:
    # The owner (host, boot id, pid namespace, pid, start time) travels with the objects: `clean` judges
    # liveness from the engine's labels and the kernel, not from a claim file another mount namespace cannot see.
    return owner_labels(run_id)


# ---- the backend --------------------------------------------------------------------------------

class DockerBackend(Backend):
    name = "docker"

    def __init__(self, scenario: Scenario, run_dir: Path, options: BackendOptions | None = None, plan=None):
        super().__init__(scenario, run_dir, options, plan)
        self.client: Any = None  # a docker.DockerClient (docker ships no types)
        self.image: image.ImageStatus | None = None
        self.network: Any = None  # a docker network
        self.containers: list = []  # by rank
        self.addresses: list[str] = []
        self.pids: list[int] = []
        self.host_veths: list[str] = []
        self.placements: list[Placement] = []
        self.splices: dict[int, Any] = {}  # rank -> distro_bench.net.splice.SpliceState
        self.emulation: Emulation | None = None  # once the links are shaped
        self.bringup_s: float | None = None  # network and containers up, seconds
        self.shaping_s: float | None = None  # tc applied and read back on every link, seconds
        self.teardown_problems: list[str] = []
        self._exec_count = 0
        # The engine's answers slow down with the host (a 10 s read timeout died under load, issue 38).
        self.timeouts = Timeouts.for_host()
        self._exec_users: dict[Path, str] = {}

    # ---- capability ------------------------------------------------------------------
    @classmethod
    def probe(cls, scenario: Scenario | None = None) -> tuple[bool, str]:
        try:
            dc = image.client(timeout=3.0 * timeout_scale())  # a busy engine is not a missing one
        except CapabilityError as e:
            return False, str(e)
        try:
            status = image.image_status(dc)
            if status.problem:
                # `--image` is not known here: any worker image that matches this harness will do.
                status = next((s for s in image.matching_images(dc)), status)
            version = dc.version().get("Version", "?")
        finally:
            dc.close()
        if status.problem:
            return False, status.problem
        if scenario is not None and _needs_shaping(scenario) and os.geteuid() != 0:
            return False, "shaping containers' links from the host needs root (tc in their namespaces)"
        return True, f"engine {version} reachable, image {status.tag} matches harness {status.version}"

    @classmethod
    def requirements(cls, needs: Needs) -> list[Requirement]:
        # Shaped links are shaped from the host: root, pyroute2 (the host-side veth is found over netlink)
        # and `tc` for rates; the containers' namespaces are Docker's.
        own: list[Requirement] = [PythonModule(module="docker", needed_for="the docker backend", install="docker-sdk"),
                                  DockerEngine(needed_for="the docker backend")]
        if not (needs.shaped or needs.impaired):
            return own
        return own + emulation_requirements(needs, "shaping containers' links from the host", namespaces=False)

    @classmethod
    def preflight(cls, scenario: Scenario, options: BackendOptions):
        """The link plan (netem, or the userspace delay line spliced into each container's eth0), or
        CapabilityError naming what cannot be emulated; creates nothing."""
        if _needs_shaping(scenario) and os.geteuid() != 0:
            raise CapabilityError("the docker backend shapes links from the host and needs root for it "
                                  "(or run a scenario without shaped links)")
        if scenario.regions is not None:
            # Region delays key on node addresses the docker network assigns; only netns plans them so far.
            raise CapabilityError("regions: the docker backend does not emulate delays between regions yet; "
                                  "use --backend netns")
        caps = net_probe.probe(docker=False, gpus=False)
        return plan_links(scenario.nodes(), caps, engine=options.link_engine,
                          allow_unemulated=options.allow_unemulated, seed=scenario.train.seed)

    @classmethod
    def clean_leftovers(cls, include_live: bool = False) -> tuple[list[str], list[str]]:
        """Everything labelled `distro-bench=1` whose run is over. No engine: nothing to do."""
        try:
            client = image.client(timeout=5.0 * timeout_scale())
        except CapabilityError:
            return [], []
        try:
            return remove_labelled(client, include_live=include_live)
        finally:
            client.close()

    # ---- lifecycle ---------------------------------------------------------------------
    def setup(self) -> None:
        if self.plan is None:
            self.plan = self.preflight(self.scenario, self.options)
        self.client = image.client(timeout=self.timeouts.docker_api_s)
        self.image = image.require_image(self.client, self.options.image)
        missing = image.method_problems(self.image, self.scenario)  # a method of another distribution
        if missing:
            raise CapabilityError("; ".join(missing))
        n_gpus = host_gpu_count()
        self.placements = [place(n, n_gpus) for n in self.scenario.nodes()]
        atexit.register(self.teardown)
        t0 = time.monotonic()
        self._create_network()
        self._start_nodes()
        self.bringup_s = time.monotonic() - t0
        self._find_host_veths()
        self._splice()
        self._emulate()
        self.shaping_s = time.monotonic() - t0 - self.bringup_s
        self._check_reachable()

    def _create_network(self) -> None:
        # internal: workers reach each other and nothing else (no NAT to the outside world).
        self.network = self.client.networks.create(f"distro-bench-{self.run_id}", driver="bridge", internal=True,
                                                   labels=_owner_labels(self.run_id), check_duplicate=True)

    def _mounts(self) -> dict[str, dict]:
        run_dir = str(self.run_dir.resolve())
        volumes = {run_dir: {"bind": run_dir, "mode": "rw"}}
        corpus = self.scenario.corpus_path()
        if not corpus.startswith("builtin:") and Path(corpus).exists():
            volumes[corpus] = {"bind": corpus, "mode": "ro"}
        return volumes

    def _start_node(self, node: Node):
        assert self.image is not None  # setup() requires it before any node starts
        p = self.placements[node.rank]
        kwargs: dict[str, Any] = {
            "image": self.image.id, "command": ["sleep", "infinity"], "entrypoint": [], "detach": True, "init": True,
            "name": f"distro-bench-{self.run_id}-{node.name}", "hostname": node.name,
            "labels": {**_owner_labels(self.run_id), LABEL_RANK: str(node.rank)},
            "network": self.network.name, "volumes": self._mounts(), "user": container_user(),
            "shm_size": SHM_SIZE, "cap_drop": DROPPED_CAPS, "security_opt": ["no-new-privileges"], "privileged": False,
            "environment": {"HOME": "/tmp"},
        }
        if p.nano_cpus:
            kwargs["nano_cpus"] = p.nano_cpus
        if p.mem_bytes:
            kwargs["mem_limit"] = p.mem_bytes
        if p.gpus:
            kwargs["device_requests"] = device_requests(p)
        return self.client.containers.run(**kwargs)

    def _start_nodes(self) -> None:
        import docker

        nodes = self.scenario.nodes()
        t0 = time.monotonic()
        # Created in parallel: the engine does the work, and bring-up time grows less with the count.
        with ThreadPoolExecutor(max_workers=min(8, len(nodes))) as pool:
            futures = [pool.submit(self._start_node, n) for n in nodes]
            errors = []
            for f in futures:
                try:
                    self.containers.append(f.result(timeout=max(1.0, self.timeouts.container_start_s
                                                                - (time.monotonic() - t0))))
                except docker.errors.APIError as e:
                    errors.append(e)
                except OSError as e:  # our wait ran out, or the SDK's (requests' errors are OSErrors): ReadTimeout
                    for other in futures:
                        other.cancel()
                    raise HarnessError(self.timeouts.exceeded(
                        f"docker backend: starting {len(nodes)} node container(s) ({type(e).__name__} waiting for "
                        f"the engine; one request may take {self.timeouts.docker_api_s:.0f}s, all of them "
                        f"{self.timeouts.container_start_s:.0f}s)", time.monotonic() - t0)) from None
        if errors:
            first = errors[0]
            gpu = any(p.gpus for p in self.placements)
            hint = " (GPU containers need the NVIDIA container toolkit configured for this engine)" if gpu else ""
            raise CapabilityError(f"docker backend: starting node containers failed: {str(first)[:300]}{hint}")
        self.containers.sort(key=lambda c: int(c.labels[LABEL_RANK]))
        for c in self.containers:
            c.reload()
            state = c.attrs["State"]
            if not state.get("Running"):
                raise HarnessError(f"container {c.name} exited at once ({state.get('Status')}, code {state.get('ExitCode')}): "
                                   + c.logs(tail=5).decode(errors="replace"))
            self.pids.append(int(state["Pid"]))
            self.addresses.append(c.attrs["NetworkSettings"]["Networks"][self.network.name]["IPAddress"])

    def _ns(self, rank: int):
        return NetnsRef(path=f"/proc/{self.pids[rank]}/ns/net", label=f"container {self.containers[rank].name}")

    def _find_host_veths(self) -> None:
        # Before any splice: afterwards eth0's peer is `a`, inside the container.
        if _needs_shaping(self.scenario):
            self.host_veths = [host_veth(self._ns(r)) for r in range(len(self.containers))]

    def _splice(self) -> None:
        """A delay-line hop in each container whose plan needs one (see the module docstring)."""
        assert self.plan is not None
        for rank in sorted(self.plan.delay_line_ranks):
            self.splices[rank] = splice(self._ns(rank), IFACE)
            # As the netns backend's switch port: frames from other nodes reach `b` MTU-sized.
            offloads_off(NetnsRef.current(), self.host_veths[rank])

    def _emulate(self) -> None:
        """tc on each container's eth0 (uplink) and on its host-side veth (downlink), read back; the
        delay lines in the spliced containers, a->b the uplink."""
        assert self.plan is not None
        if not _needs_shaping(self.scenario):
            return  # nothing to apply: the containers keep Docker's own qdiscs
        self.emulation = emulation = Emulation(self.plan, [
            Endpoints(rank=r, up_ns=self._ns(r), up_iface=IFACE, down_ns=NetnsRef.current(),
                      down_iface=self.host_veths[r], delay_line_ns=self._ns(r).path if r in self.splices else None,
                      delay_line_ifaces=(NODE_SIDE, SWITCH_SIDE))
            for r in range(len(self.containers))], log_dir=self.run_dir)
        emulation.apply()

    def _check_reachable(self) -> None:
        """A TCP handshake to the next node from each spliced node at once (the workers' path, through both delay
        lines): a hop that does not forward fails here, not as a worker hung on its first collective."""
        if not self.splices or len(self.containers) < 2:
            return
        n = len(self.containers)
        failed = check_reachable([(f"{self.containers[r].name} -> {self.addresses[(r + 1) % n]}", self._ns(r),
                                   self._ns((r + 1) % n), self.addresses[(r + 1) % n]) for r in self.splices])
        if failed:
            raise HarnessError("no TCP handshake through the delay line: " + ", ".join(failed))

    def _stop_delay_lines(self) -> list[str]:
        problems = self.emulation.stop() if self.emulation else []
        # Give Docker back the eth0 it created, so the engine's own cleanup finds it.
        for rank in list(self.splices):
            problems += [f"rank {rank}: {p}" for p in undo(self._ns(rank), IFACE)]
        self.splices.clear()
        return problems

    def teardown(self) -> None:
        """Remove this run's containers and network, found by label, so a partial setup is covered too."""
        atexit.unregister(self.teardown)
        self.teardown_problems += self._stop_delay_lines()
        if self.client is None:
            return
        _removed, problems = remove_labelled(self.client, self.run_id)
        self.teardown_problems += problems
        self.containers, self.network = [], None

    # ---- workers -----------------------------------------------------------------------
    def python(self) -> str:
        return self.image.python if self.image else "python"

    def master_addr(self) -> str:
        if not self.addresses:
            raise HarnessError("docker backend used before setup")
        return self.addresses[0]

    def worker_env(self, rank: int) -> dict[str, str]:
        return {**worker_env(IFACE), "HOME": "/tmp"}

    def start_worker(self, rank: int, argv: list[str], env: dict[str, str], log_path: Path) -> WorkerHandle:
        container = self.containers[rank]
        log_path.parent.mkdir(parents=True, exist_ok=True)
        self._exec_count += 1
        pid_file = f"/tmp/distro-bench-worker-{self._exec_count}.pid"
        # The log goes straight to the bind-mounted run folder, as a local worker's would.
        cmd = ["sh", "-c", 'echo $$ >"$1"; shift; exec "$@" >>"$0" 2>&1', str(log_path), pid_file, *argv]
        # Relative paths in argv (a relative --out) resolve as on the host: the run folder is mounted at
        # its host path, so the host's working directory exists in the container too.
        workdir = os.getcwd() if not self.run_dir.is_absolute() else "/tmp"
        api = self.client.api
        user = self._exec_user(container, log_path, argv)
        ex = api.exec_create(container.id, cmd, environment=env, workdir=workdir, user=user)
        api.exec_start(ex["Id"], detach=True)
        return ContainerWorker(rank=rank, log_path=log_path, api=api, container_id=container.id,
                               exec_id=ex["Id"], pid_file=pid_file, user=user)

    def _exec_user(self, container, log_path: Path, argv: list[str]) -> str:
        """Who the worker writing `log_path`'s folder runs as (see the module docstring), decided once per folder."""
        out = log_path.parent
        if os.geteuid() != 0:
            return container_user()
        if out not in self._exec_users:
            os.chown(out, WORKER_UID, WORKER_GID)
            check = 'test -w "$0" -a -x "$0" || exit 1; for f; do test -r "$f" || exit 1; done'
            api = self.client.api
            ex = api.exec_create(container.id, ["sh", "-c", check, str(out), *worker_reads(self.scenario, argv)],
                                 user=NOBODY)
            api.exec_start(ex["Id"])
            if api.exec_inspect(ex["Id"]).get("ExitCode") == 0:
                self._exec_users[out] = NOBODY
            else:
                os.chown(out, 0, 0)
                if not self.options.allow_root_workers:
                    raise CapabilityError(
                        f"the workers cannot run as nobody ({WORKER_UID}) in their containers: it cannot write {out} "
                        f"or read {', '.join(worker_reads(self.scenario, argv))} (a run folder or corpus under a 0700 "
                        "home, such as /root, is out of its reach). Fix: --out and the scenario's files in a folder "
                        "other users can reach; or accept workers as the container's root (no capabilities) with "
                        "--allow-root-workers")
                self._exec_users[out] = "0:0"
        user = self._exec_users[out]
        if user == NOBODY:  # the container's shell opens the log as the worker
            log_path.touch()
            os.chown(log_path, WORKER_UID, WORKER_GID)
        return user

    def describe(self) -> dict:
        plan = describe_plan(self.plan)
        nodes = []
        plans = {p.rank: p for p in self.plan.nodes} if self.plan else {}
        for n in self.scenario.nodes():
            c = self.containers[n.rank] if n.rank < len(self.containers) else None
            p = plans.get(n.rank)
            nodes.append({
                "rank": n.rank, "name": n.name, "address": self.addresses[n.rank] if c else None,
                "container": c.name if c else None, "container_id": c.id[:12] if c else None,
                "host_veth": self.host_veths[n.rank] if n.rank < len(self.host_veths) else None,
                "link": n.link_name, "link_spec": n.link.describe() if n.link else "unshaped",
                "resources": self.placements[n.rank].describe() if self.placements else None,
                "applied": self.emulation.describe_node(n.rank) if self.emulation else None,
                "not_emulated": p.not_emulated if p else [],
            })
        net = self.network
        return {
            "backend": self.name, "network_emulated": bool(self.emulation and self.emulation.applied),
            "run_id": self.run_id,
            "image": {"tag": self.image.tag, "id": self.image.id, "harness": self.image.version} if self.image else None,
            "engine": self.client.version().get("Version") if self.client else None,
            "link_engine": plan["link_engine"], "link_engine_reason": plan["link_engine_reason"],
            "topology": None if net is None else {
                "network": net.name, "network_id": net.id[:12], "driver": "bridge", "internal": True,
                "interface": IFACE, "uplink": f"egress of each container's {IFACE}",
                "downlink": "egress of each container's host-side veth",
                "delay_line": None if not self.splices else (
                    f"spliced into {IFACE} of nodes {sorted(self.splices)}: {IFACE} <-> a | delay line | "
                    "b (Docker's veth) <-> host veth; entered from the host")},
            "bringup_s": self.bringup_s, "shaping_s": self.shaping_s,
            "nodes": nodes,
            "not_emulated": plan["not_emulated"],
        }


def _needs_shaping(scenario: Scenario) -> bool:
    return any(n.link is not None and n.link.shaped for n in scenario.nodes())


def host_veth(ns) -> str:
    """The host-side peer of eth0 in namespace `ns`: the host interface whose index is eth0's iflink."""
    return peer_ifname(ns, IFACE, NetnsRef.current())
