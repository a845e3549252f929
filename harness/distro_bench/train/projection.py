"""A model of bytes and step time per optimizer, for settings nobody can run here (1.2B on 32 home machines).

Bytes come from the real parameter shapes and each strategy's own accounting of its collectives
(`Strategy.predict_collectives`), never a rule of thumb. Time is built from the links:

- Collectives are rings, as gloo and NCCL run them on a flat network: an all-reduce of B bytes is
  2(N-1) rounds in which every worker sends B/N to its right neighbour; an all-gather of s bytes each
  is N-1 rounds of s. In a star of access links, a round from worker i to i+1 crosses i's uplink and
  i+1's downlink, and ends when the slowest pair has delivered: round time = max over pairs of
  (chunk on the wire / min(up_i, down_i+1)) + max over pairs of the pair's round trip (gloo's
  rendezvous: see _ring_hops) + the host's own cost per round (calibrated per run).
- `direct` gathers (DisTrO's `exchange: direct`): every worker sends its s bytes to each peer at once, one
  round: the slowest pair's round trip (the same rendezvous) + (N-1) * s through each worker's uplink
  and into its downlink, at the slower of the two + the host's cost of one round. A ring gather moves the
  same bytes per link; direct saves the N-2 extra round trips.
- Gossip exchanges (NoLoCo): each worker sends its buffer to its random group's other members at once, one
  round, timed as a direct gather to those peers only (the slowest pair's round trip + the bytes it sends).
- Wire bytes = payload x the TCP/IPv4/Ethernet framing of full-size segments (1514 bytes on the wire
  per 1448 bytes of payload, MTU 1500 with TCP timestamps).
- Compute = 6 x parameters x tokens per worker per step / (the profile's TFLOPS x MFU), plus, where the caller
  gives it (`optimizer_compute_s`: the published time rows, studies/time_model.py), each optimizer's own
  measured work (its compression, decoding and update); a step is the slowest worker's compute plus the
  communication, or the larger of the two for a strategy that overlaps them (DisTrO's `overlap: true`: step
  t's exchange runs during step t+1's compute).

It leaves out TCP slow start after idle periods and congestion on lossy links, so it is a lower bound
on communication time where loss is high or steps are long apart. Wire bytes leave out each message's
control traffic (gloo's preamble and ready notice, pure ACKs): measured at 0.8-1.6 kB per message (tx + rx),
nothing beside a multi-segment message, but 40-70% more than a one-segment DisTrO packet's framed bytes
(docs/projection.md, "Scale on one box").
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

from distro_bench.scenario.model import LinkSpec, Node, Scenario
from distro_bench.train.model import ModelConfig
from distro_bench.train.models import model_shapes
from distro_bench.train.optim import Collective, get_strategy
from distro_bench.train.optim.base import floor_tx_bits_of, payload_of, scaled

MSS = 1448  # payload per TCP segment at MTU 1500 with timestamps
FRAME = 1514  # Ethernet frame carrying it (14 + 20 IP + 32 TCP + 1448)
WIRE_FACTOR = FRAME / MSS
DEFAULT_MFU = 0.4  # model FLOPs utilisation a tuned small-LLM trainer reaches on a modern GPU
UNSHAPED_BPS = 10e9  # an unshaped veth/bridge path is treated as 10 Gbit/s
# Software cost of one ring round (a send, a receive, a wake-up) on a quiet host with gloo or NCCL
# sockets; a run calibrates its own from the workers' `latency_probe`, taken under training load
# (report/prediction.py): on a host with fewer cores than workers it is milliseconds, not this.
DEFAULT_ROUND_OVERHEAD_S = 0.2e-3


def analytic_shapes(cfg: ModelConfig | dict, *, n_kv_heads: int | None = None) -> dict[str, tuple[int, ...]]:
    """harness/distro_bench/train/model.py's parameter names and shapes, read from the model built on the meta device
    (train/models.py model_shapes: no second formula, no weights). `n_kv_heads` below `n_heads` gives grouped-query
    attention's smaller k/v projections (Llama 3), as published 10B+ models use."""
    c = dict(cfg if isinstance(cfg, dict) else asdict(cfg))
    if n_kv_heads is not None:
        c["n_kv_heads"] = n_kv_heads
    return model_shapes(c)


