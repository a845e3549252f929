"""ssh backend: hosts you can log in to (home PCs, lab boxes; no Slurm), listed in an inventory
(backends/inventory.py). The run is not launched worker by worker from here: each host runs its own agent,
`distro-bench node --stream` (multihost/agent.py: it shapes its interface, reads the shaping back, runs its workers
under torchrun and removes the shaping on every exit path), started over SSH by run/remote.py, which relays the
agents' records and heartbeats and copies node 0's run folder back.

Why the OpenSSH client and not a library (asyncssh, paramiko): it is on every machine that has an SSH server to
talk to, it reads the user's own ~/.ssh/config, agent, keys and known_hosts exactly as their `ssh` does (jump
hosts, certificates, hardware keys), and it adds no Python dependency; what a library would give (channels in
one process) we do not need, because each host is one long command with a pipe each way. Its remote command is
a shell string: every argument is quoted with shlex.quote (`remote_command`), and no value from the inventory or
the scenario is ever pasted into it unquoted.

This module holds the pure part: the `ssh` argument lists and remote commands (tested exactly), and the
backend's declaration (catalog, preflight). Nothing here connects.
"""

from __future__ import annotations

import shlex
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from distro_bench.backends.base import Backend, WorkerHandle
from distro_bench.backends.inventory import Inventory, ResolvedHost
from distro_bench.backends.requirements import Needs, Problem, Requirement
from distro_bench.errors import HarnessError
from distro_bench.net.host import HostInfo
from distro_bench.scenario.timeouts import Timeouts
from distro_bench.train.launch import node_args

SSH = "ssh"
# ssh gives up on a host that stops answering after ALIVE_S x ALIVE_COUNT (a host that dropped off the network);
# the agents decide sooner among themselves (multihost/store.py LOST_AFTER_S), this only ends our pipe.
ALIVE_S = Timeouts.SSH_ALIVE_S  # scenario/timeouts.py, with every other wait
ALIVE_COUNT = Timeouts.SSH_ALIVE_COUNT
REMOTE_TMP = "/tmp"

# Run on each host before its agent, with the scenario's files as a tar archive on stdin: a private folder
# of this run in $1 (its path printed first, so a failure later leaves nothing unknown behind), the files unpacked
# in it, then the version of distro-bench that the inventory's python ($2) imports, then a line
# `method-missing: ...` for each method of another distribution ($3...) it cannot load (docs/extending.md).
# Values come in as $1, $2, ..., never pasted into the script.
PREPARE = ('set -e; umask 077; mkdir -p "$1"; d=$(mktemp -d "$1/dbench-ssh.XXXXXXXX"); printf "%s\\n" "$d"; '
           'tar -x -f - -C "$d"; py=$2; shift 2; "$py" -c "import distro_bench; print(distro_bench.__version__)"; '
           'if [ "$#" -gt 0 ]; then exec "$py" -m distro_bench.scenario.methods "$@"; fi')
# The run folder node 0 wrote ($2, a name in $1), as a tar archive on stdout.
FETCH = 'set -e; cd "$1"; exec tar -c -f - -- "$2"'
# Our folder of this run ($1), removed: only a folder PREPARE made (its name says so).
REMOVE = 'case "$1" in */dbench-ssh.*) exec rm -rf -- "$1";; *) exit 2;; esac'


@dataclass(frozen=True, kw_only=True)
class SshClient(Requirement):
    """The OpenSSH client on this machine (the one that launches; the hosts need an SSH server)."""

    def problems(self, host: HostInfo, link_engine: str = "auto") -> list[Problem]:
        if shutil.which(SSH):
            return []
        return [Problem("`ssh` (openssh-client)", self.needed_for, "apt-get install openssh-client")]


def ssh_argv(h: ResolvedHost, inv: Inventory, command: str) -> list[str]:
    """`ssh` reaching host `h` and running `command` (a shell string built by remote_command), never prompting:
    a key or an agent, host keys checked (an unknown or changed one stops it), no terminal (the agent's stdout is
    a stream of JSON lines, and its stdin's end is how it learns the launcher went away)."""
    argv = [SSH, "-T", "-o", "BatchMode=yes", "-o", f"ConnectTimeout={inv.connect_timeout_s:g}",
            "-o", f"ServerAliveInterval={ALIVE_S}", "-o", f"ServerAliveCountMax={ALIVE_COUNT}",
            "-o", "StrictHostKeyChecking=" + ("yes" if inv.strict_host_keys else "accept-new"),
            "-o", "LogLevel=ERROR", "-p", str(h.port)]
    if inv.known_hosts is not None:
        argv += ["-o", f"UserKnownHostsFile={inv.known_hosts}"]
    if h.key is not None:
        argv += ["-i", str(h.key), "-o", "IdentitiesOnly=yes"]
    if h.user:
        argv += ["-l", h.user]
    return [*argv, "--", h.host, command]


def remote_command(argv: list[str], sudo: bool = False) -> str:
    """The shell string ssh hands the host's login shell: each argument quoted, `sudo -n` (never a password
    prompt) in front where the inventory asks for it."""
    return shlex.join((["sudo", "-n", "--"] if sudo else []) + argv)


def shell_script(script: str, *args: str, sudo: bool = False) -> str:
    """A fixed script run by `sh -c` with `args` as $1, $2, ...: values travel as arguments, quoted."""
    return remote_command(["sh", "-c", script, "sh", *args], sudo)


def agent_argv(h: ResolvedHost, *, workdir: str, scenario: str, rdzv: str, nnodes: int, placement: str,
               extra: list[str], secret: str | None = None) -> list[str]:
    """`distro-bench node --stream` on host `h`, with the files PREPARE unpacked in `workdir` (`scenario` the
    scenario's path among them, `secret` the agents' store secret's) and its records under workdir/results."""
    # `distro-bench node` as every launcher starts it (train/launch.py), driven over the pipe (--stream).
    return [h.python, "-u", "-m", "distro_bench.cli", *node_args(
        f"{workdir}/{scenario}", rdzv=rdzv, node_rank=str(h.node_rank), nnodes=str(nnodes), placement=placement,
        iface=h.iface, out=f"{workdir}/results", secret_file=f"{workdir}/{secret}" if secret else None,
        flags=["--stream", *extra])]


class SshBackend(Backend):
    """Declared like every backend (catalog, preflight, doctor), but its hosts each run a whole agent: its launcher
    is "agents" (run/runner.py LAUNCHERS: run/remote.py), not start_worker."""

    name = "ssh"
    launcher: ClassVar[str] = "agents"

    @classmethod
    def probe(cls, scenario=None) -> tuple[bool, str]:
        path = shutil.which(SSH)
        if path is None:
            return False, "no OpenSSH client (`ssh`) on this machine"
        return True, f"OpenSSH client at {path}; the hosts come from --inventory"

    @classmethod
    def requirements(cls, needs: Needs) -> list[Requirement]:
        # Root, tc and the kernel's qdiscs are the hosts' business: each agent checks its own before it shapes.
        return [SshClient(needed_for="reaching the inventory's hosts (the ssh backend)")]

    def master_addr(self) -> str:
        raise HarnessError("the ssh backend starts an agent per host (run/remote.py), not single workers")

    def start_worker(self, rank: int, argv: list[str], env: dict[str, str], log_path: Path) -> WorkerHandle:
        raise HarnessError("the ssh backend starts an agent per host (run/remote.py), not single workers")
