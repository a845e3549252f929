"""The verdict's estimates and pairing: `Verdict` (one optimizer against the baseline, each side a mean over seeds
with its 95% interval, each comparison paired seed by seed from `per_seed`), read from summary.json alone, and the
cost to target attached to it. report/verdict.py lays them out; report/verdict_words.py words them."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from distro_bench.results import cost as _cost
from distro_bench.results.figures import Figure, reduction, reduction_basis, total_bytes, verdict_rows
from distro_bench.results.stats import (
    Interval,
    RestrictedTime,
    paired_difference,
    ratio_interval,
    restricted_speedup,
    restricted_time,
    restriction_s,
)
from distro_bench.results.summary import OptimizerSummary, Summary


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
class Side:
    """One side of a verdict (the optimizer judged, or its baseline): its figures, each a mean over seeds with its
    95% interval, read from its summary by one function (`_side`) for both."""

    step_time: Estimate
    time_to_target: Estimate
    reached: bool | None  # None: the run folder does not record time to target
    loss_equal_time: Estimate
    loss_equal_steps: Estimate
    reached_seeds: int | None = None  # how many seeds reached the target (summary `target_reached`)
    # its time to target as a restricted mean to the verdict's `tau` (results/stats.py RestrictedTime)
    restricted: RestrictedTime | None = None
    bytes_per_step: float | None = None  # tx + rx per worker per step on the verdict's `bytes_basis`
    steps: Estimate = field(default_factory=lambda: Estimate(None))  # mean steps per seed
    # Cost to the target (issue 29, results/cost.py): None without `costs` in the summary or without a target.
    cost: _cost.CostSide | None = None
    # Issue 37: useful model FLOPs per training second (6 x parameters per token that reached the shared model),
    # and its share of the workers' peak where every worker ran on a profile's GPU.
    goodput: Estimate = field(default_factory=lambda: Estimate(None))
    goodput_of_peak: float | None = None


@dataclass(frozen=True)
class Compared:
    """One figure of the verdict's block on both sides (a figure row with a `verdict`, results/figures.py): each a
    mean over seeds with its 95% interval, and the two paired seed by seed as the row compares them (a ratio,
    this optimizer / the baseline, or a difference, this optimizer - the baseline)."""

    mine: Estimate
    base: Estimate
    paired: Interval | None  # None for one seed or a folder without `per_seed`
    recorded: bool  # whether this optimizer's summary has the key at all (older harnesses wrote fewer)

    @property
    def difference(self) -> Estimate:
        return _paired_or_diff(self.paired, self.mine, self.base)

    @property
    def ratio(self) -> float | None:
        """This optimizer's mean / the baseline's (the paired interval goes beside it)."""
        return _ratio(self.mine.mean, self.base.mean)


@dataclass
class Verdict:
    """One optimizer (`mine`) against the baseline (`base`): each side's figures, and how they compare."""

    optimizer: str
    baseline: str
    seeds: int | None
    target: float | None
    target_how: str | None
    mine: Side
    base: Side
    bytes_ratio: float | None  # baseline bytes / this optimizer's (tx + rx per worker per step)
    bytes_basis: str | None
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
    speedup_why: str | None = None  # why there is no time-to-target speed-up ("not estimable: ...")
    post_hoc: bool = False  # the target was chosen after seeing the data (the worst best): descriptive only
    # Issue 49: which side's restricted time is a bound because it missed the target on some seed (counted at
    # tau, right-censored): "base" (the speed-up is at least the ratio), "mine" (at most), "both" (a ratio of
    # restricted means, named as such), None (no side missed).
    capped: str | None = None
    cost_ratio: Interval | None = None  # paired baseline / this optimizer's cost (dollars where priced, else hours)
    cost_unit: str = "GPU-h"
    paired_goodput: Interval | None = None  # paired this / baseline
    figures: dict[str, Compared] = field(default_factory=dict)  # the block's figures by key (`compared`)

    @property
    def missing(self) -> str:
        """A figure the summary lacks: an old folder never recorded it; a new one had no evaluation to use."""
        return "not recorded" if self.mine.reached is None else "n/a"

    @property
    def step_speedup(self) -> float | None:
        """Baseline step time / this optimizer's: above 1, this optimizer's steps are quicker."""
        if self.paired_step_speedup is not None:
            return self.paired_step_speedup.mean
        return _ratio(self.base.step_time.mean, self.mine.step_time.mean)

    @property
    def target_speedup(self) -> float | None:
        """Baseline / this optimizer's (restricted) time to target; None when post-hoc or not estimable."""
        if self.post_hoc or self.speedup_why:
            return None
        if self.paired_target_speedup is not None:
            return self.paired_target_speedup.mean
        if not (self.mine.reached and self.base.reached):
            return None
        return _ratio(self.base.time_to_target.mean, self.mine.time_to_target.mean)

    @property
    def loss_diff_equal_time(self) -> Estimate:
        return _paired_or_diff(self.paired_equal_time, self.mine.loss_equal_time, self.base.loss_equal_time)

    @property
    def loss_diff_equal_steps(self) -> Estimate:
        return _paired_or_diff(self.paired_equal_steps, self.mine.loss_equal_steps, self.base.loss_equal_steps)


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

