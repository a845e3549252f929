"""The CI gate: a run's reduction factor, loss gap, replica agreement and completeness against thresholds."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from harness.errors import InputError
from harness.report.analysis import total_bytes
from harness.report.load import LoadedRun

PASS, FAIL, SKIP = "PASS", "FAIL", "SKIP"


@dataclass
class CheckResult:
    check: str
    optimizer: str | None
    measured: float | str | bool | None
    threshold: str
    status: str  # PASS | FAIL | SKIP (no threshold given)
    note: str = ""


def measured_text(r: CheckResult) -> str:
    v = r.measured
    if v is None:
        return "n/a"
    if isinstance(v, bool):
        return str(v).lower()
    if isinstance(v, float) and r.check.startswith("reduction"):
        return f"{v:,.1f}x"
    if isinstance(v, float) and "gap" in r.check:
        return f"{v:+.4f}"
    return str(v)


@dataclass
class CheckReport:
    run: str
    state: str
    baseline: str | None
    candidates: list[str]
    thresholds: dict
    results: list[CheckResult] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return all(r.status != FAIL for r in self.results)

    def to_dict(self) -> dict:
        return {**asdict(self), "passed": self.passed}


def _known(run: LoadedRun) -> list[str]:
    names = list(run.data.scenario.get("optimizers") or {})
    return names + [n for n in run.optimizers if n not in names]


def _pair_reduction(base: dict, cand: dict) -> tuple[float | None, str]:
    """Baseline bytes over candidate bytes (tx + rx per worker per step): wire when both measured it."""
    basis = "wire" if total_bytes(base, "wire") and total_bytes(cand, "wire") else "payload"
    b, c = total_bytes(base, basis), total_bytes(cand, basis)
    return (b / c if b and c else None), basis


def run_checks(run: LoadedRun, *, min_reduction: float | None = None, max_loss_gap: float | None = None,
               baseline: str | None = None, candidates: list[str] | None = None) -> CheckReport:
    """Thresholds from the arguments, else from the scenario's `checks`; InputError for a name the run lacks."""
    checks = run.data.scenario.get("checks") or {}
    if min_reduction is None:
        min_reduction = checks.get("min_reduction")
    if max_loss_gap is None:
        max_loss_gap = checks.get("max_loss_gap")
    for flag, value in (("--min-reduction", min_reduction), ("--max-loss-gap", max_loss_gap)):
        if value is not None and (not isinstance(value, (int, float)) or value < 0):
            raise InputError(f"{flag}: must be a non-negative number, got {value!r}")
    known = _known(run)
    listing = ", ".join(known) or "none"
    if baseline is not None and baseline not in known:
        raise InputError(f"--baseline: {baseline!r} is not an optimizer of this run; it has: {listing}")
    base = baseline or run.baseline
    for c in candidates or []:
        if c not in known:
            raise InputError(f"--candidate: {c!r} is not an optimizer of this run; it has: {listing}")
        if c == base:
            raise InputError(f"--candidate: {c!r} is the baseline; name another optimizer")
    if not candidates:
        default = checks.get("candidate")
        candidates = [default] if default and default != base else [n for n in known if n != base]

    summaries = run.data.summary.get("optimizers", {})
    report = CheckReport(run=str(run.data.path), state=run.state, baseline=base, candidates=list(candidates),
                         thresholds={"min_reduction": min_reduction, "max_loss_gap": max_loss_gap}, notes=list(run.notes))
    add = report.results.append
    reason = f": {run.reason}" if run.reason else ""
    add(CheckResult("run complete", None, run.state, "complete", PASS if run.state == "complete" else FAIL,
                    "" if run.state == "complete" else f"the run is {run.state}{reason}"))

    for name in [base, *candidates]:
        s = summaries.get(name)
        identical = s.get("replicas_identical") if s else None
        note = "" if identical else ("no summary: the optimizer recorded no step" if s is None else
                                     "end-of-run checksums not recorded" if identical is None else
                                     "workers ended with different parameters"
                                     + (f" (diverged at step {s['replicas_diverged_at_step']})"
                                        if s.get("replicas_diverged_at_step") is not None else ""))
        add(CheckResult("replicas identical", name, identical, "true", PASS if identical is True else FAIL, note))

    base_summary = summaries.get(base)
    if not candidates:
        for label, value in (("reduction vs baseline", min_reduction), ("val loss gap vs baseline", max_loss_gap)):
            if value is not None:
                add(CheckResult(label, None, None, str(value), FAIL,
                                f"no candidate optimizer: this run has only the baseline {base}"))
    for cand in candidates:
        s = summaries.get(cand)
        if min_reduction is None:
            add(CheckResult(f"reduction vs {base}", cand, None, "not set", SKIP, "no threshold set"))
        elif s is None or base_summary is None:
            add(CheckResult(f"reduction vs {base}", cand, None, f">= {min_reduction:g}x", FAIL,
                            f"no summary for {cand if s is None else base}: it recorded no step"))
        else:
            red, basis = _pair_reduction(base_summary, s)
            add(CheckResult(f"reduction vs {base}", cand, red, f">= {min_reduction:g}x",
                            PASS if red is not None and red >= min_reduction else FAIL,
                            f"{basis} bytes, tx + rx" if red is not None else "bytes not recorded"))
        if max_loss_gap is None:
            add(CheckResult(f"val loss gap vs {base}", cand, None, "not set", SKIP, "no threshold set"))
        elif s is None or base_summary is None:
            add(CheckResult(f"val loss gap vs {base}", cand, None, f"<= {max_loss_gap:g}", FAIL,
                            f"no summary for {cand if s is None else base}: it recorded no step"))
        else:
            key, note = "final_val_loss", "final val loss, candidate - baseline"
            if s.get(key) is None or base_summary.get(key) is None:
                key, note = "final_loss", "no val loss recorded: final training loss, candidate - baseline"
            a, b = s.get(key), base_summary.get(key)
            gap = a - b if a is not None and b is not None else None
            add(CheckResult(f"val loss gap vs {base}", cand, gap, f"<= {max_loss_gap:g}",
                            PASS if gap is not None and gap <= max_loss_gap else FAIL, note if gap is not None else "loss not recorded"))
    return report
