"""GPU acceptance (issue 34 item 6): what a machine with a CUDA GPU proves about the harness, in one script of at
most 8 minutes, and the same steps on the CPU with small sizes (`--dry`) so that CI runs it and it never rots.

    benchmarks/gpu_acceptance.sh                 # on the GPU box: CUDA
    benchmarks/gpu_acceptance.sh --dry           # anywhere: the same steps on the CPU, small sizes (CI)

Steps, each printing one line (PASS, FAIL or SKIP with its figure), then a table; the exit status is 1 when a step
FAILed, 2 on bad arguments, else 0:

1. environment: torch, CUDA, the device's name, NCCL's version, the GPU count, the harness's Python dependencies,
   and a one-rank process group (NCCL on CUDA, gloo on the CPU) that all-reduces on the device.
2. fidelity: our DisTrO against DeMo written from its equations (benchmarks/distro_reference.py), three workers
   on threads, both on the device, by the comparison of tests/unit/train/test_distro_reference.py (its core is reused,
   not copied); on CUDA also ours on CUDA against ours on the CPU. Bit-identity is not expected there: the DCTs
   are GEMMs, and cuBLAS blocks and sums them in another order than the CPU's BLAS (no FFT is involved), so
   float32 results differ by about 1e-7 relative. The tolerance is the test's: each step moves a parameter by
   exactly +-lr or 0, so parameters agree to 1e-6 except where an update lies within rounding of 0 or two
   coefficients within rounding of a top-k tie, and such elements may be at most 0.1% of a tensor. Replicas
   must be bit-identical (every rank decodes the same buffers with the same operations on the same device),
   and the payload predicted from the shapes must equal the bytes handed to the gathers, in three wire formats.
3. run: `distro-bench run scenarios/ci-smoke.yaml` with every worker's hardware `device: cuda` (`cpu` in the dry
   mode, which trains two of its four workers, one seed, for a few steps), on the netns backend where root and
   namespaces allow it (links shaped), else local (loopback, unshaped), and says which. The process-group
   backend is the harness's choice (harness/distro_bench/run/lifecycle.py choose_dist_backend): with one GPU and
   four workers it is gloo, as NCCL refuses two ranks on one GPU; NCCL with a GPU per worker. Checks that the run
   is complete, its folder holds every file, every worker ran on the device, and the replicas agree.
4. ladder: the size ladder's largest rung (issue 34 item 5; `base`, 27.5M parameters) through
   benchmarks/size_ladder.py's `run_rung`: AdamW and DisTrO at the shoot-out's rates, home-dsl's four workers on
   the device, 100 steps each, unshaped (the ladder's equal-tokens setting: synchronous methods' losses do not
   depend on the links). PASS when the run is complete, replicas agree and each val loss is below the uniform
   model's ln 256. The dry mode trains the smallest rung, two workers, 3 steps.
5. optimizer-compute (issue 48 item 3): benchmarks/optimizer_compute.py on the device at llama-1.2b's shapes
   (layer 0 whole: its four 2048 x 2048 attention and three 8192 x 2048 MLP matrices, 67M parameters), 2, 8 and
   32 workers:
   each method's own compress + apply seconds per parameter, fitted a + b (N - 1), written to
   results/optimizer-compute-cuda.json. Copied to harness/distro_bench/data/published/ and named in a new dated
   time model, it replaces the assumed CPU-to-H100 rule of the published time rows (docs/projection.md). PASS
   when every method was timed; the figure is DisTrO's and AdamW's nanoseconds a parameter at 32 workers and the
   1.2B step's optimizer compute they imply. The dry mode times the `tiny` model's tensors on the CPU, 2 workers.

The figures go to a JSON file (--out; default results/gpu-acceptance.json, results/gpu-acceptance-dry.json in the
dry mode, so CI never overwrites a GPU run's figures), for recording in docs.
"""

from __future__ import annotations

import argparse
import datetime
import importlib.util
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