def _estimate(s: OptimizerSummary | dict, key: str) -> Estimate:
    """A figure of one side (a summary key, results/figures.py) with the half-width of its 95% interval."""
    s = OptimizerSummary.model_validate(s)
    v = getattr(s, key, None)
    if v is None or isinstance(v, bool) or not isinstance(v, (int, float)):
        return Estimate(None)
    ci = (s.ci95 or {}).get(key)
    half = None
    if isinstance(ci, (list, tuple)) and len(ci) == 2 and all(isinstance(c, (int, float)) for c in ci):
        half = (float(ci[1]) - float(ci[0])) / 2
    return Estimate(float(v), half)


def _recorded(s: OptimizerSummary, key: str) -> bool:
    """Whether the summary.json this side was read from has the key at all (older harnesses wrote fewer)."""
    return key in s.model_fields_set or key in (s.model_extra or {})


def _reached(s: OptimizerSummary) -> bool | None:
    if not _recorded(s, "time_to_target_s"):
        return None
    return s.time_to_target_s is not None


def _count(v) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def _bytes(base: OptimizerSummary, cand: OptimizerSummary) -> tuple[float | None, str | None]:
    """The reduction and its basis (results/figures.py's one rule; a mean over seeds has wire bytes only where
    every seed counted them)."""
    basis = reduction_basis([base], [cand])
    r = reduction(base, cand, basis)
    if r:
        return r, basis
    red = cand.reduction_vs_baseline
    return (float(red), cand.reduction_basis) if red else (None, None)


def _seed_map(s: OptimizerSummary, key: str) -> dict:
    """{seed: figure} from the summary's `per_seed` (empty for a folder without it)."""
    return {k: v.get(key) for k, v in (s.per_seed or {}).items() if isinstance(v, dict)}


def _paired(p: Interval | None) -> Interval | None:
    return p if p is not None and p.n >= 2 else None


def _missed(s: OptimizerSummary) -> int:
    return sum(1 for v in (s.per_seed or {}).values() if v.get("time_to_target_s") is None)


def _time_budget(summary: dict | Summary) -> float | None:
    b = Summary.model_validate(summary).run.budget or {}
    if isinstance(b, dict) and b.get("kind") == "time" and isinstance(b.get("value"), (int, float)):
        return float(b["value"])
    cap = b.get("cap") if isinstance(b, dict) else None
    if isinstance(cap, dict) and cap.get("kind") == "time" and isinstance(cap.get("value"), (int, float)):
        return float(cap["value"])
    return None


def is_post_hoc(summary: dict | Summary) -> bool:
    """The comparison's target was chosen after seeing the data (the worst best validation loss)."""
    t = Summary.model_validate(summary).target
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


def _budget_cap(summary: dict | Summary, *sides: OptimizerSummary) -> float:
    """The most training seconds any seed could have spent: the time budget, else the longest seed's."""
    budget = _time_budget(summary)
    if budget is not None:
        return budget
    times = [float(t) for s in sides for v in (s.per_seed or {}).values()
             if isinstance(t := v.get("train_time_s"), (int, float))]
    return max(times) if times else math.inf


def _side(s: OptimizerSummary, cap: float, basis: str | None) -> Side:
    """One side's figures from its summary (times to target cut to [0, cap]; bytes on the verdict's basis)."""
    return Side(step_time=_estimate(s, "step_time_s_mean"),
                time_to_target=_estimate(s, "time_to_target_s").within(0.0, cap), reached=_reached(s),
                loss_equal_time=_estimate(s, "val_loss_at_equal_time"),
                loss_equal_steps=_estimate(s, "val_loss_at_equal_steps"), reached_seeds=_count(s.target_reached),
                bytes_per_step=total_bytes(s, basis) if basis else None, steps=_estimate(s, "steps"),
                goodput=_estimate(s, "goodput_model_flops_per_s"), goodput_of_peak=s.goodput_of_peak)


