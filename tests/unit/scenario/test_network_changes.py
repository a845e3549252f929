"""Networks that change (issue 18), without root: the schedule schema and its errors, the timeline, trace
parsing, planning for later states, read-back formatting, and the scheduler against a fake emulation."""

from __future__ import annotations

import dataclasses
import json
import time

import pytest

from distro_bench.errors import ScenarioError
from distro_bench.net.engines import plan_links
from distro_bench.net.host import Capabilities
from distro_bench.scenario.loading import scenario_from_dict
from distro_bench.scenario.timeline import compile_timeline, compute_scale_at
from distro_bench.scenario.trace import FLOOR_BPS, TraceError, load_trace
from tests.helpers import tiny_scenario_dict


def _scenario(link: dict | None = None, hw: dict | None = None, base_dir=None, **kw):
    d = tiny_scenario_dict(**kw)
    d["links"] = {"l": link or {"up": "10Mbit"}}
    d["hardware"] = {"h": hw or {}}
    d["workers"] = [{"count": 2, "hardware": "h", "link": "l"}]
    return scenario_from_dict(d, base_dir=base_dir)


BROKEN = [
    ({"up": "10Mbit", "schedule": [{"at": "30s", "up": "1Mbit"}, {"at": "20s", "up": "2Mbit"}]},
     "links.l: schedule[1].at 20s is not after schedule[0].at 30s"),
    ({"schedule": [{"at": "30s", "down": "10s"}]}, "down '10s' is a duration, but down is the downlink rate"),
    ({"schedule": [{"at": "30s", "up": "1Mbps"}]}, "links.l.schedule[0].up: invalid rate '1Mbps'"),
    ({"schedule": [{"at": "30s", "bandwidth": "1Mbit"}]}, "links.l.schedule[0].bandwidth: unknown field 'bandwidth'"),
    ({"schedule": [{"at": "30s"}]}, "a schedule entry needs a field to change"),
    ({"schedule": [{"up": "1Mbit"}]}, "give exactly one of at"),
    ({"schedule": [{"at": "3s", "at_step": 3, "up": "1Mbit"}]}, "give exactly one of at"),
    ({"schedule": [{"at": 30, "up": "1Mbit"}]}, "links.l.schedule[0].at: duration 30 has no unit"),
    ({"schedule": [{"at": "1s", "up": "1Mbit"}, {"at_step": 5, "up": "2Mbit"}]}, "mixes at and at_step"),
    ({"schedule": [{"at": "1s", "outage": "5s", "up": "1Mbit"}]}, "an outage entry changes nothing else"),
    ({"delay": "5ms", "schedule": [{"at": "1s", "jitter": "10ms"}]}, "schedule[0]: jitter 10ms exceeds delay 5ms"),
    ({"up_trace": "no/such.mahi"}, "links.l.up_trace: trace"),
    ({"up_trace": "x.csv", "schedule": [{"at": "1s", "up": "1Mbit"}]}, "up_trace sets the up rate"),
]


@pytest.mark.parametrize("link,fragment", BROKEN)
def test_broken_schedules_name_field_value_and_what_is_valid(link, fragment):
    with pytest.raises(ScenarioError) as e:
        _scenario(link)
    assert fragment in str(e.value), str(e.value)


def test_broken_compute_schedule():
    with pytest.raises(ScenarioError) as e:
        _scenario(hw={"compute_schedule": [{"at": "20s", "compute_scale": 0.25}, {"at": "10s", "compute_scale": 1}]})
    assert "compute_schedule[1].at 10s is not after compute_schedule[0].at 20s" in str(e.value)
    with pytest.raises(ScenarioError) as e:
        _scenario(hw={"compute_schedule": [{"at": "20s", "compute_scale": 2}]})
    assert "compute_schedule[0].compute_scale" in str(e.value)


