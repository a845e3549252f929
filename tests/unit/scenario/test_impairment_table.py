"""The one table of link impairments (harness/distro_bench/scenario/impairments.py, issue 36): every reader takes
its impairments from it, so `duplicate` reaches validate's output and the report, and `reorder` (netem's
`reorder P`, the delay line otherwise) is a row plus what the delay line does with it."""

from __future__ import annotations

import itertools
import json
from dataclasses import replace

import pytest
import yaml

from distro_bench.errors import ScenarioError
from distro_bench.net.delayline import Impairment, Schedule
from distro_bench.net.engines import directions, plan_links
from distro_bench.net.host import Capabilities
from distro_bench.net.netchange import read_back
from distro_bench.net.shaping import check_qdiscs, tc_commands
from distro_bench.net.tcclass import path_classes
from distro_bench.report.describe import emulation_blocks, link_rows
from distro_bench.report.document import Table
from distro_bench.report.load import load_for_report
from distro_bench.scenario.impairments import IMPAIRMENTS
from distro_bench.scenario.loading import scenario_from_dict
from distro_bench.scenario.model import LinkChange, LinkSpec
from distro_bench.scenario.timeline import FIELD_DIRECTIONS, compile_timeline
from tests.unit.runfolders import make_run

IMPAIRED = {"up": "10Mbit", "down": "50Mbit", "delay": "15ms", "jitter": "3ms", "loss": "0.1%", "duplicate": "1%",
            "reorder": "5%"}


def _scenario(link: dict, **extra) -> dict:
    return {"name": "imp", "workers": [{"count": 2, "link": "line"}], "links": {"line": link},
            "model": {"preset": "tiny"}, "data": {"seq_len": 32, "batch_size": 2}, "train": {"steps": 2, "eval_every": 1},
            "optimizers": {"adamw": {"lr": 1e-3}}, **extra}


def test_every_row_is_a_field_of_the_spec_the_timeline_and_the_plan():
    keys = [row.key for row in IMPAIRMENTS]
    assert keys == ["delay", "jitter", "loss", "duplicate", "reorder"]
    assert set(keys) <= set(LinkSpec.model_fields) and set(keys) <= set(LinkChange.model_fields)
    assert all(FIELD_DIRECTIONS[k] == ("up", "down") for k in keys)
    up, down = directions(LinkSpec(**IMPAIRED))
    assert (up.delay_s, up.jitter_s, up.loss, up.duplicate, up.reorder) == (0.015, 0.003, 0.001, 0.01, 0.05)
    assert up.rate_bps == 10_000_000 and down.rate_bps == 50_000_000 and down.reorder == 0.05


