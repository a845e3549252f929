"""The model-size ladder: does a method's gap to AdamW, and the methods' ranking, hold as the model grows?

    python benchmarks/size_ladder.py [--scenario scenarios/home-dsl.yaml] [--sizes tiny,small,medium]
        [--methods adamw,distro,diloco,sparseloco] [--rates scenarios/methods-home-dsl.yaml]
        [--corpus builtin:stdlib] [--seeds 3] [--first-seed 1] [--budget none|60s]
        [--tokens-per-param 20 | --tokens 400k] [--min-syncs 20]
        [--no-tune | --lr-factors 0.333,1,3 | --lrs 1e-3,3e-3,1e-2] [--tune-seed 0] [--max-widen 2]
        [--backend netns] [--tokens-backend local] [--out results/ladder] [--plan]
        [--write-docs docs/size-ladder.md]
    python benchmarks/size_ladder.py --sizes 35m,150m,350m --plan     # the GPU rungs: budgets and hours, no run
    python benchmarks/size_ladder.py [--table tiny=RUN_DIR ...] [--tokens-run tiny=RUN_DIR ...] [--write-docs F]

Defaults are compute-matched (issue 48): every rung trains `--tokens-per-param` tokens a parameter (default 20,
Chinchilla's), so size is not confounded with undertraining; a rung whose budget gives a periodic method fewer
than `--min-syncs` outer syncs (20) is refused, naming the method and the steps it needs; each method's rate is
tuned at each rung on a seed the ladder does not report, over a grid of its `--rates` rate x 0.333, 1, 3 that is
widened at an edge (`--max-widen`), so the pick is bracketed or the run says it is not. `--plan` prints each
rung's parameters, tokens, steps, syncs and the compute it needs (FLOPs, and hours on one H100 at an assumed MFU
of 0.3) without running anything. Rungs are model presets (tiny 0.49M, small 3.5M, medium 11.7M, base 27.5M) or
the GPU rungs below (35M, 150M, 350M, byte-level), which overlap the published sizes: DiLoCo scaling laws' 35M,
the DisTrO report's 50M and 300M (tried, footnote 7), DeMo's 300M and 1B.

For each size (a model preset) the scenario's network and workers are kept; the model, the corpus and the
optimizers change: `--methods`, each with its configuration and rate from `--rates` (the shoot-out's tuned
scenario), or, with `--tune`, with its rate swept at this size on `--tune-seed` (a seed the ladder does not
report; benchmarks/methods_shootout.py's sweep, the grid widened at an edge). Two runs per size through
`distro-bench run`, paired seeds `--first-seed..`:
- equal time: `--budget` seconds of training per method (what a user on this network gets per hour);
- equal tokens: `--tokens` per method (what the method does with the same data, wherever the time goes).

The table: per size and budget, each method's val loss (at equal time, or at the end of its tokens) and its
paired difference to AdamW with a 95% interval and a Holm-adjusted p over the methods (report/shootout.py);
then whether the methods' order by mean holds from size to size. `--write-docs` writes it as Markdown.
The default corpus is `builtin:stdlib` (~12 MB: the larger rungs would see `builtin:pydoc`'s 465 KB many
times over). Sizes whose steps take seconds on a CPU (base, 27.5M parameters) belong on a GPU.

The equal-tokens run goes over `--tokens-backend` (default local: loopback, unshaped). The four methods are
synchronous, so a seed's losses at a given token count do not depend on how long the links took; an unshaped
run gets them in a fraction of the time a DSL line would take AdamW's full all-reduces at the larger sizes.

`RUNGS` and `run_rung` are the GPU acceptance script's hook (benchmarks/gpu_acceptance.py step 4): one rung,
AdamW and DisTrO for a fixed number of steps on a device, with its figures and a PASS or FAIL.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "harness"))

from distro_bench.errors import InputError  # after the path insert: runs from a checkout

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
RUNGS = ("tiny", "small", "base")  # model presets, smallest first (the GPU acceptance hook's)
# Rungs only a GPU can run at 20 tokens a parameter: byte-level Llama-style shapes (ffn 3x dim) near the published
# sizes; `model` dicts the scenario takes in place of a preset.
GPU_RUNGS: dict[str, dict] = {
    "35m": {"preset": None, "dim": 640, "n_layers": 7, "n_heads": 10, "ffn_dim": 1920, "vocab_size": 256,
            "max_seq_len": 1024},
    "150m": {"preset": None, "dim": 1024, "n_layers": 11, "n_heads": 16, "ffn_dim": 3072, "vocab_size": 256,
             "max_seq_len": 1024},
    "350m": {"preset": None, "dim": 1280, "n_layers": 16, "n_heads": 20, "ffn_dim": 3840, "vocab_size": 256,
             "max_seq_len": 1024},
}
TOKENS_PER_PARAM = 20.0  # Chinchilla's compute-optimal ratio, about 20 tokens a parameter
MIN_SYNCS = 20
PLAN_MFU = 0.3  # assumed for --plan's hours: a small model on one H100 (989 TFLOPS dense bf16)
H100_TFLOPS = 989.0
# A byte-level model that predicts uniformly scores ln 256 nats a byte: a rung that trained at all is below it.
UNIFORM_LOSS = math.log(256)


def _shootout():
    """benchmarks/methods_shootout.py (its CLI call and its sweep), loaded by path: benchmarks is no package."""
    spec = importlib.util.spec_from_file_location("methods_shootout", HERE / "methods_shootout.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules["methods_shootout"] = mod
    spec.loader.exec_module(mod)
    return mod


def rung_scenario(base: dict, rates: dict, size: str, methods: list[str], corpus: str) -> dict:
    """The scenario of one rung: `base`'s network and workers, model preset `size`, `corpus`, and `methods`
    as `rates` configures them (each method must be one of its optimizers); AdamW is the baseline."""
    missing = [m for m in methods if m not in (rates.get("optimizers") or {})]
    if missing:
        raise InputError(f"--methods: {', '.join(missing)} not in --rates's optimizers "
                         f"({', '.join(rates.get('optimizers') or {})})")
    doc = {k: v for k, v in base.items() if k not in ("optimizers", "checks", "baseline")}
    doc["name"] = f"{base.get('name', 'ladder')}-{size}"
    doc["model"] = dict(GPU_RUNGS[size]) if size in GPU_RUNGS else {"preset": size}
    doc["data"] = {**(base.get("data") or {}), "corpus": corpus}
    doc["optimizers"] = {m: dict(rates["optimizers"][m]) for m in methods}
    doc["baseline"] = "adamw" if "adamw" in methods else methods[0]
    return doc


def rung_params(doc: dict) -> int:
    """The rung's parameter count, from the model's own shapes (no model is built)."""
    from distro_bench.scenario.loading import scenario_from_dict
    from distro_bench.train.model import ModelConfig, parameter_shapes

    shapes = parameter_shapes(ModelConfig(**scenario_from_dict(doc).resolved_model()))
    return sum(math.prod(s) for s in shapes.values())


@dataclass(frozen=True)
class Budget:
    """A rung's compute-matched budget: tokens = tokens_per_param x parameters, rounded up to whole steps."""

    params: int
    tokens_per_step: int
    steps: int
    syncs: dict[str, int]  # periodic methods' outer syncs in those steps

    @property
    def tokens(self) -> int:
        return self.steps * self.tokens_per_step

    @property
    def tokens_per_param(self) -> float:
        return self.tokens / self.params