def test_timeline_is_sorted_typed_and_describes_each_change():
    s = _scenario({"up": "10Mbit", "down": "50Mbit", "delay": "10ms",
                   "schedule": [{"at": "30s", "up": "1Mbit"}, {"at": "45s", "outage": "5s"},
                                {"at": "60s", "up": "10Mbit", "loss": "2%"}]},
                  hw={"compute_scale": 0.5, "compute_schedule": [{"at": "20s", "compute_scale": 0.25}]})
    tl = compile_timeline(s)
    assert [(c.at_s, c.kind, c.rank) for c in tl.changes] == [
        (20.0, "compute", 0), (20.0, "compute", 1), (30.0, "schedule", 0), (30.0, "schedule", 1),
        (45.0, "outage", 0), (45.0, "outage", 1), (60.0, "schedule", 0), (60.0, "schedule", 1)]
    first = tl.changes[2]
    assert first.directions == ("up",) and first.fields == {"up": "1Mbit"} and first.previous == {"up": "10Mbit"}
    assert first.link.up == 1_000_000 and first.link.down == 50_000_000 and first.link.delay == 0.01
    last = tl.changes[-1]
    assert last.directions == ("up", "down") and last.link.loss == pytest.approx(0.02) and last.link.up == 10_000_000
    outage = tl.changes[4]
    assert outage.duration_s == 5.0 and outage.link.up == 1_000_000 and outage.link_name == "l"
    assert tl.changes[0].describe() == "node0 compute_scale 0.5 -> 0.25"
    assert tl.longest_outage_s() == 5.0 and tl.outage_ranks == {0, 1}


def test_no_changes_is_an_empty_timeline():
    assert not compile_timeline(_scenario())


def test_compute_scale_follows_its_schedule_by_time_or_step():
    from distro_bench.scenario.model import ComputeChange

    timed = [ComputeChange(at="20s", compute_scale=0.25), ComputeChange(at="40s", compute_scale=1.0)]
    assert [compute_scale_at(0.5, timed, t, 0) for t in (None, 0.0, 19.9, 20.0, 39.0, 41.0)] == \
        [0.5, 0.5, 0.5, 0.25, 0.25, 1.0]
    stepped = [ComputeChange(at_step=5, compute_scale=0.1)]
    assert [compute_scale_at(1.0, stepped, None, s) for s in (0, 4, 5, 9)] == [1.0, 1.0, 0.1, 0.1]


# ---- traces ----------------------------------------------------------------------------------------------

def test_mahimahi_windows_are_opportunities_times_mtu(tmp_path):
    p = tmp_path / "t.mahi"
    # 10 opportunities in the first 100 ms, none in the second, 5 in the third; period 300 ms
    p.write_text("\n".join(["0"] * 5 + ["50"] * 5 + ["210"] * 5 + ["300"]) + "\n")
    t = load_trace(p)
    assert t.kind == "mahimahi" and t.period_s == 0.3
    w = t.windows(0.1)
    assert w == [10 * 1500 * 8 * 10, FLOOR_BPS, 6 * 1500 * 8 * 10]  # the last window holds the period's line too


def test_csv_windows_average_the_steps(tmp_path):
    p = tmp_path / "t.csv"
    p.write_text("t_s,rate_bit_s\n0,1000000\n1,3000000\n")
    t = load_trace(p)
    assert t.period_s == 2.0
    assert t.windows(1.0) == [1_000_000, 3_000_000]
    assert t.windows(2.0) == [2_000_000]
    assert t.mean_bps() == pytest.approx(2_000_000)


@pytest.mark.parametrize("name,text,fragment", [
    ("a.mahi", "0\n5\nx\n", "line 3: not a whole number"),
    ("b.mahi", "5\n3\n", "earlier than the line before"),
    ("c.csv", "time,rate\n0,1\n", "line 1: not the header 't_s,rate_bit_s'"),
    ("d.csv", "0,1\n", "at least two rows"),
    ("e.csv", "1,5\n2,5\n", "a trace starts at t_s 0"),
    ("f.csv", "0,5\n0,6\n", "times must increase"),
    ("g.mahi", "", "empty"),
])
def test_bad_traces_name_file_line_and_format(tmp_path, name, text, fragment):
    (tmp_path / name).write_text(text)
    with pytest.raises(TraceError) as e:
        load_trace(tmp_path / name)
    assert fragment in str(e.value) and name in str(e.value)


def test_shipped_traces_parse_and_their_scenarios_validate():
    from distro_bench.scenario.loading import load_scenario
    from tests.helpers import REPO

    for f in ("lte-drive.mahi", "dsl-diurnal.csv", "flaky-cable.csv"):
        t = load_trace(REPO / "scenarios" / "traces" / f)
        assert t.period_s >= 60 and len(t.windows(0.1)) >= 600
    for name in ("trace-lte-drive", "trace-dsl-diurnal", "home-dsl-outage", "link-schedule"):
        s = load_scenario(REPO / "scenarios" / f"{name}.yaml")
        assert compile_timeline(s)


# ---- planning for later states -----------------------------------------------------------------------------