def test_reorder_plan_is_netem_reorder_and_reads_back():
    up, _ = directions(LinkSpec(**IMPAIRED))
    cmds = tc_commands("eth0", up)
    assert cmds[1][cmds[1].index("netem"):] == ["netem", "limit", cmds[1][cmds[1].index("limit") + 1],
                                                "delay", "15000us", "3000us", "loss", "random", "0.1%",
                                                "duplicate", "1%", "reorder", "5%"]
    netem = {"kind": "netem", "parent": "1:1", "options": {
        "delay": {"delay": 0.015, "jitter": 0.003}, "loss-random": {"loss": 0.001},
        "duplicate": {"duplicate": 0.01}, "reorder": {"reorder": 0.05}, "gap": 1}}
    tbf = {"kind": "tbf", "root": True, "handle": "1:", "options": {"rate": 10_000_000 // 8}}
    assert check_qdiscs("eth0", up, [tbf, netem]) == []
    netem["options"].pop("reorder")  # a kernel that dropped it
    assert check_qdiscs("eth0", up, [tbf, netem]) == ["eth0: netem reorder is 0.0, planned 0.05"]
    # a change read back from netem, and from a delay line's impairment
    assert read_back("reorder", "up", {"tc": [tbf, {**netem, "options": {"reorder": {"reorder": 0.05}}}]}) == "5%"
    assert read_back("duplicate", "up", {"tc": [], "delay_line": {"duplicate": 0.01}}) == "1%"


def test_reorder_rides_the_region_classes_too():
    up, _ = directions(LinkSpec(**IMPAIRED))
    leaves = path_classes(replace(up, per_dest=(("10.0.0.3", 0.05, 0.0, 0.0),)))
    assert all(leaf.netem is not None and leaf.netem.reorder == 0.05 and leaf.netem.duplicate == 0.01
               for leaf in leaves)


def test_reorder_goes_to_the_delay_line_without_netem():
    s = scenario_from_dict(_scenario(IMPAIRED))
    caps = Capabilities(root=True, kernel="test", iproute2="iproute2-6.1.0", nsenter=True, netns=True, netns_error=None,
                        qdiscs=("pfifo", "tbf", "htb"), iperf3=True, ping=True, ethtool=True,
                        delayline=True, delayline_detail="importable", docker=None)  # this host: no netem
    plan = plan_links(s.nodes(), caps)
    up = plan.nodes[0].up
    assert plan.engine == "userspace" and up.delay_line is not None and up.delay_line.reorder == 0.05
    assert up.tc.rate_bps == 10_000_000 and not up.tc.netem and up.tc.reorder == 0


def test_reorder_needs_a_delay_in_every_state():
    with pytest.raises(ScenarioError, match="reorder 5% needs delay"):
        scenario_from_dict(_scenario({"up": "10Mbit", "reorder": "5%"}))
    with pytest.raises(ScenarioError, match=r"schedule\[0\]: from then on reorder 5% needs delay"):
        scenario_from_dict(_scenario({"delay": "10ms", "reorder": "5%", "schedule": [{"at": "1s", "delay": 0}]}))
    tl = compile_timeline(scenario_from_dict(_scenario({"delay": "10ms", "schedule": [{"at": "1s", "reorder": "2%"}]})))
    assert tl.changes[0].fields == {"reorder": "2%"} and tl.changes[0].directions == ("up", "down")


# ---- the delay line's scheduling ------------------------------------------------------------------------------

def _frames(n: int) -> list[bytes]:
    return [i.to_bytes(4, "big") + bytes(96) for i in range(n)]


def _drain(s: Schedule, until: float) -> list[tuple[float, bytes]]:
    out = []
    while (item := s.pop_due(until)) is not None:
        out.append(item)
    return out


def test_delay_line_sends_a_seeded_fraction_at_once_ahead_of_the_queue():
    s = Schedule(Impairment(delay_s=0.010, reorder=0.25, seed=7))
    arrivals = [i * 0.001 for i in range(2000)]  # 1 ms apart: ten frames in flight
    releases = [s.admit(t, f) for t, f in zip(arrivals, _frames(2000))]
    at_once = [r == t for t, r in zip(arrivals, releases)]
    assert all(r == pytest.approx(t + 0.010) for t, r, now in zip(arrivals, releases, at_once) if not now)
    # Binomial(2000, 0.25): mean 500, sd 19.4; the band is > 5 sd wide on each side.
    assert 400 <= sum(at_once) <= 600 and s.counters()["reordered"] == sum(at_once)
    out = _drain(s, 10.0)
    order = [int.from_bytes(f[:4], "big") for _, f in out]
    assert sorted(order) == list(range(2000)) and len(s) == 0 and s.queued_bytes == 0
    assert [r for r, _ in out] == sorted(r for r, _ in out)  # each leaves at its time
    inversions = sum(a > b for a, b in itertools.pairwise(order))
    assert inversions >= 300  # nearly every frame sent at once passes the delayed ones
    delayed = [i for i, now in enumerate(at_once) if not now]
    assert [i for i in order if i in set(delayed)] == delayed  # the others keep their order


def test_reorder_draws_only_when_set_and_repeats_with_its_seed():
    plain = Schedule(Impairment(delay_s=0.010, jitter_s=0.002, seed=1))
    zero = Schedule(Impairment(delay_s=0.010, jitter_s=0.002, reorder=0.0, seed=1))
    assert [plain.admit(i * 1e-3, f) for i, f in enumerate(_frames(50))] == \
           [zero.admit(i * 1e-3, f) for i, f in enumerate(_frames(50))]
    a, b = (Schedule(Impairment(delay_s=0.010, reorder=0.3, seed=4)) for _ in range(2))
    assert [a.admit(i * 1e-3, f) for i, f in enumerate(_frames(200))] == \
           [b.admit(i * 1e-3, f) for i, f in enumerate(_frames(200))]


# ---- the describers: validate and the report -----------------------------------------------------------------

def test_validate_shows_duplicate_and_reorder(cli, write_scenario):
    path = write_scenario(_scenario(IMPAIRED))
    doc = json.loads(cli("validate", path, "--json").stdout)
    node = doc["nodes"][0]
    assert node["duplicate"] == pytest.approx(0.01) and node["reorder"] == pytest.approx(0.05)
    out = cli("validate", path).stdout
    assert "duplicate 1%" in out and "reorder 5%" in out and "15ms±3ms" in out


def test_report_link_table_has_duplicate_when_a_link_sets_it(tmp_path):
    run = make_run(tmp_path, network={
        "backend": "netns", "network_emulated": True, "link_engine": "userspace", "not_emulated": [],
        "nodes": [{"rank": 0, "name": "node0", "link": "dsl",
                   "applied": {"up": {"plan": {"rate_bps": 10_000_000}}, "down": {"plan": {"rate_bps": 50_000_000}},
                               "delay_line": {d: {"delay_s": 0.015, "jitter_s": 0.003, "loss": 0.001,
                                                  "duplicate": 0.01} for d in ("up", "down")}}}]})
    scenario = yaml.safe_load((run / "scenario.yaml").read_text())
    scenario["links"]["dsl"]["duplicate"] = "1%"
    (run / "scenario.yaml").write_text(yaml.safe_dump(scenario))
    loaded = load_for_report(run)
    table = next(b for b in emulation_blocks(loaded) if isinstance(b, Table))
    assert table.headers == ["nodes", "link", "direction", "rate", "delay (one-way)", "jitter", "loss", "duplicate",
                             "engine"]
    (up,) = [r for r in link_rows(loaded) if r[2] == "up"]
    assert up[7] == "1% / 1% / not measured" and up[8] == "tc tbf + userspace delay line"
