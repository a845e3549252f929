"""A run across the hosts of an ssh inventory: `distro-bench run SCENARIO --backend ssh --inventory hosts.yaml`.

    check      the inventory (backends/inventory.py) and the placement: one inventory host per placement host
    prepare    on every host, over ssh: a private folder (/tmp/dbench-ssh.XXXXXXXX) holding the scenario, with the
               overrides applied, and its corpus file; the host's distro-bench must be this one's version
    agents     on every host, over ssh: `distro-bench node --stream` (multihost/agent.py), host 0 serving the
               rendezvous. Each shapes its interface, reads the shaping back, trains its workers under torchrun and
               removes the shaping on every exit path (its janitor does it if the agent is killed outright)
    relay      their notes, records (the live progress `run` shows on one host) and heartbeats, as JSON lines
    fetch      node 0's run folder copied here (tar over ssh), then every host's private folder removed

The agents own the run: they meet, find a lost host (multihost/store.py) and node 0 writes the folder, so this
launcher adds no second judge of liveness; it starts them and ends them. Closing an agent's stdin (Ctrl-C or SIGTERM
here; ssh gets SIGTERM if this process dies, and the connection closes) makes that agent take its Ctrl-C path.
"""

from __future__ import annotations

import io
import queue
import re
import secrets
import shutil
import socket
import subprocess
import tarfile
import threading
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import IO, Any

from distro_bench import __version__
from distro_bench.backends.catalog import needs_message
from distro_bench.backends.inventory import Inventory, ResolvedHost, load_inventory
from distro_bench.backends.ssh import (
    FETCH,
    PREPARE,
    REMOTE_TMP,
    REMOVE,
    agent_argv,
    remote_command,
    shell_script,
    ssh_argv,
)
from distro_bench.errors import HarnessError, InputError, Interrupted, WorkerFailed
from distro_bench.results import runfiles
from distro_bench.results.rundir import atomic_write_json
from distro_bench.run.launch import Event, decode, term_with_parent
from distro_bench.run.lifecycle import ProgressSink, sigterm_as_interrupt
from distro_bench.run.overrides import RunSettings
from distro_bench.run.progress import AcrossRanks
from distro_bench.scenario import hfcorpus, methods
from distro_bench.scenario.loading import dump_scenario
from distro_bench.scenario.model import BUILTIN_CORPORA, Scenario
from distro_bench.scenario.placement import from_scenario
from distro_bench.scenario.timeouts import Timeouts

SCENARIO_FILE = "scenario.yaml"
# The agents' store secret of this run (multihost/secret.py), made here and unpacked with the scenario into each
# host's private folder (PREPARE: umask 077): on no command line.
SECRET_FILE = "agents.secret"
# After Ctrl-C, or once host 0's agent is done: how long the other agents get to end on their own (torchrun stops
# in up to 20 s, then the shaping is removed and node 0 writes the folder and its report) before ssh is killed.
STOP_S = 120.0
# The agents' stream beats every 5 s (multihost/stream.py): a host silent this long is named in a note
# (scenario/timeouts.py, with every other wait).
SILENT_S = Timeouts.REMOTE_SILENT_S
_WORKDIR = re.compile(r"^/[A-Za-z0-9_./-]*/dbench-ssh\.[A-Za-z0-9]+$")


class FetchFailed(HarnessError):
    """Node 0's run folder could not be copied here: it stays on host 0 (not removed), and the message says where."""


@dataclass(frozen=True)
class RemoteOutcome:
    run_dir: Path  # node 0's run folder, copied here
    state: str


