"""The verdict: one block per optimizer against the baseline, from summary.json alone.

Both the report and the end of `distro-bench run` lead with it. Each side's figure is a mean over seeds with
its 95% interval (`ci95`); every comparison (a loss gap, a speed-up) is paired seed by seed from `per_seed`
(harness/distro_bench/results/stats.py), since seeds share initial weights and data order. A run folder written before those keys
existed still gets a verdict, with "not recorded" where a figure is missing (and unpaired intervals). Nothing here imports torch or
matplotlib: the CLI prints `verdict_lines(summary)` as it is.
"""

from __future__ import annotations

import math
import textwrap
from dataclasses import dataclass, field

from distro_bench.results import cost as _cost
from distro_bench.results.figures import reduction, reduction_basis, total_bytes
from distro_bench.results.format import fmt_bytes
from distro_bench.results.stats import (
    Interval,
    RestrictedTime,
    paired_difference,
    ratio_interval,
    restricted_speedup,
    restricted_time,
    restriction_s,
)
from distro_bench.results.summary import Summary, verdict_figures

WIDTH = 80  # the block `run` prints fits an 80-column terminal or log


@dataclass(frozen=True)
class Estimate:
    """A mean with an optional 95% half-width (None for one seed, or when the summary has no interval)."""

    mean: float | None
    half: float | None = None
    bounds: tuple[float, float] | None = None  # an interval cut to what is possible (0 s .. the budget)
    prefix: str = ""  # a sign before the figure (no longer used for times: their interval carries the censoring)

    @property
    def known(self) -> bool:
        return self.mean is not None and not math.isnan(self.mean)

    def text(self, unit: str = "", digits: int = 3) -> str:
        if self.mean is None or not self.known:
            return "n/a"
        if self.half is None or self.half == 0:
            return self.prefix + _num(self.mean, digits) + unit
        m, h = _round_pair(self.mean, self.half)
        if self.bounds is not None:
            lo, hi = (_round_pair(b, self.half)[0] for b in self.bounds)
            return f"{self.prefix}{m}{unit} [{lo}, {hi}]"
        return f"{self.prefix}{m} ± {h}{unit}"

    def within(self, lo: float, hi: float) -> Estimate:
        """This estimate with its interval cut to [lo, hi] (shown as [a, b] once cut)."""
        if self.mean is None or not self.known or not self.half or (self.mean - self.half >= lo and self.mean + self.half <= hi):
            return self
        return Estimate(self.mean, self.half, (max(lo, self.mean - self.half), min(hi, self.mean + self.half)),
                        self.prefix)


@dataclass
class Verdict:
    optimizer: str
    baseline: str
    seeds: int | None
    target: float | None
    target_how: str | None
    step_time: Estimate
    base_step_time: Estimate
    time_to_target: Estimate
    base_time_to_target: Estimate
    reached: bool | None  # None: the run folder does not record time to target
    base_reached: bool | None
    loss_equal_time: Estimate
    base_loss_equal_time: Estimate
    loss_equal_steps: Estimate
    base_loss_equal_steps: Estimate
    bytes_ratio: float | None  # baseline bytes / this optimizer's (tx + rx per worker per step)
    bytes_basis: str | None
    reached_seeds: int | None = None  # how many seeds reached the target (summary `target_reached`)
    base_reached_seeds: int | None = None
    notes: list[str] = field(default_factory=list)
    # Paired over seeds (harness/distro_bench/results/stats.py; None for one seed or a folder without `per_seed`): differences
    # candidate - baseline seed by seed, speed-ups as baseline / candidate on the log scale.
    paired_equal_time: Interval | None = None
    paired_equal_steps: Interval | None = None
    paired_step_speedup: Interval | None = None
    paired_target_speedup: Interval | None = None
    # Times to target are restricted means to `tau` (harness/distro_bench/results/stats.py RestrictedTime): a seed that
    # missed counts exactly tau; every crossing is interval-censored between two of the method's evaluations.
    tau: float | None = None
    restricted: RestrictedTime | None = None
    base_restricted: RestrictedTime | None = None
    speedup_why: str | None = None  # why there is no time-to-target speed-up ("not estimable: ...")
    post_hoc: bool = False  # the target was chosen after seeing the data (the worst best): descriptive only
    # Issue 49: which side's restricted time is a bound because it missed the target on some seed (counted at
    # tau, right-censored): "base" (the speed-up is at least the ratio), "mine" (at most), "both" (a ratio of
    # restricted means, named as such), None (no side missed).
    capped: str | None = None
    bytes_per_step: float | None = None  # tx + rx per worker per step on `bytes_basis`
    base_bytes_per_step: float | None = None
    steps: Estimate = field(default_factory=lambda: Estimate(None))  # mean steps per seed
    base_steps: Estimate = field(default_factory=lambda: Estimate(None))
    # Cost to the target (issue 29, report/cost.py): None without `costs` in the summary or without a target.
    cost: _cost.CostSide | None = None
    base_cost: _cost.CostSide | None = None
    cost_ratio: Interval | None = None  # paired baseline / this optimizer's cost (dollars where priced, else hours)
    cost_unit: str = "GPU-h"
    # Issue 37: useful model FLOPs per training second (6 x parameters per token that reached the shared model),
    # in all, and its share of the workers' peak where every worker ran on a profile's GPU.
    goodput: Estimate = field(default_factory=lambda: Estimate(None))
    base_goodput: Estimate = field(default_factory=lambda: Estimate(None))
    goodput_of_peak: float | None = None
    base_goodput_of_peak: float | None = None
    paired_goodput: Interval | None = None  # paired this / baseline

    @property
    def missing(self) -> str:
        """A figure the summary lacks: an old folder never recorded it; a new one had no evaluation to use."""
        return "not recorded" if self.reached is None else "n/a"

    @property
    def step_speedup(self) -> float | None:
        """Baseline step time / this optimizer's: above 1, this optimizer's steps are quicker."""
        if self.paired_step_speedup is not None:
            return self.paired_step_speedup.mean
        return _ratio(self.base_step_time.mean, self.step_time.mean)

    @property
    def target_speedup(self) -> float | None:
        """Baseline / this optimizer's (restricted) time to target; None when post-hoc or not estimable."""
        if self.post_hoc or self.speedup_why:
            return None
        if self.paired_target_speedup is not None:
            return self.paired_target_speedup.mean
        if not (self.reached and self.base_reached):
            return None
        return _ratio(self.base_time_to_target.mean, self.time_to_target.mean)

    @property
    def loss_diff_equal_time(self) -> Estimate:
        return _paired_or_diff(self.paired_equal_time, self.loss_equal_time, self.base_loss_equal_time)

    @property
    def loss_diff_equal_steps(self) -> Estimate:
        return _paired_or_diff(self.paired_equal_steps, self.loss_equal_steps, self.base_loss_equal_steps)