def rung_budget(doc: dict, tokens_per_param: float, min_syncs: int = MIN_SYNCS) -> Budget:
    """The rung's steps at `tokens_per_param`; InputError where a periodic method would make fewer than
    `min_syncs` outer syncs (its inner_steps H: steps / H syncs), naming the method and the steps it needs."""
    from distro_bench.scenario.loading import scenario_from_dict

    s = scenario_from_dict(doc)
    params = rung_params(doc)
    per_step = s.data.seq_len * s.data.batch_size * s.world_size
    steps = max(1, math.ceil(tokens_per_param * params / per_step))
    syncs = {name: steps // cfg.inner_steps for name, cfg in s.optimizers.items()
             if getattr(cfg, "inner_steps", 1) > 1}
    short = {n: k for n, k in syncs.items() if k < min_syncs}
    if short:
        name = next(iter(short))
        need = min_syncs * s.optimizers[name].inner_steps  # type: ignore[union-attr]
        raise InputError(f"--tokens-per-param {tokens_per_param:g}: {doc.get('name')}'s {steps} steps give {name} "
                         f"{short[name]} outer syncs (H = {s.optimizers[name].inner_steps}), fewer than --min-syncs "  # type: ignore[union-attr]
                         f"{min_syncs}; it needs {need} steps: raise --tokens-per-param or lower its inner_steps")
    return Budget(params, per_step, steps, syncs)


