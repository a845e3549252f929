"""The scenario: pydantic models, YAML loading with located errors, preset expansion.

A scenario file is validated in one pass that collects every problem with its location
(`workers[1].link: unknown link 'dls'; known: dsl, cable, ...`), so a user fixes them all at once.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PlainSerializer,
    PrivateAttr,
    SerializationInfo,
    ValidationInfo,
    create_model,
    field_serializer,
    field_validator,
    model_validator,
)

from distro_bench.scenario import hfcorpus, presets
from distro_bench.scenario.budget import Budget, format_count, parse_count, resolve_budget, resolve_target_cap
from distro_bench.scenario.churn import ChurnSpec
from distro_bench.scenario.datafiles import MAX_CONFIG_BYTES, MAX_TOKENIZER_BYTES, hf_config, read_file, tokenizer_vocab
from distro_bench.scenario.gates import GATES
from distro_bench.scenario.impairments import IMPAIRMENTS, describe_parts, link_fields
from distro_bench.scenario.methods import validate_entries
from distro_bench.scenario.optimizers import StrategyConfig
from distro_bench.scenario.regions import REGION_PATTERN, RegionMatrix, RegionsSpec
from distro_bench.scenario.regions import resolve as resolve_regions
from distro_bench.scenario.replay import ReplaySpec
from distro_bench.scenario.sites import SITE_PATTERN, SiteLayout, SitesSpec
from distro_bench.scenario.sites import layout as site_layout_of
from distro_bench.scenario.trace import TraceFile
from distro_bench.scenario.units import (
    Duration,
    Rate,
    Size,
    format_duration,
    format_rate,
    no_bool_numbers,
)

BUILTIN_CORPORA = ("builtin:pydoc", "builtin:stdlib")
BYTE_VOCAB = 256  # a text corpus without a tokenizer: bytes are tokens
# A callable by import path, "package.module:function" (the module part dotted names, the object part too).
IMPORT_PATH_PATTERN = r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*:[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$"
BUILTIN_MODEL_FIELDS = ("dim", "n_layers", "n_heads", "ffn_dim", "vocab_size", "max_seq_len")

# A scenario's and an optimizer's name become folder names (results/<scenario>-<time>/workers/<optimizer>/):
# one path component, no separators, no leading dot ('..', '.hidden'), so nothing is written outside the run.
NAME_PATTERN = r"^[a-zA-Z0-9][a-zA-Z0-9_.-]{0,63}$"
NAME_RULE = "1-64 letters, digits, '-', '_' and '.', starting with a letter or digit"

# A token count: 2000000, '2M', '500k'.
Count = Annotated[int, BeforeValidator(parse_count), PlainSerializer(format_count, return_type=str)]


# Every user-named key (links, hardware, optimizers) follows NAME_PATTERN: names reach folder names, terminals,
# reports and tc comments, so no separators, control characters, markup or spaces.
NAMED_SECTIONS = ("links", "hardware")

# Bounds on what a worker computes from the scenario, each past anything a run here does:
MIN_COMPUTE_SCALE = 1e-3  # 1000x slower than this host (laptop-cpu next to h100 is 1/989); smaller overflows sleeps
MAX_WORKERS = 64
MAX_TFLOPS = 1e5  # 100 PFLOPS: 100x an H100; tflops from 1e-3 (a phone) up
# Tokens one rank holds for one evaluation pass (val_batches + tune_batches windows of seq_len + 1, int64): 2^25
# tokens are 256 MiB; 10^9 val_batches was an OOM kill after minutes.
MAX_EVAL_TOKENS = 2**25
MAX_BATCH_TOKENS = 2**22  # batch_size x seq_len per rank and step: 4M tokens (a large model's *global* batch)


class _Strict(BaseModel):
    # allow_inf_nan: a float field written `1e400` (or .inf) is refused rather than passed on as infinity.
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    # `count: true` is not one worker: a bool is refused wherever a field does not take one.
    _no_bools = field_validator("*", mode="before")(classmethod(no_bool_numbers))


class _Trigger(_Strict):
    """When a scheduled change happens: `at` (a duration since the optimizer/seed run's first step, the
    clock every optimizer shares) or `at_step` (when rank 0 begins that step); exactly one."""

    at: Duration | None = None
    at_step: int | None = Field(default=None, ge=0)

    @model_validator(mode="after")
    def _one_trigger(self):
        if (self.at is None) == (self.at_step is None):
            raise ValueError("give exactly one of at (a time such as '30s') or at_step (a step number)")
        return self

    @property
    def key(self) -> float:
        if self.at is not None:
            return self.at
        assert self.at_step is not None  # the validator above: exactly one of them
        return float(self.at_step)


# A schedule is written by hand or by a script; 10^4 entries is hours at one change a second. A 10^6-entry
# one took minutes and GBs to validate: that is a trace's job (up_trace/down_trace).
MAX_SCHEDULE_ENTRIES = 10_000

_LINK_CHANGE_FIELDS = ("up", "down", *(row.key for row in IMPAIRMENTS))


class _LinkChangeRates(_Trigger):
    up: Rate | None = None
    down: Rate | None = None
    if TYPE_CHECKING:  # the impairment fields come from the table (below); the type checker sees them as Any
        def __getattr__(self, name: str) -> Any: ...


# A link's impairments (delay, jitter, loss, ...) are fields made from the one table of them
# (harness/distro_bench/scenario/impairments.py), on LinkSpec and on a schedule entry alike.
if TYPE_CHECKING:
    _LinkChangeFields = _LinkChangeRates
else:
    _LinkChangeFields = create_model("_LinkChangeFields", __base__=_LinkChangeRates, **link_fields(changes=True))


class LinkChange(_LinkChangeFields):
    """One entry of a link's `schedule`: from then on the named fields take these values (the others keep
    theirs), or `outage: 5s`, the link carrying nothing either way for that long, then returning to the
    state it had. docs/network-changes.md."""

    outage: Duration | None = None

    @model_validator(mode="before")
    @classmethod
    def _down_is_a_rate(cls, data: Any) -> Any:
        # `down: 10s` reads like an outage but `down` is the downlink's rate: say which field is meant.
        if isinstance(data, dict) and isinstance(data.get("down"), str) and re.fullmatch(
                r"\s*[0-9.]+\s*(us|ms|s)\s*", data["down"]):
            raise ValueError(f"down {data['down']!r} is a duration, but down is the downlink rate (e.g. '2Mbit'); "
                             f"an outage is written outage: {data['down'].strip()}")
        return data

    @model_validator(mode="after")
    def _something_changes(self):
        changed = self.changed()
        if self.outage is not None and changed:
            raise ValueError(f"an outage entry changes nothing else; put {', '.join(changed)} in an entry of its own")
        if self.outage is not None and self.outage <= 0:
            raise ValueError("outage must be longer than 0s")
        if self.outage is None and not changed:
            raise ValueError("a schedule entry needs a field to change: one or more of "
                             + ", ".join(_LINK_CHANGE_FIELDS) + ", or outage")
        return self

    def changed(self) -> list[str]:
        return [f for f in _LINK_CHANGE_FIELDS if getattr(self, f) is not None]


class ComputeChange(_Trigger):
    """One entry of a hardware profile's `compute_schedule`: its compute_scale from then on."""

    compute_scale: float = Field(ge=MIN_COMPUTE_SCALE, le=1)


