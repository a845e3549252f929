"""The one type a link direction is described by, from the plan to tc and to the userspace delay line.

`Impairment` is what a direction does to frames besides limiting their rate (delay, jitter, loss,
duplication); `Direction` is an impairment with a rate. The scenario's `LinkSpec` becomes two
`Direction`s in one plan function (harness/distro_bench/net/engines.py: `directions`); tc (harness/distro_bench/net/shaping.py)
takes a `Direction`, the delay line (harness/distro_bench/net/delayline/) takes its `Impairment`. Nothing copies
the fields one by one, so a new impairment is a field here (with its label and unit), a field of
`LinkSpec`, a line in `directions`, and what each engine does with it (docs/link-emulation.md).
"""

from __future__ import annotations

from dataclasses import KW_ONLY, dataclass, field, fields
from typing import Self

from distro_bench.errors import InputError
from distro_bench.scenario.units import format_duration, format_percent


def _duration(label: str):
    """An impairment field in seconds (>= 0), shown as `label 15ms`."""
    return field(default=0.0, metadata={"label": label, "format": format_duration, "max": None})


def _fraction(label: str):
    """An impairment field that is a probability (0..1), shown as `label 0.1%`."""
    return field(default=0.0, metadata={"label": label, "format": format_percent, "max": 1.0})


def _format_dest(paths) -> str:
    def one(to, delay, jitter, loss):
        return (f"{to} +{format_duration(delay)}" + (f" ±{format_duration(jitter)}" if jitter else "")
                + (f" loss {format_percent(loss)}" if loss else ""))
    return "{" + ", ".join(one(*p) for p in paths) + "}"


@dataclass(frozen=True)
class Impairment:
    """What one direction of a link does to frames besides rate-limiting them: one-way delay, jitter
    (uniform in ±jitter), loss and duplication (fractions 0..1). `reorder` and `seed` say how the
    userspace delay line draws them; netem has its own."""

    delay_s: float = _duration("delay")
    jitter_s: float = _duration("jitter")
    loss: float = _fraction("loss")
    duplicate: float = _fraction("duplicate")
    _: KW_ONLY
    # The path to each destination beyond the access link, by IPv4 address: `((to, delay_s, jitter_s, loss), ...)`,
    # the path between two regions (harness/distro_bench/scenario/regions.py). The delay line keeps a queue order per
    # destination, tc an htb class per path (harness/distro_bench/net/tcclass.py); jitter and loss only where a path has them.
    per_dest: tuple[tuple[str, float, float, float], ...] = field(
        default=(), metadata={"label": "to", "format": _format_dest, "max": "paths"})
    reorder: bool = False  # delay line: False keeps packet order under jitter (an access line); True lets frames pass
    seed: int = 0  # delay line: its random stream

    def __post_init__(self) -> None:
        problems = []
        # From JSON (the delay line's command line, its control file) the paths arrive as lists.
        paths = tuple((str(p[0]), *(float(x) for x in p[1:]), *(0.0,) * (4 - len(p))) for p in self.per_dest)
        object.__setattr__(self, "per_dest", paths)
        for f, value in self._impairments():
            if f.metadata["max"] == "paths":
                for to, delay, jitter, loss in value:
                    if not (delay >= 0 and jitter >= 0):
                        problems.append(f"{f.name} {to}: delay and jitter must be >= 0, got {delay}, {jitter}")
                    if not 0 <= loss <= 1:
                        problems.append(f"{f.name} {to}: loss is a fraction in 0..1, got {loss}")
            elif f.metadata["max"] is None and not value >= 0:
                problems.append(f"{f.name} must be >= 0, got {value}")
            elif f.metadata["max"] is not None and not 0 <= value <= f.metadata["max"]:
                problems.append(f"{f.name} is a fraction in 0..1, got {value}")
        if problems:
            raise InputError("impairment: " + "; ".join(problems))

    def _impairments(self):
        return [(f, getattr(self, f.name)) for f in fields(Impairment) if "label" in f.metadata]

    @property
    def impaired(self) -> bool:
        return any(value for _, value in self._impairments())

    def impairment_text(self) -> str:
        """`delay 15ms, jitter 3ms, loss 0.1%`: the impairments that are set."""
        return ", ".join(f"{f.metadata['label']} {f.metadata['format'](v)}" for f, v in self._impairments() if v)

    @property
    def impairment(self) -> Impairment:
        """The impairment part alone (what the delay line is given)."""
        return Impairment(**{f.name: getattr(self, f.name) for f in fields(Impairment) if f.init})

    def without_impairment(self) -> Self:
        """The same rate (if any), no delay, jitter, loss or duplication: where another engine does those."""
        return type(self)(**{f.name: getattr(self, f.name) for f in fields(self)
                             if f.init and "label" not in f.metadata})


@dataclass(frozen=True)
class Direction(Impairment):
    """One direction of one access link: a rate in bit/s (None: unlimited) and its impairment."""

    rate_bps: int | None = field(default=None, kw_only=True)

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.rate_bps is not None and not self.rate_bps > 0:
            raise InputError(f"direction: rate_bps must be > 0 or None, got {self.rate_bps}")
