"""Strict units for scenario fields: rates in bit/s, durations in seconds, loss as a fraction, sizes in bytes.

Each parser accepts one spelling family and rejects the ambiguous ones with a message that says
what to write instead; each formatter shows a value back in the normalised spelling.
"""

from __future__ import annotations

import re
import types
import typing
from typing import Annotated

from pydantic import BaseModel, BeforeValidator, PlainSerializer, WithJsonSchema

_NUMBER = r"(?P<num>\d+(?:\.\d+)?(?:[eE][+-]?\d+)?)"

_RATE_UNITS = {"bit": 1, "kbit": 10**3, "mbit": 10**6, "gbit": 10**9, "tbit": 10**12}
_RATE_RE = re.compile(_NUMBER + r"\s*(?P<unit>[a-zA-Z]+)(?:/s)?$")


# Upper bounds: a value past these is a typo (or `1e400`, which float() reads as infinity), not a network or
# a budget; refusing it here keeps OverflowError and never-ending runs out of validation and the run.
RATE_MAX_BPS = 10**12  # 1Tbit
DURATION_MAX_S = 7 * 24 * 3600.0  # a week
SIZE_MAX_BYTES = 2**50  # 1PiB


def _number(m: re.Match, value: object, what: str, limit: float, scale: float, shown: str) -> float:
    """The match's number times `scale`, refused (ValueError naming the value and the cap) past `limit`."""
    x = float(m.group("num")) * scale
    if not x <= limit:  # also catches inf
        raise ValueError(f"{what} {value!r} is above the largest accepted, {shown}")
    return x


def _bare_number(value: object) -> bool:
    if isinstance(value, bool):
        return False
    return isinstance(value, (int, float)) or (isinstance(value, str) and re.fullmatch(_NUMBER, value.strip()) is not None)


def parse_rate(value: object) -> int:
    """'10Mbit' -> 10_000_000 bit/s. Bytes-per-second spellings are rejected: in tc 'mbps' means MB/s."""
    if _bare_number(value):
        raise ValueError(f"rate {value!r} has no unit; write it like '10Mbit' (bit/s: bit, kbit, Mbit, Gbit)")
    if not isinstance(value, str):
        raise ValueError(f"rate must be a string like '10Mbit', got {type(value).__name__}")
    m = _RATE_RE.match(value.strip())
    unit = m.group("unit").lower() if m else ""
    if not m or unit not in _RATE_UNITS:
        hint = ""
        if m and unit in {"b", "kb", "mb", "gb", "bps", "kbps", "mbps", "gbps", "kib", "mib", "gib"}:
            hint = " (bytes or 'bps' are ambiguous: write bits, e.g. 80Mbit for 10 megabytes/s)"
        raise ValueError(f"invalid rate {value!r}{hint}; write a number and one of bit, kbit, Mbit, Gbit, e.g. '10Mbit'")
    bits = _number(m, value, "rate", RATE_MAX_BPS, _RATE_UNITS[unit], "1Tbit")
    if bits < 8000:
        raise ValueError(f"rate {value!r} is below 8kbit, which tc cannot shape meaningfully")
    return round(bits)


def format_rate(bits: int) -> str:
    for unit, scale in (("Gbit", 10**9), ("Mbit", 10**6), ("kbit", 10**3)):
        if bits >= scale:
            return f"{bits / scale:g}{unit}"
    return f"{bits}bit"


# min and h for budgets and schedules ("time_budget: 2h"); a bare "m" is refused, as it reads as metres or milli.
_TIME_UNITS = {"us": 1e-6, "ms": 1e-3, "s": 1.0, "min": 60.0, "h": 3600.0}
_TIME_RE = re.compile(_NUMBER + r"\s*(?P<unit>us|ms|s|min|h)$")


