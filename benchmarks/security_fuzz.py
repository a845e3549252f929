"""The security fuzzers at full size (issue 51 item 9): hostile scenarios through `validate`, and forged run folders
(stored and live files) through the coordinator's live readers, `check`, `report` and `export`.

The same generators and checks as CI's (tests/unit/scenario/test_fuzz_scenarios.py, tests/unit/results/test_forged_runfolders.py),
seeded, at the sizes the issue names; CI runs 400 and 250 of them. Prints each fuzzer's figures (cases, outcomes,
internal errors, hangs, the slowest case) and exits 1 when either found an internal error, a hang or a change
outside the run folders.

    python benchmarks/security_fuzz.py [--scenarios 2000] [--folders 500] [--real-plots-every 10]
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def run_fuzzer(test: str, env: dict[str, str], pattern: str) -> tuple[int, list[str], float]:
    """pytest on one fuzz test (`-s`: its figures printed); (exit code, its figure lines, seconds)."""
    t0 = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-s", "-m", "slow", "-p", "no:cacheprovider", test],
                          cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO / "harness"), **env},
                          capture_output=True, text=True)
    took = time.monotonic() - t0
    lines = [ln for ln in proc.stdout.splitlines() if re.search(pattern, ln)]
    if proc.returncode:
        lines += [ln for ln in proc.stdout.splitlines() if ln.startswith("E ")][:20]
    return proc.returncode, lines, took


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--scenarios", type=int, default=2000, help="fuzzed scenarios through validate (twice each)")
    ap.add_argument("--folders", type=int, default=500, help="forged run folders")
    ap.add_argument("--real-plots-every", type=int, default=10, help="draw the real plots on every Nth folder")
    args = ap.parse_args()
    load = os.getloadavg()
    print(f"host: {os.cpu_count()} cores, load average {load[0]:.1f} {load[1]:.1f} {load[2]:.1f}")
    failed = 0
    rc, lines, took = run_fuzzer("tests/unit/scenario/test_fuzz_scenarios.py", {"DISTRO_BENCH_FUZZ_CASES": str(args.scenarios)},
                                 r"^\.?fuzz: ")
    print(f"scenarios: {args.scenarios} through validate and validate --json in {took:.0f} s, "
          f"{'PASS (0 internal errors)' if rc == 0 else 'FAIL'}")
    for ln in lines:
        print("  " + ln.lstrip("."))
    failed += rc != 0
    rc, lines, took = run_fuzzer("tests/unit/results/test_forged_runfolders.py::test_forged_run_folders_fail_cleanly",
                                 {"DISTRO_BENCH_FORGED_CASES": str(args.folders),
                                  "DISTRO_BENCH_FORGED_REAL_PLOTS_EVERY": str(args.real_plots_every)},
                                 r"forged folders in")
    print(f"run folders: {args.folders} forged (live readers, check, report, export; real plots every "
          f"{args.real_plots_every}th) in {took:.0f} s, {'PASS (0 internal errors)' if rc == 0 else 'FAIL'}")
    for ln in lines:
        print("  " + ln.lstrip("."))
    failed += rc != 0
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