HOST = Capabilities(root=True, kernel="test", iproute2="iproute2-6.1.0", nsenter=True, netns=True, netns_error=None,
                    qdiscs=("pfifo", "tbf", "htb"), iperf3=True, ping=True, ethtool=True,
                    delayline=True, delayline_detail="importable", docker=None)


def test_a_later_loss_plans_a_delay_line_from_the_start():
    nodes = _scenario({"up": "10Mbit", "schedule": [{"at": "5s", "loss": "1%"}]}).nodes()
    plan = plan_links(nodes, HOST)
    assert plan.engine == "userspace" and plan.nodes[0].needs_delay_line
    assert not plan.nodes[0].up.delay_line.impaired  # nothing to do until the change
    rate_only = plan_links(_scenario({"up": "10Mbit", "schedule": [{"at": "5s", "up": "1Mbit"}]}).nodes(), HOST)
    assert not rate_only.nodes[0].needs_delay_line


def test_a_later_loss_without_an_engine_is_refused_before_the_run():
    from distro_bench.errors import CapabilityError

    no_line = dataclasses.replace(HOST, delayline=False, delayline_detail="not importable")
    with pytest.raises(CapabilityError) as e:
        plan_links(_scenario({"up": "10Mbit", "schedule": [{"at": "5s", "loss": "1%"}]}).nodes(), no_line)
    assert "loss 1%" in str(e.value)


def test_resolved_scenario_keeps_trace_paths_usable(tmp_path, monkeypatch):
    (tmp_path / "t.csv").write_text("0,1000000\n1,2000000\n")
    s = _scenario({"up_trace": "t.csv"}, base_dir=tmp_path)
    d = s.resolved_dict()
    assert d["links"]["l"]["up_trace"] == str((tmp_path / "t.csv").resolve())
    monkeypatch.delenv("DISTRO_BENCH_ALLOW_TRACE_OUTSIDE", raising=False)
    assert scenario_from_dict(d, base_dir=tmp_path)  # absolute, inside the scenario's folder
    # From another folder it is outside (issue 26): valid only where the user opts in.
    with pytest.raises(ScenarioError, match="outside the scenario's folder"):
        scenario_from_dict(d, base_dir=tmp_path / "elsewhere")
    monkeypatch.setenv("DISTRO_BENCH_ALLOW_TRACE_OUTSIDE", "1")
    assert scenario_from_dict(d, base_dir=tmp_path / "elsewhere")


# ---- the scheduler against a fake emulation ---------------------------------------------------------------

