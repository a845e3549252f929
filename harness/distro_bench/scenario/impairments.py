"""One table of link impairments: the fields of `Impairment`, each carrying its row.

A row says, for one impairment: its scenario key (on `LinkSpec` and in a `schedule` entry), its unit, its netem
argument, where `tc -j qdisc show` reads it back, what the userspace delay line does with it, and how it is
described. Everything that handles impairments iterates this table rather than naming them:

| reader | what it takes from a row |
|---|---|
| harness/distro_bench/scenario/model.py | `LinkSpec` and `LinkChange` fields (unit type, default, description), `describe()`, `needs` |
| harness/distro_bench/scenario/timeline.py | a change's directions and its value in scenario units |
| harness/distro_bench/net/engines.py `directions()` | scenario key -> `Impairment` field |
| harness/distro_bench/net/shaping.py, tcclass.py | `netem` arguments, `read_back` compared with the plan |
| harness/distro_bench/net/netchange.py | a change read back (netem or the delay line's impairment) |
| harness/distro_bench/net/delayline/schedule.py | the `Impairment` field by name (`delay_line` says what it does) |
| harness/distro_bench/report/describe.py, cli/scenario.py | labels, units, the report's link-table columns |

Adding an impairment: a field here (its row), what the delay line's `Schedule.admit()` does with it, and a line
in docs/link-emulation.md. The scenario is the lowest room that needs the table (the spec's fields come from it),
so it lives here; harness/distro_bench/net/link.py builds `Direction` (an impairment with a rate) on it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import KW_ONLY, dataclass, field, fields, replace
from typing import Any, Literal, Self

from distro_bench.errors import InputError
from distro_bench.scenario.units import Duration, Percent, format_duration, format_percent


def _us(seconds: float) -> str:
    return f"{round(seconds * 1e6)}us"


def _pct(fraction: float) -> str:
    return f"{fraction * 100:.6g}%"


@dataclass(frozen=True)
class ImpairmentRow:
    """One impairment: everything the harness needs to know about it, in one place."""

    key: str  # the scenario key on LinkSpec and in a schedule entry (events.parquet's `field`)
    unit: Literal["duration", "fraction"]  # seconds (written '15ms') or a probability 0..1 (written '0.1%')
    label: str  # in descriptions: `loss 0.1%`
    netem: Callable[[Impairment], list[str]]  # its netem argument ([] when unset, or carried by another row's)
    read_back: tuple[str, str]  # its value in `tc -j qdisc show`: netem's options[a][b] (iproute2's q_netem.c)
    delay_line: str  # what the userspace delay line (net/delayline/schedule.py) does with it
    doc: str  # what it does (docs/link-emulation.md's table of impairments)
    heading: str | None = None  # the report's link-table column (default: the label)
    joins: str | None = None  # described inside another row's part: jitter in delay's, `delay 15ms ±3ms`
    needs: tuple[str, str] | None = None  # (another key that must be set with it, why)
    always_shown: bool = False  # a column of the report's link table even when no link sets it
    attr: str = ""  # the Impairment field (delay_s); filled from the field's name

    @property
    def format(self) -> Callable[[float], str]:
        """The value in scenario units ('15ms', '0.1%')."""
        return format_duration if self.unit == "duration" else format_percent

    def text(self, value: float, *, joined: bool = False) -> str:
        """`delay 15ms`, or `±3ms` for a row described inside another's part."""
        return f"±{self.format(value)}" if joined else f"{self.label} {self.format(value)}"

    @property
    def tolerance(self) -> tuple[float, float]:
        """(relative, absolute) agreement between a planned value and tc's read-back (its rounding)."""
        return (0.01, 2e-6) if self.unit == "duration" else (0.01, 1e-6)


def _row(**kw: Any) -> Any:
    return field(default=0.0, metadata={"row": ImpairmentRow(**kw)})


def _format_dest(paths) -> str:
    def one(to, delay, jitter, loss):
        return (f"{to} +{format_duration(delay)}" + (f" ±{format_duration(jitter)}" if jitter else "")
                + (f" loss {format_percent(loss)}" if loss else ""))
    return "{" + ", ".join(one(*p) for p in paths) + "}"


