"""DisTrO's step at two versions of its code, interleaved in one process: is a change faster, and by how much?

    python benchmarks/distro_ab.py [--base REV] [--against REV] [--preset small] [--repeats 60] [--world 4]

`--against` (default HEAD) and `--base` (default: this working tree) name git revisions whose
harness/distro_bench/train/optim/distro.py and dct.py are loaded as modules of their own (the rest of harness comes from this
tree). On a shared host the time of DisTrO's memory-bound step moves by 20% from one minute to the next, so
two separate runs of benchmarks/optimizer_overhead.py cannot show a change of a few percent. Here both
versions step the same gradients, each on its own copy of the parameters, in a random order every repeat,
right after their own forward+backward, so the host's state falls on both alike; the ratio of their medians
is the figure to quote. Process CPU time, as in optimizer_overhead.py, at the threads a worker gets.
Also printed: whether both end at the same parameters (a reordering of float sums may change the last bit).
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "harness"))
sys.path.insert(0, str(REPO / "benchmarks"))

from optimizer_overhead import LoopbackComm, _model_and_step  # noqa: E402

from distro_bench.scenario.presets import MODELS  # noqa: E402
from distro_bench.train.optim.base import PhaseTimer  # noqa: E402
from distro_bench.train.optim.distro import DisTrOConfig  # noqa: E402


def _git_show(rev: str, path: str) -> str:
    done = subprocess.run(["git", "-C", str(REPO), "show", f"{rev}:{path}"], capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"distro_ab: cannot read {path} at revision {rev!r}: {done.stderr.strip()}")
    return done.stdout


def distro_class(rev: str | None):
    """The DisTrO class of revision `rev`, or of this working tree for None."""
    if rev is None:
        from distro_bench.train.optim.distro import DisTrO
        return DisTrO
    tag = "".join(c if c.isalnum() else "_" for c in rev)
    modules = {}
    with tempfile.TemporaryDirectory(prefix="distro_ab-") as folder:  # only while the modules load
        for name in ("dct", "distro"):
            text = _git_show(rev, f"harness/distro_bench/train/optim/{name}.py")
            text = text.replace("from distro_bench.train.optim.dct import", f"from dct_at_{tag} import")
            path = Path(folder) / f"{name}_at_{tag}.py"
            path.write_text(text)
            spec = importlib.util.spec_from_file_location(f"{name}_at_{tag}", path)
            modules[name] = importlib.util.module_from_spec(spec)
            sys.modules[spec.name] = modules[name]  # the distro module imports its dct by this name
            spec.loader.exec_module(modules[name])
    return modules["distro"].DisTrO


def compare(versions: dict[str, type], *, preset: str, repeats: int, world: int, batch: int = 8, seq_len: int = 128,
            warmup: int = 2, seed: int = 0) -> dict:
    """Median (and quartiles of) CPU ms per step of each version, forward+backward's median, and whether all
    versions end at the same parameters."""
    _, params, fwd_bwd = _model_and_step(preset, batch, seq_len)
    cfg = DisTrOConfig(lr=1e-4, topk=4, chunk=64, values="1bit", bucket=True)
    runs = {}
    for name, cls in versions.items():
        mine = [(n, torch.nn.Parameter(p.detach().clone())) for n, p in params]
        runs[name] = (mine, cls(cfg, mine, LoopbackComm(world), total_steps=10**6))
    timer = PhaseTimer(torch.device("cpu"))
    samples: dict[str, list[float]] = {name: [] for name in runs}
    fb: list[float] = []
    order, rng = list(runs), random.Random(seed)
    for i in range(warmup + repeats):
        rng.shuffle(order)
        for name in order:
            start = time.process_time()
            fwd_bwd()
            fb_s = time.process_time() - start
            mine, strategy = runs[name]
            for (_, p), (_, q) in zip(params, mine):
                q.grad = p.grad
            start = time.process_time()
            strategy.step(i, timer)
            if i >= warmup:
                samples[name].append(time.process_time() - start)
                fb.append(fb_s)
    out = {"fwd_bwd_ms": statistics.median(fb) * 1e3, "versions": {}}
    for name, v in samples.items():
        q = statistics.quantiles(v, n=4)
        out["versions"][name] = {"ms": statistics.median(v) * 1e3, "q1_ms": q[0] * 1e3, "q3_ms": q[2] * 1e3}
    first, *others = list(samples)
    # Paired: each repeat's ratio of two steps taken seconds apart, so the host's drift between minutes cancels.
    out["ratios"] = {name: median_interval([a / b for a, b in zip(samples[first], samples[name])]) for name in others}
    finals = [[p.detach() for _, p in mine] for mine, _ in runs.values()]
    out["same_parameters"] = all(torch.equal(a, b) for other in finals[1:] for a, b in zip(finals[0], other))
    return out


def _at_least_two(text: str) -> int:
    n = int(text)
    if n < 2:
        raise argparse.ArgumentTypeError(f"{n}: quartiles and an interval need at least 2 repeats")
    return n


def median_interval(values: list[float], z: float = 1.96) -> tuple[float, float, float]:
    """(median, low, high): the median and its distribution-free ~95% interval (order statistics at
    n/2 -+ z * sqrt(n) / 2)."""
    v, n = sorted(values), len(values)
    half = z * n**0.5 / 2
    lo, hi = max(0, int(n / 2 - half)), min(n - 1, int(n / 2 + half + 0.5))
    return statistics.median(v), v[lo], v[hi]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--base", default=None, help="git revision measured first (default: this working tree)")
    p.add_argument("--against", default="HEAD", help="git revision it is compared with (default: HEAD)")
    p.add_argument("--preset", default="small", choices=sorted(MODELS))
    p.add_argument("--repeats", type=_at_least_two, default=60, help="interleaved repeats (at least 2)")
    p.add_argument("--world", type=int, default=4, help="workers whose buffers are aggregated")
    p.add_argument("--threads", type=int, default=None, help="torch threads (default: cores // workers, at least 1)")
    args = p.parse_args(argv)
    torch.set_num_threads(args.threads or max(1, (os.cpu_count() or 1) // args.world))
    base, against = args.base or "working tree", args.against
    if base == against:
        raise SystemExit("distro_ab: --base and --against name the same version")
    versions = {base: distro_class(args.base), against: distro_class(args.against)}
    print(f"load average {os.getloadavg()[0]:.2f}; {torch.get_num_threads()} threads; preset {args.preset}; "
          f"{args.repeats} interleaved repeats")
    r = compare(versions, preset=args.preset, repeats=args.repeats, world=args.world)
    for name, v in r["versions"].items():
        print(f"{name:>14}: {v['ms']:6.2f} ms CPU a step [quartiles {v['q1_ms']:.2f}-{v['q3_ms']:.2f}], "
              f"{v['ms'] / r['fwd_bwd_ms']:.1%} of forward+backward ({r['fwd_bwd_ms']:.0f} ms)")
    ratio, lo, hi = r["ratios"][against]
    print(f"{base} / {against}, step by step: {ratio:.3f} of the step time [95% interval {lo:.3f}-{hi:.3f}]; "
          f"same parameters at the end: {r['same_parameters']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
