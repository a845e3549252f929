"""The time model's settings for the published time rows, frozen in one dated file before the rows are judged.

distro_bench/data/published/time-model-DATE.yaml holds every setting the published time rows depend on and
the projection cannot take from the source (MFU, interconnect, per-round cost, top-k, precision, overlap, the
optimizer step's device), each with its value, its source or "assumed", the rows it applies to, and the rows
whose published figure was already seen when it was chosen (`chosen_after`). A row that uses such a setting
is `calibrated`, not `independent` (studies/published.py): agreement it shows was partly put there.

Optimizer compute (issue 48 item 3) comes from a committed measurement (benchmarks/optimizer_compute.py:
seconds per parameter a + b (N - 1) of each method's own compress + apply), carried from the measuring
device to the row's by the ratio of memory bandwidths (the file's rule, an assumed setting like the others).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from distro_bench.errors import InputError

DATA = Path(str(resources.files("distro_bench") / "data" / "published"))
TIME_MODEL_FILE = DATA / "time-model-2026-12-06.yaml"
SENSITIVITY = 0.25  # each numeric setting at -25% and +25%

# How a setting reaches the projection:
# - project: an argument of train/projection.py's project() (mfu, round_overhead_s);
# - link / link_up / link_down: the rate of every worker's link (both ways, up, down), bit/s;
# - option: an optimizer option of that name, on every optimizer of the row's scenario that has it;
# - device_bandwidth: the memory bandwidth (bytes/s) the measured optimizer compute is carried to;
# - codec: which measured implementation stands for the method named by `option` (its value: a method of the
#   results file, e.g. DisTrO's own or DeMo's per-tensor reference).
Kind = Literal["project", "link", "link_up", "link_down", "option", "device_bandwidth", "codec"]


class Setting(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    value: float | bool | str
    kind: Kind
    option: str | None = None  # kind option: the option's name; kind project: the argument's
    unit: str = ""
    source: str  # where the value comes from, or "assumed: ..." and why
    assumed: bool
    rows: list[str] = Field(min_length=1)  # published points (ids) it applies to
    chosen_after: list[str] = Field(default_factory=list)  # rows whose figure was seen when it was chosen
    alternative: float | bool | str | None = None  # a non-numeric setting's other value, for its sensitivity

    @model_validator(mode="after")
    def _number_where_a_rate(self):
        if self.kind not in ("option", "codec") and not is_finite_number(self.value):
            raise ValueError(f"value: {self.value!r} is not a number; a {self.kind} setting is one (YAML reads "
                             f"400.0e9 as text: write 4.0e+11)")
        if self.kind in ("project", "option", "codec") and not self.option:
            raise ValueError(f"option: a {self.kind} setting names the argument or option it sets")
        return self


class TimeModel(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    date: str
    frozen: str  # what "frozen" means for this file, in words
    optimizer_compute: str  # results file of benchmarks/optimizer_compute.py beside this file
    optimizer_compute_rows: list[str] = Field(default_factory=list)  # rows whose step includes it
    settings: dict[str, Setting]

    def for_row(self, row: str) -> dict[str, Setting]:
        return {name: s for name, s in self.settings.items() if row in s.rows}

    def calibrated(self, row: str) -> list[str]:
        """The settings of this row chosen after its figure was seen (empty: the row is independent)."""
        return [name for name, s in self.for_row(row).items() if row in s.chosen_after]


def load_time_model(path: Path = TIME_MODEL_FILE) -> TimeModel:
    try:
        raw = yaml.safe_load(Path(path).read_text())
        return TimeModel(**(raw or {}))
    except (OSError, yaml.YAMLError) as e:
        raise InputError(f"time model: cannot read {path}: {e}") from None
    except (TypeError, ValidationError) as e:
        raise InputError(f"{path}: {e}") from None


def perturbed(setting: Setting) -> list[tuple[str, float | bool | str]]:
    """(label, value) pairs a row's sensitivity is shown at: -25% and +25% of a numeric value (an integer
    option stays an integer, at least 1), or the alternative of a non-numeric one."""
    v = setting.value
    if isinstance(v, bool | str):
        return [] if setting.alternative is None else [("alternative", setting.alternative)]
    out: list[tuple[str, float | bool | str]] = []
    for label, factor in (("-25%", 1 - SENSITIVITY), ("+25%", 1 + SENSITIVITY)):
        x = v * factor
        if setting.kind == "option" and float(v).is_integer():
            x = max(1, round(x))
        out.append((label, x))
    return out


@dataclass(frozen=True)
class OptimizerCompute:
    """Measured optimizer compute (benchmarks/optimizer_compute.py's results file)."""

    device: str
    host_bandwidth_Bps: float
    fits: dict[str, dict[str, dict[str, float]]]  # method -> "step" / "sync" -> {"a", "b"} seconds per parameter
    source: str  # the file, for the table

    def seconds_per_step(self, kind: str, params: int, workers: int, period_steps: int,
                         device_bandwidth_Bps: float) -> float | None:
        """A step's optimizer compute on the row's device: (every step's + a sync's / period) seconds per
        parameter at `workers`, x parameters, x host bandwidth / device bandwidth. None: not measured."""
        fit = self.fits.get(kind)
        if fit is None:
            return None

        def at(part: str) -> float:
            line = fit.get(part)
            return 0.0 if line is None else max(line["a"] + line["b"] * (workers - 1), 0.0)

        per_param = at("step") + at("sync") / max(period_steps, 1)
        return per_param * params * self.host_bandwidth_Bps / device_bandwidth_Bps


def load_optimizer_compute(model: TimeModel, base: Path = DATA) -> OptimizerCompute:
    path = base / model.optimizer_compute
    try:
        raw = json.loads(path.read_text())
        fits = {name: m["fit"] for name, m in raw["methods"].items()}
        return OptimizerCompute(device=raw["device"], host_bandwidth_Bps=float(raw["copy_bandwidth_Bps"]), fits=fits,
                                source=path.name)
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise InputError(f"time model: optimizer_compute: cannot read {path}: {e}") from None


def is_finite_number(v: object) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)
