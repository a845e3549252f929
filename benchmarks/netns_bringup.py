"""Bring-up and teardown time of the netns star (namespaces, veths, bridge, tbf on every link, read-back
verification, reachability ping) for 2, 4 and 8 nodes. Prints figures; asserts nothing.

    python benchmarks/netns_bringup.py [--repeat 3]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from distro_bench.backends.netns import NetnsBackend
from distro_bench.scenario.loading import scenario_from_dict


def scenario(n: int):
    return scenario_from_dict({
        "name": f"bringup-{n}", "workers": [{"count": n, "hardware": "host", "link": "l"}],
        "links": {"l": {"up": "10Mbit", "down": "50Mbit"}},
        "model": {"preset": "tiny"}, "train": {"steps": 1, "eval_every": 1}, "optimizers": {"adamw": {"lr": 1e-3}},
    })


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--nodes", type=int, nargs="+", default=[2, 4, 8])
    args = p.parse_args()
    NetnsBackend.probe()  # the capability probe is cached per process; keep it out of the figures
    print(f"{'nodes':>5} {'bring-up s (median)':>20} {'teardown s (median)':>20} {'runs':>5}")
    for n in args.nodes:
        s = scenario(n)
        ups, downs = [], []
        for _ in range(args.repeat):
            with tempfile.TemporaryDirectory() as tmp:
                b = NetnsBackend(s, Path(tmp))
                t0 = time.perf_counter()
                b.__enter__()
                t1 = time.perf_counter()
                b.__exit__(None, None, None)
                t2 = time.perf_counter()
                if b.teardown_problems:
                    raise SystemExit(f"teardown problems: {b.teardown_problems}")
            ups.append(t1 - t0)
            downs.append(t2 - t1)
        print(f"{n:>5} {statistics.median(ups):>20.3f} {statistics.median(downs):>20.3f} {args.repeat:>5}")


if __name__ == "__main__":
    main()