REPO = Path(__file__).resolve().parents[1]
for _p in (REPO, REPO / "harness"):  # tests.* and distro_bench, also when run without the wrapper
    if str(_p) not in sys.path:
        sys.path.insert(0, str(_p))

SCHEMA_VERSION = 1
PASS, FAIL, SKIP = "PASS", "FAIL", "SKIP"
STEPS = ("environment", "fidelity", "run", "ladder", "optimizer-compute")
# What `distro-bench run` imports (pyproject's dependencies less torch), and what the netns and docker backends add.
NEEDED = ("pydantic", "yaml", "typer", "rich", "pandas", "pyarrow", "matplotlib")
OPTIONAL = {"pyroute2": "the netns backend (shaped links)", "docker": "the docker backend (not used here)"}
# Every file a complete run folder holds (docs/run-folder.md).
RUN_FILES = ("scenario.yaml", "environment.json", "metrics.parquet", "summary.json", "summary.csv", "status.json",
             "report.md", "report.html")
# Step 2's larger setting, on CUDA only (the dry mode keeps the test's small one): production chunking, 64x64
# chunks of matrices whose dimensions have a divisor 64 (so DeMo's chunking and ours agree), ten steps.
LARGE_SHAPES = [(512, 256), (256,), (1024, 384), (64, 64)]
LARGE_OPTIONS = {"lr": 0.01, "chunk": 64, "topk": 4, "decay": 0.999, "weight_decay": 0.1}
LARGE_STEPS = 10


@dataclass
class Step:
    name: str
    status: str
    figure: str  # the one line printed
    figures: dict[str, Any] = field(default_factory=dict)
    seconds: float = 0.0