@dataclass(frozen=True)
class Projection:
    optimizer: str
    workers: int
    params: int
    payload_tx_bytes: int
    payload_rx_bytes: int
    wire_tx_bytes: float
    wire_rx_bytes: float
    collectives: int
    rounds: int
    latency_s: float  # rounds x the slowest hop's round trip
    transfer_s: float  # bytes over the bottleneck rates
    overhead_s: float  # rounds x the host's per-round software cost
    comm_s: float
    compute_s: float | None  # None where a profile has no TFLOPS figure
    step_s: float | None
    floor_tx_bits: float = 0.0  # the information floor of payload_tx_bytes (issue 37; Strategy.predict_floor_tx_bits)

    @property
    def floor_ratio(self) -> float | None:
        """Payload bits over their information floor: 1.0 for a dense buffer, above it for an index format
        that spends more than log2 C(n, k) bits per chunk (u16 indices at top-8 of 4096: 1.53)."""
        return 8 * self.payload_tx_bytes / self.floor_tx_bits if self.floor_tx_bits else None

    def as_dict(self) -> dict:
        return {**asdict(self), "floor_ratio": self.floor_ratio}


def _ring_hops(nodes: list[Node]) -> list[tuple[float, float]]:
    """(bottleneck bit/s, latency s of one round) of each hop i -> i+1 of the ring.

    A round costs the hop's round trip, not its one-way delay: gloo's TCP transport sends a buffer only
    once the receiver has said it posted the matching receive (a rendezvous), so each round waits for
    that notice to come back (i+1's up + i's down) before the data goes out (i's up + i+1's down).
    Measured here over the delay line: 3-round all-gathers at 30 ms one-way took 59 ms a round.
    """
    hops = []
    for i, a in enumerate(nodes):
        b = nodes[(i + 1) % len(nodes)]
        up = (a.link.up if a.link and a.link.up else UNSHAPED_BPS)
        down = (b.link.down if b.link and b.link.down else UNSHAPED_BPS)
        rtt = 2 * ((a.link.delay if a.link else 0.0) + (b.link.delay if b.link else 0.0))
        hops.append((min(up, down), rtt))
    return hops


def _access(node: Node) -> tuple[float, float, float]:
    """(up bit/s, down bit/s, one-way delay s) of a node's access link."""
    link = node.link
    return ((link.up if link and link.up else UNSHAPED_BPS), (link.down if link and link.down else UNSHAPED_BPS),
            (link.delay if link else 0.0))


def direct_time(nbytes: int, nodes: list[Node]) -> tuple[int, float, float]:
    """(rounds, latency s, transfer s) of a direct gather: every worker sends `nbytes` to each peer at once."""
    n = len(nodes)
    links = [_access(x) for x in nodes]
    rtt = max(2 * (links[i][2] + links[j][2]) for i in range(n) for j in range(n) if i != j)
    bits = (n - 1) * nbytes * WIRE_FACTOR * 8
    return 1, rtt, max(bits / min(up, down) for up, down, _ in links)


def exchange_time(nbytes: int, nodes: list[Node]) -> tuple[int, float, float]:
    """(rounds, latency s, transfer s) of a gossip exchange (NoLoCo): every worker sends `nbytes` in all to its
    group's peers at once, one round. The groups are random, so the slowest pair bounds it, as for a direct gather."""
    n = len(nodes)
    links = [_access(x) for x in nodes]
    rtt = max(2 * (links[i][2] + links[j][2]) for i in range(n) for j in range(n) if i != j)
    return 1, rtt, max(nbytes * WIRE_FACTOR * 8 / min(up, down) for up, down, _ in links)


# How a published system lays out the collective our strategy issues as an all-gather (`project(layout=...)`),
# where its deployment differs from ours; each is the system's own published design, not a fitted factor:
# - "ring": ours (gloo's ring or direct gather, as the strategy says);
# - "int8_ring": prime's int8 all-reduce (INTELLECT-1, arXiv 2412.01152: "custom int8 all-reduce"): the int8
#   buffer goes round a ring all-reduce (dequantise, add in fp32, requantise per hop), so each worker moves
#   2(N-1)/N of one buffer each way, where our int8 all-gather receives N-1 whole buffers;
# - "via_store": Templar/Covenant-72B (arXiv 2603.08163): each peer puts its compressed packet in object storage
#   once and gets the other gathered peers' packets: one packet up, N-1 down, one after the other.
LAYOUTS = ("ring", "int8_ring", "via_store")


def store_time(nbytes: int, nodes: list[Node]) -> tuple[int, float, float]:
    """(rounds, latency s, transfer s) of a gather through object storage: put `nbytes` up, then get the N-1
    others' down; the slowest node bounds it (one round trip per transfer to the store: its delay both ways)."""
    n = len(nodes)
    links = [_access(x) for x in nodes]
    rtt = max(2 * 2 * d for _, _, d in links)
    return 1, rtt, max(nbytes * WIRE_FACTOR * 8 / up + (n - 1) * nbytes * WIRE_FACTOR * 8 / down
                       for up, down, _ in links)


