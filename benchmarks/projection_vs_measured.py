"""The projection model against measurement: runs scenarios on the netns backend (real shaped links; delay
through the userspace delay line where the kernel has no netem) and prints, per optimizer, predicted and
measured communication seconds per step and their ratio. Prints figures; asserts nothing.

    python benchmarks/projection_vs_measured.py [--steps 30] [SCENARIO ...]

Default scenarios: ci-smoke (rate-shaped) and home-dsl (rate, delay, jitter, loss). Needs root.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from distro_bench.report.load import load_for_report
from distro_bench.report.prediction import prediction_rows
from distro_bench.run.runner import RunOptions, run_scenario
from distro_bench.scenario.loading import load_scenario, with_overrides

REPO = Path(__file__).resolve().parents[1]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("scenarios", nargs="*", default=[REPO / "scenarios" / "ci-smoke.yaml", REPO / "scenarios" / "home-dsl.yaml"])
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--backend", default="netns")
    args = p.parse_args()
    print(f"{'scenario':<14}{'optimizer':<18}{'rounds':>7}{'overhead/round ms':>19}{'predicted s':>13}{'measured s':>12}{'measured/pred':>15}{'median/pred':>13}")
    with tempfile.TemporaryDirectory() as out:
        for path in args.scenarios:
            s = with_overrides(load_scenario(path), steps=args.steps)
            result = run_scenario(s, RunOptions(backend=args.backend, out=Path(out), write_report=False))
            for r in prediction_rows(load_for_report(result.run_dir)):
                ovh = r["overhead_per_round"]
                print(f"{s.name:<14}{r['optimizer']:<18}{r['rounds']:>7}{(ovh or 0) * 1e3:>19.2f}"
                      f"{r['comm_predicted']:>13.4f}{r['comm_measured']:>12.4f}{r['comm_ratio']:>15.2f}"
                      f"{r['comm_ratio_median']:>13.2f}")


if __name__ == "__main__":
    main()