def run_over_ssh(scenario: Scenario, settings: RunSettings, sink: ProgressSink,
                 probe: Callable[[], str] | None = None) -> RemoteOutcome:
    """Train `scenario` (overrides already applied) on the inventory's hosts; node 0's run folder lands in
    settings.out. Raises as a single-host run does when the run failed (WorkerFailed) or was interrupted.
    `probe` checks this machine (its ssh client) and says why it runs; after the inventory and the placement,
    whose mistakes come first wherever they are read."""
    if settings.inventory is None:
        raise InputError(needs_message("ssh", "inventory"))
    inv = load_inventory(settings.inventory)
    hosts = inv.all()
    try:  # one inventory host per placement host
        placement = from_scenario(scenario, len(hosts))
    except InputError as e:
        raise InputError(f"--inventory lists {len(hosts)} hosts: {e}") from None
    if probe is not None:
        sink.note(f"backend: {probe()}")
    archive = scenario_archive(scenario, secrets.token_hex(32))  # as multihost/secret.py make()
    sink.note(f"ssh: {len(hosts)} hosts ({', '.join(h.host for h in hosts)}), placement {placement.encode()}, "
              f"rendezvous {hosts[0].address}:{inv.rdzv_port}")
    workdirs: dict[int, str] = {}
    keep = False  # leave the hosts' folders where node 0's could not be copied here
    try:
        _prepare_all(inv, hosts, archive, workdirs,
                     methods.foreign_types([c.type for c in scenario.optimizers.values()]))
        agents = [RemoteAgent(h, inv, workdirs[h.node_rank]) for h in hosts]
        relay = Relay(sink, scenario, len(hosts))
        interrupted = False
        try:
            with sigterm_as_interrupt():
                try:
                    for a in agents:
                        a.start(agent_argv(a.host, workdir=a.workdir, scenario=SCENARIO_FILE, secret=SECRET_FILE,
                                           rdzv=f"{hosts[0].address}:{inv.rdzv_port}", nnodes=len(hosts),
                                           placement=placement.encode(),
                                           extra=agent_flags(settings) + (["--i-know"] if a.host.i_know else [])),
                                relay.events)
                    relay.until_done(agents)
                except KeyboardInterrupt:
                    interrupted = True
                    sink.note("ssh: interrupted; every agent removes its shaping and node 0 keeps what was recorded")
                    relay.stop_all(agents)
        except KeyboardInterrupt:  # a second one: no more waiting; each agent still sees its stdin close
            keep = True
            for a in agents:
                a.kill()
            raise Interrupted(f"interrupted twice: the agents stop on their own; {hosts[0].label()} keeps the "
                              f"run folder in {agents[0].workdir}/results") from None
        finally:
            relay.stop_all(agents)  # after a failure here too: no agent outlives the launcher's attention
            relay.finish_open()
        # Host 0's agent ended without a word (lost, crashed): whatever it recorded stays on the hosts.
        keep = agents[0].end is None
        try:
            return _outcome(inv, agents, settings, interrupted, sink)
        except FetchFailed:
            keep = True
            raise
    finally:
        if not keep:
            _remove_all(inv, hosts, workdirs, sink)


# ---- what travels to every host ---------------------------------------------------------------------------

def scenario_archive(scenario: Scenario, run_secret: str | None = None) -> bytes:
    """A tar archive of scenario.yaml (as resolved here, overrides applied), the run's secret (mode 600) and the
    corpus file or folder it names (at the same relative path), which every agent unpacks into its folder."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        if run_secret is not None:
            data = run_secret.encode() + b"\n"
            info = tarfile.TarInfo(SECRET_FILE)
            info.size, info.mode = len(data), 0o600
            tar.addfile(info, io.BytesIO(data))
        text = dump_scenario(scenario).encode()
        info = tarfile.TarInfo(SCENARIO_FILE)
        info.size, info.mode = len(text), 0o600
        tar.addfile(info, io.BytesIO(text))
        corpus = scenario.data.corpus
        if corpus not in BUILTIN_CORPORA and not hfcorpus.is_hf(corpus):
            rel = PurePosixPath(corpus)
            if rel.is_absolute() or ".." in rel.parts:
                raise InputError(f"data.corpus: {corpus!r} is not inside the scenario's folder, so it cannot travel "
                                 "to the hosts with it; copy it into that folder and name it relative to it")
            tar.add(scenario.corpus_path(), arcname=str(rel))
    return buf.getvalue()


def agent_flags(settings: RunSettings) -> list[str]:
    """The run settings every agent takes from `run`'s flags."""
    out: list[str] = []
    if settings.allow_unemulated is not None:
        out.append("--allow-unemulated" if settings.allow_unemulated else "--no-allow-unemulated")
    if settings.measure_links is False:
        out.append("--no-measure")
    if settings.collective_timeout_s is not None:
        out += ["--collective-timeout", f"{settings.collective_timeout_s:g}"]
    return out