def plan_line(size: str, budget: Budget, methods: list[str], seeds: int, grid: int) -> str:
    """One rung's plan: its budget and the compute the ladder's runs need (seeds x methods, plus the tuning's
    `grid` rates a method on one seed), in FLOPs and hours on one H100 at PLAN_MFU (assumed)."""
    runs = len(methods) * (seeds + grid)
    flops = 6 * budget.params * budget.tokens * runs
    hours = flops / (H100_TFLOPS * 1e12 * PLAN_MFU) / 3600
    syncs = ", ".join(f"{n} {k}" for n, k in budget.syncs.items()) or "none periodic"
    return (f"{size}: {budget.params / 1e6:.2f}M parameters, {budget.tokens:,} tokens ({budget.tokens_per_param:.1f} a "
            f"parameter), {budget.steps:,} steps; outer syncs: {syncs}; {runs} runs ({len(methods)} methods x "
            f"({seeds} seeds + {grid} tuning rates)): {flops:.3g} FLOPs, {hours:.3g} h on one H100 at MFU {PLAN_MFU}")


@dataclass(frozen=True)
class Cell:
    """One method at one rung and budget: its val loss over seeds, and its paired gap to the baseline."""

    loss: str
    gap: str
    mean: float | None


def rung_cells(run_dir: Path, figure: str) -> dict[str, Cell]:
    """Each method's cell of one finished run: `figure` per seed (val_loss_at_equal_time for the equal-time
    run, final_val_loss for the equal-tokens one), the gap to the baseline paired by seed, Holm over the rest."""
    from distro_bench.results.multiple import compare_family
    from distro_bench.results.rundir import read_summary
    from distro_bench.results.stats import finite, t_interval

    # The summary alone: the ladder's committed record (benchmarks/ladder/DATE/RUNG) keeps only summary.json
    # and scenario.yaml of each run, and the table is rebuilt from it.
    summ = read_summary(run_dir)
    if summ is None:
        raise InputError(f"{run_dir}: no summary.json (not a finished distro-bench run folder)")
    opts = {n: s for n, s in (summ.get("optimizers") or {}).items() if isinstance(s, dict)}
    values = {n: {k: float(v[figure]) for k, v in (s.get("per_seed") or {}).items() if finite(v.get(figure))}
              for n, s in opts.items()}
    base = summ.get("baseline") or next(iter(opts))
    fam = compare_family(values, base, figure) if base in values and len(values) > 1 else None
    out = {}
    for name, vals in values.items():
        iv = t_interval(vals.values())
        loss = "n/a" if iv is None else f"{iv.mean:.3f} [{iv.lo:.3f}, {iv.hi:.3f}]"
        gap = "(baseline)" if name == base else "n/a"
        c = fam.comparisons.get(name) if fam else None
        if c is not None and c.interval is not None:
            gap = f"{c.interval.mean:+.3f} [{c.interval.lo:+.3f}, {c.interval.hi:+.3f}] {c.p_text}"
        out[name] = Cell(loss, gap, None if iv is None else iv.mean)
    return out