class FakeEmulation:
    """Records calls; reads back what was asked (or `lie` for a rate, to see a failed read-back)."""

    def __init__(self, plan, lie: int | None = None):
        self.plan, self.lie, self.calls, self.down = plan, lie, [], set()

    def _node_plan(self, rank):
        return next(p for p in self.plan.nodes if p.rank == rank)

    def change(self, rank, direction, spec):
        self.calls.append(("change", rank, direction, spec.rate_bps, spec.loss))
        rate = self.lie or spec.rate_bps
        tc = [{"kind": "tbf", "root": True, "options": {"rate": rate // 8}}] if rate else []
        return {"tc": tc, "delay_line": {"delay_s": spec.delay_s, "jitter_s": spec.jitter_s, "loss": spec.loss,
                                         "duplicate": spec.duplicate}, "pending": rank in self.down,
                "applied_at": time.time()}

    def outage(self, rank, down):
        self.calls.append(("outage", rank, down))
        (self.down.add if down else self.down.discard)(rank)
        kind = "blackhole" if down else "tbf"
        return {d: [{"kind": kind, "root": True}] for d in ("up", "down")} | {"applied_at": time.time()}


def _scheduler(tmp_path, link, started_ago: float, lie=None, **kw):
    from distro_bench.net.netchange import ChangeScheduler

    s = _scenario(link, **kw)
    em = FakeEmulation(plan_links(s.nodes(), HOST), lie=lie)
    t0 = time.time() - started_ago
    (tmp_path / "rank0.hb").write_text(f"2 compute {t0 + 1:.3f}\n")
    (tmp_path / "rank0.jsonl").write_text(json.dumps({"type": "step", "step": 0, "t_start": t0}) + "\n")
    return ChangeScheduler(compile_timeline(s), em, tmp_path, "adamw", 0), em, t0


def test_scheduler_applies_due_changes_logs_rows_and_restores(tmp_path):
    from distro_bench.results.events import events_frame

    link = {"up": "10Mbit", "schedule": [{"at": "1s", "up": "1Mbit"}, {"at": "2s", "outage": "3s"},
                                         {"at": "3s", "loss": "5%"}, {"at": "1000s", "up": "2Mbit"}]}
    sched, em, t0 = _scheduler(tmp_path, link, started_ago=10.0)
    sched._observe()
    assert sched.origin == pytest.approx(t0) and sched.step == 2  # exact origin from the step record
    sched._tick()
    df = events_frame(sched.rows)  # the contract's dtypes accept the rows
    assert list(df["kind"]) == ["schedule", "schedule", "outage", "outage", "schedule", "schedule",
                                "restore", "restore"]
    up = df.iloc[0]
    assert (up["direction"], up["field"], up["requested"], up["verified"], up["ok"]) == ("up", "rate", "1Mbit",
                                                                                       "1Mbit", True)
    assert up["scheduled_s"] == 1.0 and up["t_s"] >= 9.0  # applied late here (origin 10 s ago): recorded as such
    loss = df[df["field"] == "loss"].iloc[0]
    assert loss["direction"] == "both" and loss["verified"] == "5%" and "link down" in loss["detail"]
    assert df[df["kind"] == "outage"].iloc[0]["until_s"] == 5.0
    assert sched.failure is None
    assert len(sched._pending) == 2  # the change at 1000 s is not due
    sched.stop()
    # back to the plan: each touched node's directions changed back to 10 Mbit, no node left down
    assert ("change", 0, "up", 10_000_000, 0.0) in em.calls and not em.down


def test_scheduler_flags_a_read_back_that_differs(tmp_path):
    sched, _em, _ = _scheduler(tmp_path, {"up": "10Mbit", "schedule": [{"at": "1s", "up": "1Mbit"}]},
                              started_ago=5.0, lie=3_000_000)
    sched._observe()
    sched._tick()
    assert sched.rows[0]["ok"] is False and "read back '3Mbit'" in sched.rows[0]["detail"]
    assert sched.failure and "1Mbit" in sched.failure


def test_scheduler_step_triggers_wait_for_the_step(tmp_path):
    sched, _em, _ = _scheduler(tmp_path, {"up": "10Mbit", "schedule": [{"at_step": 3, "up": "1Mbit"}]},
                              started_ago=5.0)
    sched._observe()
    sched._tick()
    assert sched.rows == []  # rank 0 is at step 2
    (tmp_path / "rank0.hb").write_text(f"3 compute {time.time():.3f}\n")
    sched._observe()
    sched._tick()
    assert [r["step"] for r in sched.rows] == [3, 3]


def test_compute_changes_are_logged_without_an_emulation(tmp_path):
    from distro_bench.net.netchange import ChangeScheduler

    s = _scenario(hw={"compute_schedule": [{"at": "1s", "compute_scale": 0.25}]})
    (tmp_path / "rank0.hb").write_text(f"0 compute {time.time() - 3:.3f}\n")
    sched = ChangeScheduler(compile_timeline(s), None, tmp_path, "distro", 1)
    sched._observe()
    sched._tick()
    assert [(r["kind"], r["field"], r["requested"], r["ok"]) for r in sched.rows] == [
        ("compute", "compute_scale", "0.25", None)] * 2


def test_outage_cause_names_the_link_and_every_node_it_took_down(tmp_path):
    sched, _em, _ = _scheduler(tmp_path, {"up": "10Mbit", "schedule": [{"at": "1s", "outage": "600s"}]},
                              started_ago=5.0)
    sched._observe()
    sched._tick()
    cause = sched.outage_cause(within_s=60)
    assert cause["link"] == "l" and cause["start_s"] == 1.0
    assert cause["nodes"] == ["node0", "node1"]  # both nodes use the profile: one outage takes both down


def test_validate_lists_the_changes_a_run_will_see(cli):
    from pathlib import Path

    repo = Path(__file__).resolve().parents[3]
    r = cli("validate", repo / "scenarios" / "home-dsl-outage.yaml")
    assert r.exit_code == 0, r.output
    assert "changes during each optimizer's run" in r.output and "at 30s: alice link dsl-drops down for 5s" in r.output
    r = cli("validate", repo / "scenarios" / "trace-lte-drive.yaml")
    assert "node0 up rate follows lte-drive.mahi every 100 ms" in r.output, r.output
    r = cli("validate", repo / "scenarios" / "home-dsl.yaml")
    assert r.exit_code == 0 and "changes during" not in r.output