# ---- number formatting -------------------------------------------------------------------------------

def _num(x: float, digits: int = 3) -> str:
    if x == 0:
        return "0"
    if abs(x) >= 10 ** digits:
        return f"{x:,.0f}"
    return f"{x:.{digits}g}"


def _round_pair(mean: float, half: float) -> tuple[str, str]:
    """The half-width to one significant digit (two when it starts with a 1), the mean to the same place:
    19 ± 2, 0.41 ± 0.05, 2.63 ± 0.14."""
    if half <= 0 or math.isnan(half):
        return _num(mean), "0"
    exp = math.floor(math.log10(half))
    decimals = -exp + (1 if half / 10 ** exp < 1.95 else 0)
    if decimals > 0:
        return f"{mean:.{decimals}f}", f"{half:.{decimals}f}"
    scale = 10 ** (-decimals)
    return f"{round(mean / scale) * scale:,.0f}", f"{round(half / scale) * scale:,.0f}"


def _ratio(a, b) -> float | None:
    if a is None or b is None or not b or math.isnan(a) or math.isnan(b):
        return None
    return a / b


def _factor(x: float) -> str:
    return f"{x:,.0f}x" if x >= 10 else f"{x:.1f}x"


def _paired_or_diff(p: Interval | None, a: Estimate, b: Estimate) -> Estimate:
    """The paired difference where the summary has each seed's figures, else the unpaired `_diff`."""
    if p is not None and p.n >= 2:
        return Estimate(p.mean, p.half)
    return _diff(a, b)


def _diff(a: Estimate, b: Estimate) -> Estimate:
    """a - b for a folder without per-seed figures: the half-widths add in quadrature (the two sides treated
    as independent, which overstates the noise of paired seeds; harness/distro_bench/results/stats.py)."""
    if a.mean is None or b.mean is None or not (a.known and b.known):
        return Estimate(None)
    half = None
    if a.half is not None or b.half is not None:
        half = math.hypot(a.half or 0.0, b.half or 0.0)
    return Estimate(a.mean - b.mean, half)


# ---- reading the summary --------------------------------------------------------------------------

def _estimate(s: dict, key: str) -> Estimate:
    v = s.get(key)
    if v is None or isinstance(v, bool) or not isinstance(v, (int, float)):
        return Estimate(None)
    ci = (s.get("ci95") or {}).get(key)
    half = None
    if isinstance(ci, (list, tuple)) and len(ci) == 2 and all(isinstance(c, (int, float)) for c in ci):
        half = (float(ci[1]) - float(ci[0])) / 2
    return Estimate(float(v), half)


def _reached(s: dict) -> bool | None:
    if "time_to_target_s" not in s:
        return None
    return s.get("time_to_target_s") is not None


def _count(v) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def _bytes(base: dict, cand: dict) -> tuple[float | None, str | None]:
    """The reduction and its basis (results/figures.py's one rule; a mean over seeds has wire bytes only where
    every seed counted them)."""
    basis = reduction_basis([base], [cand])
    r = reduction(base, cand, basis)
    if r:
        return r, basis
    red = cand.get("reduction_vs_baseline")
    return (float(red), cand.get("reduction_basis")) if red else (None, None)


def _seed_map(s: dict, key: str) -> dict:
    """{seed: figure} from the summary's `per_seed` (empty for a folder without it)."""
    return {k: v.get(key) for k, v in (s.get("per_seed") or {}).items() if isinstance(v, dict)}


def _paired(p: Interval | None) -> Interval | None:
    return p if p is not None and p.n >= 2 else None


def _missed(s: dict) -> int:
    return sum(1 for v in (s.get("per_seed") or {}).values() if v.get("time_to_target_s") is None)


def _time_budget(summary: dict) -> float | None:
    b = (summary.get("run") or {}).get("budget") or {}
    if isinstance(b, dict) and b.get("kind") == "time" and isinstance(b.get("value"), (int, float)):
        return float(b["value"])
    cap = b.get("cap") if isinstance(b, dict) else None
    if isinstance(cap, dict) and cap.get("kind") == "time" and isinstance(cap.get("value"), (int, float)):
        return float(cap["value"])
    return None


def is_post_hoc(summary: dict) -> bool:
    """The comparison's target was chosen after seeing the data (the worst best validation loss)."""
    t = summary.get("target")
    if not isinstance(t, dict) or t.get("val_loss") is None:
        return False
    return bool(t.get("post_hoc"))  # an older folder's summary gained the flag when read (results/summary.py MIGRATIONS)


def restricted_estimate(r: RestrictedTime | None) -> Estimate:
    """A restricted mean as the verdict shows it: 'mean [lo, hi]' within [0, tau], the interval carrying the
    seeds' spread and each crossing's censoring between two evaluations (results/stats.py RestrictedTime)."""
    if r is None:
        return Estimate(None)
    iv = r.interval
    if iv.hi - iv.lo <= 0:
        return Estimate(iv.mean)
    return Estimate(iv.mean, (iv.hi - iv.lo) / 2, (iv.lo, iv.hi))


def _budget_cap(summary: dict, *sides: dict) -> float:
    """The most training seconds any seed could have spent: the time budget, else the longest seed's."""
    budget = _time_budget(summary)
    if budget is not None:
        return budget
    times = [v.get("train_time_s") for s in sides for v in (s.get("per_seed") or {}).values()]
    times = [t for t in times if isinstance(t, (int, float))]
    return max(times) if times else math.inf