def pair_rows(run_dir: Path, figure: str) -> list[list[str]]:
    """Every pair of methods of one finished run, paired by seed: the difference a - b [95% interval], its p and
    Holm's adjustment over all the pairs (the family: every pair at this rung and budget), and the order it
    supports at 0.05 ('a < b' lower loss first) or 'not distinct'."""
    import itertools

    from distro_bench.results.multiple import ALPHA, holm, paired_p
    from distro_bench.results.rundir import read_summary
    from distro_bench.results.stats import finite, paired_difference

    summ = read_summary(run_dir)
    if summ is None:
        raise InputError(f"{run_dir}: no summary.json (not a finished distro-bench run folder)")
    values = {n: {k: float(v[figure]) for k, v in (s.get("per_seed") or {}).items() if finite(v.get(figure))}
              for n, s in (summ.get("optimizers") or {}).items() if isinstance(s, dict)}
    pairs, ps, ivs = [], {}, {}
    for a, b in itertools.combinations(sorted(values), 2):
        common = sorted(set(values[a]) & set(values[b]))
        if len(common) < 2:
            continue
        key = f"{a} vs {b}"
        pairs.append((key, a, b))
        ps[key] = paired_p([values[a][k] - values[b][k] for k in common])
        ivs[key] = paired_difference({k: values[a][k] for k in common}, {k: values[b][k] for k in common})
    adjusted = holm(ps)
    rows = []
    for key, a, b in pairs:
        iv = ivs[key]
        order = ("not distinct" if adjusted[key] >= ALPHA or iv is None else
                 f"{a} < {b}" if iv.mean < 0 else f"{b} < {a}")
        ci = "n/a" if iv is None else f"{iv.mean:+.3f} [{iv.lo:+.3f}, {iv.hi:+.3f}]"
        rows.append([key, ci, f"{ps[key]:.3f}", f"{adjusted[key]:.3f}", order])
    return rows


def order(cells: dict[str, Cell]) -> list[str]:
    """Methods by mean loss, lowest first (those without one last)."""
    return sorted(cells, key=lambda n: (cells[n].mean is None, cells[n].mean if cells[n].mean is not None else 0.0))


def ladder_table(runs: dict[str, dict[str, Path]]) -> str:
    """Markdown: {budget label: {size: run folder}} -> one table per budget, and the ranking per size."""
    lines = []
    for label, by_size in runs.items():
        figure = "val_loss_at_equal_time" if label == "equal time" else "final_val_loss"
        cells = {size: rung_cells(run, figure) for size, run in by_size.items()}
        methods = list(dict.fromkeys(m for c in cells.values() for m in c))
        lines += [f"### At {label}", "", "| size | " + " | ".join(f"{m}: val loss | {m}: gap to baseline"
                                                                  for m in methods) + " |",
                  "|---|" + "---|---|" * len(methods)]
        for size, c in cells.items():
            lines.append(f"| {size} | " + " | ".join(f"{c[m].loss} | {c[m].gap}" if m in c else "- | -"
                                                      for m in methods) + " |")
        # Only tested orders: every pair paired by seed, Holm over all the pairs of the rung (no order by means).
        lines += ["", f"Every pair at {label}, paired by seed (a - b, val loss), Holm over all the pairs of each rung:",
                  "", "| size | pair | a - b [95% interval] | p | Holm p | order at 0.05 |", "|---|---|---|---|---|---|"]
        for size, run in by_size.items():
            lines += [f"| {size} | " + " | ".join(row) + " |" for row in pair_rows(run, figure)]
        lines += [""]
    return "\n".join(lines)