def _increasing(entries: list, what: str) -> list:
    """Entries of one schedule use one kind of trigger, strictly increasing (the same time twice is one entry)."""
    kinds = {"at" if e.at is not None else "at_step" for e in entries}
    if len(kinds) > 1:
        raise ValueError(f"{what} mixes at and at_step; use one kind of trigger per schedule")
    for i in range(1, len(entries)):
        if entries[i].key <= entries[i - 1].key:
            kind = kinds.pop() if kinds else "at"
            prev, cur = entries[i - 1], entries[i]
            show = (lambda e: format_duration(e.at)) if kind == "at" else (lambda e: str(e.at_step))
            raise ValueError(f"{what}[{i}].{kind} {show(cur)} is not after {what}[{i - 1}].{kind} {show(prev)}; "
                             "entries must be in increasing order")
    return entries


class _LinkRates(_Strict):
    preset: str | None = None
    up: Rate | None = None
    down: Rate | None = None
    if TYPE_CHECKING:  # the impairment fields come from the table (below); the type checker sees them as Any
        def __getattr__(self, name: str) -> Any: ...


if TYPE_CHECKING:
    _LinkFields = _LinkRates
else:
    _LinkFields = create_model("_LinkFields", __base__=_LinkRates, **link_fields(changes=False))


class LinkSpec(_LinkFields):
    """One access link: node -> switch (`up`) and switch -> node (`down`); its impairments (delay, jitter, loss,
    ...: harness/distro_bench/scenario/impairments.py) are one-way, the same in each direction."""

    # Changes during a run (docs/network-changes.md): a list of timed/stepped changes and outages, and
    # recorded bandwidth traces per direction (Mahimahi or CSV, harness/distro_bench/scenario/trace.py) followed at
    # `trace_resolution`.
    schedule: list[LinkChange] = Field(default_factory=list, max_length=MAX_SCHEDULE_ENTRIES)
    up_trace: str | None = None
    down_trace: str | None = None
    trace_resolution: Duration = 0.1

    @model_validator(mode="after")
    def _jitter_fits_delay(self) -> LinkSpec:
        if self.jitter > self.delay:
            raise ValueError(
                f"jitter {format_duration(self.jitter)} exceeds delay {format_duration(self.delay)}; "
                "an in-order access line cannot deliver a packet before it was sent"
            )
        _increasing(self.schedule, "schedule")
        # Every state the schedule passes through must be a valid link too.
        delay, jitter = self.delay, self.jitter
        for i, c in enumerate(self.schedule):
            delay = c.delay if c.delay is not None else delay
            jitter = c.jitter if c.jitter is not None else jitter
            if jitter > delay:
                raise ValueError(f"schedule[{i}]: jitter {format_duration(jitter)} exceeds delay "
                                 f"{format_duration(delay)} from then on")
        # An impairment that needs another (the table's `needs`), in the link and in every state after a change.
        for i, state in enumerate(self.states()):
            for row in IMPAIRMENTS:
                if row.needs and getattr(state, row.key) and not getattr(state, row.needs[0]):
                    where = f"schedule[{i - 1}]: from then on " if i else ""
                    raise ValueError(f"{where}{row.key} {row.format(getattr(state, row.key))} needs {row.needs[0]} "
                                     f"set too ({row.needs[1]})")
        for d in ("up", "down"):
            if getattr(self, f"{d}_trace") is not None and any(getattr(c, d) is not None for c in self.schedule):
                raise ValueError(f"{d}_trace sets the {d} rate all run long; a schedule entry cannot change {d} too")
        if not 0.01 <= self.trace_resolution <= 10:
            raise ValueError(f"trace_resolution {format_duration(self.trace_resolution)} is outside 10ms..10s")
        return self

    @property
    def shaped(self) -> bool:
        return any((self.up, self.down, *(getattr(self, row.key) for row in IMPAIRMENTS), self.schedule,
                    self.up_trace, self.down_trace))

    @property
    def changes(self) -> bool:
        """Whether this link changes during a run (a schedule or a trace)."""
        return bool(self.schedule or self.up_trace or self.down_trace)

    def states(self) -> list[LinkSpec]:
        """This link and every state its schedule takes it to, in order (outages excluded: they carry nothing)."""
        out, cur = [self], self
        for c in self.schedule:
            if c.outage is None:
                cur = cur.model_copy(update={f: getattr(c, f) for f in c.changed()})
                out.append(cur)
        return out

    def describe(self) -> str:
        parts = [f"up {format_rate(self.up)}" if self.up else "up unlimited",
                 f"down {format_rate(self.down)}" if self.down else "down unlimited"]
        return ", ".join(parts + describe_parts(self.impairments()))

    def impairments(self) -> dict[str, float]:
        """Scenario key -> value of every impairment of the table (harness/distro_bench/scenario/impairments.py)."""
        return {row.key: getattr(self, row.key) for row in IMPAIRMENTS}