# ---- one-off commands on every host -----------------------------------------------------------------------

def _ssh(h: ResolvedHost, inv: Inventory, command: str, timeout: float,
         data: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(ssh_argv(h, inv, command), input=data, capture_output=True, timeout=timeout,
                          stdin=None if data is not None else subprocess.DEVNULL)


def _said(r: subprocess.CompletedProcess[bytes]) -> str:
    lines = [x for x in r.stderr.decode(errors="replace").splitlines() if x.strip()]
    return lines[-1].strip() if lines else f"exit {r.returncode}"


def _prepare_all(inv: Inventory, hosts: list[ResolvedHost], archive: bytes, workdirs: dict[int, str],
                 foreign: list[str] | None = None) -> None:
    """Every host's private folder with the files unpacked, its distro-bench version checked, and the scenario's
    methods from other distributions (`foreign`) loaded there, in parallel; HarnessError naming each host that
    failed (the folders made are in `workdirs`, for removal)."""
    def prepare(h: ResolvedHost) -> str | None:
        try:
            r = _ssh(h, inv, shell_script(PREPARE, inv.workdir or REMOTE_TMP, h.python, *(foreign or []),
                                          sudo=h.sudo),
                     timeout=inv.connect_timeout_s + 120, data=archive)
        except subprocess.TimeoutExpired:
            return f"{h.label()}: no answer in {inv.connect_timeout_s + 120:.0f}s"
        out = r.stdout.decode(errors="replace").split()
        if out and _WORKDIR.match(out[0]):
            workdirs[h.node_rank] = out[0]
        if r.returncode == 255:
            return f"{h.label()}: ssh could not reach it or log in ({_said(r)})"
        if r.returncode != 0 or len(out) < 2:
            return (f"{h.label()}: preparing its folder failed ({_said(r)}); is distro-bench installed for "
                    f"{h.python!r} there (the inventory's `python`)?")
        if out[1] != __version__:
            return (f"{h.label()}: runs distro-bench {out[1]}, this machine {__version__}: install the same "
                    "version on every host")
        missing = [line.removeprefix("method-missing: ") for line in r.stdout.decode(errors="replace").splitlines()
                   if line.startswith("method-missing: ")]
        if missing:
            return (f"{h.label()}: " + "; ".join(missing) + f"; install the method's package for {h.python!r} "
                    "there (pip install PATH-OR-NAME), as on this machine")
        return None

    with ThreadPoolExecutor(max_workers=min(16, len(hosts))) as pool:
        problems = [p for p in pool.map(prepare, hosts) if p]
    if problems:
        raise HarnessError("ssh: " + "; ".join(problems))


def _remove_all(inv: Inventory, hosts: list[ResolvedHost], workdirs: dict[int, str], sink: ProgressSink) -> None:
    """Each host's private folder removed (node 0's run folder was copied here first); a host that cannot be
    reached keeps its folder, and a note says where."""
    def remove(h: ResolvedHost) -> None:
        d = workdirs.get(h.node_rank)
        if d is None:
            return
        try:
            r = _ssh(h, inv, shell_script(REMOVE, d, sudo=h.sudo), timeout=inv.connect_timeout_s + 30)
            ok, why = r.returncode == 0, _said(r)
        except subprocess.TimeoutExpired:
            ok, why = False, "no answer"
        if not ok:
            sink.note(f"ssh: {h.label()}: {d} not removed ({why}); remove it by hand when the host is back")

    with ThreadPoolExecutor(max_workers=min(16, len(hosts))) as pool:
        list(pool.map(remove, hosts))


# ---- the agents ---------------------------------------------------------------------------------------------

@dataclass
class RemoteAgent:
    """One host's `distro-bench node --stream`, over its own ssh connection."""

    host: ResolvedHost
    inv: Inventory
    workdir: str
    proc: subprocess.Popen[bytes] | None = None
    end: dict[str, Any] | None = None  # the agent's `end` event
    last_word: float = field(default_factory=time.monotonic)
    errors: deque[str] = field(default_factory=lambda: deque(maxlen=20))  # its last lines on stderr
    exited: bool = False
    said_silent: bool = False

    def start(self, argv: list[str], events: queue.Queue[tuple[int, Event | None]]) -> None:
        # The remote command drops SSH_CONNECTION: the agent refuses to shape the interface of "your SSH
        # session", which this connection (a pipe of JSON lines) is not.
        command = remote_command(["env", "-u", "SSH_CONNECTION", "-u", "SSH_CLIENT", *argv], self.host.sudo)
        # A session of its own: the terminal's Ctrl-C reaches this launcher only, which stops the agents in
        # order; ssh dies with us (SIGTERM), so its agent sees stdin close.
        self.proc = subprocess.Popen(ssh_argv(self.host, self.inv, command), stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True,
                                     preexec_fn=term_with_parent)  # noqa: PLW1509 (one prctl call, no locks)
        rank = self.host.node_rank
        assert self.proc.stdout is not None and self.proc.stderr is not None
        threading.Thread(target=_read_events, args=(rank, self.proc.stdout, events), daemon=True).start()
        threading.Thread(target=_read_stderr, args=(rank, self.proc.stderr, events), daemon=True).start()

    def stop(self) -> None:
        """Close its stdin: the agent takes its Ctrl-C path."""
        if self.proc is not None and self.proc.stdin is not None and not self.proc.stdin.closed:
            try:
                self.proc.stdin.close()
            except OSError:
                pass

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)


