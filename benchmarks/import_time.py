"""How long `import distro_bench.api` (and `distro-bench --help`'s import) takes in a fresh interpreter (issue 52:
the target is under 0.3 s; it took 1.1 s when the module loaded pydantic, numpy and the scenario loader at import).

    python benchmarks/import_time.py [--repeats 7]

Prints, per module, the median and min wall time of a fresh `python -c "import M"` over the repeats (the
interpreter's own start subtracted: `python -c pass`), and the five slowest imports `python -X importtime` names.
A benchmark that prints figures, not a test: the time depends on the host's load.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

HARNESS = Path(__file__).resolve().parents[1] / "harness"
MODULES = ["distro_bench.api", "distro_bench.cli"]


def wall(code: str) -> float:
    env = {"PYTHONPATH": str(HARNESS), "PATH": "/usr/bin:/bin"}
    t = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], env=env, check=True)
    return time.perf_counter() - t


def slowest(module: str, n: int = 5) -> list[tuple[int, str]]:
    out = subprocess.run([sys.executable, "-X", "importtime", "-c", f"import {module}"], capture_output=True,
                         text=True, env={"PYTHONPATH": str(HARNESS), "PATH": "/usr/bin:/bin"}, check=True).stderr
    rows = []
    for line in out.splitlines():
        if line.startswith("import time:") and "|" in line:
            _self, cumulative, name = (x.strip() for x in line.removeprefix("import time:").split("|"))
            if cumulative.isdigit():
                rows.append((int(cumulative), name))
    return sorted(rows, reverse=True)[:n]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=7)
    args = ap.parse_args()
    base = [wall("pass") for _ in range(args.repeats)]
    print(f"python -c pass: median {statistics.median(base):.3f} s (subtracted below)")
    for module in MODULES:
        times = [wall(f"import {module}") - statistics.median(base) for _ in range(args.repeats)]
        print(f"import {module}: median {statistics.median(times):.3f} s, min {min(times):.3f} s "
              f"over {args.repeats} fresh interpreters")
        for us, name in slowest(module):
            print(f"    {us / 1e6:.3f} s cumulative  {name}")


if __name__ == "__main__":
    main()