def verdicts(summary: dict) -> list[Verdict]:
    """One verdict per optimizer other than the baseline, in the summary's order."""
    opts = summary.get("optimizers") or {}
    base_name = summary.get("baseline")
    base = opts.get(base_name)
    if base is None or base_name is None:
        return []
    target = summary.get("target") or {}
    t_val = target.get("val_loss") if isinstance(target, dict) else None
    out = []
    for name, s in opts.items():
        if name == base_name or not isinstance(s, dict):
            continue
        ratio, basis = _bytes(base, s)
        seeds = s.get("seeds")
        cap = _budget_cap(summary, s, base)
        v = Verdict(
            optimizer=name, baseline=base_name, seeds=int(seeds) if isinstance(seeds, int) else None,
            target=float(t_val) if isinstance(t_val, (int, float)) else None,
            target_how=target.get("how") if isinstance(target, dict) and isinstance(target.get("how"), str) else None,
            step_time=_estimate(s, "step_time_s_mean"), base_step_time=_estimate(base, "step_time_s_mean"),
            time_to_target=_estimate(s, "time_to_target_s").within(0.0, cap),
            base_time_to_target=_estimate(base, "time_to_target_s").within(0.0, cap),
            reached=_reached(s), base_reached=_reached(base),
            loss_equal_time=_estimate(s, "val_loss_at_equal_time"),
            base_loss_equal_time=_estimate(base, "val_loss_at_equal_time"),
            loss_equal_steps=_estimate(s, "val_loss_at_equal_steps"),
            base_loss_equal_steps=_estimate(base, "val_loss_at_equal_steps"),
            bytes_ratio=ratio, bytes_basis=basis,
            reached_seeds=_count(s.get("target_reached")), base_reached_seeds=_count(base.get("target_reached")))
        v.paired_equal_time = _paired(paired_difference(_seed_map(s, "val_loss_at_equal_time"),
                                                        _seed_map(base, "val_loss_at_equal_time")))
        v.paired_equal_steps = _paired(paired_difference(_seed_map(s, "val_loss_at_equal_steps"),
                                                         _seed_map(base, "val_loss_at_equal_steps")))
        v.paired_step_speedup = _paired(ratio_interval(_seed_map(base, "step_time_s_mean"),
                                                       _seed_map(s, "step_time_s_mean")))
        v.goodput, v.base_goodput = _estimate(s, "goodput_model_flops_per_s"), _estimate(base, "goodput_model_flops_per_s")
        v.goodput_of_peak, v.base_goodput_of_peak = s.get("goodput_of_peak"), base.get("goodput_of_peak")
        v.paired_goodput = _paired(ratio_interval(_seed_map(s, "goodput_model_flops_per_s"),
                                                  _seed_map(base, "goodput_model_flops_per_s")))
        v.post_hoc = is_post_hoc(summary)
        mine_seeds, base_seeds = s.get("per_seed") or {}, base.get("per_seed") or {}
        if mine_seeds and base_seeds and v.reached is not None:
            v.tau = restriction_s([mine_seeds, base_seeds], _time_budget(summary))
            v.restricted, v.base_restricted = restricted_time(mine_seeds, v.tau), restricted_time(base_seeds, v.tau)
            if v.restricted is not None:
                v.time_to_target = restricted_estimate(v.restricted)
            if v.base_restricted is not None:
                v.base_time_to_target = restricted_estimate(v.base_restricted)
            if (v.reached_seeds or 0) + (v.base_reached_seeds or 0) > 0 or v.reached or v.base_reached:
                iv, why = restricted_speedup(base_seeds, mine_seeds, v.tau)
                v.paired_target_speedup, v.speedup_why = _paired(iv), why
            mine_missed = bool(v.restricted and v.restricted.missed)
            base_missed = bool(v.base_restricted and v.base_restricted.missed)
            v.capped = ("both" if mine_missed and base_missed else "mine" if mine_missed else
                        "base" if base_missed else None)
        if v.post_hoc:
            v.paired_target_speedup = None
        if basis:
            v.bytes_per_step, v.base_bytes_per_step = total_bytes(s, basis), total_bytes(base, basis)
        v.steps, v.base_steps = _estimate(s, "steps"), _estimate(base, "steps")
        _add_cost(v, summary)
        if v.reached is None:
            v.notes.append("time to target not recorded (run folder from before issue 16)")
        if not v.loss_equal_time.known and "val_loss_at_equal_time" not in s:
            v.notes.append("loss at equal time not recorded")
        if v.target_how and "seed overlap, labelled" in v.target_how:  # issue 49: said wherever the verdict is
            v.notes.append("target: " + v.target_how)
        if v.post_hoc and v.target is not None:
            v.notes.append(f"post-hoc, descriptive: the target val loss {v.target:.4g} is the worst best loss, chosen "
                           "after seeing the data, so times to it describe this run and no speed-up interval is "
                           "given; set checks.target_val_loss in advance (e.g. from a pilot run) to test one")
        missed = (v.restricted.missed if v.restricted else 0) + (v.base_restricted.missed if v.base_restricted else 0)
        if missed and v.tau is not None:
            v.notes.append(f"seeds that reached the target: {v.optimizer} {v.reached_seeds or 0}/{v.seeds}, "
                           f"{v.baseline} {v.base_reached_seeds or 0}/{v.seeds}; times to target are restricted "
                           f"means to {_num(v.tau)} s (a seed that missed counts {_num(v.tau)} s), intervals within "
                           f"[0, {_num(v.tau)}] s")
        if v.capped and v.paired_target_speedup is not None and not v.post_hoc:
            words = {"base": f"{v.baseline} missed the target on some seed and counts {_num(v.tau or 0)} s there "
                             "(right-censored: its true time is later), so the speed-up is at least the figure shown",
                     "mine": f"{v.optimizer} missed the target on some seed and counts {_num(v.tau or 0)} s there "
                             "(right-censored), so the speed-up is at most the figure shown",
                     "both": f"both missed the target on some seed: the comparison is of restricted means to "
                             f"{_num(v.tau or 0)} s (E[min(T, {_num(v.tau or 0)} s)]), not of times to target"}
            v.notes.append(words[v.capped] + " (the bound is the paired 95% interval's end)")
        if v.speedup_why and not v.post_hoc:
            v.notes.append(f"time-to-target speed-up not estimable: {v.speedup_why}")
        if v.restricted is not None and v.base_restricted is not None and not v.post_hoc \
                and (v.restricted.censored or v.base_restricted.censored):
            v.notes.append("times to target are read on each method's own evaluations: a crossing lies between the "
                           "last evaluation above the target and the first at or below it (interval-censored), "
                           "estimated by linear interpolation between them; each interval spans the lower bounds' "
                           "95% lower end to the upper bounds' upper end; the speed-up is the geometric mean of "
                           "the per-seed ratios (baseline / this optimizer)")
        out.append(v)
    return out


