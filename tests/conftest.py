"""Shared fixtures (a CLI runner, scenarios written to a temp folder) and the markers each folder implies.

Folders and markers (select with -m, e.g. `-m "not root and not docker"` on a laptop):
  tests/unit/                 none: no root, no Docker (tests/unit/<package>/: one folder per package, docs/testing.md)
  tests/integration/local/    none: real worker processes on the local backend (loopback)
  tests/integration/netns/    root: network namespaces, tc, the delay line
  tests/integration/docker/   docker: a Docker engine and the worker image
A test that needs more than its folder implies says so itself (`browser`, `root`), and a test
parametrized with backend "netns" needs root wherever it lives.

Tiers (docs/testing.md): `slow` marks each test that took over ~10 s in a full run on the shared
2-core CI host, wherever it lives; `pytest` alone runs the rest (pyproject's addopts `-m "not slow"`),
`pytest -m slow` the slow tier. `extended` (EXTENDED below) marks the slow tests whose property CI already
proves elsewhere at lower cost: CI (.ci/run) runs `-m "(slow or docker or browser) and not extended"`,
`pytest -m extended` runs them before a release.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

TESTS = Path(__file__).resolve().parent
FOLDER_MARKS = {
    ("unit",): (),
    ("integration", "local"): (),
    ("integration", "netns"): ("root",),
    ("integration", "docker"): ("docker",),
}


# The slow tests CI leaves out (issue 38: `.ci/run` in 15 minutes): node id prefix -> what proves the same in CI.
# Each is a variant of a property that another CI test proves on the same code path; none is the only proof.
EXTENDED = {
    "tests/integration/local/test_reliability.py::test_interrupt_tears_down_keeps_metrics_and_exits_130[netns-ctrl-c]":
        "[netns-sigterm] (same teardown through the same handler) and [local-ctrl-c] in the fast tier",
    "tests/integration/local/test_reliability.py::test_hung_worker_is_caught_by_the_watchdog[netns]":
        "[local] (the watchdog is the runner's, the backend only starts the process)",
    "tests/integration/local/test_reliability.py::test_a_stopped_worker_is_named_not_the_peer_whose_collective_timed_out[netns]":
        "[local] (the heartbeat rule is the runner's)",
    "tests/integration/local/test_reliability.py::test_a_sigkilled_cli_takes_its_workers_along_and_clean_marks_the_run[netns]":
        "[local] in the fast tier; netns teardown by `clean` in test_netns.py's clean tests",
    "tests/integration/local/test_liveness.py::test_three_workers_complete_with_every_core_busy[netns]":
        "[local] (the liveness rule under load is the runner's; the backend only starts the processes)",
    "tests/integration/local/test_local_run.py::test_ci_smoke_cli_end_to_end":
        "the fresh machine's main job (`run` through the CLI, home-dsl) and the gate (ci-gate through the CLI: the "
        "loss, replicas identical, on shaped links)",
    "tests/integration/netns/test_ssh_backend.py::test_a_host_that_drops_mid_run_is_named_and_the_others_shaping_is_removed":
        "test_multihost.py's [9-lost] (node 0 finds a silent host lost, the others stop and remove their shaping), "
        "the ssh two-host run (the launcher) and the unit tests of the launcher's relay of a lost connection",
    "tests/integration/local/test_reliability.py::test_two_runs_at_once_do_not_collide[local]":
        "[netns] (names, ports and namespaces collide there, if anywhere)",
    "tests/integration/netns/test_multihost.py::test_four_hosts_records_shipped_to_node_zero":
        "test_two_hosts_shared_folder_match_a_single_host_run (the same shipping, two hosts)",
    "tests/integration/netns/test_multihost.py::test_killing_one_agent_stops_all_names_it_and_removes_every_shaping[15-failed]":
        "[9-lost] (the same stop path; SIGKILL is the harder case)",
    "tests/integration/netns/test_multihost.py::test_a_killed_worker_on_host_0_ends_both_hosts_in_one_line_each":
        "test_multihost_faults.py (unit: the root-cause wording) and [9-lost] (the stop path)",
    "tests/integration/netns/test_ssh_backend.py::test_stopping_the_launcher_stops_every_agent_and_removes_every_shaping[sigkill]":
        "[sigterm] (every agent's stdin closes, the same stop path) and the unit test of the agent's stream",
    "tests/integration/netns/test_ssh_backend.py::test_stopping_the_launcher_stops_every_agent_and_removes_every_shaping[sigterm]":
        "test_a_host_that_drops_mid_run_... (the surviving agent's stop path and shaping removal, 1.5-3 min) and the "
        "unit tests of the agent's stdin and stream; both stop variants pass on their own (-m extended)",
    "tests/integration/netns/test_netchange.py::test_cli_links_schedule_measures_and_refuses_a_link_without_one":
        "test_change_and_outage_are_applied_and_read_back (the scheduler) and test_netns.py's `links` test",
    "tests/integration/netns/test_sweep_rates.py::test_rate_sweep_draws_measured_and_projected_curves":
        "test_sweep_local.py (the sweep) and test_scale.py (measured against projected bytes)",
    "tests/integration/docker/test_docker_delay.py::test_run_end_to_end_with_delay_on_docker":
        "test_ci_smoke_end_to_end_with_shaped_links (a run on docker) and the delay-line RTT test on containers",
    "tests/integration/docker/test_docker_netchange.py::test_run_survives_a_short_outage_on_docker":
        "test_change_and_outage_on_containers (outage applied on docker) and the netns outage run",
}


def _extended(nodeid: str) -> bool:
    return any(nodeid == k or nodeid.startswith(k + "[") for k in EXTENDED)


def folder_marks(path: Path) -> tuple[str, ...]:
    parts = path.resolve().relative_to(TESTS).parts
    for prefix, marks in FOLDER_MARKS.items():
        if parts[:len(prefix)] == prefix:
            return marks
    raise pytest.UsageError(f"{path}: test modules belong under one of "
                            + ", ".join("tests/" + "/".join(p) for p in FOLDER_MARKS))


def pytest_collection_modifyitems(config, items):
    for item in items:
        for mark in folder_marks(Path(str(item.path))):
            item.add_marker(mark)
        if _extended(item.nodeid):
            item.add_marker("extended")
        callspec = getattr(item, "callspec", None)
        if callspec is not None and callspec.params.get("backend") == "netns":
            item.add_marker("root")


@pytest.fixture
def cli():
    from distro_bench.cli import app

    runner = CliRunner()

    def invoke(*args: str):
        return runner.invoke(app, [str(a) for a in args])

    return invoke


@pytest.fixture
def write_scenario(tmp_path):
    def write(data: dict | str, name: str = "scenario.yaml") -> Path:
        p = tmp_path / name
        p.write_text(data if isinstance(data, str) else yaml.safe_dump(data))
        return p

    return write


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """A worker that failed in a test shows its log's last lines in the report (CI keeps no run folders)."""
    outcome = yield
    excinfo = call.excinfo
    if excinfo is None:
        return
    from distro_bench.errors import WorkerFailed

    if isinstance(excinfo.value, WorkerFailed) and excinfo.value.log_tail:
        outcome.get_result().sections.append((f"rank {excinfo.value.rank} log (last lines)", excinfo.value.log_tail))
