"""The gates of `check` as data (issue 35): one row per threshold check, from which the scenario's `checks`
fields are made (scenario/model.py ChecksSpec), report/check.py judges, the CLI takes each flag's name and
help, and every CheckResult its op and limit. Import-light (no pandas, no pydantic): the CLI reads it at
start-up. docs/ci-gate.md.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Gate:
    """A threshold check declared as data: the scenario's `checks` key and the flag that set its threshold, the
    figure it judges, which way is good, how seeds are paired, and how the figure is shown. The checks below,
    the CLI's help and each CheckResult's op and limit come from this one table."""

    key: str  # checks.<key> in the scenario, and the threshold's name in CheckReport.thresholds
    flag: str
    label: str  # the result's name, "<label> vs <baseline>"
    figure: str  # what is judged, per seed
    op: str  # ">=": the interval's lower end must reach the limit; "<=": its upper end must stay within it
    pairing: str
    fmt: str  # the measured figure, as shown
    help: str
    # What a threshold may be: (pydantic's bound keyword, value), e.g. ("gt", 0) for a factor above zero.
    bound: tuple[str, float] = ("ge", 0)
    # "interval": the relevant end of the paired 95% interval must meet the limit (noise can only fail it);
    # "mean": the paired mean must (issue 49: a regression gate against a reference run, whose tolerance is set
    # from the measured noise so that its false-fail and detection rates are known: docs/ci-gate.md).
    rule: str = "interval"
    against: bool = False  # judged against a reference run (`check --against`), not the run's own baseline

    @property
    def higher_is_better(self) -> bool:
        return self.op == ">="

    def bound_text(self) -> str:
        return f"{'>' if self.bound[0] == 'gt' else '>='} {self.bound[1]:g}"

    def allows(self, value: object) -> bool:
        """Whether `value` may be this gate's threshold (a number within the bound)."""
        if not isinstance(value, (int, float)) or isinstance(value, bool):
            return False
        return value > self.bound[1] if self.bound[0] == "gt" else value >= self.bound[1]

    def schema_text(self) -> str:
        """The scenario key's description: what is judged and which end of the interval must meet it."""
        if self.rule == "mean":
            return f"`check --against` ({self.flag}): {self.figure}; its mean over paired seeds must be {self.op} this"
        end = "lower" if self.higher_is_better else "upper"
        return f"`check` ({self.flag}): {self.figure}; the {end} end of its paired 95% interval must be {self.op} this"

    def threshold_text(self, limit: float) -> str:
        return f"{self.op} {limit:g}" + ("x" if self.fmt.endswith("x") else "")  # a factor reads as one


GATES: dict[str, Gate] = {g.key: g for g in (
    Gate("min_reduction", "--min-reduction", "reduction", "baseline bytes / candidate bytes per worker per step, tx + rx "
         "(wire where both measured it, else payload)", ">=", "per seed, the candidate against the baseline's seed",
         "{:,.1f}x", "candidate must send at least X times fewer bytes than the baseline: the lower end of the "
         "paired 95% interval (default: the scenario's checks.min_reduction)", bound=("gt", 0)),
    Gate("max_loss_gap", "--max-loss-gap", "val loss gap", "val loss at equal time, candidate - baseline", "<=",
         "per seed, the candidate against the baseline's seed", "{:+.4f}",
         "non-inferiority margin: the upper end of the paired 95% interval of (candidate - baseline) val loss at "
         "equal time must be at most Y (default: checks.max_loss_gap)", bound=("ge", 0)),
    Gate("max_reduction_drop", "--max-reduction-drop", "reduction drop", "1 - this run's reduction / the reference "
         "run's (geometric mean over seeds)", "<=", "per seed, this run's seed against the reference run's",
         "{:+.1%}", "with --against: the reduction may fall by at most this fraction of the reference run's "
         "(mean over paired seeds; default: checks.max_reduction_drop)", bound=("ge", 0), rule="mean", against=True),
    Gate("max_loss_regression", "--max-loss-regression", "val loss regression", "(candidate - baseline val loss at "
         "equal time) in this run minus the same in the reference run", "<=",
         "per seed, this run's seed against the reference run's", "{:+.4f}",
         "with --against: the candidate's val loss gap at equal time may grow by at most this many nats over the "
         "reference run's (mean over paired seeds; default: checks.max_loss_regression)", bound=("ge", 0),
         rule="mean", against=True),
)}
# Checks without a threshold: what each must equal.
FIXED: dict[str, tuple[str, object]] = {"run complete": ("==", "complete"), "replicas identical": ("==", True)}


__all__ = ["FIXED", "GATES", "Gate"]
