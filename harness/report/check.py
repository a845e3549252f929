"""The CI gate: a run's reduction factor, loss gap, replica agreement and completeness against thresholds.

Over repeats (several seeds), the reduction and the loss gap are taken seed by seed (candidate against the
baseline's same seed: the same data order), and a check fails only when the 95% Student-t interval of
their mean lies wholly on the wrong side of its threshold; a mean on the wrong side with an interval that
still reaches the threshold is noise and passes, and says so. Every result reports its margin (how far
the mean is from the threshold, positive = room to spare). With one seed the value itself is compared.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from harness.errors import InputError
from harness.fair import t_interval
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
    interval: list[float] | None = None  # 95% interval of the mean over seeds (None: one seed)
    margin: float | None = None  # threshold side minus the mean: > 0 has room, < 0 is beyond the threshold
    seeds: int | None = None


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


def _per_seed(base: dict, cand: dict, fn) -> list:
    """fn(baseline's figures, candidate's figures) for every seed both ran (summary `per_seed`); for a run
    folder from before repeats, of the summaries themselves."""
    bs, cs = base.get("per_seed") or {}, cand.get("per_seed") or {}
    common = [k for k in cs if k in bs]
    return [fn(bs[k], cs[k]) for k in common] if common else [fn(base, cand)]


def _judge(values: list[float], threshold: float, higher_is_better: bool) -> tuple[float, list[float] | None, float, str, str]:
    """(mean, interval, margin, status, note) for values that must be >= (or <=) threshold."""
    mean, lo, hi = t_interval(values)
    n = len(values)
    margin = (mean - threshold) if higher_is_better else (threshold - mean)
    if n < 2:
        ok = margin >= 0
        return mean, None, margin, PASS if ok else FAIL, f"margin {margin:+.4g}"
    # fail only when the whole interval is on the wrong side of the threshold
    ok = hi >= threshold if higher_is_better else lo <= threshold
    note = f"margin {margin:+.4g}; mean of {n} seeds, 95% CI [{lo:.4g}, {hi:.4g}]"
    if ok and margin < 0:
        note += "; the mean misses the threshold but the interval reaches it: within noise"
    return mean, [lo, hi], margin, PASS if ok else FAIL, note


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
            pairs = _per_seed(base_summary, s, _pair_reduction)
            reds = [r for r, _ in pairs if r is not None]
            basis = pairs[0][1] if pairs else "payload"
            if len(reds) < len(pairs) or not reds:
                add(CheckResult(f"reduction vs {base}", cand, None, f">= {min_reduction:g}x", FAIL, "bytes not recorded"))
            else:
                red, ci, margin, status, note = _judge(reds, min_reduction, higher_is_better=True)
                add(CheckResult(f"reduction vs {base}", cand, red, f">= {min_reduction:g}x", status,
                                "; ".join(filter(None, [f"{basis} bytes, tx + rx", note])), ci, margin, len(reds)))
        if max_loss_gap is None:
            add(CheckResult(f"val loss gap vs {base}", cand, None, "not set", SKIP, "no threshold set"))
        elif s is None or base_summary is None:
            add(CheckResult(f"val loss gap vs {base}", cand, None, f"<= {max_loss_gap:g}", FAIL,
                            f"no summary for {cand if s is None else base}: it recorded no step"))
        else:
            key, what = "final_val_loss", "final val loss, candidate - baseline"
            if s.get(key) is None or base_summary.get(key) is None:
                key, what = "final_loss", "no val loss recorded: final training loss, candidate - baseline"

            def gap_of(b: dict, c: dict):
                return c[key] - b[key] if c.get(key) is not None and b.get(key) is not None else None

            gaps = _per_seed(base_summary, s, gap_of)
            if not gaps or any(g is None for g in gaps):
                add(CheckResult(f"val loss gap vs {base}", cand, None, f"<= {max_loss_gap:g}", FAIL, "loss not recorded"))
            else:
                gap, ci, margin, status, note = _judge(gaps, max_loss_gap, higher_is_better=False)
                add(CheckResult(f"val loss gap vs {base}", cand, gap, f"<= {max_loss_gap:g}", status,
                                "; ".join(filter(None, [what, note])), ci, margin, len(gaps)))
    return report
