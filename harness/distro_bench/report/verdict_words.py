"""The verdict in English: the sentence, the speed-up's words, the decision and the headline (one place words
the headline: `run`'s closing lines and the report's headings both come from here)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from distro_bench.report.verdict_estimates import Estimate, Verdict, _factor, _num
from distro_bench.results.format import fmt_times
from distro_bench.results.stats import Interval, paired_difference, ratio_interval
from distro_bench.results.summary import OptimizerSummary, Summary

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
    r, name = (v.base.restricted, v.baseline) if side == "base" else (v.mine.restricted, v.optimizer)
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
    if v.mine.reached is None:
        return None
    restricted = v.tau is not None and ((v.mine.restricted is not None and v.mine.restricted.missed)
                                        or (v.base.restricted is not None and v.base.restricted.missed))
    if not v.mine.reached:
        t += _partly(v.mine.reached_seeds, v.seeds)
        if restricted and v.target_speedup:  # a restricted mean compares even with misses
            return (f"did not reach {t}; its time restricted to {_num(v.tau or 0)} s was "
                    f"{v.mine.time_to_target.text(' s')}" + _speedup_words(v))
        if v.base.reached:
            return f"did not reach {t} (which {v.baseline} reached in {v.base.time_to_target.text(' s')})"
        return f"did not reach {t}, nor did {v.baseline}"
    clause = f"reached {t} in {v.mine.time_to_target.text(' s')}"
    if v.target_speedup:
        clause += (f" (restricted to {_num(v.tau or 0)} s)" if restricted else "") + _speedup_words(v)
    elif v.base.reached is False:
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


def _seeds_of(k: int | None, n: int | None, short: bool = False) -> str:
    if short:
        return f" ({k or 0}/{n} hit)" if n else ""
    return f" (by {k} of {n} seeds)" if k and n and 0 < k < n else ""


def _budget_words(summary: dict | Summary) -> str | None:
    b = Summary.model_validate(summary).run.budget
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


def heading(v: Verdict, summary: dict | Summary) -> str:
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


def decision(v: Verdict, summary: dict | Summary) -> Decision:
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
    backend = Summary.model_validate(summary).run.backend
    gap = v.paired_equal_time
    if gap is not None and gap.n >= 2 and backend != "local":
        outcome = "wins" if gap.hi < 0 else "loses" if gap.lo > 0 else "ties"
        side = "lower" if gap.mean < 0 else "higher"
        return Decision(outcome, f"loss at equal time {abs(gap.mean):.2g} {side} {_interval_words(gap, '+.2g')}")
    why = ("1 seed, no interval" if (v.seeds or 1) < 2 else
           "local backend: no network emulated" if backend == "local" else "no paired figure")
    return Decision("no verdict", why=why)


def headline(v: Verdict, summary: dict | Summary) -> str:
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


def closing_line(v: Verdict, summary: dict | Summary, figures: str) -> str:
    """`run`'s last line for one optimizer: the decision first, then the figures (`figures`, from
    verdict_figures), labelled as measurements, not a verdict, where there is none; on an
    unemulated network they are the loopback's."""
    d = decision(v, summary)
    if d.decided:
        return f"{v.optimizer} {d.outcome} vs {v.baseline}; {figures}"
    where = " on loopback" if Summary.model_validate(summary).run.backend == "local" else ""
    return (f"{v.optimizer} vs {v.baseline}: no verdict ({d.why or 'the bound does not decide'}); "
            f"measured{where}, not a verdict: {figures}")



def figure_lines(summary: dict | Summary) -> list[str]:
    """One line per optimizer against the baseline, e.g. `distro: 8.0x faster steps, 565x fewer wire bytes, val
    loss +0.59 vs adamw` (`report --json`'s `verdicts`): `verdict_figures` with the names around it."""
    model = Summary.model_validate(summary)
    base = model.optimizers.get(model.baseline or "")
    if base is None:
        return []
    return [f"{name}: {verdict_figures(s, base)} vs {model.baseline}" for name, s in model.optimizers.items()
            if name != model.baseline]


def verdict_figures(s: OptimizerSummary, base: OptimizerSummary) -> str:
    """The figures of `run`'s last line ('1.2x faster steps, 616x fewer payload bytes, ...'), paired over seeds
    (harness/distro_bench/results/stats.py): step speed-up, bytes, and the val loss gap at equal time (final loss
    for a folder without it), with its 95% half-width over three or more seeds. `closing_line` puts the verdict's
    decision in front of them."""
    def seeds(o: OptimizerSummary, key: str) -> dict:
        return {k: v.get(key) for k, v in (o.per_seed or {}).items()}

    parts = []
    speed = ratio_interval(seeds(base, "step_time_s_mean"), seeds(s, "step_time_s_mean"))
    r = speed.mean if speed is not None and speed.n >= 2 else (
        base.step_time_s_mean / s.step_time_s_mean if s.step_time_s_mean and base.step_time_s_mean else None)
    if r:
        parts.append(f"{fmt_times(r)} faster steps" if r >= 1 else f"{fmt_times(1 / r)} slower steps")
    if s.reduction_vs_baseline:
        r, basis = s.reduction_vs_baseline, s.reduction_basis or "payload"
        parts.append(f"{fmt_times(r)} fewer {basis} bytes" if r >= 1 else f"{fmt_times(1 / r)} more {basis} bytes")
    for key, label in (("val_loss_at_equal_time", "val loss at equal time"), ("final_val_loss", "val loss"),
                       ("final_loss", "loss")):
        gap = paired_difference(seeds(s, key), seeds(base, key))
        a, b = s.get(key), base.get(key)
        if gap is not None and gap.n >= 2:
            parts.append(f"{label} {gap.mean:+.2f} ± {gap.half:.2f}")
            break
        if a is not None and b is not None:
            parts.append(f"{label} {a - b:+.2f}")
            break
    if s.replicas_identical is False:
        parts.append("REPLICAS DIFFER")
    return ", ".join(parts) or "no figures recorded"