def _add_cost(v: Verdict, summary: dict) -> None:
    """The cost-to-target figures and their note (nothing when the summary has no `costs` or no target)."""
    mine, base = _cost.side(summary, v.optimizer), _cost.side(summary, v.baseline)
    if mine is None or base is None:
        return
    costs = summary["costs"]
    v.cost, v.base_cost = mine, base
    v.cost_ratio = None if v.post_hoc else _cost.paired_ratio(base, mine)  # descriptive only on a post-hoc target
    v.cost_unit = costs.get("hours_unit") or "GPU-h"
    price, gpu = costs.get("egress_usd_per_gb"), costs.get("gpu_usd_per_hour")
    basis = _cost.BASIS_WORDS.get(costs.get("bytes_basis") or "", "payload bytes sent")
    classes = costs.get("class_usd_per_gb") or {}
    priced = (f", at ${price:g}/GB on every link" if isinstance(price, (int, float))
              else ", priced by link class (" + ", ".join(f"{c} ${p:g}/GB" for c, p in classes.items()) + ")"
              if classes else " (not priced)")
    words = [f"egress = {basis} per worker x steps to target x workers" + priced]
    unit = "worker-hours on CPU" if v.cost_unit == "CPU-h" else "workers x GPUs per worker x hours"
    words.append(f"{v.cost_unit} = {unit} to target" + (f" at ${gpu:g}/h" if isinstance(gpu, (int, float)) else ""))
    if not _cost.one_currency(base, mine):
        words.append(f"egress and {v.cost_unit} compared apart: no single price covers both")
    if costs.get("energy_j") is None and costs.get("energy_note"):
        words.append(f"energy {costs['energy_note']}")
    v.notes.append("cost to target: " + "; ".join(words))


def _apart(v: Verdict, mine: _cost.CostSide, base: _cost.CostSide) -> str:
    """Egress bytes and hours, each as its own factor."""
    capped = ("both" if mine.capped and base.capped else "mine" if mine.capped else "base" if base.capped
              else None)
    parts = []
    for x, fewer, more in ((_ratio(base.egress_bytes, mine.egress_bytes), "less egress", "more egress"),
                           (_ratio(base.hours, mine.hours), f"fewer {v.cost_unit}", f"more {v.cost_unit}")):
        if not x:
            parts.append("n/a")
        elif 0.95 <= x <= 1.05:
            parts.append(f"same {more.split()[-1]}")
        else:
            parts.append(f"{_bound(capped, x < 1)}{_factor(x if x >= 1 else 1 / x)} {fewer if x >= 1 else more}")
    return ", ".join(parts)


def _money(x: float) -> str:
    """Two significant digits, never in e-notation ($0.000023, $0.018, $1.50, $120)."""
    if x >= 100 or x <= 0:
        return f"${x:,.0f}"
    return f"${x:.{max(2, 1 - math.floor(math.log10(x)))}f}"


def cost_label(v: Verdict) -> str:
    """'cost to target $, CPU-h': the units live in the label so each side stays as narrow as a step time."""
    priced = (v.cost is not None and v.cost.usd is not None and v.base_cost is not None
              and v.base_cost.usd is not None)
    return f"cost to target {'$, ' if priced else ''}{v.cost_unit}"


def cost_text(c: _cost.CostSide | None, priced: bool = True) -> str:
    """'$0.018, 0.11' (dollars where priced, then worker-hours); '>=' when a seed missed and counts at its
    whole run (a lower bound)."""
    if c is None:
        return "n/a"
    pre = ">=" if c.capped else ""
    hours = f"{c.hours:.2g}"
    return f"{pre}{_money(c.usd)}, {hours}" if priced and c.usd is not None else f"{pre}{hours}"


def cost_comparison(v: Verdict) -> str:
    """'98x cheaper [90, 107]' on dollars where they price both the bytes and the hours; else the two apart,
    '40x less egress, 2.5x fewer CPU-h' (a bytes win is not a verdict when the hours went the other way)."""
    mine, base = v.cost, v.base_cost
    if mine is None or base is None:
        return "n/a"
    if v.post_hoc:  # a cost to a target chosen after the data: descriptive, as its time is
        return "post-hoc target: descriptive"
    if not _cost.one_currency(base, mine):
        return _apart(v, mine, base)
    key = "usd"
    x = v.cost_ratio.mean if v.cost_ratio is not None else _ratio(getattr(base, key), getattr(mine, key))
    if not x:
        return "n/a"
    capped = ("both" if mine.capped and base.capped else "mine" if mine.capped else "base" if base.capped
              else None)
    b = _bound(capped, x < 0.95)
    what = "cheaper" if key == "usd" else "fewer hours"
    if 0.95 <= x <= 1.05:
        return f"about the same ({b}{_factor(x)}{_range(v.cost_ratio)})"
    word = what if x >= 1 else "dearer" if key == "usd" else "more hours"
    return f"{b}{_factor(x if x >= 1 else 1 / x)} {word}" + _range(v.cost_ratio, x < 1)


# ---- words -----------------------------------------------------------------------------------------

def _lower_higher(d: Estimate) -> str:
    """'0.41 ± 0.05 lower' / '0.59 higher'; an interval that spans zero is called within noise."""
    if d.mean is None or not d.known:
        return "n/a"
    mag = Estimate(abs(d.mean), d.half)
    word = "lower" if d.mean < 0 else "higher" if d.mean > 0 else "the same"
    text = f"{mag.text()} {word}" if d.mean else "the same"
    if d.half is not None and abs(d.mean) <= d.half:
        text += " (within noise)"
    return text