def _read_events(rank: int, stream: IO[bytes], events: queue.Queue[tuple[int, Event | None]]) -> None:
    for raw in stream:
        ev = decode(raw.decode(errors="replace"))
        if ev is not None:
            events.put((rank, ev))
    events.put((rank, None))  # its stdout closed


def _read_stderr(rank: int, stream: IO[bytes], events: queue.Queue[tuple[int, Event | None]]) -> None:
    for raw in stream:
        text = raw.decode(errors="replace").rstrip()
        if text:
            events.put((rank, Event("note", rank, {"text": text, "stderr": True})))


class Relay:
    """The agents' streams into the progress sink: notes, each optimizer's steps (every rank's records joined into
    one per step, as `run` shows them on one host), and each host's last word."""

    def __init__(self, sink: ProgressSink, scenario: Scenario, nhosts: int):
        self.sink, self.nhosts = sink, nhosts
        self.events: queue.Queue[tuple[int, Event | None]] = queue.Queue()
        self.across = AcrossRanks(sink, scenario.world_size)
        self.seeds = len(scenario.train.seed_list())
        self.finished: dict[str, int] = {}  # label -> hosts that finished it
        self.open: list[str] = []

    def label(self, fields: dict[str, Any]) -> str:
        name = str(fields.get("optimizer"))
        return f"{name} seed {fields.get('seed')}" if self.seeds > 1 else name

    def handle(self, agent: RemoteAgent, ev: Event) -> None:
        agent.last_word, agent.said_silent = time.monotonic(), False
        f = ev.fields
        if ev.event == "note":
            if f.get("stderr"):
                agent.errors.append(str(f.get("text")))
                self.sink.note(f"{agent.host.label()}: {f.get('text')}")
            else:
                self.sink.note(str(f.get("text")))
        elif ev.event == "start":
            label = self.label(f)
            if label not in self.finished:
                self.finished[label] = 0
                self.open.append(label)
                self.sink.start(label, f.get("total_steps"))
        elif ev.event == "record":
            rec = f.get("record")
            if isinstance(rec, dict) and rec.get("type") == "step":
                self.across.step(self.label(f), rec)
        elif ev.event == "finish":
            label = self.label(f)
            self.finished[label] = self.finished.get(label, 0) + 1
            if self.finished[label] == self.nhosts and label in self.open:
                self.open.remove(label)
                self.sink.finish(label)
        elif ev.event == "end":
            agent.end = f

    def finish_open(self) -> None:
        for label in self.open:
            self.sink.finish(label)
        self.open = []

    def stop_all(self, agents: list[RemoteAgent]) -> None:
        """Tell every agent still running to stop (its Ctrl-C path) and relay until they end, STOP_S at most."""
        if all(a.exited or a.proc is None for a in agents):
            return
        for a in agents:
            a.stop()
        self.until_done([a for a in agents if a.proc is not None], deadline=time.monotonic() + STOP_S)

    def until_done(self, agents: list[RemoteAgent], deadline: float | None = None) -> None:
        """Relay until every agent's ssh has ended. Once host 0's agent is done (the run folder written), the others
        get STOP_S / 2 to end on their own, then are told to stop; past `deadline` or STOP_S, ssh is killed."""
        host0_done_at: float | None = None
        by_rank = {a.host.node_rank: a for a in agents}
        while True:
            try:
                rank, ev = self.events.get(timeout=0.5)
                if ev is not None and rank in by_rank:
                    self.handle(by_rank[rank], ev)
            except queue.Empty:
                pass
            now = time.monotonic()
            for a in agents:
                if not a.exited and a.proc is not None and a.proc.poll() is not None:
                    a.exited = True
                    self._ended(a)
                elif not a.exited and not a.said_silent and now - a.last_word > SILENT_S:
                    a.said_silent = True
                    self.sink.note(f"ssh: {a.host.label()}: no word for {now - a.last_word:.0f}s (the agents judge "
                                   "whether it is lost)")
            if all(a.exited for a in agents):
                self._drain(agents)
                return
            if 0 in by_rank and by_rank[0].exited and host0_done_at is None:
                host0_done_at = now
            if host0_done_at is not None and now - host0_done_at > STOP_S / 2:
                for a in agents:
                    a.stop()
            if (deadline is not None and now > deadline) or (host0_done_at is not None and now - host0_done_at > STOP_S):
                for a in agents:
                    a.kill()

    def _drain(self, agents: list[RemoteAgent]) -> None:
        """What the readers still hold once every ssh ended (their last lines, the `end` events)."""
        by_rank = {a.host.node_rank: a for a in agents}
        closed, until = 0, time.monotonic() + 5.0
        while closed < len(agents) and time.monotonic() < until:
            try:
                rank, ev = self.events.get(timeout=0.5)
            except queue.Empty:
                continue
            if ev is None:
                closed += 1
            elif rank in by_rank:
                self.handle(by_rank[rank], ev)

    def _ended(self, a: RemoteAgent) -> None:
        assert a.proc is not None
        rc = a.proc.returncode
        if rc == 255:  # ssh's own failure; what it said is relayed as it comes
            self.sink.note(f"ssh: {a.host.label()}: connection lost (ssh exit 255)")
        elif rc != 0:
            self.sink.note(f"ssh: {a.host.label()}: its agent exited with code {rc}")