def _load(path: Path, name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod  # dataclasses look their module up there
    spec.loader.exec_module(mod)
    return mod


def _missing(names) -> list[str]:
    return [n for n in names if importlib.util.find_spec(n) is None]


# ---- 1. environment -----------------------------------------------------------------------------------------

def _nccl_version(torch) -> str | None:
    try:
        v = torch.cuda.nccl.version()
    except Exception:  # a CPU build of torch has no NCCL
        return None
    return ".".join(str(x) for x in v) if isinstance(v, tuple) else str(v)


def _one_rank_all_reduce(torch, device: str) -> str:
    """A world-1 process group on the device (NCCL on CUDA, gloo on the CPU) all-reduces a tensor: '' when it
    worked, else what went wrong."""
    import torch.distributed as dist

    backend = "nccl" if device == "cuda" else "gloo"
    with tempfile.TemporaryDirectory() as tmp:
        try:
            dist.init_process_group(backend, init_method=f"file://{tmp}/store", rank=0, world_size=1)
            t = torch.arange(4, dtype=torch.float32, device=device)
            dist.all_reduce(t)
            if device == "cuda":
                torch.cuda.synchronize()
            if t.cpu().tolist() != [0.0, 1.0, 2.0, 3.0]:
                return f"{backend} all-reduce of one rank gave {t.cpu().tolist()}"
            return ""
        except Exception as e:
            return f"{backend}: {type(e).__name__}: {e}"
        finally:
            if dist.is_initialized():
                dist.destroy_process_group()


def step_environment(device: str) -> Step:
    import torch

    cuda = torch.cuda.is_available()
    figures: dict[str, Any] = {
        "python": sys.version.split()[0], "host": platform.node(), "kernel": platform.release(), "root": os.geteuid() == 0,
        "torch": torch.__version__, "torch_cuda": torch.version.cuda, "cuda_available": cuda,
        "gpu_count": torch.cuda.device_count() if cuda else 0,
        "device_name": torch.cuda.get_device_name(0) if cuda else None,
        "nccl_version": _nccl_version(torch) if cuda else None,
        "missing_modules": _missing(NEEDED), "missing_optional": _missing(OPTIONAL),
    }
    problems = []
    if device == "cuda" and not cuda:
        problems.append("torch sees no CUDA device (run --dry on a machine without one)")
    if figures["missing_modules"]:
        problems.append("missing " + ", ".join(figures["missing_modules"])
                        + ": carry their wheels (docs/testing.md, 'GPU acceptance')")
    if not problems:
        error = _one_rank_all_reduce(torch, device)
        figures["process_group"] = error or ("nccl" if device == "cuda" else "gloo") + " all-reduce ok"
        if error:
            problems.append(error)
    what = (f"torch {figures['torch']}, CUDA {figures['torch_cuda']}, {figures['gpu_count']} x {figures['device_name']}, "
            f"NCCL {figures['nccl_version']}" if cuda else f"torch {figures['torch']}, no CUDA (device cpu)")
    if figures["missing_optional"]:
        what += "; without " + ", ".join(f"{m} ({OPTIONAL[m]})" for m in figures["missing_optional"])
    if "process_group" in figures:
        what += f"; {figures['process_group']}"
    return Step("environment", FAIL if problems else PASS, "; ".join(problems) if problems else what, figures)


# ---- 2. fidelity --------------------------------------------------------------------------------------------

def _reference_tests() -> ModuleType:
    """tests/unit/train/test_distro_reference.py: the comparison's device-generic core."""
    return importlib.import_module("tests.unit.train.test_distro_reference")


def step_fidelity(device: str, large: bool) -> Step:
    import torch

    ref = _reference_tests()
    settings = [("small", ref.SHAPES, ref.OPTIONS, ref.STEPS)]
    if large:
        settings.append(("large", LARGE_SHAPES, LARGE_OPTIONS, LARGE_STEPS))
    figures: dict[str, Any] = {"atol": ref.ATOL, "max_share_differing": ref.MAX_DIFFER, "world": ref.WORLD,
                               "settings": {}, "payload": {}}
    if device == "cuda":  # TF32 GEMMs would round at 1e-3, not 1e-7: torch leaves them off unless asked
        figures["tf32_matmul"] = torch.backends.cuda.matmul.allow_tf32
    problems: list[str] = []
    worst_demo = worst_cpu = 0.0
    for label, shapes, options, steps in settings:
        for values in ("fp32", "1bit"):
            opts = {**options, "values": values, "weight_decay_on": "all"}  # DeMo decays every tensor
            kw = {"shapes": shapes, "steps": steps}
            ours = ref.train_distro(opts, device, **kw)
            demo = ref.train_demo(opts, device, **kw)
            start = ref._initial(shapes, device)
            row: dict[str, Any] = {"params": sum(p.numel() for p in start), "steps": steps}
            row["vs_demo_share"], row["vs_demo_max_abs"] = ref.differing(ours[0], demo[0])
            row["moved"] = all(not torch.equal(a, p0) for a, p0 in zip(ours[0], start))
            row["replicas_identical"] = ref.identical(ours)
            if device != "cpu":
                cpu = ref.train_distro(opts, "cpu", **kw)
                row["vs_cpu_share"], row["vs_cpu_max_abs"] = ref.differing(ours[0], cpu[0])
                row["vs_cpu_bit_identical"] = all(torch.equal(a.cpu(), b) for a, b in zip(ours[0], cpu[0]))
                worst_cpu = max(worst_cpu, row["vs_cpu_share"])
            worst_demo = max(worst_demo, row["vs_demo_share"])
            name = f"{label}-{values}"
            figures["settings"][name] = row
            if row["vs_demo_share"] > ref.MAX_DIFFER:
                problems.append(f"{name}: {row['vs_demo_share']:.3%} of elements differ from DeMo by > {ref.ATOL:g}")
            if row.get("vs_cpu_share", 0.0) > ref.MAX_DIFFER:
                problems.append(f"{name}: {row['vs_cpu_share']:.3%} of elements differ from the CPU run")
            if not row["moved"]:
                problems.append(f"{name}: a parameter did not move")
            if not row["replicas_identical"]:
                problems.append(f"{name}: replicas differ")
    formats = {"demo-fp32-int64": {"values": "fp32", "index": "int64", "bucket": False},
               "distro-1bit-bucket": {"values": "1bit", "bucket": True}, "bf16": {"values": "bf16"}}
    for name, fmt in formats.items():
        paid = ref.payload_bytes({**ref.OPTIONS, **fmt}, device)
        figures["payload"][name] = asdict(paid)
        if paid.counted != paid.predicted or (paid.reference is not None and paid.reference != paid.counted):
            problems.append(f"payload {name}: predicted {paid.predicted}, counted {paid.counted}, DeMo {paid.reference}")
    figures["worst_share_vs_demo"] = worst_demo
    if device != "cpu":
        figures["worst_share_vs_cpu"] = worst_cpu
    what = (f"{len(figures['settings'])} settings on {device}: at most {worst_demo:.3%} of elements off DeMo by "
            f"> {ref.ATOL:g} (allowed {ref.MAX_DIFFER:.1%})")
    if device != "cpu":
        what += f", {worst_cpu:.3%} off the CPU run"
    what += f"; replicas bit-identical; payload predicted == counted in {len(formats)} wire formats"
    return Step("fidelity", FAIL if problems else PASS, "; ".join(problems) or what, figures)


# ---- 3. a real run ------------------------------------------------------------------------------------------

def acceptance_scenario(device: str, dry: bool) -> dict[str, Any]:
    """scenarios/ci-smoke.yaml with every worker on `device` (and, dry, two workers and one seed)."""
    import yaml

    doc = yaml.safe_load((REPO / "scenarios" / "ci-smoke.yaml").read_text())
    doc["name"] = "gpu-acceptance" + ("-dry" if dry else "")
    doc["description"] = f"ci-smoke with every worker on {device} (benchmarks/gpu_acceptance.py)"
    doc["hardware"] = {**doc.get("hardware", {}), "acceptance": {"device": device, "compute_scale": 1.0}}
    for group in doc["workers"]:
        group["hardware"] = "acceptance"
    if dry:  # two workers (four torch processes at once crawl on a 2-core CI host), one seed
        doc["workers"] = [{**doc["workers"][0], "count": 2}]
        doc["train"] = {**doc["train"], "seeds": [0]}
        doc["train"].pop("seed", None)
    return doc


def _choose_backend(requested: str, scenario) -> tuple[str, str]:
    """(backend, why): netns where it can run (links shaped), else local; an explicit choice is taken as asked."""
    if requested == "local":
        return "local", "requested"
    if _missing(["pyroute2"]):
        ok, why = False, "pyroute2 is not installed"
    else:
        from distro_bench.backends.netns import NetnsBackend

        ok, why = NetnsBackend.probe(scenario)
    if ok:
        return "netns", f"links shaped ({why})"
    if requested == "netns":
        raise RuntimeError(f"--backend netns cannot run here: {why}")
    return "local", f"loopback, links not shaped (netns: {why})"


def _worker_devices(run_dir: Path) -> set[str]:
    """The devices the workers' start records name (workers/<optimizer>/[seed<S>/]rank<R>.jsonl)."""
    devices = set()
    for path in run_dir.glob("workers/**/rank*.jsonl"):
        for line in path.read_text().splitlines():
            try:
                rec = json.loads(line)
            except ValueError:
                continue
            if isinstance(rec, dict) and rec.get("type") == "start":
                devices.add(str(rec.get("device")))
    return devices


def step_run(device: str, dry: bool, backend: str, runs: Path, steps: int | None, timeout_s: float) -> Step:
    missing = _missing(NEEDED)
    if missing:
        return Step("run", FAIL, f"cannot run the harness without {', '.join(missing)}")
    import torch
    import yaml

    from distro_bench import api
    from distro_bench.run.lifecycle import choose_dist_backend

    runs.mkdir(parents=True, exist_ok=True)
    path = runs / ("gpu-acceptance-dry.yaml" if dry else "gpu-acceptance.yaml")
    path.write_text(yaml.safe_dump(acceptance_scenario(device, dry), sort_keys=False))
    scenario = api.validate(path)
    figures: dict[str, Any] = {"scenario": str(path), "workers": len(scenario.nodes())}
    try:
        figures["backend"], figures["backend_why"] = _choose_backend(backend, scenario)
    except RuntimeError as e:
        return Step("run", FAIL, str(e), figures)
    dist_backend = choose_dist_backend(scenario)
    gpus = figures["gpus"] = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if dist_backend == "gloo" and device == "cuda":
        why = (f"{figures['workers']} workers on {gpus} GPU(s): NCCL refuses two ranks on one GPU, gloo moves the "
               "CUDA tensors")
    elif dist_backend == "gloo":
        why = "CPU workers"
    else:
        why = "a GPU per worker"
    figures["dist_backend"], figures["dist_backend_why"] = dist_backend, why
    argv = [sys.executable, "-m", "distro_bench", "run", str(path), "--backend", figures["backend"], "--out", str(runs)]
    if steps:
        argv += ["--steps", str(steps)]
    figures["argv"] = argv[1:]
    started = time.monotonic()
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s, cwd=REPO)
    except subprocess.TimeoutExpired:
        return Step("run", FAIL, f"distro-bench run did not end within {timeout_s:g} s", figures)
    figures["wall_s"] = round(time.monotonic() - started, 1)
    lines = [ln.strip() for ln in proc.stdout.splitlines() if ln.strip()]
    run_dir = Path(lines[-1]) if lines else None
    if proc.returncode != 0 or run_dir is None or not run_dir.is_dir():
        tail = (proc.stderr.strip().splitlines() or lines or ["no output"])[-1]
        return Step("run", FAIL, f"distro-bench run exited {proc.returncode}: {tail}", figures)
    figures["run_dir"] = str(run_dir)
    problems = []
    absent = [f for f in RUN_FILES if not (run_dir / f).is_file()]
    if absent:
        problems.append("run folder lacks " + ", ".join(absent))
    status = json.loads((run_dir / "status.json").read_text()) if (run_dir / "status.json").is_file() else {}
    figures["state"] = status.get("state")
    if status.get("state") != "complete":
        problems.append(f"run is {status.get('state')}: {status.get('reason')}")
    devices = figures["worker_devices"] = sorted(_worker_devices(run_dir))
    if not devices or any(not d.startswith(device) for d in devices):
        problems.append(f"workers ran on {devices or 'no device recorded'}, not {device}")
    summary = json.loads((run_dir / "summary.json").read_text()) if (run_dir / "summary.json").is_file() else {}
    keys = ("steps", "step_time_s_mean", "payload_tx_bytes_per_step", "wire_tx_bytes_per_step",
            "reduction_vs_baseline", "final_val_loss", "replicas_identical")
    optimizers = summary.get("optimizers", {})
    figures["optimizers"] = {name: {k: s.get(k) for k in keys} for name, s in optimizers.items()}
    if not optimizers:
        problems.append("summary.json names no optimizer")
    for name, s in optimizers.items():
        if s.get("replicas_identical") is not True:
            problems.append(f"{name}: replicas_identical is {s.get('replicas_identical')}")
    red = optimizers.get("distro", {}).get("reduction_vs_baseline")
    what = (f"{figures['workers']} workers on {','.join(devices)} over {figures['backend']} ({figures['backend_why']}), "
            f"{dist_backend} ({why}); complete, {len(RUN_FILES)} files, replicas identical"
            + (f", DisTrO {red:.0f}x fewer bytes" if isinstance(red, (int, float)) else "")
            + f"; {figures['wall_s']:g} s")
    return Step("run", FAIL if problems else PASS, "; ".join(problems) or what, figures)