def _range(iv: Interval | None, invert: bool = False) -> str:
    """' [2.3, 2.9]' for a ratio's paired interval; ' [0.9, 1.2], within noise' when it holds 1. `invert`
    gives the interval of 1/ratio, beside words that name the slower side ("1.7x later")."""
    if iv is None or iv.half is None:
        return ""
    if invert and iv.lo > 0:
        iv = type(iv)(1 / iv.mean, 1 / iv.hi, 1 / iv.lo, iv.n)  # still a ratio: noise when it holds 1
    def f(x: float) -> str:
        return f"{x:.2f}" if x < 1 else f"{x:.1f}" if x < 10 else f"{x:,.0f}"

    return f" [{f(iv.lo)}, {f(iv.hi)}]" + (", within noise" if iv.spans else "")


def _bound(capped: str | None, later: bool = False) -> str:
    """The sign a budget-capped speed-up carries; flipped when the words give its inverse ("2x later")."""
    if later:
        capped = {"base": "mine", "mine": "base"}.get(capped or "", capped)
    return {"base": ">=", "mine": "<="}.get(capped or "", "~" if capped else "")


def _bound_kind(v: Verdict, iv: Interval) -> str | None:
    """'at least' when the speed-up is only bounded below (the baseline missed the target on some seed and is
    counted at tau, or the interval's upper end is unbounded), 'at most' when only bounded above (this
    optimizer missed), 'restricted' when both missed (a ratio of restricted means), None when two-sided."""
    if v.capped == "both":
        return "restricted"
    if v.capped == "base" or (v.capped is None and math.isinf(iv.hi)):
        return "at least"
    if v.capped == "mine" or (v.capped is None and iv.lo <= 0):
        return "at most"
    return None


def _missed_words(v: Verdict, side: str) -> str:
    r, name = (v.base_restricted, v.baseline) if side == "base" else (v.restricted, v.optimizer)
    missed = r.missed if r is not None else 0
    n = r.n if r is not None else v.seeds
    return f"{name} not reached in {_num(v.tau or 0)} s on {missed} of {n} seeds"


def speedup_text(v: Verdict, brackets: bool = False, short: bool = False) -> str:
    """The time-to-target comparison in words: 'N.Nx sooner [lo, hi]' (two-sided); a bound where a side is
    censored: 'at least 2.1x sooner (adamw not reached in 60 s on 3 of 3 seeds)', 'at least 1.4x later (...)',
    'at most 1.3x sooner (...)'; where both missed on some seed, 'ratio of restricted means to 60 s: 1.2x
    sooner [0.9, 1.6]'. `short` leaves out the parenthesis (the block's table; its note says it). Every ratio
    is the geometric mean of per-seed ratios; a bound is the paired 95% interval's end."""
    iv, x = v.paired_target_speedup, v.target_speedup
    if iv is None or x is None:
        return "n/a" if x is None else _sooner(x)
    kind = _bound_kind(v, iv)

    def why(side: str) -> str:
        if short:
            return ""
        if v.capped == side:
            return f" ({_missed_words(v, side)})"
        return (" (a crossing before its first evaluation: no upper bound)" if side == "base" else
                " (the baseline crossed before its first evaluation: no lower bound)")

    if kind == "at least":  # the true speed-up is at least the interval's lower end
        if iv.lo >= 1:
            return f"at least {_factor(iv.lo)} sooner{why('base')}"
        return (f"not shown sooner (at least {_factor(iv.lo)}){why('base')}" if iv.lo > 0 else
                f"not estimable{why('base')}")
    if kind == "at most":  # the true speed-up is at most the interval's upper end
        if iv.hi < 1:
            return f"at least {_factor(1 / iv.hi)} later{why('mine')}"
        return (f"at most {_factor(iv.hi)} sooner{why('mine')}" if math.isfinite(iv.hi) else
                f"not estimable{why('mine')}")
    words = _sooner(x, iv) if not brackets else (
        (f"{_factor(x)} sooner" if x >= 1 else f"{_factor(1 / x)} later") + " " +
        _interval_words(iv if x >= 1 else type(iv)(1 / iv.mean, 1 / iv.hi, 1 / iv.lo, iv.n)))
    if kind == "restricted":
        if short:
            return f"restricted means: {words}"
        return (f"ratio of restricted means to {_num(v.tau or 0)} s: {words} (both missed the target on some "
                "seed, counted at that horizon)")
    return words


def _sooner(x: float, iv: Interval | None = None, capped: str | None = None) -> str:
    b = _bound(capped, x < 0.95)
    if 0.95 <= x <= 1.05:
        return f"about as soon ({b}{_factor(x)}{_range(iv)})"
    return (f"{b}{_factor(x)} sooner" if x >= 1 else f"{b}{_factor(1 / x)} later") + _range(iv, x < 1)


def _faster(x: float, iv: Interval | None = None) -> str:
    if 0.95 <= x <= 1.05:
        return f"about as fast ({_factor(x)}{_range(iv)})"
    return (f"{_factor(x)} faster" if x >= 1 else f"{_factor(1 / x)} slower") + _range(iv, x < 1)


def _partly(k: int | None, n: int | None) -> str:
    """' (reached in 2 of 3 seeds)' when some seeds reached the target but not all (so no mean time)."""
    return f" in every seed (only {k} of {n} did)" if k and n and 0 < k < n else ""


def _target_words(v: Verdict) -> str:
    t = f"val loss {v.target:.3g}" if v.target is not None else "the target loss"
    return f"the post-hoc target {t} (descriptive)" if v.post_hoc else t


def _speedup_words(v: Verdict) -> str:
    """', 2.6x sooner than adamw ([2.3, 2.9])' or '' when there is none to give."""
    x, iv = v.target_speedup, v.paired_target_speedup
    if not x:
        return ""
    if iv is not None and _bound_kind(v, iv) is not None:
        return f" ({speedup_text(v)} than {v.baseline})"
    if 0.95 <= x <= 1.05:
        return f", about as soon as {v.baseline} ({_factor(x)}{_range(iv)})"
    return (f", {_factor(x if x >= 1 else 1 / x)} {'sooner' if x >= 1 else 'later'} than {v.baseline}"
            + (f" ({_range(iv, x < 1).strip()})" if _range(iv) else ""))


