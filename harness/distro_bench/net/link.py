"""The one type a link direction is described by, from the plan to tc and to the userspace delay line.

`Impairment` is what a direction does to frames besides limiting their rate; its fields are the one table of link
impairments (harness/distro_bench/scenario/impairments.py: per impairment its scenario key, unit, netem argument,
read-back path, delay-line knob and description). `Direction` is an impairment with a rate. The scenario's
`LinkSpec` becomes two `Direction`s in one plan function (harness/distro_bench/net/engines.py: `directions`); tc
(harness/distro_bench/net/shaping.py) takes a `Direction`, the delay line (harness/distro_bench/net/delayline/) takes
its `Impairment`. Nothing copies the fields one by one (docs/link-emulation.md, "Adding an impairment").
"""

from __future__ import annotations

from dataclasses import dataclass, field

from distro_bench.errors import InputError
from distro_bench.scenario.impairments import IMPAIRMENTS, Impairment, ImpairmentRow

__all__ = ["IMPAIRMENTS", "Direction", "Impairment", "ImpairmentRow"]


@dataclass(frozen=True)
class Direction(Impairment):
    """One direction of one access link: a rate in bit/s (None: unlimited) and its impairment."""

    rate_bps: int | None = field(default=None, kw_only=True)
    # A site's uplink (harness/distro_bench/scenario/sites.py): per destination address, the WAN path it takes (the
    # destination's site) and that path's rate (None: the uplink's). tc gives each path an htb class of its own.
    dest_paths: tuple[tuple[str, str, int | None], ...] = field(default=(), kw_only=True)
    # A site's uplink: the addresses of the site's own nodes, each a leaf of its own under every path, so nodes
    # sending at once share the uplink evenly (harness/distro_bench/net/tcclass.py).
    fair_srcs: tuple[str, ...] = field(default=(), kw_only=True)

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.rate_bps is not None and not self.rate_bps > 0:
            raise InputError(f"direction: rate_bps must be > 0 or None, got {self.rate_bps}")
        object.__setattr__(self, "dest_paths", tuple((str(a), str(p), None if r is None else int(r))
                                                     for a, p, r in self.dest_paths))
        object.__setattr__(self, "fair_srcs", tuple(str(a) for a in self.fair_srcs))