# ---- the run folder, here ------------------------------------------------------------------------------------

def _outcome(inv: Inventory, agents: list[RemoteAgent], settings: RunSettings, interrupted: bool,
             sink: ProgressSink) -> RemoteOutcome:
    """Node 0's run folder copied into settings.out and what became of the run; raises as `run` does when the run
    failed or was interrupted (the message names the folder)."""
    a0 = agents[0]
    end = a0.end or {}
    remote_dir = end.get("run_dir")
    if not remote_dir:
        why = end.get("reason") or (a0.errors[-1] if a0.errors else "its connection ended without a word")
        raise WorkerFailed(f"ssh: {a0.host.label()} (node-rank 0, which writes the run folder) did not finish the "
                           f"run: {why}" + (f"; what it recorded stays in {a0.workdir}/results" if a0.end is None else ""))
    local = fetch_run_folder(a0, remote_dir, settings.out)
    _record_launch(local, inv, agents)
    try:  # a folder another host wrote: read as run folders are (results/runfiles.py)
        status = runfiles.read_json(local, "status.json")
    except (OSError, runfiles.RunFileError):
        status = None
    if not isinstance(status, dict):
        status = {"state": end.get("state"), "reason": end.get("reason")}
    state, reason = str(status.get("state")), status.get("reason")
    sink.note(f"ssh: node 0's run folder copied to {local}")
    if interrupted or state == "incomplete":
        raise Interrupted(f"interrupted; partial results kept in {local}")
    if state != "complete":
        raise WorkerFailed(f"{reason or 'the run failed'}; run folder: {local}")
    return RemoteOutcome(local, state)