def parse_duration(value: object) -> float:
    """'15ms' -> 0.015 s. A bare 0 is accepted; any other bare number is ambiguous."""
    if value == 0 or value == "0":
        return 0.0
    if _bare_number(value):
        raise ValueError(f"duration {value!r} has no unit; write it like '15ms' (us, ms, s, min or h)")
    if not isinstance(value, str):
        raise ValueError(f"duration must be a string like '15ms', got {type(value).__name__}")
    m = _TIME_RE.match(value.strip())
    if not m:
        raise ValueError(f"invalid duration {value!r}; write a number and one of us, ms, s, min, h, e.g. '15ms' or '10min'")
    return _number(m, value, "duration", DURATION_MAX_S, _TIME_UNITS[m.group("unit")], "168h (a week)")


def format_duration(seconds: float) -> str:
    if seconds == 0:
        return "0ms"
    if seconds >= 1:
        return f"{seconds:g}s"
    if seconds >= 1e-3:
        return f"{seconds * 1e3:g}ms"
    return f"{seconds * 1e6:g}us"


_PERCENT_RE = re.compile(_NUMBER + r"\s*%$")


def parse_percent(value: object) -> float:
    """'0.1%' -> 0.001. A bare 0 is accepted; other bare numbers are ambiguous (fraction or percent?)."""
    if value == 0 or value == "0":
        return 0.0
    m = _PERCENT_RE.match(value.strip()) if isinstance(value, str) else None
    if m is None:
        raise ValueError(f"invalid percentage {value!r}; write it with a % sign, e.g. '0.1%'")
    pct = float(m.group("num"))
    if pct > 100:
        raise ValueError(f"percentage {value!r} is above 100%")
    return pct / 100.0


def format_percent(fraction: float) -> str:
    return f"{fraction * 100:g}%"