# ---- 4. the size ladder's largest rung ----------------------------------------------------------------------

LADDER = REPO / "benchmarks" / "size_ladder.py"


def ladder_rung(preset: str | None, device: str, out: Path, dry: bool = False) -> Step:
    """Train the size ladder's rung `preset` (None: its largest; dry, its smallest, small and short) on `device`,
    with the figures it reports. benchmarks/size_ladder.py provides `RUNGS` (preset names, smallest first) and
    `run_rung(preset, *, device, out, ...) -> dict` (its figures, with a `status` of PASS or FAIL and a `figure`)."""
    if not LADDER.is_file():
        return Step("ladder", SKIP, "benchmarks/size_ladder.py does not exist yet (issue 34 item 5): no rung to train",
                    {"preset": preset})
    mod = _load(LADDER, "size_ladder")
    if not hasattr(mod, "run_rung") or not hasattr(mod, "RUNGS"):
        return Step("ladder", SKIP, "benchmarks/size_ladder.py has no RUNGS and run_rung(preset, device, out) yet",
                    {"preset": preset})
    preset = preset or (mod.RUNGS[0] if dry else mod.RUNGS[-1])
    small = {"steps": 3, "workers": 2} if dry else {}
    figures = dict(mod.run_rung(preset, device=device, out=out, **small))
    status = figures.pop("status", FAIL)
    return Step("ladder", status if status in (PASS, FAIL) else FAIL, f"{preset}: {figures.pop('figure', '')}",
                {"preset": preset, **figures})