@dataclass(frozen=True)
class Impairment:
    """What one direction of a link does to frames besides rate-limiting them. Its fields up to `per_dest` are the
    table (each field's metadata holds its `ImpairmentRow`); `jitter_reorders` and `seed` say how the userspace
    delay line draws them (netem has its own)."""

    delay_s: float = _row(
        key="delay", unit="duration", label="delay", heading="delay (one-way)", always_shown=True,
        netem=lambda i: (["delay", _us(i.delay_s)] + ([_us(i.jitter_s)] if i.jitter_s else [])
                         if i.delay_s or i.jitter_s else []),
        read_back=("delay", "delay"), doc="one-way delay, each direction ('15ms')",
        delay_line="holds each frame until arrival + delay")
    jitter_s: float = _row(
        key="jitter", unit="duration", label="jitter", joins="delay", always_shown=True,
        netem=lambda i: [],  # the second value of delay's argument: `delay 15ms 3ms`
        read_back=("delay", "jitter"), doc="delay varies uniformly in ±jitter (at most the delay)",
        delay_line="adds a uniform draw in ±jitter (clamped at 0); keeps packet order unless jitter_reorders")
    loss: float = _row(
        key="loss", unit="fraction", label="loss", always_shown=True,
        netem=lambda i: ["loss", "random", _pct(i.loss)] if i.loss else [],
        read_back=("loss-random", "loss"), doc="fraction of frames dropped, independently ('0.1%')",
        delay_line="drops a seeded fraction of frames")
    duplicate: float = _row(
        key="duplicate", unit="fraction", label="duplicate",
        netem=lambda i: ["duplicate", _pct(i.duplicate)] if i.duplicate else [],
        read_back=("duplicate", "duplicate"), doc="fraction of frames delivered twice ('1%')",
        delay_line="queues a seeded fraction of frames twice (the copy scheduled as a frame of its own)")
    reorder: float = _row(
        key="reorder", unit="fraction", label="reorder", needs=("delay", "a frame overtakes others by skipping the delay"),
        netem=lambda i: ["reorder", _pct(i.reorder)] if i.reorder else [],  # tc's default gap 1: every frame may
        read_back=("reorder", "reorder"), doc="fraction of frames sent at once, overtaking the delayed ones ('5%')",
        delay_line="sends a seeded fraction of frames without the delay, ahead of those queued")
    _: KW_ONLY
    # The path to each destination beyond the access link, by IPv4 address: `((to, delay_s, jitter_s, loss), ...)`,
    # the path between two regions (harness/distro_bench/scenario/regions.py). The delay line keeps a queue order per
    # destination, tc an htb class per path (harness/distro_bench/net/tcclass.py); jitter and loss only where a path has them.
    per_dest: tuple[tuple[str, float, float, float], ...] = ()
    # delay line: False keeps packet order under jitter (an access line); True lets jittered frames pass each other.
    jitter_reorders: bool = False
    seed: int = 0  # delay line: its random stream

    def __post_init__(self) -> None:
        problems = []
        # From JSON (the delay line's command line, its control file) the paths arrive as lists.
        paths: tuple[tuple[str, float, float, float], ...] = tuple(
            (str(p[0]), *(float(x) for x in p[1:]), *(0.0,) * (4 - len(p))) for p in self.per_dest)  # type: ignore[misc]
        object.__setattr__(self, "per_dest", paths)
        for to, delay, jitter, loss in paths:
            if not (delay >= 0 and jitter >= 0):
                problems.append(f"per_dest {to}: delay and jitter must be >= 0, got {delay}, {jitter}")
            if not 0 <= loss <= 1:
                problems.append(f"per_dest {to}: loss is a fraction in 0..1, got {loss}")
        for row, value in self.rows():
            if row.unit == "duration" and not value >= 0:
                problems.append(f"{row.attr} must be >= 0, got {value}")
            elif row.unit == "fraction" and not 0 <= value <= 1:
                problems.append(f"{row.attr} is a fraction in 0..1, got {value}")
        if problems:
            raise InputError("impairment: " + "; ".join(problems))

    def rows(self) -> list[tuple[ImpairmentRow, float]]:
        """Every row of the table with this impairment's value."""
        return [(row, getattr(self, row.attr)) for row in IMPAIRMENTS]

    @property
    def impaired(self) -> bool:
        return bool(self.per_dest) or any(value for _, value in self.rows())

    def impairment_text(self) -> str:
        """`delay 15ms, jitter 3ms, loss 0.1%`: the impairments that are set."""
        parts = [row.text(v) for row, v in self.rows() if v]
        return ", ".join(parts + ([f"to {_format_dest(self.per_dest)}"] if self.per_dest else []))

    def netem_args(self) -> list[str]:
        """netem's arguments for the impairments that are set, in the table's order."""
        return [a for row in IMPAIRMENTS for a in row.netem(self)]

    @property
    def impairment(self) -> Impairment:
        """The impairment part alone (what the delay line is given)."""
        return Impairment(**{f.name: getattr(self, f.name) for f in fields(Impairment) if f.init})

    def without_impairment(self) -> Self:
        """The same rate (if any), none of the table's impairments and no paths: where another engine does those."""
        none: dict[str, Any] = {row.attr: 0.0 for row in IMPAIRMENTS}
        return replace(self, per_dest=(), **none)


IMPAIRMENTS: tuple[ImpairmentRow, ...] = tuple(
    replace(f.metadata["row"], attr=f.name) for f in fields(Impairment) if "row" in f.metadata)
BY_KEY: dict[str, ImpairmentRow] = {row.key: row for row in IMPAIRMENTS}


def link_fields(*, changes: bool) -> dict[str, Any]:
    """The table as pydantic fields, for `create_model`: LinkSpec's (default 0) or a schedule entry's (`changes`:
    default None, the link's value kept)."""
    out: dict[str, Any] = {}
    for row in IMPAIRMENTS:
        kind: Any = Duration if row.unit == "duration" else Percent  # its JSON Schema says how to write it
        out[row.key] = (kind | None, None) if changes else (kind, 0.0)
    return out


def describe_parts(values: dict[str, float], *, short: bool = False) -> list[str]:
    """The impairments set in `values` (scenario key -> value) as parts: `["delay 15ms ±3ms", "loss 0.1%"]`;
    `short` drops the label of the first row (`15ms±3ms`, for tables 80 columns wide)."""
    parts: dict[str, str] = {}
    for row in IMPAIRMENTS:
        v = values.get(row.key)
        if not v:
            continue
        if row.joins is not None and row.joins in parts:
            parts[row.joins] += ("" if short else " ") + row.text(v, joined=True)
        elif short and row is IMPAIRMENTS[0]:
            parts[row.key] = row.format(v)
        else:
            parts[row.key] = row.text(v)
    return list(parts.values())