def _target_clause(v: Verdict) -> str | None:
    t = _target_words(v)
    if v.reached is None:
        return None
    restricted = v.tau is not None and ((v.restricted is not None and v.restricted.missed)
                                        or (v.base_restricted is not None and v.base_restricted.missed))
    if not v.reached:
        t += _partly(v.reached_seeds, v.seeds)
        if restricted and v.target_speedup:  # a restricted mean compares even with misses
            return (f"did not reach {t}; its time restricted to {_num(v.tau or 0)} s was "
                    f"{v.time_to_target.text(' s')}" + _speedup_words(v))
        if v.base_reached:
            return f"did not reach {t} (which {v.baseline} reached in {v.base_time_to_target.text(' s')})"
        return f"did not reach {t}, nor did {v.baseline}"
    clause = f"reached {t} in {v.time_to_target.text(' s')}"
    if v.target_speedup:
        clause += (f" (restricted to {_num(v.tau or 0)} s)" if restricted else "") + _speedup_words(v)
    elif v.base_reached is False:
        clause += f", which {v.baseline} did not reach"
    return clause


def _bytes_words(v: Verdict) -> str | None:
    if not v.bytes_ratio:
        return None
    r = v.bytes_ratio
    return f"{_factor(r)} fewer bytes" if r >= 1 else f"{_factor(1 / r)} more bytes"


def sentence(v: Verdict, scenario: str | None = None) -> str:
    """'On home-dsl, distro reached val loss 2.75 in 19 ± 2 s, 2.6x sooner than adamw, with 565x fewer bytes;
    at equal time its loss was 0.41 ± 0.05 lower.'"""
    head = f"On {scenario}, {v.optimizer} " if scenario else f"{v.optimizer} "
    parts = []
    target = _target_clause(v)
    bytes_words = _bytes_words(v)
    if target:
        parts.append(head + target + (f", with {bytes_words}" if bytes_words else ""))
    elif v.step_speedup:
        faster = v.step_speedup
        step = (f"{_factor(faster)} faster" if faster > 1.05 else f"{_factor(1 / faster)} slower" if faster < 0.95
                else "about as fast") + _range(v.paired_step_speedup, faster < 0.95)
        parts.append(head + f"ran steps {step} than {v.baseline}" + (f" with {bytes_words}" if bytes_words else ""))
    elif bytes_words:
        parts.append(head + f"exchanged {bytes_words} than {v.baseline}")
    else:
        parts.append(head + f"has no figures to compare with {v.baseline}")
    if v.loss_diff_equal_time.known:
        parts.append(f"at equal time its loss was {_lower_higher(v.loss_diff_equal_time)}")
    if v.loss_diff_equal_steps.known:
        parts.append(f"at equal steps {_lower_higher(v.loss_diff_equal_steps)}")
    return "; ".join(parts) + "."


def rows(v: Verdict) -> list[tuple[str, str, str, str]]:
    """(figure, this optimizer, the baseline, comparison) for the block's table."""
    out = []
    sp = v.step_speedup
    out.append(("step time", v.step_time.text(" s"), v.base_step_time.text(" s"),
                "n/a" if sp is None else _faster(sp, v.paired_step_speedup)))
    if v.reached is None:
        out.append(("time to target", "not recorded", "not recorded", "n/a"))
    else:
        def shown(reached, est, restricted, k):
            if reached or (restricted is not None and v.tau is not None):  # a miss counts tau: restricted mean
                return est.text(" s") + ("" if reached else _seeds_of(k, v.seeds, short=True))
            return "not reached" + _seeds_of(k, v.seeds)

        mine = shown(v.reached, v.time_to_target, v.restricted, v.reached_seeds)
        theirs = shown(v.base_reached, v.base_time_to_target, v.base_restricted, v.base_reached_seeds)
        k, kb = v.reached_seeds or 0, v.base_reached_seeds or 0
        cmp = ("post-hoc target: descriptive" if v.post_hoc else
               speedup_text(v, short=True) if v.target_speedup else
               "not estimable" if v.speedup_why else
               "only this one reached it" if v.reached else
               f"only {v.baseline} reached it" if v.base_reached else
               f"seeds hit {k}/{v.seeds} vs {kb}/{v.seeds}" if k or kb else "neither reached it")
        out.append((f"time to val loss {v.target:.4g}" if v.target is not None else "time to target", mine, theirs, cmp))
    for label, mine, theirs, diff in (
            ("val loss at equal time", v.loss_equal_time, v.base_loss_equal_time, v.loss_diff_equal_time),
            ("val loss at equal steps", v.loss_equal_steps, v.base_loss_equal_steps, v.loss_diff_equal_steps)):
        out.append((label, mine.text() if mine.known else v.missing, theirs.text() if theirs.known else v.missing,
                    _lower_higher(diff)))
    bw = _bytes_words(v)
    # The short labels keep the CLI's block within 80 columns; the report's text says what each figure is.
    basis = v.bytes_basis or "payload"
    mine_b, base_b = v.bytes_per_step, v.base_bytes_per_step
    known = mine_b is not None and base_b is not None
    out.append((f"{basis} bytes/step (tx+rx)", fmt_bytes(mine_b) if known else "", fmt_bytes(base_b) if known else "",
                bw or "n/a"))
    # Per step hides what a budget costs: at equal time the quicker method takes more steps.
    if mine_b is not None and base_b is not None and v.steps.mean and v.base_steps.mean and v.steps.known \
            and v.base_steps.known:
        mine_t, base_t = mine_b * v.steps.mean, base_b * v.base_steps.mean
        r = base_t / mine_t if mine_t else None
        out.append((f"{basis} bytes, whole run", fmt_bytes(mine_t), fmt_bytes(base_t),
                    "n/a" if not r else f"{_factor(r)} fewer bytes" if r >= 1 else f"{_factor(1 / r)} more bytes"))
    g, base_g = v.goodput.mean, v.base_goodput.mean
    if g is not None and base_g and v.goodput.known:  # issue 37: the same for every method
        r = g / base_g
        cmp = (f"about the same ({_factor(r)}{_range(v.paired_goodput)})" if 0.95 <= r <= 1.05 else
               f"{_factor(r)} more" + _range(v.paired_goodput) if r > 1 else f"{_factor(1 / r)} less"
               + _range(v.paired_goodput, True))
        out.append(("goodput, model FLOP/s", _flops_text(v.goodput, v.goodput_of_peak),
                    _flops_text(v.base_goodput, v.base_goodput_of_peak), cmp))
    if v.cost is not None and v.base_cost is not None:  # issue 29; the note under the block says how it is costed
        label = cost_label(v)
        priced = "$" in label
        out.append((label, cost_text(v.cost, priced), cost_text(v.base_cost, priced), cost_comparison(v)))
    return out