# ---- 5. each method's own optimizer compute ------------------------------------------------------------------

OPTIMIZER_COMPUTE = REPO / "benchmarks" / "optimizer_compute.py"


def step_optimizer_compute(device: str, out: Path, dry: bool = False) -> Step:
    """benchmarks/optimizer_compute.py on `device`: at llama-1.2b's shapes (layer 0's tensors) and 2, 8, 32
    workers; dry: the tiny model's tensors on the CPU, 2 workers, one repeat."""
    import math

    from distro_bench.scenario.presets import MODELS
    from distro_bench.train.model import ModelConfig, parameter_shapes

    params_1_2b = sum(math.prod(s) for s in parameter_shapes(ModelConfig(**MODELS["llama-1.2b"])).values())
    mod = _load(OPTIMIZER_COMPUTE, "optimizer_compute")
    target = out.parent / ("optimizer-compute-dry.json" if dry else "optimizer-compute-cuda.json")
    argv = ["--device", device, "--out", str(target)]
    argv += (["--model", "tiny", "--worlds", "2", "--repeats", "1", "--sample-params", str(1 << 22)] if dry else
             ["--model", "llama-1.2b", "--worlds", "2", "8", "32", "--repeats", "3", "--layer", "0"])
    rc = mod.main(argv)
    if rc != 0 or not target.is_file():
        return Step("optimizer-compute", FAIL, f"benchmarks/optimizer_compute.py exited {rc}", {"out": str(target)})
    result = json.loads(target.read_text())
    methods = result["methods"]
    world = max(result["methods"]["distro"]["per_world"], key=lambda r: r["world"])["world"]

    def ns(name: str) -> float:
        row = next(r for r in methods[name]["per_world"] if r["world"] == world)
        return row["step_s_per_param"] * 1e9

    figure = (f"{world} workers: DisTrO {ns('distro'):.2f} ns a parameter, AdamW {ns('adamw'):.2f}; at 1.2B: "
              f"{ns('distro') * params_1_2b * 1e-9:.3f} s and {ns('adamw') * params_1_2b * 1e-9:.3f} s a step")
    return Step("optimizer-compute", PASS if all(m["per_world"] for m in methods.values()) else FAIL, figure,
                {"out": str(target), "device": result["device"], "copy_bandwidth_Bps": result["copy_bandwidth_Bps"],
                 "ns_per_param": {name: ns(name) for name in methods}})