_DEVICE_RE = re.compile(r"^(auto|cpu|cuda(:\d+)?)$")


class HardwareSpec(_Strict):
    """A worker's hardware. `compute_scale` is throughput relative to this host (1.0 = native, 0.25 = 4x slower);
    when absent it is derived from `tflops` relative to the fastest profile in the scenario."""

    preset: str | None = None
    device: str = Field(default="auto", json_schema_extra={"pattern": r"^(auto|cpu|cuda(:\d+)?)$"})
    tflops: float | None = Field(default=None, ge=1e-3, le=MAX_TFLOPS)
    compute_scale: float | None = Field(default=None, ge=MIN_COMPUTE_SCALE, le=1)
    memory: Size | None = None
    cpus: float | None = Field(default=None, ge=0.01, le=4096)
    # A straggler that comes and goes: compute_scale from each entry's time or step on.
    compute_schedule: list[ComputeChange] = Field(default_factory=list, max_length=MAX_SCHEDULE_ENTRIES)

    @field_validator("compute_schedule")
    @classmethod
    def _schedule_order(cls, v: list[ComputeChange]) -> list[ComputeChange]:
        return _increasing(v, "compute_schedule")

    @field_validator("device")
    @classmethod
    def _device(cls, v: str) -> str:
        if not _DEVICE_RE.match(v):
            raise ValueError(f"invalid device {v!r}; one of auto, cpu, cuda, cuda:N")
        return v


class WorkerGroup(_Strict):
    """`{count: 4, hardware: gaming-pc, link: dsl}` or one named worker `{name: alice, ...}`."""

    count: int = Field(default=1, ge=1, le=MAX_WORKERS)
    name: str | None = Field(default=None, pattern=r"^[a-zA-Z][a-zA-Z0-9_-]{0,31}$")
    hardware: str | HardwareSpec = "host"
    link: str | LinkSpec | None = None
    # Multi-host runs (`distro-bench node`): the agent (its --node-rank) whose host runs this group's
    # workers. Absent everywhere: node-rank i takes the scenario's nodes in order (harness/distro_bench/scenario/placement.py).
    host: int | None = Field(default=None, ge=0, le=63)
    # Geo-distributed topologies: the region these workers sit in; the one-way delay between regions is
    # the scenario's `regions:` table (harness/distro_bench/scenario/regions.py, docs/link-emulation.md).
    region: str | None = Field(default=None, pattern=REGION_PATTERN)
    # Shared bottlenecks: the site (home router, lab) whose uplink these workers share (scenario/sites.py).
    site: str | None = Field(default=None, pattern=SITE_PATTERN)