def rung_for_device(doc: dict, device: str, workers: int | None, seed: int) -> dict:
    """`doc` with every worker on `device` (one hardware profile, compute as measured), optionally fewer workers,
    and one seed: what the GPU acceptance script trains."""
    doc = {**doc, "hardware": {**(doc.get("hardware") or {}), "rung": {"device": device, "compute_scale": 1.0}}}
    doc["workers"] = [{**g, "hardware": "rung"} for g in doc["workers"]]
    if workers is not None:
        doc["workers"] = [{**doc["workers"][0], "count": workers}]
    doc["train"] = {k: v for k, v in (doc.get("train") or {}).items() if k not in ("seed", "seeds")} | {"seeds": [seed]}
    return doc


def _params(run_dir: Path) -> int | None:
    """The model's parameter count, from a worker's start record."""
    for path in sorted(run_dir.glob("workers/**/rank*.jsonl")):
        for line in path.read_text().splitlines():
            try:
                rec = json.loads(line)
            except ValueError:
                continue
            if isinstance(rec, dict) and rec.get("type") == "start" and rec.get("params"):
                return int(rec["params"])
    return None


def run_rung(preset: str, *, device: str, out: Path, steps: int = 100, methods: tuple[str, ...] = ("adamw", "distro"),
             workers: int | None = None, backend: str = "local", timeout_s: float = 240.0,
             scenario: Path = REPO / "scenarios" / "home-dsl.yaml",
             rates: Path = REPO / "scenarios" / "methods-home-dsl.yaml") -> dict:
    """Train rung `preset` with `methods` at their shoot-out rates for `steps` steps on `device` (one seed, the
    home-dsl workers unless `workers`), through `distro-bench run`. Its figures, with `status` PASS when the run is
    complete, every method's replicas agree and its val loss is below the uniform model's, and a `figure` line."""
    base, rate_doc = (yaml.safe_load(Path(f).read_text()) for f in (scenario, rates))
    doc = rung_for_device(rung_scenario(base, rate_doc, preset, list(methods), "builtin:stdlib"), device, workers, 1)
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"ladder-rung-{preset}-{device}.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    argv = [sys.executable, "-m", "distro_bench", "run", str(path), "--backend", backend, "--steps", str(steps),
            "--out", str(out)]
    figures: dict = {"preset": preset, "device": device, "steps": steps, "backend": backend, "argv": argv[1:]}
    started = time.monotonic()
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s, cwd=REPO)
    except subprocess.TimeoutExpired:
        return {**figures, "status": "FAIL", "figure": f"distro-bench run did not end within {timeout_s:g} s"}
    figures["wall_s"] = round(time.monotonic() - started, 1)
    lines = done.stdout.strip().splitlines()
    run_dir = Path(lines[-1].strip()) if lines else None
    if done.returncode not in (0, 1) or run_dir is None or not (run_dir / "summary.json").is_file():
        tail = (done.stderr.strip().splitlines() or lines or ["no output"])[-1]
        return {**figures, "status": "FAIL", "figure": f"distro-bench run exited {done.returncode}: {tail}"}
    summary = json.loads((run_dir / "summary.json").read_text())
    figures["run_dir"] = str(run_dir)
    figures["params"] = _params(run_dir)
    problems = []
    per_method = figures["methods"] = {}
    for name in methods:
        s = (summary.get("optimizers") or {}).get(name) or {}
        row = {k: s.get(k) for k in ("steps", "step_time_s_mean", "first_val_loss", "final_val_loss",
                                     "replicas_identical", "wire_tx_bytes_per_step", "max_rss_bytes")}
        per_method[name] = row
        loss = row["final_val_loss"]
        if row["replicas_identical"] is not True:
            problems.append(f"{name}: replicas_identical is {row['replicas_identical']}")
        if not isinstance(loss, (int, float)) or not loss < UNIFORM_LOSS:
            problems.append(f"{name}: val loss {loss} is not below the uniform model's {UNIFORM_LOSS:.3f}")
    state = json.loads((run_dir / "status.json").read_text()).get("state") if (run_dir / "status.json").is_file() else None
    if state != "complete":
        problems.append(f"run is {state}")
    shown = ", ".join(f"{n} val loss {r['final_val_loss']:.3f} at {r['step_time_s_mean']:.3f} s/step"
                      for n, r in per_method.items()
                      if isinstance(r["final_val_loss"], (int, float)) and isinstance(r["step_time_s_mean"], (int, float)))
    return {**figures, "status": "FAIL" if problems else "PASS",
            "figure": "; ".join(problems) or f"{steps} steps on {device} over {backend}: {shown}; {figures['wall_s']:g} s"}