# ---- the script ---------------------------------------------------------------------------------------------

def _timed(name: str, fn: Callable[[], Step]) -> Step:
    start = time.monotonic()
    try:
        step = fn()
    except Exception as e:  # a step that breaks is a FAIL with its reason, and the next step still runs
        step = Step(name, FAIL, f"{type(e).__name__}: {e}")
    step.seconds = round(time.monotonic() - start, 2)
    print(f"{step.status:<4}  {step.name:<11} {step.figure}  ({step.seconds:g} s)", flush=True)
    return step


def _table(steps: list[Step]) -> str:
    width = max([len("step")] + [len(s.name) for s in steps])
    rows = [f"{'step':<{width}}  result  seconds", f"{'-' * width}  ------  -------"]
    rows += [f"{s.name:<{width}}  {s.status:<6}  {s.seconds:>7.1f}" for s in steps]
    return "\n".join(rows)


def _git_commit() -> str | None:
    if shutil.which("git") is None:  # a machine the checkout was copied to may have no git
        return None
    out = subprocess.run(["git", "-C", str(REPO), "rev-parse", "HEAD"], capture_output=True, text=True)
    return out.stdout.strip() if out.returncode == 0 else None


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0] if __doc__ else None)
    p.add_argument("--dry", action="store_true", help="the same steps on the CPU with small sizes (CI)")
    p.add_argument("--out", type=Path, help="JSON of the figures (default results/gpu-acceptance.json; "
                   "results/gpu-acceptance-dry.json with --dry)")
    p.add_argument("--runs", type=Path, help="folder for step 3's scenario and run folder (default: beside --out)")
    p.add_argument("--backend", choices=["auto", "netns", "local"], default="auto",
                   help="step 3's backend: auto takes netns where it can run, else local")
    p.add_argument("--steps", type=int, help="step 3's training steps (default: the scenario's 30; 4 with --dry)")
    p.add_argument("--timeout", type=float, help="step 3's limit in seconds (default 360; 300 with --dry)")
    p.add_argument("--ladder-preset", help="step 4's rung (default: the ladder's largest; with --dry its smallest)")
    p.add_argument("--only", choices=STEPS, action="append", help="run only this step (repeatable)")
    args = p.parse_args(argv)
    if args.steps is not None and args.steps < 1:
        p.error(f"--steps: {args.steps} is not a step count; give 1 or more")
    if args.timeout is not None and args.timeout <= 0:
        p.error(f"--timeout: {args.timeout:g} s; give a positive number of seconds")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    device = "cpu" if args.dry else "cuda"
    out = args.out or REPO / "results" / ("gpu-acceptance-dry.json" if args.dry else "gpu-acceptance.json")
    runs = args.runs or out.parent / (out.stem + "-runs")
    steps = args.steps or (4 if args.dry else None)
    timeout_s = args.timeout or (300.0 if args.dry else 360.0)
    wanted = args.only or list(STEPS)
    print(f"GPU acceptance ({'dry: device cpu, small sizes' if args.dry else 'device cuda'}), figures to {out}")
    plan: dict[str, Callable[[], Step]] = {
        "environment": lambda: step_environment(device),
        "fidelity": lambda: step_fidelity(device, large=not args.dry),
        "run": lambda: step_run(device, args.dry, args.backend, runs, steps, timeout_s),
        "ladder": lambda: ladder_rung(args.ladder_preset, device, runs, dry=args.dry),
        "optimizer-compute": lambda: step_optimizer_compute(device, out, dry=args.dry),
    }
    started = time.monotonic()
    done = [_timed(name, plan[name]) for name in STEPS if name in wanted]
    ok = all(s.status != FAIL for s in done)
    print()
    print(_table(done))
    record = {
        "schema_version": SCHEMA_VERSION, "mode": "dry" if args.dry else "cuda", "device": device, "ok": ok,
        "finished": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "git_commit": _git_commit(), "wall_s": round(time.monotonic() - started, 1),
        "steps": {s.name: {"status": s.status, "figure": s.figure, "seconds": s.seconds, "figures": s.figures}
                  for s in done},
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(record, indent=2, default=str) + "\n")
    print(f"{'PASS' if ok else 'FAIL'}: {sum(s.status == PASS for s in done)} passed, "
          f"{sum(s.status == FAIL for s in done)} failed, {sum(s.status == SKIP for s in done)} skipped; "
          f"figures in {out}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
