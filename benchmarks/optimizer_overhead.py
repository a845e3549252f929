"""How much work each optimizer adds to a training step, against forward+backward (and DisTrO against DeMo).

    python benchmarks/optimizer_overhead.py [--presets tiny small base] [--world 4] [--batch 8 --seq-len 128]
                                            [--threads N] [--no-others]

Threads: by default what each of `--world` workers gets from the runner on this host (cores // workers, at
least 1), so the share is the one a run sees.

For each model preset, on this machine's CPU: the median time of forward+backward of one batch, and of
every method's own work in a step (its `compress` and `apply` phases: for DisTrO momentum, DCT, top-k,
packing, then unpacking, aggregation of `--world` workers' buffers, inverse DCT, sign update). The
collective itself is left out: a loopback stand-in hands back `--world` copies of this worker's buffer.
DisTrO is also set beside the straightforward per-tensor DeMo of benchmarks/distro_reference.py.
Figures, not assertions: the targets (DisTrO <= 10% of forward+backward and >= 2x faster than the
reference at `small`) are printed as met or not. Beside wall time, each part's CPU time (all threads of
this process) is measured: on a machine others load, wall-time shares swing by 2x, CPU-time shares much less
(the CPU share of a step also holds the loopback gather's copies, so it is a slight over-estimate).

Adding a method: one entry in METHODS, a function that builds its strategy over the model's parameters
and a loopback comm. Everything in a repeat is interleaved (forward+backward, then each method), so load
from other processes on a shared machine falls on all of them alike.
"""

from __future__ import annotations

import argparse
import functools
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "harness"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from distro_reference import ReferenceDeMo

from distro_bench.scenario.presets import MODELS
from distro_bench.train.model import ModelConfig, build_model
from distro_bench.train.optim.base import PhaseTimer
from distro_bench.train.optim.distro import DisTrO, DisTrOConfig


class LoopbackComm:
    """Stands in for the process group: every 'worker' sends what this one sent; nothing is counted or timed."""

    def __init__(self, world_size: int):
        self.rank, self.world_size = 0, world_size

    def all_gather(self, tensor: torch.Tensor, **_) -> list[torch.Tensor]:
        return [tensor] + [tensor.clone() for _ in range(self.world_size - 1)]

    def all_gather_async(self, tensor: torch.Tensor, **kw):
        out = self.all_gather(tensor)
        return SimpleNamespace(wait=lambda: out)

    def all_reduce(self, tensor: torch.Tensor) -> torch.Tensor:
        return tensor


def _distro(params, comm, args, index="auto"):
    cfg = DisTrOConfig(lr=1e-4, topk=args.topk, chunk=64, values=args.values, bucket=True, index=index)
    return DisTrO(cfg, params, comm, total_steps=10**6)


# name -> builder(named params, loopback comm, parsed args) -> Strategy. Methods append here.
METHODS: dict[str, Callable] = {"distro": _distro, "distro-coded": functools.partial(_distro, index="coded")}


def _timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def _cpu(fn) -> float:
    """CPU seconds of this process (all its threads) spent in fn: unlike wall time, not inflated when other
    processes take the cores, so its ratios hold on a shared machine."""
    start = time.process_time()
    fn()
    return time.process_time() - start


def _model_and_step(preset: str, batch: int, seq_len: int):
    """The preset's model, its named parameters, and one forward+backward on a fixed random batch."""
    model = build_model(ModelConfig(**MODELS[preset]), seed=0)
    g = torch.Generator().manual_seed(0)
    x = torch.randint(0, model.cfg.vocab_size, (batch, seq_len), generator=g)
    y = torch.randint(0, model.cfg.vocab_size, (batch, seq_len), generator=g)

    def fwd_bwd():
        model.zero_grad(set_to_none=True)
        model.loss(x, y).backward()

    return model, list(model.named_parameters()), fwd_bwd


