"""Byte replay (issue 34, named so in issue 48): a run in which the workers train nothing but send, step by step,
the messages the byte model predicts for the scenario's model and methods (`Strategy.predict_step`), with
synthetic contents, over the scenario's real (emulated) links; the codec is not run on them but timed apart
(on this CPU at run open, or stated) and waited out. "payload = prediction" therefore holds by construction:
what a replay measures is the links, the framing and the collectives' timing, not the method's bytes.

    replay:
      mfu: 0.4                      # compute a step = 6 x parameters x tokens / (profile tflops x mfu)
      fraction: {adamw: 0.0625}     # replay 1/16 of each of AdamW's collectives' bytes (default 1: all of them)
      codec: {distro: measure}      # encode/decode seconds a step: measured on this CPU at run open, or given

Each step a worker waits out the compute its hardware profile gives, then its method's codec time, then issues
the collectives its strategy issues at that step (`Strategy.predict_step`: the same list the byte prediction
reads), as real buffers of those sizes with synthetic contents, through the same `Comm` that counts a training
run's bytes; the wire counters count what crossed the interface. Nothing is trained, so a replay has no loss.

`fraction` exists for a buffer that does not fit the box or its time (AdamW's 2.4 GB of bf16 gradients per worker
at 1.2B): the run says what it replayed, never silently. No torch here: `validate` reads it.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from distro_bench.scenario.units import no_bool_numbers

# Methods whose collectives replay cannot lay out from their byte model alone, and why.
NOT_REPLAYABLE = {
    "noloco": "its gossip groups are drawn afresh each round, which its byte model does not name",
}
MEASURE = "measure"


class ReplaySpec(BaseModel):
    """The `replay:` section: how compute, codec and the bytes replayed are set."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)
    _no_bools = field_validator("mfu", mode="before")(classmethod(no_bool_numbers))
    # Model FLOPs utilisation the profile's peak is taken at (the projection's DEFAULT_MFU).
    mfu: float = Field(default=0.4, gt=0, le=1)
    # Run name -> the share of each of its collectives' bytes replayed (default 1).
    fraction: dict[str, float] = Field(default_factory=dict)
    # Run name -> encode/decode seconds a step: `measure` (timed on this CPU when the run opens, the default) or
    # a figure from elsewhere (a GPU profile's). The run folder's scenario.yaml holds the seconds it used.
    codec: dict[str, float | Literal["measure"]] = Field(default_factory=dict)
    # Whether workers sleep through their compute (the links idle between exchanges as in training, and an
    # overlapped exchange runs during it) or only count it into the step (a long inner loop replayed in seconds).
    wait_compute: bool = True

    @field_validator("fraction")
    @classmethod
    def _fractions(cls, v: dict[str, float]) -> dict[str, float]:
        for name, f in v.items():
            if isinstance(f, bool) or not 0 < f <= 1:
                raise ValueError(f"{name}: {f!r} must be in (0, 1]: the share of each collective's bytes replayed")
        return v

    @field_validator("codec")
    @classmethod
    def _codecs(cls, v: dict[str, float | str]) -> dict[str, float | str]:
        for name, c in v.items():
            if isinstance(c, bool) or (not isinstance(c, str) and not 0 <= c <= 3600):
                raise ValueError(f"{name}: {c!r} must be '{MEASURE}' or seconds a step in [0, 3600]")
        return v

    def fraction_of(self, run_name: str) -> float:
        return self.fraction.get(run_name, 1.0)

    def codec_of(self, run_name: str) -> float | str:
        return self.codec.get(run_name, MEASURE)


WHAT = "byte replay (predicted messages, synthetic contents, the codec timed apart)"


def fraction_words(fractions: dict[str, float]) -> str:
    """'fraction of predicted bytes replayed: adamw 0.0156, distro 1' (each method's, in order)."""
    return "fraction of predicted bytes replayed: " + ", ".join(f"{n} {f:.3g}" for n, f in fractions.items())


def banner(fractions: dict[str, float]) -> str:
    """The line a replay opens with (console) and its report's banner: what it is and how much of it ran."""
    return f"{WHAT}: nothing is trained; {fraction_words(fractions)} (docs/replay.md)"


def replay_problems(spec: ReplaySpec, optimizers: dict[str, str], budget_kind: str, churn: bool,
                    tflops: dict[str, float | None]) -> list[str]:
    """What a replay cannot run, as problem lines: run names it does not know, a method it cannot lay out,
    a budget only training can decide (time, target), churn, hardware without a TFLOPS figure.
    `optimizers`: run name -> type; `tflops`: hardware name -> its profile's TFLOPS."""
    problems = []
    for section, names in (("fraction", spec.fraction), ("codec", spec.codec)):
        for name in names:
            if name not in optimizers:
                problems.append(f"replay.{section}.{name}: not one of the optimizers ({', '.join(sorted(optimizers))})")
    for name, kind in optimizers.items():
        if kind in NOT_REPLAYABLE:
            problems.append(f"optimizers.{name}: {kind} cannot be replayed: {NOT_REPLAYABLE[kind]}")
    if budget_kind not in ("steps", "tokens"):
        problems.append(f"train: a replay runs a number of steps (train.steps or train.tokens), not a {budget_kind} "
                        "budget: it trains nothing, so no loss or training clock can decide its end")
    if churn:
        problems.append("churn: a replay does not take churn (workers that leave and come back); remove one of them")
    for hw, t in tflops.items():
        if not t:
            problems.append(f"hardware.{hw}: a replay takes each step's compute from the profile's tflops, and "
                            f"{hw!r} has none; give tflops (an H100 is 989)")
    return problems