def collective_time(c: Collective, nodes: list[Node], layout: str = "ring") -> tuple[int, float, float]:
    """(rounds, latency seconds, transfer seconds) of one collective (a ring, or a direct gather) over these
    nodes' links, laid out as `layout` says (LAYOUTS)."""
    n = len(nodes)
    if n == 1:
        return 0, 0.0, 0.0
    if layout == "via_store" and c.kind in ("all_gather", "all_gather_direct"):
        return store_time(c.nbytes, nodes)
    if layout == "int8_ring" and c.kind == "all_gather":
        c = Collective("all_reduce", c.nbytes)
    if c.kind == "all_gather_direct":
        return direct_time(c.nbytes, nodes)
    if c.kind == "exchange":
        return exchange_time(c.nbytes, nodes)
    if c.kind == "all_reduce":
        rounds, chunk = 2 * (n - 1), c.nbytes / n
    else:
        rounds, chunk = n - 1, c.nbytes
    hops = _ring_hops(nodes)
    per_round_transfer = max(chunk * WIRE_FACTOR * 8 / rate for rate, _ in hops)
    per_round_latency = max(delay for _, delay in hops)
    return rounds, rounds * per_round_latency, rounds * per_round_transfer


def wire_bytes(c: Collective, n: int, layout: str = "ring") -> tuple[float, float]:
    """(sent, received) framed bytes per worker of one collective, as `layout` moves it."""
    if n == 1:
        return 0.0, 0.0
    if layout == "via_store" and c.kind in ("all_gather", "all_gather_direct"):
        return c.nbytes * WIRE_FACTOR, (n - 1) * c.nbytes * WIRE_FACTOR
    if c.kind == "all_reduce" or (layout == "int8_ring" and c.kind == "all_gather"):
        each = 2 * (n - 1) * c.nbytes / n
    else:  # a ring or direct gather, or a gossip exchange: N-1 packets each way (the exchange's buffer holds them)
        each = c.nbytes if c.kind == "exchange" else (n - 1) * c.nbytes
    return each * WIRE_FACTOR, each * WIRE_FACTOR


def comm_seconds(collectives: list[Collective], nodes: list[Node], round_overhead_s: float,
                 layout: str = "ring") -> float:
    total = 0.0
    for c in collectives:
        rounds, latency, transfer = collective_time(c, nodes, layout)
        total += latency + transfer + rounds * round_overhead_s
    return total


def resolve_options(cfg, nodes: list[Node], shapes: dict[str, tuple[int, ...]],
                    round_overhead_s: float = DEFAULT_ROUND_OVERHEAD_S):
    """The options with every `auto` choice made for these links: DisTrO's `exchange: auto` becomes `direct`
    where the model predicts it communicates faster than the ring, else `ring` (they tie for two workers).
    The worker and the projection both resolve through here, so a run does what its prediction assumed."""
    if getattr(cfg, "exchange", None) != "auto":
        return cfg
    strategy = get_strategy(cfg.type)
    seconds = {}
    for how in ("ring", "direct"):
        option = cfg.model_copy(update={"exchange": how})
        seconds[how] = comm_seconds(strategy.predict_collectives(option, shapes, len(nodes)), nodes, round_overhead_s)
    return cfg.model_copy(update={"exchange": "direct" if seconds["direct"] < seconds["ring"] else "ring"})


def compute_seconds(params: int, tokens: int, nodes: list[Node], mfu: float = DEFAULT_MFU) -> float | None:
    flops = 6 * params * tokens
    tflops = [n.hardware.tflops for n in nodes]
    known = [t for t in tflops if t is not None]
    if len(known) < len(tflops):
        return None
    return max(flops / (t * 1e12 * mfu) for t in known)


def max_hop_delay(nodes: list[Node]) -> float:
    """The slowest hop's latency per ring round (its round trip)."""
    return max((d for _, d in _ring_hops(nodes)), default=0.0)


