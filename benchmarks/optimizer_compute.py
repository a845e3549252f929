"""Each method's own optimizer compute, per parameter and per worker count, for the time model (issue 48 item 3).

    python benchmarks/optimizer_compute.py [--device cpu|cuda] [--model llama-1.2b] [--sample-params N]
                                           [--worlds 2 8 32] [--repeats 3] [--out FILE]

What is timed is the strategy's own step (on a CPU its CPU seconds, one thread by default: a shared host's load
does not inflate them as it does wall time; on CUDA wall time, synchronised), split into its `compress` and
`apply` phases as their wall times were (PhaseTimer):
- AdamW: gradient packing into buckets and the AdamW update (its collective is the loopback stand-in);
- DisTrO: momentum, DCT, top-k, error feedback and packing (compress); unpacking the N workers' packets,
  decoding them, the inverse DCT and the sign step (apply);
- DiLoCo / SparseLoCo: an inner AdamW step every step, and at a sync the pseudo-gradient, its compression
  (SparseLoCo: top-k, 2-bit, error feedback), decoding N workers' buffers and the outer step.
The collective is a loopback stand-in that hands back N copies of this worker's buffer, so the decode of N-1
peers' packets is real work on real sizes; no network is involved and nothing is counted.

The tensors are whole tensors of the model's own shapes, taken in order while they fit in --sample-params (at
llama-1.2b and the default 8.4M: one 2048 x 2048 attention projection and every norm vector, 4.3M parameters; the
8192 x 2048 MLP and 32000 x 2048 embedding matrices are chunked alike, 64 x 64, but not timed themselves), so
chunking and bucketing see real shapes;
seconds are divided by the parameters sampled (per-parameter figures: a model's are these x its parameters).
Per worker count, a line a + b (N - 1) per parameter is fitted (least squares), so the projection can take any N.

The projection (harness/distro_bench/train/projection.py via studies/time_model.py) reads the committed file
(harness/distro_bench/data/published/optimizer-compute-*.json) and carries CPU seconds to a GPU by the ratio of
memory bandwidths (the host's copy bandwidth, measured here, over the datasheet's): an assumed rule, shown with
its sensitivity. On a GPU (`--device cuda`, benchmarks/gpu_acceptance.sh) the same file is written from CUDA
timings at the 1.2B shapes, which need no carrying.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import torch

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "harness"))
sys.path.insert(0, str(REPO / "benchmarks"))

from distro_bench.scenario.methods import options_class  # noqa: E402
from distro_bench.scenario.presets import MODELS  # noqa: E402
from distro_bench.train.model import ModelConfig, parameter_shapes  # noqa: E402
from distro_bench.train.optim import get_strategy  # noqa: E402
from distro_bench.train.optim.base import PhaseTimer  # noqa: E402
from distro_bench.train.replay import codec_sample  # noqa: E402

SCHEMA_VERSION = 1
# The methods and the options they are timed with: the DisTrO report's scenario (distro-report-1.2b.yaml) for
# AdamW and DisTrO; the published defaults (scenario/optimizers.py) for DiLoCo and SparseLoCo, with a short
# period so a sync is reached (its cost per sync does not depend on H).
METHODS: dict[str, dict] = {
    "adamw": {"type": "adamw", "lr": 4e-4, "weight_decay": 0.1, "grad_dtype": "bf16"},
    "distro": {"type": "distro", "lr": 4e-4, "topk": 4, "chunk": 64, "values": "1bit", "bucket": True},
    "diloco": {"type": "diloco", "lr": 4e-4, "inner_steps": 2},
    "sparseloco": {"type": "sparseloco", "lr": 4e-4, "inner_steps": 2},
    # DeMo's straightforward per-tensor implementation (benchmarks/distro_reference.py) with DisTrO's wire options:
    # the same method without our bucketing and batched chunks, as a released reference codes it. The DisTrO
    # report's code is unpublished; this is how much an implementation alone moves the codec's cost.
    "demo-reference": {"type": "demo-reference", "lr": 4e-4, "topk": 4, "chunk": 64, "decay": 0.999, "values": "1bit"},
}


class _Reference:
    """ReferenceDeMo behind the Strategy step signature: its whole step (encode, gather, decode) is `apply`."""

    def __init__(self, options: dict, params, comm):
        from distro_reference import ReferenceDeMo

        kw = {k: v for k, v in options.items() if k != "type"}
        self.ref = ReferenceDeMo([p for _, p in params], comm, **kw)

    def step(self, step: int, timer) -> None:
        with timer.phase("apply"):
            self.ref.step()


class LoopbackComm:
    """Stands in for the process group: every 'worker' sends what this one sent (N copies), so decoding N
    packets is real work; `calls` tells a sync step from a local one."""

    def __init__(self, world_size: int):
        self.rank, self.world_size, self.calls = 0, world_size, 0

    def all_gather(self, tensor: torch.Tensor, **_) -> list[torch.Tensor]:
        self.calls += 1
        return [tensor] + [tensor.clone() for _ in range(self.world_size - 1)]

    def all_gather_async(self, tensor: torch.Tensor, **kw):
        out = self.all_gather(tensor)
        return SimpleNamespace(wait=lambda: out)

    def all_reduce(self, tensor: torch.Tensor) -> torch.Tensor:
        self.calls += 1
        return tensor


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize()


def copy_bandwidth(device: torch.device, nbytes: int = 1 << 28, repeats: int = 5) -> float:
    """Bytes per second of a large tensor copy (read + write counted), best of `repeats`, with the threads the
    methods are timed with (CPU seconds on a CPU, as they are): the yardstick CPU seconds are carried to a GPU's
    memory bandwidth with."""
    a = torch.empty(nbytes // 4, dtype=torch.float32, device=device).uniform_()
    b = torch.empty_like(a)
    clock = time.perf_counter if device.type == "cuda" else time.process_time
    best = float("inf")
    for _ in range(repeats):
        _sync(device)
        start = clock()
        b.copy_(a)
        _sync(device)
        best = min(best, clock() - start)
    return 2 * nbytes / best


def measure(name: str, options: dict, shapes: dict, world: int, device: torch.device, repeats: int) -> dict:
    """Seconds per parameter of one method at `world` workers: every step's (`step_s_per_param`) and, for a
    periodic method, a sync's extra (`sync_s_per_param`), each split into compress and apply."""
    gen = torch.Generator().manual_seed(0)
    params = [(n, torch.nn.Parameter((torch.randn(s, generator=gen) * 0.02).to(device))) for n, s in shapes.items()]
    comm = LoopbackComm(world)
    steps = 2 + 2 * max(repeats, 2)
    if options["type"] == "demo-reference":
        strategy = _Reference(options, params, comm)
    else:
        cfg = options_class(options["type"])(**options)
        strategy = get_strategy(cfg.type)(cfg, params, comm, steps)
    timer = PhaseTimer(device)
    local: list[tuple[float, float]] = []
    synced: list[tuple[float, float]] = []
    clock = time.perf_counter if device.type == "cuda" else time.process_time
    for step in range(steps):
        for _, p in params:
            p.grad = torch.randn(p.shape, generator=gen).to(device) * 1e-3
        before = comm.calls
        timer.take()
        _sync(device)
        start = clock()
        strategy.step(step, timer)
        _sync(device)
        spent = clock() - start
        phases = timer.take()
        if step < 2:  # the first steps build buffers (and a periodic method's first sync)
            continue
        # On a CPU the step's own CPU seconds (not inflated when other processes take the cores: this host is
        # shared), split between compress and apply as the phases' wall times were; on CUDA wall time, synced.
        wall = phases.get("compress", 0.0) + phases.get("apply", 0.0)
        share = phases.get("compress", 0.0) / wall if wall > 0 else 0.0
        pair = (spent * share, spent * (1 - share))
        (synced if comm.calls > before else local).append(pair)
    n = sum(p.numel() for _, p in params)
    out: dict = {"world": world, "params_sampled": n}
    periodic = bool(local) and bool(synced)
    every = local if periodic else synced or local
    out["step_compress_s_per_param"] = statistics.median(c for c, _ in every) / n
    out["step_apply_s_per_param"] = statistics.median(a for _, a in every) / n
    out["step_s_per_param"] = out["step_compress_s_per_param"] + out["step_apply_s_per_param"]
    if periodic:  # a sync's cost beyond the local step it ends
        sync_c = statistics.median(c for c, _ in synced) / n - out["step_compress_s_per_param"]
        sync_a = statistics.median(a for _, a in synced) / n - out["step_apply_s_per_param"]
        out.update({"sync_compress_s_per_param": max(sync_c, 0.0), "sync_apply_s_per_param": max(sync_a, 0.0),
                    "sync_s_per_param": max(sync_c, 0.0) + max(sync_a, 0.0)})
    return out