def verdicts(summary: dict | Summary) -> list[Verdict]:
    """One verdict per optimizer other than the baseline, in the summary's order (read as the typed Summary)."""
    model = Summary.model_validate(summary)
    raw = summary if isinstance(summary, dict) else model.to_dict()  # results/cost.py reads the document
    opts = model.optimizers
    base_name = model.baseline
    base = opts.get(base_name or "")
    if base is None or base_name is None:
        return []
    target = model.target or {}
    t_val = target.get("val_loss")
    out = []
    for name, s in opts.items():
        if name == base_name:
            continue
        ratio, basis = _bytes(base, s)
        seeds = s.seeds
        cap = _budget_cap(model, s, base)
        v = Verdict(
            optimizer=name, baseline=base_name, seeds=int(seeds) if isinstance(seeds, int) else None,
            target=float(t_val) if isinstance(t_val, (int, float)) else None,
            target_how=target.get("how") if isinstance(target.get("how"), str) else None,
            mine=_side(s, cap, basis), base=_side(base, cap, basis), bytes_ratio=ratio, bytes_basis=basis)
        v.paired_equal_time = _paired(paired_difference(_seed_map(s, "val_loss_at_equal_time"),
                                                        _seed_map(base, "val_loss_at_equal_time")))
        v.paired_equal_steps = _paired(paired_difference(_seed_map(s, "val_loss_at_equal_steps"),
                                                         _seed_map(base, "val_loss_at_equal_steps")))
        v.paired_step_speedup = _paired(ratio_interval(_seed_map(base, "step_time_s_mean"),
                                                       _seed_map(s, "step_time_s_mean")))
        v.paired_goodput = _paired(ratio_interval(_seed_map(s, "goodput_model_flops_per_s"),
                                                  _seed_map(base, "goodput_model_flops_per_s")))
        v.figures = {f.key: compared(f, s, base) for f in verdict_rows()}
        v.post_hoc = is_post_hoc(model)
        mine_seeds, base_seeds = s.per_seed or {}, base.per_seed or {}
        if mine_seeds and base_seeds and v.mine.reached is not None:
            v.tau = restriction_s([mine_seeds, base_seeds], _time_budget(model))
            v.mine.restricted, v.base.restricted = restricted_time(mine_seeds, v.tau), restricted_time(base_seeds, v.tau)
            if v.mine.restricted is not None:
                v.mine.time_to_target = restricted_estimate(v.mine.restricted)
            if v.base.restricted is not None:
                v.base.time_to_target = restricted_estimate(v.base.restricted)
            if (v.mine.reached_seeds or 0) + (v.base.reached_seeds or 0) > 0 or v.mine.reached or v.base.reached:
                iv, why = restricted_speedup(base_seeds, mine_seeds, v.tau)
                v.paired_target_speedup, v.speedup_why = _paired(iv), why
            mine_missed = bool(v.mine.restricted and v.mine.restricted.missed)
            base_missed = bool(v.base.restricted and v.base.restricted.missed)
            v.capped = ("both" if mine_missed and base_missed else "mine" if mine_missed else
                        "base" if base_missed else None)
        if v.post_hoc:
            v.paired_target_speedup = None
        _add_cost(v, raw)
        if v.mine.reached is None:
            v.notes.append("time to target not recorded (run folder from before issue 16)")
        if not v.mine.loss_equal_time.known and not _recorded(s, "val_loss_at_equal_time"):
            v.notes.append("loss at equal time not recorded")
        if v.target_how and "seed overlap, labelled" in v.target_how:  # issue 49: said wherever the verdict is
            v.notes.append("target: " + v.target_how)
        if v.post_hoc and v.target is not None:
            v.notes.append(f"post-hoc, descriptive: the target val loss {v.target:.4g} is the worst best loss, chosen "
                           "after seeing the data, so times to it describe this run and no speed-up interval is "
                           "given; set checks.target_val_loss in advance (e.g. from a pilot run) to test one")
        missed = (v.mine.restricted.missed if v.mine.restricted else 0) + (v.base.restricted.missed if v.base.restricted else 0)
        if missed and v.tau is not None:
            v.notes.append(f"seeds that reached the target: {v.optimizer} {v.mine.reached_seeds or 0}/{v.seeds}, "
                           f"{v.baseline} {v.base.reached_seeds or 0}/{v.seeds}; times to target are restricted "
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
        if v.mine.restricted is not None and v.base.restricted is not None and not v.post_hoc \
                and (v.mine.restricted.censored or v.base.restricted.censored):
            v.notes.append("times to target are read on each method's own evaluations: a crossing lies between the "
                           "last evaluation above the target and the first at or below it (interval-censored), "
                           "estimated by linear interpolation between them; each interval spans the lower bounds' "
                           "95% lower end to the upper bounds' upper end; the speed-up is the geometric mean of "
                           "the per-seed ratios (baseline / this optimizer)")
        out.append(v)
    return out


def compared(fig: Figure, mine: OptimizerSummary, base: OptimizerSummary) -> Compared:
    """A figure row on both sides, paired by seed as the row compares two methods."""
    pair = paired_difference if fig.compare == "difference" else ratio_interval
    return Compared(_estimate(mine, fig.key), _estimate(base, fig.key),
                    _paired(pair(_seed_map(mine, fig.key), _seed_map(base, fig.key))), _recorded(mine, fig.key))


def _add_cost(v: Verdict, summary: dict) -> None:
    """The cost-to-target figures and their note (nothing when the summary has no `costs` or no target)."""
    mine, base = _cost.side(summary, v.optimizer), _cost.side(summary, v.baseline)
    if mine is None or base is None:
        return
    costs = summary["costs"]
    v.mine.cost, v.base.cost = mine, base
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