def _flops_text(e: Estimate, of_peak: float | None) -> str:
    """GFLOP/s (or TFLOP/s) with the interval, and the share of peak where there is one."""
    scale, unit = (1e12, " TFLOP/s") if (e.mean or 0) >= 1e12 else (1e9, " GFLOP/s")
    shown = Estimate(e.mean / scale if e.mean is not None else None, e.half / scale if e.half else e.half)
    return shown.text(unit) + (f" ({of_peak:.1%} of peak)" if isinstance(of_peak, (int, float)) else "")


def _seeds_of(k: int | None, n: int | None, short: bool = False) -> str:
    if short:
        return f" ({k or 0}/{n} hit)" if n else ""
    return f" (by {k} of {n} seeds)" if k and n and 0 < k < n else ""


def _budget_words(summary: dict) -> str | None:
    b = (summary.get("run") or {}).get("budget")
    if not isinstance(b, dict) or "kind" not in b:
        return None
    value = b.get("value")
    shown = _num(float(value)) if isinstance(value, (int, float)) and not isinstance(value, bool) else str(value)
    words = {"steps": f"{shown} steps", "time": f"{shown} s of training", "tokens": f"{shown} tokens",
             "target": f"until val loss {shown}"}.get(b["kind"], f"{b['kind']} {shown}")
    cap = b.get("cap")
    if b["kind"] == "target" and isinstance(cap, dict) and isinstance(cap.get("value"), (int, float)):
        words += f" (at most {_num(float(cap['value']))}{' s' if cap.get('kind') == 'time' else ' steps'})"
    return f"budget {words} each"


def heading(v: Verdict, summary: dict) -> str:
    bits = []
    if v.seeds:
        bits.append(f"{v.seeds} seed" + ("s" if v.seeds != 1 else "") + (", paired 95% intervals" if v.seeds > 1 else ""))
    if bw := _budget_words(summary):
        bits.append(bw)
    return f"{v.optimizer} vs {v.baseline}" + (f" ({'; '.join(bits)})" if bits else "")


def _interval_words(iv: Interval, fmt: str = ".2f") -> str:
    return f"[{iv.lo:{fmt}}, {iv.hi:{fmt}}]"


@dataclass(frozen=True)
class Decision:
    """What the verdict decides for one optimizer: `outcome` is "wins", "loses", "ties" or "no verdict"; `figure`
    the words of the figure it decided on (empty for no verdict without one); `why` says why there is none."""

    outcome: str
    figure: str = ""
    why: str | None = None

    @property
    def decided(self) -> bool:
        return self.outcome != "no verdict"


def decision(v: Verdict, summary: dict) -> Decision:
    """The paired 95% interval's decision (see `headline`), shared by the report's headings and `run`'s lines so
    that none of them says more than the verdict."""
    sp = v.paired_target_speedup
    if sp is not None and sp.n >= 2 and not v.post_hoc and not v.speedup_why and v.target is not None:
        outcome = "wins" if sp.lo > 1 else "loses" if sp.hi < 1 else "ties"
        if _bound_kind(v, sp) == "at least" and outcome != "wins":
            outcome = "no verdict"  # a lower bound at or under 1 says nothing either way
        elif _bound_kind(v, sp) == "at most" and outcome != "loses":
            outcome = "no verdict"
        return Decision(outcome, f"to val loss {v.target:.3g} {speedup_text(v, brackets=True)}",
                        "the bound does not decide" if outcome == "no verdict" else None)
    backend = (summary.get("run") or {}).get("backend")
    gap = v.paired_equal_time
    if gap is not None and gap.n >= 2 and backend != "local":
        outcome = "wins" if gap.hi < 0 else "loses" if gap.lo > 0 else "ties"
        side = "lower" if gap.mean < 0 else "higher"
        return Decision(outcome, f"loss at equal time {abs(gap.mean):.2g} {side} {_interval_words(gap, '+.2g')}")
    why = ("1 seed, no interval" if (v.seeds or 1) < 2 else
           "local backend: no network emulated" if backend == "local" else "no paired figure")
    return Decision("no verdict", why=why)


def headline(v: Verdict, summary: dict) -> str:
    """One line that says who won: 'distro wins vs adamw: to val loss 3 2.6x sooner [2.30, 2.90]; 672x fewer
    bytes'. The decision is the paired 95% interval's: of the time-to-target speed-up where the
    target was set in advance and the speed-up is estimable, else of the val loss gap at equal time where the
    links were emulated; 'wins' / 'loses' when it excludes no difference, 'ties' when it holds it, 'no
    verdict' (with why) when there is no interval to decide on. A side that missed the target on some seed
    (right-censored at the budget) makes the speed-up a bound: 'at least 2.1x sooner (adamw not reached in
    60 s on 3 of 3 seeds)' (`speedup_text`)."""
    bytes_words = _bytes_words(v)
    tail = f"; {bytes_words}" if bytes_words else ""
    d = decision(v, summary)
    if d.figure:
        head = f"{v.optimizer} {d.outcome} vs {v.baseline}" if d.decided else f"{v.optimizer} vs {v.baseline}: no verdict"
        return f"{head}: {d.figure}{tail}"
    return f"{v.optimizer} vs {v.baseline}: no verdict ({d.why}){tail}"


def closing_line(v: Verdict, summary: dict, figures: str) -> str:
    """`run`'s last line for one optimizer: the decision first, then the figures (`figures`, from
    results.summary.verdict_line), labelled as measurements, not a verdict, where there is none; on an
    unemulated network they are the loopback's."""
    d = decision(v, summary)
    if d.decided:
        return f"{v.optimizer} {d.outcome} vs {v.baseline}; {figures}"
    where = " on loopback" if (summary.get("run") or {}).get("backend") == "local" else ""
    return (f"{v.optimizer} vs {v.baseline}: no verdict ({d.why or 'the bound does not decide'}); "
            f"measured{where}, not a verdict: {figures}")


def closing_lines(summary: dict) -> list[str]:
    """`closing_line` for every optimizer of the summary against its baseline."""
    model = Summary.model_validate(summary)
    base = model.optimizers.get(model.baseline or "")
    if base is None:
        return []
    return [closing_line(v, summary, verdict_figures(model.optimizers[v.optimizer], base))
            for v in verdicts(summary) if v.optimizer in model.optimizers]


