"""The typed view of `summary.json`: one model per level, fields named exactly as the public keys.

The keys are a public schema (metrics.SUMMARY_KEYS and runner.finalize write them): fields are only ever
added. `OptimizerSummary` has one field per row of results/figures.py (the table of figures), typed as the row says. Every model allows extra keys, so a summary written by a newer harness still loads, and supports
`summary["key"]` / `.get("key")` for code written against the plain dict. Torch-free and pandas-free.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field, create_model, model_validator

from distro_bench.results import figures

Number = int | float


class _Record(BaseModel):
    """A pydantic model that also reads like the dict it was loaded from."""

    model_config = ConfigDict(extra="allow")

    def __getitem__(self, key: str) -> Any:
        if key in type(self).model_fields or key in (self.model_extra or {}):
            return getattr(self, key)
        raise KeyError(key)

    def get(self, key: str, default: Any = None) -> Any:
        try:
            return self[key]
        except KeyError:
            return default

    def __contains__(self, key: object) -> bool:
        return key in type(self).model_fields or key in (self.model_extra or {})

    def to_dict(self) -> dict:
        """The JSON document this was read from (fields a file did not have are left out)."""
        return self.model_dump(mode="json", exclude_unset=True)


class _OptimizerRecord(_Record):
    """What an optimizer's summary holds besides its figures: the replay's settings, the intervals, each seed's."""

    # issue 34: in a replay, the compute, codec and fraction replayed, and the share of a step that was compute
    replay: dict[str, Any] | None = None
    ci95: dict[str, list[float] | None] | None = None
    per_seed: dict[str, dict] | None = None

    def bytes_per_step(self, basis: str | None = None) -> float | None:
        """tx + rx per worker per step on `basis` (wire, payload; default: this summary's reduction basis, else
        wire where counted): results/figures.py total_bytes, the one place bytes are added up."""
        if basis is None and self.get("reduction_basis") is None:
            return figures.bytes_per_step(self)
        return figures.total_bytes(self, basis or self.get("reduction_basis"))


if TYPE_CHECKING:
    class OptimizerSummary(_OptimizerRecord):
        """One optimizer's figures (statically: each figure's attribute, as results/figures.py's rows say)."""

        def __getattr__(self, name: str) -> Any: ...
else:
    # One optimizer's figures: per worker per step, steady state (step 0 left out), means over seeds. One field
    # per row of results/figures.py, named as its key (issue 50: the table is the one list of figures).
    OptimizerSummary = create_model(
        "OptimizerSummary", __base__=_OptimizerRecord, __module__=__name__,
        __doc__="One optimizer's figures: per worker per step, steady state (step 0 left out), means over seeds.",
        **{f.key: (f.kind | None, None) for f in figures.FIGURES})


class RunInfo(_Record):
    scenario: str | None = None
    backend: str | None = None
    state: str | None = None  # complete | incomplete | failed | running
    reason: str | None = None
    started: str | None = None
    finished: str | None = None
    world_size: int | None = None
    corpus_sha256: list[str] = Field(default_factory=list)
    probe_allgather_s: float | None = None
    budget: dict[str, Any] | None = None  # {"kind": "steps"|"time"|"tokens"|"target", "value": ...}
    mode: str | None = None  # train | replay (issue 34: the workers performed the communication only)
    root_workers: bool | None = None  # issue 51: workers kept uid 0, accepted by --allow-root-workers


# The byte bases a summary's costs may name (results/cost.py BASIS_WORDS says each in words).
BYTES_BASES = ("wire", "predicted", "payload")


def _post_hoc_flag(d: dict) -> None:
    """target.post_hoc, written since issue 35; before it the post-hoc target was the one described this way."""
    t = d.get("target")
    if isinstance(t, dict) and t.get("val_loss") is not None and "post_hoc" not in t:
        t["post_hoc"] = str(t.get("how") or "").startswith("the worst optimizer's best")


def _bytes_basis(d: dict) -> None:
    """costs.bytes_basis: a word of BYTES_BASES since issue 34; anything else read as payload, the lower bound."""
    c = d.get("costs")
    if isinstance(c, dict) and c.get("bytes_basis") is not None and c["bytes_basis"] not in BYTES_BASES:
        c["bytes_basis"] = "payload"


# What an older harness left out, filled from what it wrote, in one place (issue 35) rather than a branch in
# each reader. A step only adds or normalises a key an older summary lacks; it never changes what today's writes.
MIGRATIONS = (_post_hoc_flag, _bytes_basis)


def migrate(raw: dict) -> dict:
    """A copy of `raw` (a summary.json of any known schema version) in the form today's readers take."""
    import copy

    out = copy.deepcopy(raw)
    for step in MIGRATIONS:
        step(out)
    return out


class Summary(_Record):
    """`summary.json` of a run folder: migrated (MIGRATIONS) as it is validated, whichever harness wrote it."""

    @model_validator(mode="before")
    @classmethod
    def _migrate(cls, data: Any) -> Any:
        return migrate(data) if isinstance(data, dict) else data

    @classmethod
    def of(cls, summary: Summary | dict) -> Summary:
        """`summary` typed: a Summary as it is, a summary.json mapping validated (and migrated) once, at the
        boundary of a reader that callers hand either."""
        return summary if isinstance(summary, Summary) else cls.model_validate(summary)

    schema_version: int = 1
    run: RunInfo = Field(default_factory=RunInfo)
    baseline: str | None = None
    optimizers: dict[str, OptimizerSummary] = Field(default_factory=dict)
    target: dict[str, Any] | None = None  # {"val_loss": x, "how": "..."}
    # issue 29: {"egress_usd_per_gb", "gpu_usd_per_hour", "bytes_basis", "hours_unit", "energy_j", "energy_note"}
    costs: dict[str, Any] | None = None
    # issue 37: {"model", "optimizers": {name: {"link", "seconds_per_step", "step_time_s", "basis", "links"}}}
    bottlenecks: dict[str, Any] | None = None
    # issue 47: {"parameters", "flops_per_token", "flops_basis"}: the model as its workers built it
    model: dict[str, Any] | None = None
    # issue 47: {"unit": "nats per byte" | "nats per token (tokenizer X, vocabulary N)" | ..., "bytes_per_token",
    # "final_val_bits_per_byte": {optimizer: x}}: bits per byte where the text is known, so tokenizers compare
    loss: dict[str, Any] | None = None


__all__ = ["OptimizerSummary", "RunInfo", "Summary"]
