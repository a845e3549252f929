"""Which scenario nodes run on which host of a multi-host run. Pure: a scenario and flags in, a
`Placement` out; InputError naming the field or flag for anything that does not add up.

Sources, first that applies: the `--placement` flag ("0,1;2,3": scenario ranks per host, hosts in
--node-rank order), the scenario's `workers[].host` fields, else node-rank i takes the scenario's
nodes in order, `world_size / nnodes` each (the division must be exact).

torchrun numbers its workers in the order its c10d rendezvous sorts the agents (by address and pid),
not by --node-rank, so a worker finds its scenario rank here, through the agent's environment
(`DISTRO_BENCH_PLACEMENT`, `DISTRO_BENCH_NODE_RANK`, and torchrun's LOCAL_RANK): `scenario_rank`.
"""

from __future__ import annotations

from dataclasses import dataclass

from distro_bench.errors import InputError
from distro_bench.scenario import environ
from distro_bench.scenario.model import Scenario

ENV_PLACEMENT = environ.PLACEMENT
ENV_NODE_RANK = environ.NODE_RANK


@dataclass(frozen=True)
class Placement:
    """hosts[i] = the scenario ranks host i (--node-rank i) runs, in local-rank order."""

    hosts: tuple[tuple[int, ...], ...]

    @property
    def nnodes(self) -> int:
        return len(self.hosts)

    def ranks_of(self, node_rank: int) -> tuple[int, ...]:
        return self.hosts[node_rank]

    def host_of(self, rank: int) -> int:
        return next(i for i, ranks in enumerate(self.hosts) if rank in ranks)

    def encode(self) -> str:
        return ";".join(",".join(str(r) for r in ranks) for ranks in self.hosts)

    @classmethod
    def decode(cls, text: str) -> Placement:
        return cls(tuple(tuple(int(r) for r in part.split(",") if r.strip()) for part in text.split(";")))


def parse_flag(text: str, world_size: int) -> Placement:
    """`--placement "0,1;2,3"`: every scenario rank exactly once, no host empty."""
    try:
        p = Placement.decode(text)
    except ValueError:
        raise InputError(f"--placement: {text!r} is not a list of scenario ranks per host, e.g. '0,1;2,3' "
                         "(hosts separated by ';', ranks by ',')") from None
    _check(p, world_size, "--placement")
    return p


def _check(p: Placement, world_size: int, where: str) -> None:
    flat = [r for ranks in p.hosts for r in ranks]
    problems = []
    if any(not ranks for ranks in p.hosts):
        problems.append("a host has no scenario node")
    missing = sorted(set(range(world_size)) - set(flat))
    extra = sorted({r for r in flat if not 0 <= r < world_size})
    dups = sorted({r for r in flat if flat.count(r) > 1})
    if missing:
        problems.append(f"ranks {missing} are placed on no host")
    if extra:
        problems.append(f"ranks {extra} do not exist (the scenario has ranks 0..{world_size - 1})")
    if dups:
        problems.append(f"ranks {dups} are placed more than once")
    if problems:
        raise InputError(f"{where}: " + "; ".join(problems))


def from_scenario(scenario: Scenario, nnodes: int | None = None, flag: str | None = None) -> Placement:
    """The placement of this run; `nnodes` (the --nnodes flag) must agree with it when given."""
    world = scenario.world_size
    if flag:
        p = parse_flag(flag, world)
        where = "--placement"
    elif any(g.host is not None for g in scenario.workers):
        unplaced = [i for i, g in enumerate(scenario.workers) if g.host is None]
        if unplaced:
            raise InputError(f"workers[{unplaced[0]}].host: give every worker group a host, or none "
                             f"(groups {unplaced} have none)")
        placed = [(g.host, g.count) for g in scenario.workers if g.host is not None]  # every group, here
        n = max(host for host, _ in placed) + 1
        hosts: list[list[int]] = [[] for _ in range(n)]
        rank = 0
        for host, count in placed:
            hosts[host].extend(range(rank, rank + count))
            rank += count
        empty = [i for i, h in enumerate(hosts) if not h]
        if empty:
            raise InputError(f"workers[].host: hosts {empty} run no worker group; number hosts 0..{n - 1} without gaps")
        p = Placement(tuple(tuple(h) for h in hosts))
        where = "workers[].host"
    else:
        n = nnodes or world
        if not 1 <= n <= world or world % n:
            raise InputError(f"--nnodes: {n} hosts cannot share the scenario's {world} workers evenly; give a "
                             f"divisor of {world}, or place them (--placement '0,1;2' or workers[].host)")
        k = world // n
        return Placement(tuple(tuple(range(i * k, (i + 1) * k)) for i in range(n)))
    if nnodes is not None and nnodes != p.nnodes:
        raise InputError(f"--nnodes: {nnodes}, but {where} places the workers on {p.nnodes} hosts")
    return p


def scenario_rank(env: dict[str, str]) -> int | None:
    """This worker's scenario rank under a multi-host agent (None otherwise): its agent's host's
    ranks, indexed by torchrun's LOCAL_RANK."""
    text = env.get(ENV_PLACEMENT)
    if not text:
        return None
    p = Placement.decode(text)
    return p.ranks_of(int(env[ENV_NODE_RANK]))[int(env.get("LOCAL_RANK", "0"))]