def verdict_lines(summary: dict) -> list[str]:
    """Plain text (no markup) for the end of `distro-bench run`: one headline per optimizer (who won, on which
    figure, at what bytes), then per optimizer a heading, aligned figures (this optimizer | baseline |
    comparison) and the sentence. Empty when there is nothing to compare."""
    scenario = (summary.get("run") or {}).get("scenario")
    found = verdicts(summary)
    lines: list[str] = []
    for v in found:
        lines += textwrap.wrap(headline(v, summary), WIDTH, subsequent_indent="  ", break_on_hyphens=False)
    local = (summary.get("run") or {}).get("backend") == "local"
    for v in found:
        d = decision(v, summary)
        if d.decided:
            lines.append(heading(v, summary))
        else:  # labelled as what it is, as in the report: measurements side by side, not a verdict
            lines += textwrap.wrap(f"{heading(v, summary)}: no verdict ({d.why}); figures measured"
                                   f"{' on loopback' if local else ''}, not a verdict", WIDTH,
                                   subsequent_indent="  ", break_on_hyphens=False)
        table = rows(v)
        w = [max(len(r[i]) for r in table) for i in range(3)]
        for label, mine, theirs, cmp in table:
            if mine or theirs:
                line = f"  {label:<{w[0]}}  {mine:>{w[1]}}  vs {theirs:>{w[2]}}  {cmp}"
            else:
                line = f"  {label:<{w[0]}}  {'':>{w[1]}}     {'':>{w[2]}}  {cmp}"
                line = line if len(line) <= WIDTH else f"  {label:<{w[0]}}  {cmp}"
            if len(line) > WIDTH and cmp:  # the comparison on its own line, under the figures
                lines.append(line[:len(line) - len(cmp)].rstrip())
                lines.append(" " * max(4, WIDTH - len(cmp)) + cmp)
            else:
                lines.append(line)
        lines += textwrap.wrap(sentence(v, scenario), WIDTH, initial_indent="  ", subsequent_indent="  ",
                               break_on_hyphens=False)
        for n in v.notes:
            lines += textwrap.wrap(f"note: {n}", WIDTH, initial_indent="  ", subsequent_indent="    ",
                                   break_on_hyphens=False)
    return lines


@dataclass(frozen=True)
class Ranked:
    """One optimizer's place when several are compared: by time to target first, then by val loss at equal
    time. Times are restricted means to the run's horizon (a seed that missed counts the horizon: the time
    budget, or the shortest training of a seed that missed); a method without a time ranks last. A ranking
    by means, not a test: neighbours whose intervals overlap are not shown apart."""

    rank: int
    optimizer: str
    time_to_target: Estimate
    reached: str  # "3/3" seeds that reached the target, "" when the summary does not record it
    loss_equal_time: Estimate
    bytes_per_step: float | None  # tx + rx, wire where counted, else payload
    bytes_basis: str
    steps: Estimate


def ranking(summary: dict) -> list[Ranked]:
    """Every optimizer of the run, best first (see Ranked). Empty for fewer than three: the verdict says it all."""
    opts = {k: v for k, v in (summary.get("optimizers") or {}).items() if isinstance(v, dict)}
    if len(opts) < 3:
        return []
    basis = reduction_basis(opts.values())

    per = {n: s.get("per_seed") or {} for n, s in opts.items()}
    tau = restriction_s(per.values(), _time_budget(summary)) if all(per.values()) else None

    def time_of(name: str, s: dict) -> Estimate:
        """The restricted mean to the run's shared tau where every optimizer has per-seed figures (a miss
        counts tau, intervals within [0, tau]); else the summary's mean, its interval cut at 0."""
        if all(per.values()) and "time_to_target_s" in s:
            r = restricted_time(per[name], tau)
            if r is not None and (tau is not None or not r.missed):
                return restricted_estimate(r)
        return _estimate(s, "time_to_target_s").within(0.0, _budget_cap(summary, s))

    times = {n: time_of(n, s) for n, s in opts.items()}

    def key(item):
        name, s = item
        ttt, loss = times[name], _estimate(s, "val_loss_at_equal_time")
        return (not ttt.known, ttt.mean if ttt.known else 0.0, loss.mean if loss.known else math.inf)

    out = []
    for i, (name, s) in enumerate(sorted(opts.items(), key=key), 1):
        reached, seeds = _count(s.get("target_reached")), _count(s.get("seeds"))
        out.append(Ranked(rank=i, optimizer=name, time_to_target=times[name],
                          reached=f"{reached}/{seeds}" if reached is not None and seeds else "",
                          loss_equal_time=_estimate(s, "val_loss_at_equal_time"),
                          bytes_per_step=total_bytes(s, basis), bytes_basis=basis, steps=_estimate(s, "steps")))
    return out


RANKING_COLUMNS = ["#", "optimizer", "to target", "reached", "val loss, equal time", "bytes/step", "steps"]


def ranking_rows(ranked: list[Ranked]) -> list[list[str]]:
    return [[str(r.rank), r.optimizer, r.time_to_target.text(" s"), r.reached or "-", r.loss_equal_time.text(),
             fmt_bytes(r.bytes_per_step) if r.bytes_per_step is not None else "n/a", r.steps.text(digits=3)]
            for r in ranked]


def ranking_lines(summary: dict) -> list[str]:
    """The ranking as aligned plain text for `run`'s output (empty for fewer than three optimizers)."""
    ranked = ranking(summary)
    if not ranked:
        return []
    # Steps are in each verdict above; without them the table fits 80 columns with long optimizer names.
    cols = ["#", "optimizer", "to target", "hit", "loss, eq. time", "bytes/step"]
    table = [cols] + [row[:len(cols)] for row in ranking_rows(ranked)]
    w = [max(len(r[i]) for r in table) for i in range(len(cols))]
    lines = [f"ranking by time to target, then val loss at equal time ({ranked[0].bytes_basis} bytes, tx+rx)"]
    lines += ["  " + "  ".join(c.ljust(w[i]) if i in (1, 3) else c.rjust(w[i]) for i, c in enumerate(row)).rstrip()
              for row in table]
    return lines
