"""One training run shared by the methods' and DisTrO's end-to-end tests (test_methods_e2e.py, test_distro_e2e.py):
every method on 3 local workers for STEPS steps. Each of its workers starts a process and a process group, which is
most of such a run's time; one run of all of them costs the slow tier one start-up, not two."""

from __future__ import annotations

import pytest

from distro_bench.run.runner import RunOptions, run_scenario
from distro_bench.scenario.loading import scenario_from_dict
from tests.helpers import tiny_scenario_dict

STEPS = 5
OPTIMIZERS = {
    "adamw": {"lr": 3e-3},
    # DisTrO packed (the production format) and per tensor: the same algorithm, the same parameters at the end
    "distro": {"lr": 5e-3, "topk": 4, "values": "1bit"},
    "distro-nobucket": {"type": "distro", "lr": 5e-3, "topk": 4, "values": "1bit", "bucket": False},
    "diloco": {"lr": 3e-3, "inner_steps": 2},  # syncs at steps 1 and 3, and once more in finish()
    "diloco-int8": {"type": "diloco", "lr": 3e-3, "inner_steps": 5, "pseudo_grad": "int8"},  # step 4 only
    "sparseloco": {"lr": 3e-3, "inner_steps": 3, "topk": 32},
    "powersgd": {"lr": 3e-3, "rank": 2, "start_step": 2},
    # between steps each rank holds its own guess; evaluation and checksums see the agreed parameters
    "distro-eager": {"type": "distro", "lr": 3e-3, "topk": 4, "values": "1bit", "overlap": "eager"},
    "muloco": {"lr": 3e-3, "inner_steps": 2},  # Muon inside DiLoCo: DiLoCo's syncs and bytes
    "sparta": {"lr": 3e-3, "fraction": 0.01},  # never synced between steps; one full average in finish()
    "desloc": {"lr": 3e-3, "param_period": 2, "momentum_period": 3, "variance_period": 4},
    "streaming-diloco": {"lr": 3e-3, "inner_steps": 2, "fragments": 2},  # block 0 at steps 1, 3; block 1 at 0, 2, 4
    # 3 workers split only into one group of 3 (pairs: tests/integration/local/test_noloco_e2e.py); phi and theta - phi travel
    "noloco": {"lr": 3e-3, "inner_steps": 2, "group_size": 3, "gamma": 0.3},
}


@pytest.fixture(scope="package")
def methods_run(tmp_path_factory):
    s = scenario_from_dict(tiny_scenario_dict(workers=[{"count": 3, "hardware": "host"}],
                                              train={"steps": STEPS, "eval_every": 2, "seed": 0},
                                              optimizers=OPTIMIZERS))
    return s, run_scenario(s, RunOptions(backend="local", out=tmp_path_factory.mktemp("runs"), write_report=False))