def extract_plain(tar: tarfile.TarFile, member: tarfile.TarInfo, out: Path) -> None:
    """One member of an archive from a host, as tarfile's data filter would take it, on every Python this runs on
    (the filter is missing before 3.11.4; Debian 12 has 3.11.2): a plain file or folder at a relative path with no
    `..`, written with this process's umask; a link, device or path out of `out` is refused."""
    parts = PurePosixPath(member.name).parts
    if member.name.startswith("/") or ".." in parts or not (member.isfile() or member.isdir()):
        kind = "a path outside" if member.isfile() or member.isdir() else "a link or special file"
        raise HarnessError(f"ssh: host 0's archive holds {member.name!r} ({kind}); only plain files and folders "
                           "inside the run folder are taken")
    target = out.joinpath(*parts)
    if member.isdir():
        target.mkdir(parents=True, exist_ok=True)
        return
    target.parent.mkdir(parents=True, exist_ok=True)
    src = tar.extractfile(member)
    assert src is not None  # a regular file always has its data
    with open(target, "wb") as f:
        shutil.copyfileobj(src, f)


def fetch_run_folder(a0: RemoteAgent, remote_dir: str, out: Path) -> Path:
    """Node 0's run folder (a folder in its `results`) copied to out/<its name> through `tar` over ssh; only plain
    files and folders inside that one folder are taken (extract_plain)."""
    remote = PurePosixPath(remote_dir)
    if str(remote.parent) != f"{a0.workdir}/results" or not re.fullmatch(r"[\w.-]+", remote.name):
        raise HarnessError(f"ssh: host 0 named a run folder outside its results: {remote_dir!r}")
    local = out / remote.name
    if local.exists():
        raise FetchFailed(f"ssh: {local} exists already; not overwritten (host 0's folder stays at {remote_dir})")
    out.mkdir(parents=True, exist_ok=True)
    proc = subprocess.Popen(ssh_argv(a0.host, a0.inv, shell_script(FETCH, str(remote.parent), remote.name,
                                                                   sudo=a0.host.sudo)),
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout is not None
    try:
        with tarfile.open(fileobj=proc.stdout, mode="r|") as tar:
            for member in tar:
                if member.name != remote.name and not member.name.startswith(remote.name + "/"):
                    raise HarnessError(f"ssh: host 0's archive holds {member.name!r}, outside {remote.name}")
                extract_plain(tar, member, out)
    except (tarfile.TarError, OSError) as e:
        raise FetchFailed(f"ssh: copying {remote_dir} from {a0.host.label()} failed ({e}); it stays there") from None
    finally:
        _, err = proc.communicate(timeout=60)
    if proc.returncode != 0:
        raise FetchFailed(f"ssh: copying {remote_dir} from {a0.host.label()} failed "
                           f"({err.decode(errors='replace').strip() or proc.returncode}); it stays there")
    return local


def _record_launch(local: Path, inv: Inventory, agents: list[RemoteAgent]) -> None:
    """environment.json says how the run was launched: from where, to which hosts, how each agent ended."""
    path = local / "environment.json"
    try:  # another host's file: read as run folders are (results/runfiles.py)
        env = runfiles.read_json(local, "environment.json")
    except (OSError, runfiles.RunFileError):
        return
    if not isinstance(env, dict):
        return
    env["launcher"] = {
        "backend": "ssh", "from": socket.gethostname(), "rdzv_port": inv.rdzv_port,
        "hosts": [{"node_rank": a.host.node_rank, "host": a.host.host, "address": a.host.address,
                   "iface": a.host.iface, "user": a.host.user, "sudo": a.host.sudo,
                   "ssh_exit": a.proc.returncode if a.proc is not None else None,
                   "agent_state": (a.end or {}).get("state", "no word (lost)")} for a in agents]}
    atomic_write_json(path, env)


__all__ = ["RemoteOutcome", "run_over_ssh", "scenario_archive"]