def project(scenario: Scenario, *, nodes: list[Node] | None = None, model: dict | None = None,
            optimizers: list[str] | None = None, mfu: float = DEFAULT_MFU,
            round_overhead_s: float = DEFAULT_ROUND_OVERHEAD_S,
            shapes: dict[str, tuple[int, ...]] | None = None, layout: str = "ring",
            optimizer_compute_s: dict[str, float] | None = None) -> list[Projection]:
    """One projection per optimizer for the scenario (or the given nodes / model preset values / parameter
    shapes: published models the scenario schema cannot describe, such as grouped-query attention; `layout`:
    a published system's own layout of the gathers, LAYOUTS). `optimizer_compute_s`: seconds a step of each
    optimizer's own work (its compression, decoding and update: studies/time_model.py carries a measurement to
    the device), added to the step's compute; without it the optimizer's own work counts as nothing."""
    if layout not in LAYOUTS:
        raise ValueError(f"layout: {layout!r} is not one of {', '.join(LAYOUTS)}")
    nodes = nodes or scenario.nodes()
    shapes = shapes or model_shapes(model or scenario.resolved_model())
    params = sum(math.prod(s) for s in shapes.values())
    tokens = scenario.data.seq_len * scenario.data.batch_size
    n = len(nodes)
    out = []
    for name, ocfg in scenario.optimizer_configs().items():
        if optimizers and name not in optimizers:
            continue
        ocfg = resolve_options(ocfg, nodes, shapes, round_overhead_s)
        strategy: Any = get_strategy(ocfg.type)  # its figures are int or float by method: Projection says which
        # A period is one step for per-step methods, H steps for DiLoCo-style ones: per-step figures are
        # the period's divided by its steps.
        period = strategy.predict_period(ocfg, shapes, n)
        # A replay issues its collectives at the scenario's fraction of their bytes (scenario/replay.py)
        colls = scaled(period.collectives, scenario.replay.fraction_of(name) if scenario.replay else 1.0)
        per = period.steps
        tx, rx = (v / per if per > 1 else v for v in payload_of(colls, n))
        floor = floor_tx_bits_of(colls, n) / per
        rounds = latency = transfer = wire_tx = wire_rx = 0.0
        for c in colls:
            r, lat, xfer = collective_time(c, nodes, layout)
            rounds, latency, transfer = rounds + r, latency + lat, transfer + xfer
            up, down = wire_bytes(c, n, layout)
            wire_tx, wire_rx = wire_tx + up, wire_rx + down
        rounds, latency, transfer = rounds / per, latency / per, transfer / per
        wire_tx, wire_rx = wire_tx / per, wire_rx / per
        compute = compute_seconds(params, tokens, nodes, scenario.replay.mfu if scenario.replay else mfu)
        codec = scenario.replay.codec_of(name) if scenario.replay else None
        if compute is not None and isinstance(codec, float | int):  # a replay's stated encode and decode seconds
            compute += codec
        if compute is not None and optimizer_compute_s and name in optimizer_compute_s:
            compute += optimizer_compute_s[name]
        overhead = rounds * round_overhead_s
        comm = latency + transfer + overhead
        out.append(Projection(
            optimizer=name, workers=n, params=params, payload_tx_bytes=tx, payload_rx_bytes=rx,
            wire_tx_bytes=wire_tx, wire_rx_bytes=wire_rx, collectives=len(colls) / per if per > 1 else len(colls),
            rounds=int(rounds) if per == 1 else rounds,
            latency_s=latency, transfer_s=transfer, overhead_s=overhead, comm_s=comm, compute_s=compute,
            step_s=None if compute is None else (max(compute, comm) if getattr(ocfg, "overlap", False)
                                                 else compute + comm),
            floor_tx_bits=floor))
    return out


def nodes_like(scenario: Scenario, count: int) -> list[Node]:
    """`count` workers cycling through the scenario's own nodes (their hardware and links)."""
    base = scenario.nodes()
    return [base[i % len(base)].model_copy(update={"rank": i, "name": f"{base[i % len(base)].name}#{i}"})
            for i in range(count)]


def nodes_with_rate(nodes: list[Node], up_bps: float, down_bps: float) -> list[Node]:
    """The same nodes with every link's rates replaced (delay, jitter and loss kept)."""
    out = []
    for n in nodes:
        link = (n.link or LinkSpec()).model_copy(update={"up": int(up_bps), "down": int(down_bps)})
        out.append(n.model_copy(update={"link": link}))
    return out


# ---- the DisTrO report's accounting ----------------------------------------------------------

PAPER = {  # Nous Research, "A Preliminary Report on DisTrO" (2024), Table 1: Llama 2 1.2B, 32 workers
    "adamw_bytes": 74.4e9, "distro_bytes": 86.8e6, "ratio": 857, "adamw_loss": 2.449, "distro_loss": 2.373,
    "workers": 32,
}


def paper_accounting(proj: Projection, strategy_kind: str) -> dict:
    """Our projected bytes in several accountings, to line up with the paper's per-step figures.

    The paper's 74.4 GB equals 1.2B parameters x 2 bytes (bf16 gradients) x 31 peers: every worker's full
    gradient received from each other worker (an all-gather of gradients, not a ring all-reduce).
    Its 86.8 MB is the same for DisTrO: what one worker receives from its 31 peers.
    """
    n = proj.workers
    return {
        "optimizer": proj.optimizer,
        # what this harness reports: tx + rx payload per worker per step
        "payload_tx_rx": proj.payload_tx_bytes + proj.payload_rx_bytes,
        # ring wire bytes, one direction, per worker per step
        "wire_each_way": proj.wire_tx_bytes,
        # the paper's: received from N-1 peers, baseline as bf16 gradients gathered from everyone
        "paper_style": (proj.params * 2 * (n - 1)) if get_strategy(strategy_kind).sends_dense_gradients else proj.payload_rx_bytes,
    }