class ModelSpec(_Strict):
    # Upper bounds: several times the largest preset (llama-1.2b: 2048 x 16 layers, ffn 8192, vocab 32000,
    # seq 2048) and past published 70B shapes (8192 x 80, ffn 28672, vocab 128256), so `project` still
    # covers them; beyond is a typo, and building (even sizing) such a model would take minutes.
    preset: str | None = "tiny"
    dim: int | None = Field(default=None, ge=8, le=32768)
    n_layers: int | None = Field(default=None, ge=1, le=512)
    n_heads: int | None = Field(default=None, ge=1, le=512)
    ffn_dim: int | None = Field(default=None, ge=8, le=131072)
    vocab_size: int | None = Field(default=None, ge=2, le=1_048_576)
    max_seq_len: int | None = Field(default=None, ge=8, le=131072)
    # A model from outside (harness/distro_bench/train/models.py, docs/models-and-data.md): `factory`, a callable
    # "package.module:function" given vocab_size and `args`, returning an nn.Module from token ids [B, T] to
    # logits [B, T, vocab]; or `hf_config`, a transformers config.json (AutoModelForCausalLM.from_config),
    # in a run folder's scenario.yaml its content as validation read it.
    factory: str | None = Field(default=None, pattern=IMPORT_PATH_PATTERN)
    args: dict[str, Any] = Field(default_factory=dict)
    hf_config: str | dict[str, Any] | None = None

    @model_validator(mode="before")
    @classmethod
    def _one_source(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        outside = [k for k in ("factory", "hf_config") if data.get(k) is not None]
        if len(outside) > 1:
            raise ValueError("give one of factory and hf_config, not both")
        if outside:
            if data.get("preset") is not None:
                raise ValueError(f"give preset or {outside[0]}, not both (a preset is the built-in model)")
            own = [k for k in BUILTIN_MODEL_FIELDS if data.get(k) is not None
                   and not (k == "vocab_size" and outside[0] == "factory")]  # a factory is given the vocab
            if own:
                raise ValueError(f"{', '.join(own)}: fields of the built-in model; a {outside[0]} model takes its "
                                 + ("options in `args`" if outside[0] == "factory" else "shape from its config.json"))
            data = {**data, "preset": None}
        elif data.get("args"):
            raise ValueError("args: options of a `factory`; the built-in model takes dim, n_layers, n_heads, ffn_dim")
        return data

    @property
    def source(self) -> str:
        """`factory`, `hf_config` or `builtin`."""
        return "factory" if self.factory else "hf_config" if self.hf_config is not None else "builtin"


class DataSpec(_Strict):
    corpus: str = "builtin:pydoc"
    # A text corpus is byte-level (vocab 256) unless `tokenizer` names a tokenizers tokenizer.json to encode it.
    tokenizer: str | None = None
    # Pre-tokenised data instead of a corpus: nanoGPT's flat `.bin` (`dtype` says the width), a `.parquet` file
    # or a save_to_disk folder with `input_ids`; `val_tokens` its held-out split (else the tail, as for text).
    tokens: str | None = None
    val_tokens: str | None = None
    dtype: Literal["uint16", "uint32"] | None = None
    # The data's vocabulary: what its token ids lie below (256 for bytes, the tokenizer's own size with
    # `tokenizer`); required with `tokens`. The model's vocabulary must be the same.
    vocab_size: int | None = Field(default=None, ge=2, le=1_048_576)
    seq_len: int = Field(default=128, ge=8, le=8192)
    batch_size: int = Field(default=8, ge=1, le=4096)
    val_fraction: float = Field(default=0.05, gt=0, lt=0.5)
    val_batches: int = Field(default=4, ge=1, le=10_000)
    # Batches of the held-out tuning split (harness/distro_bench/train/data.py) evaluated beside validation as `tune_loss`;
    # 0: not evaluated. `sweep --pick best` sets it to val_batches for its trials and selects on it.
    tune_batches: int = Field(default=0, ge=0, le=10_000)

    @model_validator(mode="after")
    def _one_source(self) -> DataSpec:
        if self.tokens is not None:
            if "corpus" in self.model_fields_set:
                raise ValueError("give corpus (text) or tokens (token ids), not both")
            if self.tokenizer is not None:
                raise ValueError("tokenizer: token files are tokenised already; a tokenizer encodes a text corpus")
            if self.vocab_size is None:
                raise ValueError("vocab_size: required with tokens (the size of the vocabulary the ids come from, "
                                 "e.g. 50257 for GPT-2's)")
            if (self.dtype or "uint16") == "uint16" and self.vocab_size > 2**16:
                raise ValueError(f"dtype: uint16 holds ids below 65536, not a vocabulary of {self.vocab_size}; "
                                 "say dtype: uint32")
        elif self.val_tokens is not None or self.dtype is not None:
            raise ValueError(f"{'val_tokens' if self.val_tokens is not None else 'dtype'}: belongs to `tokens` "
                             "(a token file), which is not given")
        elif self.tokenizer is None and self.vocab_size is not None and self.vocab_size != 256:
            raise ValueError(f"vocab_size: a text corpus without a tokenizer is bytes, vocabulary 256, not "
                             f"{self.vocab_size}; name a tokenizer (data.tokenizer) or leave vocab_size out")
        return self

    @property
    def token_dtype(self) -> str:
        return self.dtype or "uint16"

    @model_validator(mode="after")
    def _memory_bounds(self) -> DataSpec:
        # What one rank allocates from these: a training batch, and the fixed evaluation windows it keeps.
        per_step = self.batch_size * self.seq_len
        if per_step > MAX_BATCH_TOKENS:
            raise ValueError(f"batch_size {self.batch_size} x seq_len {self.seq_len} is {per_step:,} tokens per worker "
                             f"and step; at most {MAX_BATCH_TOKENS:,}")
        evals = (self.val_batches + self.tune_batches) * self.batch_size * (self.seq_len + 1)
        if evals > MAX_EVAL_TOKENS:
            raise ValueError(f"(val_batches {self.val_batches} + tune_batches {self.tune_batches}) x batch_size "
                             f"{self.batch_size} x (seq_len + 1) is {evals:,} evaluation tokens held per worker; at "
                             f"most {MAX_EVAL_TOKENS:,} (fewer val_batches)")
        return self


DEFAULT_STEPS = 50
MAX_STEPS = 1_000_000
MAX_SEED = 2**32 - 1  # numpy's and most RNGs' seed range


class TrainSpec(_Strict):
    """How long each optimizer trains: one budget, `steps` (the default, 50), `time_budget` (training
    seconds from the first step: every optimizer gets the same wall-clock, steps vary), `tokens`, or
    `target_val_loss` (stop once reached; capped by `steps` or `time_budget`). `seeds` repeats every
    optimizer once per seed (the same data order for all optimizers of a seed). harness/distro_bench/scenario/budget.py."""

    steps: int | None = Field(default=None, ge=1, le=MAX_STEPS)
    time_budget: Duration | None = None
    tokens: Count | None = None
    target_val_loss: float | None = Field(default=None, gt=0)
    eval_every: int = Field(default=10, ge=1, le=1_000_000)
    seed: int = Field(default=0, ge=0, le=MAX_SEED)
    seeds: list[int] | None = Field(default=None, min_length=1, max_length=100)

    @model_validator(mode="before")
    @classmethod
    def _default_steps(cls, data: Any) -> Any:
        # steps is the default budget (and a target's default cap) unless time or tokens is the budget.
        if isinstance(data, dict) and data.get("steps") is None and data.get("time_budget") is None \
                and data.get("tokens") is None:
            data = {**data, "steps": DEFAULT_STEPS}
        return data

    @model_validator(mode="after")
    def _one_budget(self) -> TrainSpec:
        named = [k for k in ("steps", "time_budget", "tokens") if getattr(self, k) is not None]
        if len(named) > 1:
            raise ValueError(f"give one budget, not {' and '.join(named)}: steps, time_budget or tokens "
                             "(target_val_loss takes steps or time_budget as its cap)")
        if self.target_val_loss is not None and self.tokens is not None:
            raise ValueError("target_val_loss is capped by steps or time_budget, not tokens")
        if self.time_budget is not None and self.time_budget <= 0:
            raise ValueError("time_budget must be more than 0s")
        if self.seeds is not None:
            if any(not 0 <= s <= MAX_SEED for s in self.seeds):
                raise ValueError(f"seeds must be integers from 0 to {MAX_SEED}, got {self.seeds}")
            if len(set(self.seeds)) != len(self.seeds):
                raise ValueError(f"seeds must be distinct, got {self.seeds}")
        return self

    @property
    def budget_kind(self) -> str:
        if self.target_val_loss is not None:
            return "target"
        return "time" if self.time_budget is not None else "tokens" if self.tokens is not None else "steps"

    def seed_list(self) -> list[int]:
        return list(self.seeds) if self.seeds else [self.seed]


LinkEngineName = Literal["auto", "tc", "userspace"]


class NetworkSpec(_Strict):
    link_engine: LinkEngineName = "auto"
    # Run even when part of a link cannot be emulated here; the run folder then says what was not.
    allow_unemulated: bool = False
    # After the links are up, measure each node's goodput and RTT (a few seconds, once per run) into
    # environment.json, for the report's configured / applied / measured table. docs/sweeps.md.
    measure_links: bool = True


class _ChecksBase(_Strict):
    if TYPE_CHECKING:  # the threshold fields come from the gate table (below); the type checker sees them as Any
        def __getattr__(self, name: str) -> Any: ...


# One threshold field per gate of `check` (harness/distro_bench/scenario/gates.py): the key, its bound and its
# help are the table's, as the CLI's flags and each check result are.
if TYPE_CHECKING:
    _ChecksThresholds = _ChecksBase
else:
    _ChecksThresholds = create_model("_ChecksThresholds", __base__=_ChecksBase, **{
        g.key: (float | None, Field(default=None, description=g.schema_text(), **{g.bound[0]: g.bound[1]}))
        for g in GATES.values()})


class ChecksSpec(_ChecksThresholds):
    candidate: str | None = None
    # The loss time/tokens/steps-to-target are measured against (default: train.target_val_loss, else the
    # worst optimizer's best validation loss). docs/fair-comparison.md.
    target_val_loss: float | None = Field(default=None, gt=0)
    # Issue 49, seeds kept apart: the seeds of the pilot run that chose target_val_loss, and those the
    # optimizers' rates were tuned on. A target or a rate chosen on the seeds a run then reports favours it, so
    # a scenario whose reported seeds (train.seeds) overlap either is refused, unless seed_overlap is "label":
    # then it runs and its verdict names the overlap. docs/fair-comparison.md.
    target_pilot_seeds: list[Annotated[int, Field(ge=0, le=MAX_SEED)]] | None = Field(default=None, max_length=100)
    tuning_seeds: list[Annotated[int, Field(ge=0, le=MAX_SEED)]] | None = Field(default=None, max_length=100)
    seed_overlap: Literal["refuse", "label"] = "refuse"


# AWS EC2's list price for data transfer out to the internet, first 10 TB a month, us-east-1 (aws.amazon.com/
# ec2/pricing/on-demand/, "Data Transfer"): what a node in a public cloud pays per GB it sends to its peers.
EGRESS_USD_PER_GB = 0.09
# What a link's sender pays per byte: results/cost.py LINK_CLASS_USD_PER_GB prices each (sourced there).
LinkClass = Literal["home", "cloud-same-zone", "cloud-inter-region", "internet"]


class CostsSpec(_Strict):
    """Prices for the verdict's cost-to-target row (docs/reports.md). Egress is priced per link class
    (`link_classes`: link name -> class; a link not named is home, or cloud-same-zone for the `datacenter`
    preset); `egress_usd_per_gb` set prices every link at that instead. `gpu_usd_per_hour` null leaves it out."""

    egress_usd_per_gb: float | None = Field(default=None, ge=0)
    gpu_usd_per_hour: float | None = Field(default=None, ge=0)
    link_classes: dict[str, LinkClass] = Field(default_factory=dict)


class Node(BaseModel):
    """One worker after expansion: its rank, name and resolved hardware and link."""

    model_config = ConfigDict(frozen=True)
    rank: int
    name: str
    hardware_name: str
    hardware: HardwareSpec
    compute_scale: float
    link_name: str | None
    link: LinkSpec | None
    region: str | None = None
    site: str | None = None


class Scenario(_Strict):
    name: str = Field(pattern=NAME_PATTERN)
    description: str = Field(default="", max_length=4000)
    workers: list[WorkerGroup] = Field(min_length=1, max_length=MAX_WORKERS)
    links: dict[str, LinkSpec] = Field(default_factory=dict, json_schema_extra={"propertyNames": {"pattern": NAME_PATTERN}})
    hardware: dict[str, HardwareSpec] = Field(default_factory=dict,
                                              json_schema_extra={"propertyNames": {"pattern": NAME_PATTERN}})
    model: ModelSpec = Field(default_factory=ModelSpec)
    data: DataSpec = Field(default_factory=DataSpec)
    train: TrainSpec = Field(default_factory=TrainSpec)
    network: NetworkSpec = Field(default_factory=NetworkSpec)
    # Run name -> its optimizer's options, the model `type` names (default: the run name, so `adamw: {lr: 3e-3}`
    # is an AdamW and `distro-2bit: {type: distro, ...}` a second DisTrO run).
    optimizers: dict[str, StrategyConfig] = Field(min_length=1)
    baseline: str = "adamw"
    checks: ChecksSpec = Field(default_factory=ChecksSpec)
    costs: CostsSpec = Field(default_factory=CostsSpec)
    # One-way delay per ordered pair of regions (a preset or a table), applied on top of the access links.
    regions: RegionsSpec | None = None
    # Sites whose nodes share one uplink, and the WAN paths between them (harness/distro_bench/scenario/sites.py).
    sites: SitesSpec | None = None
    # Workers that leave and come back, by schedule or failure rate (harness/distro_bench/scenario/churn.py).
    churn: ChurnSpec | None = None
    # Byte replay (harness/distro_bench/scenario/replay.py): the workers train nothing and send the methods'
    # predicted messages over the links (synthetic contents, the codec timed apart), with compute from the
    # hardware profiles.
    replay: ReplaySpec | None = None

    _base_dir: Path = PrivateAttr(default=Path("."))
    # Each trace file a link names, as validation read it (the path as written -> its bytes, resolved path and
    # mode): the run copies these very bytes into its folder (dump_for_run), never the path read again.
    _traces: dict[str, TraceFile] = PrivateAttr(default_factory=dict)
    # The model's and data's files (model.hf_config, data.tokenizer, data.tokens, data.val_tokens) as
    # validation read them (field -> bytes; scenario/datafiles.py): the run copies these bytes into its folder.
    _files: dict[str, bytes] = PrivateAttr(default_factory=dict)

    @model_validator(mode="after")
    def _seeds_kept_apart(self) -> Scenario:
        if self.checks.seed_overlap == "refuse" and (problems := self.seed_overlaps()):
            raise ValueError("; ".join(problems) + ": a target or rate chosen on the seeds a run reports favours "
                             "them; report other seeds (train.seeds), or set checks.seed_overlap: label to run "
                             "and have the verdict name the overlap")
        return self

    def seed_overlaps(self) -> list[str]:
        """Where the pilot's or the tuning's seeds overlap the reported seeds, in words (empty: kept apart)."""
        reported = set(self.train.seed_list())
        out = []
        for field, seeds in (("checks.target_pilot_seeds", self.checks.target_pilot_seeds),
                             ("checks.tuning_seeds", self.checks.tuning_seeds)):
            shared = sorted(reported & set(seeds or []))
            if shared:
                out.append(f"{field} {sorted(set(seeds or []))} share seed(s) {', '.join(map(str, shared))} with the "
                           f"reported seeds {sorted(reported)}")
        return out

    @field_validator("workers", mode="before")
    @classmethod
    def _few_groups(cls, v: Any) -> Any:
        # Before any group is validated: 10^5 groups took minutes (each is checked, expanded and compared).
        if isinstance(v, list) and len(v) > MAX_WORKERS:
            raise ValueError(f"{len(v)} worker groups; at most {MAX_WORKERS} workers are supported in all")
        return v

    @field_validator(*NAMED_SECTIONS, mode="before")
    @classmethod
    def _section_names(cls, v: Any, info: ValidationInfo) -> Any:
        if isinstance(v, dict):
            bad = [k for k in v if not valid_name(k)]
            if bad:
                raise ValueError(f"invalid {info.field_name} name {show_value(bad[0])}: {NAME_RULE}")
        return v

    @field_validator("optimizers", mode="before")
    @classmethod
    def _options_by_type(cls, v: Any, info: ValidationInfo) -> Any:
        # Each entry by the options model its `type` names in the one registry (scenario/methods.py), the run
        # name standing in for a `type` left out. Validation context {"stored": True}: a run folder's record, read
        # where a method's code may be missing (its options are kept as data).
        if not isinstance(v, dict):
            return v
        return validate_entries({k: (e if e is not None else {}) for k, e in v.items()},
                                stored=bool((info.context or {}).get("stored")))

    @field_serializer("optimizers")
    def _every_option(self, v: dict[str, StrategyConfig], info: SerializationInfo) -> dict[str, Any]:
        # Every option, None included (the scenario's exclude_none must not turn AdamW's `max_grad_norm: null`,
        # no clipping, back into the default 1.0 when the dump is loaded again).
        # A method whose code is missing here (StoredOptions): its options exactly as the run folder recorded them.
        return {k: c.model_dump(mode=info.mode, exclude_unset=getattr(c, "code_missing", False)) for k, c in v.items()}

    @field_validator("optimizers")
    @classmethod
    def _run_names(cls, v: dict[str, Any]) -> dict[str, Any]:
        bad = [k for k in v if not valid_name(k)]
        if bad:
            raise ValueError(f"invalid optimizer name {show_value(bad[0])} (it names the run's folder): {NAME_RULE}")
        return v


    # ---- resolved views -------------------------------------------------------------
    @property
    def world_size(self) -> int:
        return sum(g.count for g in self.workers)

    @property
    def mode(self) -> str:
        """`replay` (the workers perform the communication only) or `train`."""
        return "train" if self.replay is None else "replay"

    def optimizer_configs(self) -> dict[str, StrategyConfig]:
        """Run name -> the options of its strategy (a copy of `optimizers`, for callers that predate it)."""
        return dict(self.optimizers)

    def comparison_target(self) -> tuple[float | None, str | None]:
        """The target loss this scenario names for time-to-target, and where (checks.target_val_loss, else a
        target budget's); (None, None) when it names none and the summary picks a post-hoc one."""
        if self.checks.target_val_loss is not None:
            overlap = self.seed_overlaps()
            return self.checks.target_val_loss, "checks.target_val_loss in the scenario" + (
                f" (seed overlap, labelled: {'; '.join(overlap)})" if overlap else "")
        if self.train.target_val_loss is not None:
            return self.train.target_val_loss, "train.target_val_loss in the scenario (the budget)"
        return None, None

    def budget(self) -> Budget:
        """What every optimizer trains for (harness/distro_bench/scenario/budget.py), the same for all of them."""
        t = self.train
        per_step = self.world_size * self.data.batch_size * self.data.seq_len
        b = resolve_budget(steps=t.steps, time_budget=t.time_budget if t.target_val_loss is None else None,
                           tokens=t.tokens, target_val_loss=t.target_val_loss, tokens_per_step=per_step,
                           default_steps=DEFAULT_STEPS)
        return resolve_target_cap(b, t.time_budget) if t.target_val_loss is not None else b

    def resolved_model(self) -> dict[str, Any]:
        """The model as the workers build it (harness/distro_bench/train/models.py): the built-in model's fields, or
        `{factory, args, vocab_size}`, or `{hf_config: <its content>, vocab_size}`."""
        if self.model.source == "hf_config":
            cfg = self.hf_config()
            return {"hf_config": cfg, "vocab_size": cfg["vocab_size"]}
        return resolve_model(self.model, self.data_vocab())

    def file_path(self, field: str) -> Path | None:
        """The file a `model.*` or `data.*` field names, relative to the scenario's folder (None: not given)."""
        section, key = field.split(".")
        value = getattr(getattr(self, section), key)
        return (self._base_dir / Path(value).expanduser()) if isinstance(value, str) else None

    def file_bytes(self, field: str, cap: int, what: str) -> bytes:
        """The bytes of the file a field names, read once (scenario/datafiles.py read_file) and kept."""
        if field not in self._files:
            path = self.file_path(field)
            assert path is not None, field
            self._files[field] = read_file(path, cap, what)
        return self._files[field]

    def hf_config(self) -> dict[str, Any]:
        """model.hf_config's content (DataFileError where it cannot be read)."""
        if isinstance(self.model.hf_config, dict):
            return hf_config(json.dumps(self.model.hf_config).encode(), "model.hf_config")
        return hf_config(self.file_bytes("model.hf_config", MAX_CONFIG_BYTES, "config.json"), "model.hf_config")

    def data_vocab(self) -> int:
        """The data's vocabulary: data.vocab_size, else the tokenizer's own size, else bytes (256)."""
        if self.data.vocab_size is not None:
            return self.data.vocab_size
        if self.data.tokenizer is not None:
            return tokenizer_vocab(self.file_bytes("data.tokenizer", MAX_TOKENIZER_BYTES, "tokenizer"), "data.tokenizer")
        return BYTE_VOCAB

    def loss_unit(self) -> str:
        """What a loss of this scenario is measured in, in words (summary.json `loss.unit`)."""
        if self.data.tokens is not None:
            return f"nats per token (token ids of a vocabulary of {self.data_vocab()})"
        if self.data.tokenizer is not None:
            return f"nats per token (tokenizer {Path(self.data.tokenizer).name}, vocabulary {self.data_vocab()})"
        return "nats per byte"

    def corpus_path(self) -> str:
        if self.data.corpus in BUILTIN_CORPORA:
            return self.data.corpus
        if hfcorpus.is_hf(self.data.corpus):
            return hfcorpus.resolve(self.data.corpus, self._base_dir)
        return str((self._base_dir / self.data.corpus).resolve())

    def nodes(self) -> list[Node]:
        hw_by_group = [resolve_hardware(self, g.hardware) for g in self.workers]
        fastest = max((hw.tflops for _, hw in hw_by_group if hw.tflops), default=None)
        nodes: list[Node] = []
        for group, (hw_name, hw) in zip(self.workers, hw_by_group):
            link_name, link = resolve_link(self, group.link)
            if hw.compute_scale is not None:
                scale = hw.compute_scale
            elif hw.tflops and fastest:
                scale = hw.tflops / fastest
            else:
                scale = 1.0
            for i in range(group.count):
                rank = len(nodes)
                name = (group.name if group.count == 1 else f"{group.name}-{i}") if group.name else f"node{rank}"
                nodes.append(Node(rank=rank, name=name, hardware_name=hw_name, hardware=hw,
                                  compute_scale=scale, link_name=link_name, link=link, region=group.region,
                                  site=group.site))
        return nodes

    def resolved_dict(self) -> dict[str, Any]:
        """The scenario with presets expanded and defaults filled: what `scenario.yaml` in a run folder holds."""
        d = self.model_dump(mode="json", exclude_none=True)
        model = self.resolved_model()
        if "hf_config" in model:  # its vocabulary is the config's own
            model = {"hf_config": model["hf_config"]}
        d["model"] = {"preset": self.model.preset, **model} if self.model.preset else model
        d["links"] = {n.link_name: n.link.model_dump(mode="json", exclude_none=True)
                      for n in self.nodes() if n.link is not None and n.link_name}
        d["hardware"] = {n.hardware_name: n.hardware.model_dump(mode="json", exclude_none=True) for n in self.nodes()}
        if self.data.tokens is None:
            d["data"]["corpus"] = self.corpus_path()
        else:  # token files are the data: no corpus beside them
            d["data"].pop("corpus", None)
        matrix = region_matrix(self)
        if matrix is not None and self.regions is not None:  # the preset expanded: every pair's one-way delay
            d["regions"] = {"intra": format_duration(matrix.intra_s), "symmetric": self.regions.symmetric, "delays": {
                a: {b: format_duration(v) for (x, b), v in sorted(matrix.one_way.items()) if x == a}
                for a in matrix.regions}}
            own = self.regions.model_dump(mode="json", include={"jitter", "loss"})
            d["regions"].update({k: v for k, v in own.items() if v})
        # Trace files as absolute paths, like the corpus (the runner copies them into the run folder): the path
        # validation resolved and read, not a new resolution (a symlink may point elsewhere by now).
        for link in [*d["links"].values(), *(g["link"] for g in d["workers"] if isinstance(g.get("link"), dict))]:
            for k in ("up_trace", "down_trace"):
                if link.get(k):
                    seen = self._traces.get(link[k])
                    link[k] = str(seen.path if seen is not None else (self._base_dir / link[k]).resolve())
        return d



def show_value(value: object, limit: int = 80) -> str:
    """A user's value inside a message: repr (control characters escaped), cut to `limit` characters."""
    text = repr(value)
    return text if len(text) <= limit else text[:limit - 5] + "...'"


def valid_name(name: object) -> bool:
    """Whether `name` is a safe scenario/optimizer name (NAME_PATTERN): one folder name, nothing more."""
    return isinstance(name, str) and re.fullmatch(NAME_PATTERN, name) is not None


def resolve_model(m: ModelSpec, data_vocab: int = BYTE_VOCAB) -> dict[str, Any]:
    """The built-in model's fields (a preset's under the explicit ones) or a factory's `{factory, args,
    vocab_size}`; the vocabulary is the data's unless the spec or its preset says one (problems.py compares)."""
    if m.factory:
        return {"factory": m.factory, "args": dict(m.args), "vocab_size": m.vocab_size or data_vocab}
    base: dict[str, Any] = dict(presets.MODELS[m.preset]) if m.preset else {}
    for k in BUILTIN_MODEL_FIELDS:
        v = getattr(m, k)
        if v is not None:
            base[k] = v
    if m.vocab_size is None and base.get("vocab_size", BYTE_VOCAB) == BYTE_VOCAB:
        base["vocab_size"] = data_vocab  # a byte-level preset takes the data's; a published model's is its own
    base.setdefault("max_seq_len", 512)
    return base


def model_label(m: ModelSpec) -> str:
    """The model in a few words: `tiny`, `tiny with dim 256`, `custom (dim 256, 4 layers)`, a factory's path, or
    `hf_config gpt2`."""
    if m.factory:
        return f"factory {m.factory}"
    if m.hf_config is not None:
        kind = m.hf_config.get("model_type") if isinstance(m.hf_config, dict) else Path(m.hf_config).name
        return f"hf_config {kind}"
    own = {k: getattr(m, k) for k in ("dim", "n_layers", "n_heads", "ffn_dim") if getattr(m, k) is not None}
    words = ", ".join(f"{v} layers" if k == "n_layers" else f"{k} {v}" for k, v in own.items())
    if not m.preset:
        return f"custom ({words})"
    preset = presets.MODELS.get(m.preset, {})
    changed = {k: v for k, v in own.items() if preset.get(k) != v}
    return m.preset if not changed else f"{m.preset} with " + ", ".join(
        f"{v} layers" if k == "n_layers" else f"{k} {v}" for k, v in changed.items())


def _expand(spec_cls, raw: Any, known: dict[str, dict]):
    """A spec that names a preset gets the preset's values under its own explicit fields."""
    if isinstance(raw, spec_cls) and raw.preset:
        merged = {**known[raw.preset], **raw.model_dump(exclude_unset=True)}
        merged.pop("preset", None)
        return spec_cls.model_validate(merged)
    return raw


def resolve_link(s: Scenario, ref: str | LinkSpec | None) -> tuple[str | None, LinkSpec | None]:
    if ref is None:
        return None, None
    if isinstance(ref, LinkSpec):
        return "inline", _expand(LinkSpec, ref, presets.LINKS)
    if ref in s.links:
        return ref, _expand(LinkSpec, s.links[ref], presets.LINKS)
    return ref, LinkSpec.model_validate(presets.LINKS[ref])


def resolve_hardware(s: Scenario, ref: str | HardwareSpec) -> tuple[str, HardwareSpec]:
    if isinstance(ref, HardwareSpec):
        return "inline", _expand(HardwareSpec, ref, presets.HARDWARE)
    if ref in s.hardware:
        return ref, _expand(HardwareSpec, s.hardware[ref], presets.HARDWARE)
    return ref, HardwareSpec.model_validate(presets.HARDWARE[ref])


def region_matrix(s: Scenario) -> RegionMatrix | None:
    """The scenario's resolved region matrix (None without `regions:`)."""
    return resolve_regions(s.regions) if s.regions is not None else None


def site_layout(s: Scenario) -> SiteLayout | None:
    """The scenario's sites in use and their WAN paths (None without `sites:`)."""
    return site_layout_of(s.sites, [g.site for g in s.workers for _ in range(g.count)]) if s.sites else None
