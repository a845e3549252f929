"""The entry point of each worker process: parse, set up, train one optimizer, close.

Started by a backend (or by torchrun: RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR and MASTER_PORT come
from the environment; under `distro-bench node`, DISTRO_BENCH_PLACEMENT maps it to its scenario rank) as
`python -m distro_bench.train.worker --scenario S --optimizer NAME --out DIR`. It trains one optimizer for
the scenario's budget (harness/distro_bench/scenario/budget.py: steps, tokens, training seconds or a target loss;
with a time or target budget rank 0 decides the last step for all) and writes one JSON line per step to
DIR/rank<R>.jsonl, flushed each step, so a crash loses at most the step in flight. The loop itself, in its
phases, is harness/distro_bench/train/loop.py. It never imports a backend.

Backend-provided environment: DISTRO_BENCH_WIRE_IFACE (interface whose counters are the wire bytes),
DISTRO_BENCH_TIMEOUT_S (collective timeout in s, scaled by the coordinator; required where the worker joins a group),
DISTRO_BENCH_DIST_BACKEND (gloo|nccl),
DISTRO_BENCH_COMPUTE_SCALE (overrides the hardware profile's relative speed), DISTRO_BENCH_THREADS (torch
threads), DISTRO_BENCH_PARENT_PID (the coordinator this worker dies with).
"""

from __future__ import annotations

import argparse
import faulthandler
import os
import sys
from pathlib import Path

import torch

from distro_bench.scenario import environ
from distro_bench.scenario.loading import load_resolved
from distro_bench.scenario.model import Scenario
from distro_bench.train.liveness import die_with_parent
from distro_bench.train.loop import TrainLoop
from distro_bench.train.replay import ReplayLoop

# The loop a worker runs, by the scenario's mode: training, or replaying the communication only (issue 34).
LOOPS: dict[str, type[TrainLoop] | type[ReplayLoop]] = {"train": TrainLoop, "replay": ReplayLoop}


def train(scenario: Scenario, run_name: str, out_dir: Path, seed: int | None = None) -> None:
    """Train (or replay) optimizer `run_name` of the scenario in this worker, writing OUT/rank<R>.jsonl."""
    LOOPS[scenario.mode].setup(scenario, run_name, out_dir, seed).run()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m distro_bench.train.worker", description=__doc__.split("\n")[0])
    p.add_argument("--scenario", required=True, help="resolved scenario.yaml")
    p.add_argument("--optimizer", required=True, help="optimizer run name in the scenario")
    p.add_argument("--out", required=True, help="folder for rank<R>.jsonl")
    p.add_argument("--seed", type=int, default=None, help="seed of this repeat (default: the scenario's train.seed)")
    args = p.parse_args(argv)
    # A native abort (gloo's terminate, a segfault) otherwise leaves only an exit code: put every thread's
    # Python stack in the rank's log.
    faulthandler.enable(all_threads=True)
    die_with_parent()
    torch.set_num_threads(int(os.environ.get(environ.THREADS, torch.get_num_threads())))
    # The run folder's resolved scenario, validated in full (traces, corpus) once when the run was opened: read
    # here with the models' checks only, not once more per rank, optimizer and seed.
    train(load_resolved(args.scenario), args.optimizer, Path(args.out), seed=args.seed)
    return 0


def leave(code: int) -> None:
    """Exit without the interpreter's teardown. torch's C++ objects sometimes abort as they are destroyed at exit
    ("terminate called without an active exception": a gloo or store thread still joinable), turning a finished
    worker into exit -6: seen twice in CI (Streaming DiLoCo rank 1, NoLoCo rank 0), each time with no Python
    frame left, after every record was written. By now the records file is closed and the process group
    destroyed (TrainLoop.run): only the standard streams remain to flush."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    leave(main())