_SIZE_UNITS = {"b": 1, "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12,
               "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40}
_SIZE_RE = re.compile(_NUMBER + r"\s*(?P<unit>[a-zA-Z]+)$")


def parse_size(value: object) -> int:
    """'8GiB' -> bytes. Sizes are bytes (B, KiB/KB, MiB/MB, GiB/GB); bits are rejected."""
    if isinstance(value, bool) or not isinstance(value, str):
        raise ValueError(f"size {value!r} has no unit; write it like '8GiB' (B, MiB, GiB, MB, GB)")
    m = _SIZE_RE.match(value.strip())
    if not m or m.group("unit").lower() not in _SIZE_UNITS or m.group("unit").endswith("bit"):
        raise ValueError(f"invalid size {value!r}; write a number and one of B, KiB, MiB, GiB, KB, MB, GB")
    return int(_number(m, value, "size", SIZE_MAX_BYTES, _SIZE_UNITS[m.group("unit").lower()], "1PiB"))


def format_size(n: int) -> str:
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= scale:
            return f"{n / scale:g}{unit}"
    return f"{n}B"


# The JSON Schema (editors, `distro-bench schema`) shows each unit field as the string a user writes, with a
# pattern that accepts the spellings the parsers above accept (case as they treat it); ranges stay the parsers' job.
_NUM = r"\d+(\.\d+)?([eE][+-]?\d+)?"
_ZERO = {"const": 0}
RATE_SCHEMA = {"type": "string", "pattern": rf"^{_NUM}\s*([bB][iI][tT]|[kKmMgGtT][bB][iI][tT])(/s)?$",
               "examples": ["10Mbit", "1Gbit", "512kbit"], "description": "bit/s: bit, kbit, Mbit, Gbit, e.g. 10Mbit"}
DURATION_SCHEMA = {"anyOf": [{"type": "string", "pattern": rf"^{_NUM}\s*(us|ms|s|min|h)$"}, _ZERO, {"const": "0"}],
                   "examples": ["15ms", "500us", "1s", "10min"],
                   "description": "us, ms, s, min or h, e.g. 15ms (bare 0 allowed)"}
PERCENT_SCHEMA = {"anyOf": [{"type": "string", "pattern": rf"^{_NUM}\s*%$"}, _ZERO, {"const": "0"}],
                  "examples": ["0.1%", "0%"], "description": "a percentage with its % sign, e.g. 0.1%"}
SIZE_SCHEMA = {"type": "string", "pattern": rf"^{_NUM}\s*([bB]|[kKmMgGtT][iI]?[bB])$",
               "examples": ["8GiB", "24GiB", "512MB"], "description": "bytes: B, KiB, MiB, GiB, KB, MB, GB"}

Rate = Annotated[int, BeforeValidator(parse_rate), PlainSerializer(format_rate, return_type=str),
                 WithJsonSchema(RATE_SCHEMA)]
Duration = Annotated[float, BeforeValidator(parse_duration), PlainSerializer(format_duration, return_type=str),
                     WithJsonSchema(DURATION_SCHEMA)]
Percent = Annotated[float, BeforeValidator(parse_percent), PlainSerializer(format_percent, return_type=str),
                    WithJsonSchema(PERCENT_SCHEMA)]
Size = Annotated[int, BeforeValidator(parse_size), PlainSerializer(format_size, return_type=str),
                 WithJsonSchema(SIZE_SCHEMA)]


# ---- booleans are not numbers -------------------------------------------------------------------
# YAML reads `count: true` as a bool, and pydantic's lax mode turns a bool into 1 (or 1.0) for an int or float
# field: `count: true` became one worker. Each scenario model refuses a bool wherever its field does not take one.

def _takes_bool(annotation: object) -> bool:
    """Whether a field of this type may hold a bool (itself or a model, which checks its own fields)."""
    if annotation is bool or annotation is typing.Any:
        return True
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return True
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        return _takes_bool(typing.get_args(annotation)[0])
    if origin is typing.Literal:
        return any(isinstance(a, bool) for a in typing.get_args(annotation))
    if origin in (list, tuple, dict, set, frozenset):
        return False  # the container itself is not a bool; its items are checked by no_bool_numbers
    return any(_takes_bool(a) for a in typing.get_args(annotation))


def _item_type(annotation: object) -> object | None:
    """X of a `list[X]` (or `list[X] | None`) field, else None."""
    origin = typing.get_origin(annotation)
    if origin is list:
        return typing.get_args(annotation)[0]
    if origin in (typing.Union, types.UnionType):
        for a in typing.get_args(annotation):
            if typing.get_origin(a) is list:
                return typing.get_args(a)[0]
    return None


def no_bool_numbers(cls, value: object, info) -> object:
    """A `field_validator("*", mode="before")` body: `true`/`false` given for a number (or a list of numbers)
    is refused, naming the value and what the field takes."""
    if info.field_name is None:
        return value
    field = cls.model_fields.get(info.field_name)
    if field is None:
        return value
    annotation = field.annotation
    if isinstance(value, bool) and not _takes_bool(annotation):
        raise ValueError(f"{str(value).lower()} is a yes/no value; this field takes "
                         + ("a number" if _numeric(annotation) else "another kind of value"))
    item = _item_type(annotation)
    if isinstance(value, list) and item is not None and not _takes_bool(item):
        for i, v in enumerate(value):
            if isinstance(v, bool):
                raise ValueError(f"item {i}: {str(v).lower()} is a yes/no value, not a number")
    return value


def _numeric(annotation: object) -> bool:
    if annotation in (int, float):
        return True
    return any(_numeric(a) for a in typing.get_args(annotation))


def no_bool_fields(cls, data: object) -> object:
    """The same as no_bool_numbers for a whole mapping, as a `model_validator(mode="before")` (a model with a
    discriminator field cannot take a `*` field validator)."""
    if isinstance(data, dict):
        for name, value in data.items():
            field = cls.model_fields.get(name) if isinstance(name, str) else None
            if field is not None and isinstance(value, bool) and not _takes_bool(field.annotation):
                raise ValueError(f"{name}: {str(value).lower()} is a yes/no value; this option takes a number")
    return data