def _pairs(items: list[str], flag: str) -> dict[str, Path]:
    out = {}
    for item in items:
        size, sep, path = item.partition("=")
        if not sep or not size or not path:
            raise InputError(f"{flag}: {item!r}; give SIZE=RUN_DIR")
        out[size] = Path(path)
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--scenario", default="scenarios/home-dsl.yaml")
    p.add_argument("--rates", default="scenarios/methods-home-dsl.yaml")
    p.add_argument("--sizes", default="tiny,small,medium",
                   help=f"model presets or GPU rungs ({', '.join(GPU_RUNGS)}), smallest first")
    p.add_argument("--methods", default="adamw,distro,diloco,sparseloco")
    p.add_argument("--corpus", default="builtin:stdlib")
    p.add_argument("--seeds", type=int, default=3)
    p.add_argument("--first-seed", type=int, default=1)
    p.add_argument("--budget", default="none", help="also an equal-time run of these seconds per method (e.g. 60s)")
    p.add_argument("--tokens-per-param", type=float, default=TOKENS_PER_PARAM,
                   help="the equal-tokens run's budget at every rung, tokens a parameter (default 20: compute-matched)")
    p.add_argument("--tokens", default=None,
                   help="instead: the same tokens at every rung (e.g. 160k; tokens per parameter then fall up the ladder)")
    p.add_argument("--min-syncs", type=int, default=MIN_SYNCS,
                   help="refuse a rung whose budget gives a periodic method fewer outer syncs (default 20)")
    p.add_argument("--no-tune", dest="tune", action="store_false",
                   help="take --rates's rates as they are (default: tune each method's rate at each rung)")
    p.add_argument("--lrs", default="1e-3,3e-3,1e-2", help="with --lr-factors none: one grid for every method")
    p.add_argument("--sweep-budget", default="20s", help="the tuning runs' time budget (equal time)")
    p.add_argument("--lr-factors", default="0.333,1,3",
                   help="each method's grid is its --rates rate times these (default brackets it: 0.333,1,3); "
                        "none: --lrs")
    p.add_argument("--max-widen", type=int, default=2, help="at most this many widenings at a grid's edge")
    p.add_argument("--tune-seed", type=int, default=0)
    p.add_argument("--backend", default="netns")
    p.add_argument("--tokens-backend", default="local",
                   help="the equal-tokens run's backend (synchronous methods: the links change its time, not its losses)")
    p.add_argument("--out", type=Path, default=Path("results/ladder"))
    p.add_argument("--plan", action="store_true", help="print each rung's budget and the compute it needs; run nothing")
    p.add_argument("--write-docs", type=Path, default=None)
    p.add_argument("--table", nargs="*", default=None, help="SIZE=RUN_DIR of finished equal-time runs: print only "
                   "(with --tokens-run, the equal-tokens ones too; either alone)")
    p.add_argument("--tokens-run", nargs="*", default=[], help="SIZE=RUN_DIR of finished equal-tokens runs")
    args = p.parse_args(argv)
    if args.table is not None or args.tokens_run:
        runs = {label: _pairs(items, flag) for label, items, flag in (("equal time", args.table, "--table"),
                                                                      ("equal tokens", args.tokens_run, "--tokens-run"))
                if items}
        text = ladder_table(runs)
        print(text)
        if args.write_docs:
            args.write_docs.write_text(f"# Model-size ladder\n\n{text}\n")
        return 0
    equal_time = args.budget.lower() != "none"
    if args.tokens is None and not args.tokens_per_param > 0:
        raise InputError(f"--tokens-per-param: {args.tokens_per_param:g}; give a positive number (20: compute-matched)")
    if args.seeds < 3:
        raise InputError(f"--seeds: {args.seeds}; a ladder's gaps need 3 or more paired seeds")
    if args.first_seed <= args.tune_seed < args.first_seed + args.seeds:
        raise InputError(f"--tune-seed: {args.tune_seed} is one of the reported seeds; tune on a fresh seed")
    base, rates = (yaml.safe_load(Path(f).read_text()) for f in (args.scenario, args.rates))
    methods = [m.strip() for m in args.methods.split(",") if m.strip()]
    factors = ([float(x) for x in args.lr_factors.split(",")] if args.lr_factors.lower() != "none" else None)
    grid = len(factors) if factors else len(args.lrs.split(","))
    sizes = [s.strip() for s in args.sizes.split(",") if s.strip()]
    budgets = {}
    for size in sizes:  # every rung's budget first: a rung that cannot make its syncs stops the ladder before it runs
        doc = rung_scenario(base, rates, size, methods, args.corpus)
        budgets[size] = None if args.tokens else rung_budget(doc, args.tokens_per_param, args.min_syncs)
        if budgets[size] is not None:
            print(plan_line(size, budgets[size], methods, args.seeds, grid if args.tune else 0), flush=True)
    if args.plan:
        return 0
    so = _shootout()
    args.out.mkdir(parents=True, exist_ok=True)
    runs: dict[str, dict[str, Path]] = {"equal time": {}} if equal_time else {}
    runs["equal tokens"] = {}
    for size in sizes:
        doc = rung_scenario(base, rates, size, methods, args.corpus)
        budget = budgets[size]
        tokens = args.tokens or str(budget.tokens)  # type: ignore[union-attr]
        if args.tune:
            grids = {m: [float(doc["optimizers"][m]["lr"]) * f for f in factors] for m in methods} if factors else None
            # Tuned as the rung is run: at its equal-tokens budget (or, with --budget alone, at equal time).
            for name, lr in so.tune(doc, args.lrs, tokens, args.tokens_backend, args.out, methods, args.tune_seed,
                                    max_widen=args.max_widen, grids=grids, budget_flag="--tokens").items():
                print(f"{size}: {name} lr {lr:g} (was {doc['optimizers'][name]['lr']})", flush=True)
                doc["optimizers"][name]["lr"] = lr
        path = args.out / f"ladder-{size}.yaml"
        path.write_text(yaml.safe_dump(doc, sort_keys=False))
        seeds = ["--repeat", str(args.seeds), "--seed", str(args.first_seed)]
        if equal_time:
            runs["equal time"][size] = so._cli(["run", str(path), "--backend", args.backend, "--time-budget",
                                                args.budget, *seeds, "--out", str(args.out)])
            print(f"{size}, equal time: {runs['equal time'][size]}", flush=True)
        runs["equal tokens"][size] = so._cli(["run", str(path), "--backend", args.tokens_backend, "--tokens", tokens,
                                              *seeds, "--out", str(args.out)])
        print(f"{size}, equal tokens: {runs['equal tokens'][size]}", flush=True)
    text = ladder_table(runs)
    print(text)
    if args.write_docs:
        args.write_docs.write_text(f"# Model-size ladder\n\n{text}\n")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except InputError as e:
        sys.exit(f"error: {e}")
