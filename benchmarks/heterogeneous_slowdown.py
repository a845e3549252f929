"""End-to-end accuracy of the emulated slowdown: a worker whose profile is k times slower than this host
(compute_scale 1/k) should compute k times as long as its peers, and they should wait the difference.
Prints the measured ratio and waits; asserts nothing. CPU contention from other processes changes
these figures (it inflates the measured compute that the stretch multiplies), which is why they are a
benchmark and not a test; the tests check the worker's accounting exactly (tests/unit/train/test_compute_scale.py).

    python benchmarks/heterogeneous_slowdown.py [--scale 0.25] [--steps 16] [--repeat 1]
"""

from __future__ import annotations

import argparse
import os
import tempfile
from pathlib import Path

from distro_bench.results.rundir import load_run
from distro_bench.run.runner import RunOptions, run_scenario
from distro_bench.scenario.loading import scenario_from_dict


def scenario(scale: float, steps: int):
    return scenario_from_dict({
        "name": "slowdown", "workers": [{"count": 2, "hardware": "host"}, {"name": "slow", "hardware": "slowbox"}],
        "hardware": {"slowbox": {"device": "cpu", "compute_scale": scale}},
        "model": {"preset": "tiny"},
        "data": {"corpus": "builtin:pydoc", "seq_len": 64, "batch_size": 8, "val_batches": 1},
        "train": {"steps": steps, "eval_every": steps, "seed": 0},
        "optimizers": {"adamw": {"lr": 3e-3}}, "baseline": "adamw",
    })


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--scale", type=float, default=0.25, help="the slow worker's compute_scale (0.25 = 4x slower)")
    p.add_argument("--steps", type=int, default=16)
    p.add_argument("--repeat", type=int, default=1)
    args = p.parse_args()
    want = 1 / args.scale
    print(f"load average {os.getloadavg()[0]:.1f}; slow rank 2 at compute_scale {args.scale} (expect {want:.2f}x)")
    print(f"{'run':>3} {'ratio (min)':>11} {'ratio (median)':>14} {'fast wait s':>11} {'compute gap s':>13} {'wait/gap':>8}")
    for i in range(args.repeat):
        with tempfile.TemporaryDirectory() as tmp:
            result = run_scenario(scenario(args.scale, args.steps),
                                  RunOptions(backend="local", out=Path(tmp), write_report=False))
            df = load_run(result.run_dir).metrics
        df = df[df["step"] > 0]
        c_min = df.groupby("rank")["compute_s"].min()
        med = df.groupby("rank")[["compute_s", "wait_s"]].median()
        gap = med.loc[2, "compute_s"] - med.loc[[0, 1], "compute_s"].mean()
        wait = med.loc[[0, 1], "wait_s"].mean()
        print(f"{i:>3} {c_min[2] / c_min[[0, 1]].mean():>11.2f} "
              f"{med.loc[2, 'compute_s'] / med.loc[[0, 1], 'compute_s'].mean():>14.2f} "
              f"{wait:>11.3f} {gap:>13.3f} {wait / gap:>8.2f}")


if __name__ == "__main__":
    main()
