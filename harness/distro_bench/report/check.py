"""The CI gate: a run's reduction factor, loss gap, replica agreement and completeness against thresholds.

Over repeats (several seeds) each figure is taken seed by seed, the candidate against the baseline's same
seed (the same initial weights and data order: harness/distro_bench/results/stats.py pairs them), and a check passes only when
the paired 95% Student-t interval lies wholly on the good side of its threshold, so more noise makes a check
fail more often and pass wrongly at most 2.5% of the time:

- reduction: the interval's lower end >= `min_reduction`;
- loss gap: a non-inferiority test on the validation loss at equal training time (candidate - baseline),
  the interval's upper end <= the margin `max_loss_gap` (0 asks the candidate to be shown better); it needs
  at least MIN_SEEDS seeds (fewer fail, unless `allow_few_seeds`, which then compares what there is), and
  any seed whose loss is missing or not finite (a diverged run) fails it.

With a reference run (`against_checks`, `check --against`), the candidate's reduction and loss gap are also
compared with the reference's, seed by seed, on the paired mean against a tolerance set from measured noise
(docs/ci-gate.md gives the error rates).

Every result reports its margin (how far the relevant end of the interval is from the threshold, positive
= room to spare). A check whose premise does not hold on the run is NOT APPLICABLE (N/A) with the reason,
not a failure: the loss at equal time compares what each method learns in the same seconds over a slow
network, so over links nothing shaped (the local backend's loopback) it measures this host's compute, not
the method; `strict` makes N/A fail too. docs/ci-gate.md.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from pydantic import ValidationError

from distro_bench.errors import InputError
from distro_bench.report.differences import scenario_differences
from distro_bench.report.load import LoadedRun
from distro_bench.report.verdict import is_post_hoc
from distro_bench.results import stats
from distro_bench.results.figures import Figure, gated, reduction, reduction_basis
from distro_bench.results.summary import OptimizerSummary, Summary
from distro_bench.scenario.gates import FIXED, GATES, Gate
from distro_bench.scenario.model import LinkSpec

MIN_SEEDS = 3  # two seeds give a t interval 12.7 standard errors wide: a gate on it cannot fail or pass honestly
PASS, FAIL, SKIP, NA = "PASS", "FAIL", "SKIP", "N/A"




@dataclass
class CheckResult:
    check: str
    optimizer: str | None
    measured: float | str | bool | None
    threshold: str
    status: str  # PASS | FAIL | SKIP (no threshold given) | N/A (its premise does not hold on this run)
    note: str = ""
    interval: list[float] | None = None  # 95% interval of the mean over seeds (None: one seed)
    margin: float | None = None  # threshold side minus the mean: > 0 has room, < 0 is beyond the threshold
    seeds: int | None = None
    gate: str | None = None  # the GATES key this result judges (None: a fixed check)
    op: str | None = None  # ">=" | "<=" | "==": how `measured` is held to `limit`
    limit: object = None  # the threshold as a value (a number, True, "complete"); None when not set


def measured_text(r: CheckResult) -> str:
    v = r.measured
    if v is None:
        return "n/a"
    if isinstance(v, bool):
        return str(v).lower()
    if isinstance(v, float) and r.gate in GATES:
        return GATES[r.gate].fmt.format(v)
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
    strict: bool = False  # a check that does not apply (N/A) fails too

    @property
    def passed(self) -> bool:
        failing = {FAIL, NA} if self.strict else {FAIL}
        return all(r.status not in failing for r in self.results)

    def to_dict(self) -> dict:
        return {**asdict(self), "passed": self.passed}


def _known(run: LoadedRun) -> list[str]:
    names = list(run.data.scenario.get("optimizers") or {})
    return names + [n for n in run.optimizers if n not in names]


def _per_seed(base: OptimizerSummary, cand: OptimizerSummary, fn) -> list:
    """fn(baseline's figures, candidate's figures) for every seed both ran (summary `per_seed`); for a run
    folder from before repeats, of the summaries themselves."""
    bs, cs = base.per_seed or {}, cand.per_seed or {}
    common = [k for k in cs if k in bs]
    return [fn(bs[k], cs[k]) for k in common] if common else [fn(base, cand)]


def _seeds(base: OptimizerSummary, cand: OptimizerSummary) -> list[str]:
    bs, cs = base.per_seed or {}, cand.per_seed or {}
    common = [k for k in cs if k in bs]
    return common or ["-"]


def _judge(values: list[float], threshold: float, higher_is_better: bool) -> tuple[float, list[float] | None, float, str, str]:
    """(mean, interval, margin, status, note) for paired per-seed values whose mean must be shown >= (or <=)
    the threshold: the whole 95% interval on the good side (one value: the value itself)."""
    iv = stats.t_interval(values)
    assert iv is not None, "_judge takes finite values only"  # both callers filter them
    n = iv.n
    edge = iv.lo if higher_is_better else iv.hi  # the end of the interval nearest the threshold's wrong side
    margin = (edge - threshold) if higher_is_better else (threshold - edge)
    status = PASS if margin >= 0 else FAIL
    if n < 2:
        return iv.mean, None, margin, status, f"margin {margin:+.4g}"
    end = "lower" if higher_is_better else "upper"
    note = f"margin {margin:+.4g} ({end} end); mean of {n} paired seeds, 95% CI [{iv.lo:.4g}, {iv.hi:.4g}]"
    mean_ok = (iv.mean >= threshold) if higher_is_better else (iv.mean <= threshold)
    if status == FAIL and mean_ok:
        note += "; the mean is within the threshold but the interval is not: not shown (more seeds narrow it)"
    return iv.mean, [iv.lo, iv.hi], margin, status, note


def _seed_reductions(base: OptimizerSummary, cand: OptimizerSummary) -> tuple[list[float | None], str]:
    """Each paired seed's reduction (baseline bytes over candidate bytes, tx + rx per worker per step) and the
    one basis they share (results/figures.py reduction_basis: wire where every paired seed of both counted it)."""
    bs, cs = base.per_seed or {}, cand.per_seed or {}
    common = [k for k in cs if k in bs]
    pairs: list[tuple[Any, Any]] = [(bs[k], cs[k]) for k in common] if common else [(base, cand)]
    basis = reduction_basis([b for b, _ in pairs], [c for _, c in pairs])
    return [reduction(b, c, basis) for b, c in pairs], basis


def unshaped_network(run: LoadedRun) -> str | None:
    """Why the loss at equal time has no premise on this run (None when it has one): nothing was emulated
    (the local backend, or a backend that could not shape), or every link of the scenario is unshaped."""
    net = run.data.environment.get("network")
    backend = Summary.model_validate(run.data.summary).run.backend or run.data.environment.get("backend")
    if isinstance(net, dict) and net.get("network_emulated") is False:
        return (f"no network was emulated on this run (backend {backend or 'unknown'}): at equal time the loss "
                "compares the methods over this host's unshaped loopback, where fewer bytes win nothing; run it on "
                "netns or docker")
    links = run.data.scenario.get("links")
    if isinstance(links, dict) and links and not any(_shaped(v) for v in links.values()):
        return "every link of the scenario is unshaped (no rate, delay or loss): at equal time nothing is slow"
    return None


def _shaped(link: object) -> bool:
    """Whether a stored link shapes anything, as the scenario model says (`LinkSpec.shaped`: a rate, any row of the
    impairment table, a schedule or a trace). A link that no longer validates counts as shaped: the gate's
    premise is not taken away on a guess."""
    if not isinstance(link, dict):
        return False
    try:
        return LinkSpec.model_validate(link).shaped
    except ValidationError:
        return True


def run_checks(run: LoadedRun, *, baseline: str | None = None, candidates: list[str] | None = None,
               allow_few_seeds: bool = False, strict: bool = False, against: LoadedRun | None = None,
               **given: float | None) -> CheckReport:
    """Thresholds from the arguments (`given`: a threshold per gate row of scenario/gates.py by its key, e.g.
    `min_reduction=50`), else from the scenario's `checks`; InputError for a name the run lacks.
    `allow_few_seeds` lets the loss gap be judged on fewer than MIN_SEEDS seeds (one seed: its value);
    `strict` fails a check that is not applicable to the run (N/A) instead of passing over it. `against`, a
    reference run of the same scenario (the last good one), adds the regression checks (`against_checks`)."""
    checks = run.data.scenario.get("checks") or {}
    unknown = sorted(set(given) - set(GATES))
    if unknown:
        raise TypeError(f"run_checks: no gate {', '.join(unknown)}; the gates are {', '.join(GATES)}")
    given = {k: given.get(k) for k in GATES}
    for key, value in given.items():  # the scenario's own thresholds were validated when the run was loaded
        if value is not None and not GATES[key].allows(value):
            raise InputError(f"{GATES[key].flag}: must be a number {GATES[key].bound_text()}, got {value!r}")
    thresholds = {k: given[k] if given[k] is not None else checks.get(k) for k in GATES}
    if against is None:  # the regression gates apply only beside a reference run
        thresholds = {k: v for k, v in thresholds.items() if not GATES[k].against}
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

    summary = Summary.model_validate(run.data.summary)  # the typed summary (a model already, or the stored dict)
    summaries = summary.optimizers
    report = CheckReport(run=str(run.data.path), state=run.state, baseline=base, candidates=list(candidates),
                         thresholds=thresholds, notes=list(run.notes),
                         strict=strict)
    target = summary.target
    if is_post_hoc(run.data.summary) and isinstance(target, dict):
        report.notes.append(f"target val loss {target.get('val_loss'):.4g} is post-hoc, descriptive: the worst best "
                            "loss, chosen after seeing the data; no check tests time to it (set "
                            "checks.target_val_loss in advance)")
    no_premise = unshaped_network(run)
    add = report.results.append
    reason = f": {run.reason}" if run.reason else ""
    add(CheckResult("run complete", None, run.state, "complete", PASS if run.state == "complete" else FAIL,
                    "" if run.state == "complete" else f"the run is {run.state}{reason}"))

    for name in [base, *candidates]:
        s = summaries.get(name or "")
        identical = s.replicas_identical if s else None
        note = "" if identical else ("no summary: the optimizer recorded no step" if s is None else
                                     "end-of-run checksums not recorded" if identical is None else
                                     "workers ended with different parameters"
                                     + (f" (diverged at step {s.replicas_diverged_at_step})"
                                        if s.replicas_diverged_at_step is not None else ""))
        add(CheckResult("replicas identical", name, identical, "true", PASS if identical is True else FAIL, note))

    base_summary = summaries.get(base or "")
    own = [(fig, gate) for fig, gate in gated() if not gate.against]  # the gates on the run's own baseline
    if not candidates:
        for _, gate in own:
            if thresholds.get(gate.key) is not None:
                add(CheckResult(f"{gate.label} vs baseline", None, None, str(thresholds[gate.key]), FAIL,
                                f"no candidate optimizer: this run has only the baseline {base}", gate=gate.key))
    for cand in candidates:
        s = summaries.get(cand)
        for fig, gate in own:  # one result per gate row (results/figures.py), judged as its figure pairs
            limit, label = thresholds.get(gate.key), f"{gate.label} vs {base}"
            if limit is None:
                add(CheckResult(label, cand, None, "not set", SKIP, "no threshold set", gate=gate.key))
            elif s is None or base_summary is None or base is None:  # no baseline name: no baseline summary either
                add(CheckResult(label, cand, None, gate.threshold_text(limit), FAIL,
                                f"no summary for {cand if s is None else base}: it recorded no step", gate=gate.key))
            else:
                judge = _JUDGES.get(fig.key) or _paired(fig)
                r = judge(gate, base, cand, base_summary, s, limit, allow_few_seeds)
                if fig.compare == "difference" and no_premise:  # a loss at equal time: measured, for information
                    r.status, r.note = NA, f"not applicable: {no_premise}; measured: {r.note}"
                add(r)
    if against is not None:
        report.results += against_checks(run, against, base, list(candidates), thresholds, no_premise)
    else:
        for key in (k for k, g in GATES.items() if g.against):
            if given[key] is not None:
                raise InputError(f"{GATES[key].flag}: compares with a reference run; give it with --against REF_RUN")
    for r in report.results:  # each result's op and limit, from the gate table (or the fixed checks)
        if r.gate in GATES:
            r.op, r.limit = GATES[r.gate].op, report.thresholds.get(r.gate)
        else:
            r.op, r.limit = FIXED.get(r.check, (None, None))
    return report


def _reduction(gate: Gate, base: str, cand: str, b: OptimizerSummary, c: OptimizerSummary, limit: float,
               allow_few_seeds: bool) -> CheckResult:
    """The reduction, paired by seed on one basis: the lower end of its 95% interval >= the limit."""
    label = f"{gate.label} vs {base}"
    all_reds, basis = _seed_reductions(b, c)
    reds = [r for r in all_reds if r is not None]
    if len(reds) < len(all_reds) or not reds:
        return CheckResult(label, cand, None, gate.threshold_text(limit), FAIL, "bytes not recorded", gate=gate.key)
    red, ci, margin, status, note = _judge(reds, limit, higher_is_better=gate.higher_is_better)
    return CheckResult(label, cand, red, gate.threshold_text(limit), status,
                       "; ".join(filter(None, [f"{basis} bytes, tx + rx", note])), ci, margin, len(reds), gate=gate.key)


def _loss_gap(gate: Gate, base: str, cand: str, b: OptimizerSummary, c: OptimizerSummary, margin: float,
              allow_few_seeds: bool) -> CheckResult:
    """Non-inferiority at equal time: candidate - baseline validation loss, paired by seed, upper end <= margin."""
    label, limit = f"{gate.label} vs {base}", gate.threshold_text(margin)
    key, what = "val_loss_at_equal_time", "val loss at equal time, candidate - baseline"
    if c.get(key) is None and b.get(key) is None and not (c.per_seed or b.per_seed):
        # a run folder from before equal-time figures: its final losses
        key, what = "final_val_loss", "final val loss, candidate - baseline (no equal-time figure recorded)"
        if c.get(key) is None or b.get(key) is None:
            key, what = "final_loss", "no val loss recorded: final training loss, candidate - baseline"
    seeds = _seeds(b, c)
    pairs = _per_seed(b, c, lambda bs, cs: (bs.get(key), cs.get(key)))
    bad = [seed for seed, (x, y) in zip(seeds, pairs) if not (stats.finite(x) and stats.finite(y))]
    if bad:
        return CheckResult(label, cand, None, limit, FAIL,
                           f"{what}: seed(s) {', '.join(bad)} have no finite value (diverged, NaN or not evaluated "
                           "at the equal time); every seed must count", seeds=len(pairs), gate=gate.key)
    gaps = [y - x for x, y in pairs]
    if len(gaps) < MIN_SEEDS and not allow_few_seeds:
        return CheckResult(label, cand, sum(gaps) / len(gaps), limit, FAIL,
                           f"{what}: {len(gaps)} seed(s); the gate needs at least {MIN_SEEDS} paired seeds "
                           "(train.seeds or run --repeat 3), or --allow-few-seeds", seeds=len(gaps), gate=gate.key)
    gap, ci, m, status, note = _judge(gaps, margin, higher_is_better=gate.higher_is_better)
    if len(gaps) < MIN_SEEDS:
        note += f"; only {len(gaps)} seed(s), allowed by --allow-few-seeds"
    return CheckResult(label, cand, gap, limit, status, "; ".join([what, note]), ci, m, len(gaps), gate=gate.key)


Judge = Callable[[Gate, str, str, OptimizerSummary, OptimizerSummary, float, bool], CheckResult]


def _paired(fig: Figure) -> Judge:
    """The judge of a gated figure without one of its own: its value paired by seed as its row compares two
    methods (a ratio: baseline / candidate, or candidate / baseline where higher is better; a difference:
    candidate - baseline), the relevant end of the 95% interval against the limit. So a gate added to a figure
    row is judged with no edit here."""
    def judge(gate: Gate, base: str, cand: str, b: OptimizerSummary, c: OptimizerSummary, limit: float,
              allow_few_seeds: bool) -> CheckResult:
        def paired(bs: Any, cs: Any) -> float | None:
            x, y = bs.get(fig.key), cs.get(fig.key)
            if not (stats.finite(x) and stats.finite(y)):
                return None
            if fig.compare == "difference":
                return float(y - x)
            num, den = (y, x) if fig.better == "higher" else (x, y)
            return float(num / den) if den else None

        label = f"{gate.label} vs {base}"
        values = _per_seed(b, c, paired)
        if not values or any(v is None for v in values):
            return CheckResult(label, cand, None, gate.threshold_text(limit), FAIL,
                               f"{fig.label}: not recorded on every paired seed", seeds=len(values), gate=gate.key)
        mean, ci, margin, status, note = _judge([float(v) for v in values], limit,
                                                higher_is_better=gate.higher_is_better)
        return CheckResult(label, cand, mean, gate.threshold_text(limit), status, f"{fig.label}: {note}", ci,
                           margin, len(values), gate=gate.key)
    return judge




# How each gated figure is judged against the run's own baseline (results/figures.py: the rows' gates).
_JUDGES: dict[str, Judge] = {
    "reduction_vs_baseline": _reduction, "val_loss_at_equal_time": _loss_gap}


# ---- against a reference run (issue 49) -----------------------------------------------------------------

def _seed_figures(summary: Summary, name: str) -> dict:
    s = summary.optimizers.get(name)
    return (s.per_seed if s is not None else None) or {}


def against_checks(run: LoadedRun, ref: LoadedRun, base: str | None, candidates: list[str], thresholds: dict,
                   no_premise: str | None) -> list[CheckResult]:
    """Each candidate of `run` against the same candidate of the reference run, paired by seed: the reduction's
    drop (1 - the geometric mean over seeds of this run's reduction / the reference's) and the loss gap's
    regression (this run's candidate - baseline val loss at equal time minus the reference's, mean over seeds).
    Each fails when its mean passes the tolerance (`Gate.rule` "mean": docs/ci-gate.md gives the tolerances'
    false-fail and detection rates, measured by benchmarks/gate_power.py with the pilot's noise). InputError
    (exit 2) when the two runs are not of one scenario, naming the differences."""
    diffs = scenario_differences(run.data.scenario, ref.data.scenario)
    if diffs:
        shown = "; ".join(diffs[:8]) + (f"; and {len(diffs) - 8} more" if len(diffs) > 8 else "")
        raise InputError(f"--against: {ref.data.path} is not a run of the same scenario ({shown}); compare a run "
                         "with a reference run of the same scenario")
    out: list[CheckResult] = []
    now, then = Summary.model_validate(run.data.summary), Summary.model_validate(ref.data.summary)
    for cand in candidates:
        b_now, c_now = _seed_figures(now, base or ""), _seed_figures(now, cand)
        b_ref, c_ref = _seed_figures(then, base or ""), _seed_figures(then, cand)
        seeds = [k for k in c_now if k in b_now and k in c_ref and k in b_ref]
        for fig, gate in ((f, g) for f, g in gated() if g.against):  # the gate rows against a reference run
            key, limit = gate.key, thresholds.get(gate.key)
            ratio = fig.compare != "difference"  # a ratio (the reduction) or a difference (the loss gap)
            label = f"{gate.label} vs reference"
            if limit is None:
                out.append(CheckResult(label, cand, None, "not set", SKIP, "no threshold set", gate=key))
                continue
            if not seeds:
                out.append(CheckResult(label, cand, None, gate.threshold_text(limit), FAIL,
                                       f"no seed that both runs ran for {cand} and {base}", gate=key))
                continue
            if ratio:
                now_basis = reduction_basis([b_now[k] for k in seeds], [c_now[k] for k in seeds])
                ref_basis = reduction_basis([b_ref[k] for k in seeds], [c_ref[k] for k in seeds])
                pairs = [(reduction(b_now[k], c_now[k], now_basis), reduction(b_ref[k], c_ref[k], ref_basis))
                         for k in seeds]
            else:
                pairs = [(_equal_time_gap(b_now[k], c_now[k]), _equal_time_gap(b_ref[k], c_ref[k])) for k in seeds]
            bad = [k for k, (x, y) in zip(seeds, pairs) if not (stats.finite(x) and stats.finite(y))
                   or (ratio and (x <= 0 or y <= 0))]
            if bad:
                out.append(CheckResult(label, cand, None, gate.threshold_text(limit), FAIL,
                                       f"seed(s) {', '.join(bad)} have no finite figure in one of the runs; every "
                                       "seed must count", seeds=len(seeds), gate=key))
                continue
            good = [(x, y) for x, y in pairs if stats.finite(x) and stats.finite(y)]  # all of them, as `bad` is empty
            out.append(_judge_against(key, cand, good, float(limit)))
            if not ratio and no_premise:  # a loss at equal time: no premise over unshaped links
                r = out[-1]
                r.status, r.note = NA, f"not applicable: {no_premise}; measured: {r.note}"
    return out


def _equal_time_gap(b: dict, c: dict) -> float | None:
    """Candidate - baseline val loss at equal time on one seed (None where either is missing)."""
    x, y = b.get("val_loss_at_equal_time"), c.get("val_loss_at_equal_time")
    return y - x if stats.finite(x) and stats.finite(y) else None


def regression(key: str, pairs: list[tuple[float, float]]) -> tuple[float, stats.Interval]:
    """(the mean regression, its paired 95% interval) from (this run's, the reference's) figure per seed: for the
    reduction, 1 - geometric mean of the ratios (the interval's ends mapped alike); for the loss gap, the mean
    difference."""
    if key == "max_reduction_drop":
        iv = stats.t_interval([math.log(x / y) for x, y in pairs])
        assert iv is not None
        return 1 - math.exp(iv.mean), stats.Interval(1 - math.exp(iv.mean), 1 - math.exp(iv.hi),
                                                     1 - math.exp(iv.lo), iv.n)
    iv = stats.t_interval([x - y for x, y in pairs])
    assert iv is not None
    return iv.mean, iv


def _judge_against(key: str, cand: str, pairs: list[tuple[float, float]], limit: float) -> CheckResult:
    gate = GATES[key]
    mean, iv = regression(key, pairs)
    margin = limit - mean
    status = PASS if margin >= 0 else FAIL
    what = "reduction drop (1 - this run's / the reference's)" if key == "max_reduction_drop" else \
        "val loss gap at equal time, this run's minus the reference's"
    note = f"{what}: mean of {iv.n} paired seed(s) {gate.fmt.format(mean)}, margin {margin:+.4g}"
    if iv.n >= 2:
        note += f"; 95% CI [{gate.fmt.format(iv.lo)}, {gate.fmt.format(iv.hi)}]"
        if status == PASS and iv.lo > 0:
            note += " (worse than the reference beyond noise, within the tolerance)"
    return CheckResult(f"{gate.label} vs reference", cand, mean, gate.threshold_text(limit), status, note,
                       [iv.lo, iv.hi] if iv.n >= 2 else None, margin, iv.n, gate=key)