def fit_line(points: list[tuple[int, float]]) -> dict:
    """Least squares of seconds per parameter against N - 1: {"a": at one worker, "b": each further worker}."""
    xs = [w - 1 for w, _ in points]
    ys = [y for _, y in points]
    if len(set(xs)) < 2:
        return {"a": ys[0], "b": 0.0}
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    b = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)
    return {"a": my - b * mx, "b": b}


def _git_commit() -> str:
    try:
        head = subprocess.run(["git", "-C", str(REPO), "rev-parse", "HEAD"], capture_output=True, text=True,
                              check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(REPO), "status", "--porcelain"], capture_output=True, text=True,
                               check=True).stdout.strip()
        return head + ("-dirty" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def _cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    p.add_argument("--model", default="llama-1.2b", choices=sorted(MODELS))
    p.add_argument("--sample-params", type=int, default=1 << 23,
                   help="parameters sampled from the model's own tensors, whole tensors in order (default 8.4M)")
    p.add_argument("--layer", type=int, default=None,
                   help="time one transformer layer's tensors whole (its attention and MLP matrices and norms) "
                        "in place of --sample-params's first tensors")
    p.add_argument("--worlds", type=int, nargs="+", default=[2, 8, 32])
    p.add_argument("--methods", nargs="+", default=list(METHODS), choices=sorted(METHODS))
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--threads", type=int, default=1,
                   help="torch threads (default 1: on a CPU the figures are CPU seconds of one thread, which other "
                        "processes on a shared host do not inflate)")
    p.add_argument("--out", type=Path, default=None, help="results file (JSON); default: print only")
    args = p.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        print("--device cuda: no CUDA device here", file=sys.stderr)
        return 2
    every = parameter_shapes(ModelConfig(**MODELS[args.model]))
    if args.layer is not None:
        shapes = {k: v for k, v in every.items() if k.startswith(f"layers.{args.layer}.")}
        if not shapes:
            print(f"--layer: {args.layer} is not a layer of {args.model}", file=sys.stderr)
            return 2
    else:
        shapes = codec_sample(every, args.sample_params)
    bandwidth = copy_bandwidth(device)
    print(f"{args.device} ({_cpu_name() if device.type == 'cpu' else torch.cuda.get_device_name()}), "
          f"{torch.get_num_threads()} threads, load {os.getloadavg()[0]:.2f}; copy bandwidth {bandwidth / 1e9:.1f} GB/s; "
          f"{sum(int(torch.Size(s).numel()) for s in shapes.values()) / 1e6:.1f}M parameters of {args.model}")
    methods: dict = {}
    for name in args.methods:
        rows = []
        for world in args.worlds:
            row = measure(name, METHODS[name], shapes, world, device, args.repeats)
            rows.append(row)
            extra = f", sync +{row['sync_s_per_param'] * 1e9:.2f} ns" if "sync_s_per_param" in row else ""
            print(f"  {name:<11} N={world:<3} every step {row['step_s_per_param'] * 1e9:7.2f} ns/param "
                  f"(compress {row['step_compress_s_per_param'] * 1e9:.2f}, apply {row['step_apply_s_per_param'] * 1e9:.2f})"
                  f"{extra}", flush=True)
        fits = {"step": fit_line([(r["world"], r["step_s_per_param"]) for r in rows])}
        if all("sync_s_per_param" in r for r in rows):
            fits["sync"] = fit_line([(r["world"], r["sync_s_per_param"]) for r in rows])
        methods[name] = {"options": METHODS[name], "per_world": rows, "fit": fits}
    result = {
        "schema_version": SCHEMA_VERSION,
        "date": datetime.date.today().isoformat(),
        "what": "each method's own compress + apply seconds per parameter (optimizer compute), by worker count; "
                "fit: a + b (N - 1) seconds per parameter",
        "device": args.device,
        "environment": {"host": platform.node(), "cpu": _cpu_name(), "torch": torch.__version__,
                        "threads": torch.get_num_threads(), "load_average": os.getloadavg()[0],
                        "gpu": torch.cuda.get_device_name() if device.type == "cuda" else None,
                        "git_commit": _git_commit()},
        "model": args.model, "layer": args.layer, "shapes": {k: list(v) for k, v in shapes.items()},
        "copy_bandwidth_Bps": bandwidth,
        "methods": methods,
    }
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(result, indent=1) + "\n")
        print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
