"""Docker backend costs: bring-up of 4 node containers (network, containers, shaping) and their
teardown, and worker-image build time when up to date, after a source change (layer cache), and
optionally from scratch.

    python benchmarks/docker_bringup.py [--repeat 3] [--uncached]

Prints figures; asserts nothing. `--uncached` rebuilds every layer (minutes: torch is installed
again); without it the uncached figure is not measured. Needs an engine, the worker image (or it is
built first) and root for shaping.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "harness"))

from distro_bench.backends.docker import (
    DockerBackend,
    image,
)
from distro_bench.scenario.loading import scenario_from_dict


def scenario(shaped: bool):
    workers = {"count": 4, "hardware": "host"}
    d = {"name": "bringup", "workers": [{**workers, "link": "l"} if shaped else workers],
         "model": {"preset": "tiny"}, "data": {"seq_len": 32, "batch_size": 4},
         "train": {"steps": 1, "eval_every": 1}, "optimizers": {"adamw": {"lr": 1e-3}}}
    if shaped:
        d["links"] = {"l": {"up": "100Mbit", "down": "100Mbit"}}
    return scenario_from_dict(d)


def bringup(shaped: bool, repeat: int) -> None:
    s = scenario(shaped)
    image.build_image(offline=True)  # the harness source may have changed meanwhile (shared work tree)
    ups, shapes, downs = [], [], []
    for _ in range(repeat):
        with tempfile.TemporaryDirectory() as tmp:
            b = DockerBackend(s, Path(tmp) / "run")
            try:
                b.setup()
                ups.append(b.bringup_s)
                shapes.append(b.shaping_s)
            finally:
                t2 = time.monotonic()
                b.teardown()
                downs.append(time.monotonic() - t2)
    what = "shaped 100Mbit" if shaped else "unshaped"
    print(f"bring-up, 4 node containers ({what}): containers+network median {statistics.median(ups):.2f}s "
          f"(min {min(ups):.2f}, max {max(ups):.2f}); tc applied and read back, median {statistics.median(shapes):.2f}s; "
          f"teardown median {statistics.median(downs):.2f}s  [n={repeat}]")


def builds(uncached: bool) -> None:
    dc = image.client()
    r = image.build_image(offline=True, docker_client=dc)
    print(f"image build, first call this run: {r.seconds:.1f}s ({'up to date' if r.cached else 'built'})")
    r = image.build_image(offline=True, docker_client=dc)
    print(f"image build, up to date (labels match, nothing built): {r.seconds:.2f}s")
    r = image.build_image(offline=True, docker_client=dc, force=True)
    print(f"image build, forced with every layer cached (context upload + cache checks): {r.seconds:.1f}s")
    if uncached:
        r = image.build_image(offline=True, docker_client=dc, no_cache=True)
        print(f"image build, uncached (every layer, torch installed again): {r.seconds:.1f}s, {r.size_bytes / 1e6:.0f} MB")
    else:
        print("image build, uncached: not measured (pass --uncached; takes minutes)")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--uncached", action="store_true")
    args = p.parse_args()
    print(f"host: {os.cpu_count()} cpus, load {os.getloadavg()[0]:.1f}")
    builds(args.uncached)
    bringup(shaped=False, repeat=args.repeat)
    if os.geteuid() == 0:
        bringup(shaped=True, repeat=args.repeat)
    else:
        print("bring-up shaped: skipped (needs root)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