def measure(preset: str, *, world: int, batch: int, seq_len: int, repeats: int, args, warmup: int = 2) -> dict:
    """Median milliseconds of forward+backward, of each method's compress+apply, and of the DeMo reference."""
    _model, params, fwd_bwd = _model_and_step(preset, batch, seq_len)

    # Each method steps its own copy of the parameters with the same gradients, so none sees another's update.
    copies = {}
    for name in args.methods:
        mine = [(n, torch.nn.Parameter(p.detach().clone())) for n, p in params]
        copies[name] = (mine, METHODS[name](mine, LoopbackComm(world), args))
    ref_params = [torch.nn.Parameter(p.detach().clone()) for _, p in params]
    ref = ReferenceDeMo(ref_params, LoopbackComm(world), lr=1e-4, topk=args.topk, chunk=64, decay=0.999,
                        values="fp32" if args.values == "bf16" else args.values)
    timer = PhaseTimer(torch.device("cpu"))
    samples: dict[str, list[float]] = {k: [] for k in ["fwd_bwd", "reference", *args.methods]}
    samples.update({f"{k}_cpu": [] for k in ["fwd_bwd", *args.methods]})
    for i in range(warmup + repeats):
        start = time.process_time()
        fb = _timed(fwd_bwd)
        fb_cpu = time.process_time() - start
        for name, (mine, strategy) in copies.items():
            for (_, p), (_, q) in zip(params, mine):
                q.grad = p.grad
            timer.take()
            cpu = _cpu(functools.partial(strategy.step, i, timer))  # the whole step: the loopback gather's copies too
            phases = timer.take()
            if i >= warmup:
                samples[name].append(phases.get("compress", 0.0) + phases.get("apply", 0.0))
                samples[f"{name}_cpu"].append(cpu)
        for p, (_, q) in zip(ref_params, params):
            p.grad = q.grad
        reference = _timed(ref.step)
        if i >= warmup:
            samples["fwd_bwd"].append(fb)
            samples["fwd_bwd_cpu"].append(fb_cpu)
            samples["reference"].append(reference)
    out = {k: statistics.median(v) * 1e3 for k, v in samples.items()}
    return {"preset": preset, "params": sum(p.numel() for _, p in params), **out}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--presets", nargs="+", default=["tiny", "small", "base"], choices=sorted(MODELS))
    p.add_argument("--world", type=int, default=4, help="workers whose buffers are aggregated")
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--seq-len", type=int, default=128)
    p.add_argument("--repeats", type=int, default=15)
    p.add_argument("--topk", type=int, default=4)
    p.add_argument("--values", default="1bit", choices=["fp32", "bf16", "1bit"])
    p.add_argument("--methods", nargs="+", default=list(METHODS), choices=sorted(METHODS))
    p.add_argument("--no-others", action="store_true", help="skip the other methods' block (DiLoCo, SparseLoCo, ...)")
    p.add_argument("--threads", type=int, default=None,
                   help="torch threads (default: what each of --world workers gets from the runner on this host, "
                        "cores // workers, at least 1: the share as a run sees it)")
    args = p.parse_args(argv)
    # The runner gives each worker cores // workers threads (harness/distro_bench/run/runner.py). Measuring with torch's
    # default (every core) on a host others load inflates the CPU time of both parts with OpenMP's spinning
    # threads, and makes the share depend on the load, not on the code.
    torch.set_num_threads(args.threads or max(1, (os.cpu_count() or 1) // args.world))

    print(f"load average {os.getloadavg()[0]:.2f}; torch {torch.__version__}, {torch.get_num_threads()} threads; batch {args.batch}x{args.seq_len} tokens; "
          f"{args.world} workers aggregated; DisTrO topk {args.topk}, chunk 64, {args.values} values, bucketed")
    head = f"{'preset':<7}{'params':>12}{'fwd+bwd ms':>12}" + "".join(f"{m + ' ms':>16}{'of f+b':>8}" for m in args.methods)
    print(head + f"{'DeMo ref ms':>13}{'of f+b':>8}")
    rows = []
    for preset in args.presets:
        r = measure(preset, world=args.world, batch=args.batch, seq_len=args.seq_len, repeats=args.repeats, args=args)
        rows.append(r)
        cells = "".join(f"{r[m]:>16.1f}{r[m] / r['fwd_bwd']:>8.1%}" for m in args.methods)
        cpu = "  CPU-time shares: " + ", ".join(f"{m} {r[m + '_cpu'] / r['fwd_bwd_cpu']:.1%}" for m in args.methods)
        print(f"{r['preset']:<7}{r['params']:>12,}{r['fwd_bwd']:>12.1f}{cells}{r['reference']:>13.1f}"
              f"{r['reference'] / r['fwd_bwd']:>8.1%}" + cpu, flush=True)
    small = next((r for r in rows if r["preset"] == "small"), None)
    if small and "distro" in small:
        share, speedup = small["distro"] / small["fwd_bwd"], small["reference"] / small["distro"]
        cpu = small["distro_cpu"] / small["fwd_bwd_cpu"]
        print(f"targets at small: DisTrO {share:.1%} of fwd+bwd wall time, {cpu:.1%} of its CPU time "
              f"(<= 10%: {'met' if share <= 0.10 else 'NOT met'} / {'met' if cpu <= 0.10 else 'NOT met'}), "
              f"{speedup:.1f}x faster than the per-tensor DeMo reference (>= 2x: {'met' if speedup >= 2 else 'NOT met'})")
    if "distro" in args.methods and "distro-coded" in args.methods:
        index_coding(args, rows)
    if not args.no_others:
        methods_overhead(args)
    return 0


def index_coding(args, rows: list[dict]) -> None:
    """`index: coded` (issue 37) against u16: the codec's own time (sort, encode this worker's indices, decode
    `--world` workers'), measured alone on each preset's DisTrO groups, as a share of forward+backward."""
    print(f"\nindex coding at topk {args.topk}: Elias-Fano (sort + encode + {args.world} decodes) against u16, "
          f"share of fwd+bwd (target <= 2%)")
    for r in rows:
        model = build_model(ModelConfig(**MODELS[r["preset"]]), seed=0)
        params = list(model.named_parameters())
        per_format = {}
        for index in ("auto", "coded"):
            groups = _distro(params, LoopbackComm(args.world), argparse.Namespace(**{**vars(args), "topk": args.topk}),
                             index=index).groups
            sets = [torch.rand(g.n_chunks, g.chunk_numel).topk(g.k, dim=1, sorted=False).indices for g in groups]

            def codec_round(groups=groups, sets=sets):
                for g, idx in zip(groups, sets):
                    buf = g.index.encode(g.index.arrange(idx))
                    for _ in range(args.world):
                        g.index.decode(buf, g.n_chunks)
            samples = [_timed(codec_round) for _ in range(args.repeats)]
            per_format[index] = statistics.median(samples) * 1e3
        share = per_format["coded"] / r["fwd_bwd"]
        print(f"{r['preset']:<7} u16 {per_format['auto']:.2f} ms, coded {per_format['coded']:.2f} ms = {share:.2%} of "
              f"fwd+bwd {r['fwd_bwd']:.1f} ms ({'met' if share <= 0.02 else 'NOT met'}); in the step: distro "
              f"{r['distro']:.1f} ms, distro-coded {r['distro-coded']:.1f} ms", flush=True)


# ---- the other methods (issue 17): DiLoCo, SparseLoCo, PowerSGD, with AdamW for scale -------------------
# Each method's own compute per step (compress, decompress, apply; the collectives are the loopback's) as a
# share of forward+backward. DiLoCo and SparseLoCo do an inner AdamW step every step and a sync every H steps:
# their per-step figure is the inner step plus the sync amortised over their default H (DiLoCo 100,
# SparseLoCo 15); the sync itself is printed beside it. PowerSGD is measured once compression has started.

def _method_configs():
    from distro_bench.scenario.optimizers import AdamWConfig, DiLoCoConfig, PowerSGDConfig, SparseLoCoConfig

    return {
        "adamw": AdamWConfig(lr=1e-4),
        "diloco": DiLoCoConfig(lr=1e-4),
        "diloco-int8": DiLoCoConfig(lr=1e-4, pseudo_grad="int8"),
        "sparseloco": SparseLoCoConfig(lr=1e-4),
        "powersgd": PowerSGDConfig(lr=1e-4, rank=2, start_step=2),
    }


def measure_methods(preset: str, *, world: int, batch: int, seq_len: int, repeats: int, warmup: int = 3) -> list[dict]:
    """Median ms per step of each method's own work; for periodic methods also the sync (inner_steps = 1, so
    every measured step syncs: sync = that step's work - a plain inner step)."""
    from distro_bench.train.optim import get_strategy

    _model, params, fwd_bwd = _model_and_step(preset, batch, seq_len)

    strategies = {}
    for name, cfg in _method_configs().items():
        period = getattr(cfg, "inner_steps", 1)
        every_step = cfg.model_copy(update={"inner_steps": 1}) if period > 1 else cfg
        strategies[name] = (get_strategy(cfg.type)(every_step, params, LoopbackComm(world), total_steps=10**6), period)
    timer = PhaseTimer(torch.device("cpu"))
    times: dict[str, list[float]] = {name: [] for name in strategies}
    fb_times = []
    with torch.no_grad():
        snapshot = [p.detach().clone() for _, p in params]
    for i in range(warmup + repeats):
        for name, (strategy, _) in strategies.items():  # interleaved, as above: load falls on all alike
            fb = _timed(fwd_bwd)
            timer.take()
            strategy.step(i, timer)
            phases = timer.take()
            with torch.no_grad():  # every method starts its step from the same weights
                for (_, p), s0 in zip(params, snapshot):
                    p.copy_(s0)
            if i >= warmup:
                fb_times.append(fb)
                times[name].append(phases.get("compress", 0.0) + phases.get("apply", 0.0))
    fb = statistics.median(fb_times) * 1e3
    inner = statistics.median(times["adamw"]) * 1e3  # AdamW's apply is the inner step (plus its tiny pack)
    rows = []
    for name, (_, period) in strategies.items():
        step = statistics.median(times[name]) * 1e3
        if period > 1:
            sync = max(0.0, step - inner)
            per_step, note = inner + sync / period, f"sync {sync:.1f} ms every {period} steps"
        else:
            per_step, note = step, ""
        rows.append({"preset": preset, "method": name, "fwd_bwd_ms": fb, "own_ms": per_step, "note": note})
    return rows


def methods_overhead(args) -> None:
    print(f"\nother methods: own compute per step (compress, decompress, apply), {args.world} workers aggregated")
    print(f"{'preset':<7}{'method':<13}{'fwd+bwd ms':>12}{'own ms':>9}{'of f+b':>8}  note")
    for preset in args.presets:
        for r in measure_methods(preset, world=args.world, batch=args.batch, seq_len=args.seq_len, repeats=args.repeats):
            print(f"{r['preset']:<7}{r['method']:<13}{r['fwd_bwd_ms']:>12.1f}{r['own_ms']:>9.1f}"
                  f"{r['own_ms'] / r['fwd_bwd_ms']:>8.1%}  {r['note']}", flush=True)


if __name__ == "__main__":
    sys.exit(main())
