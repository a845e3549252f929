"""Issue 52: a report that never contradicts itself. The same synthetic run rendered as a local, a netns and a
docker run: the banners match the run (no GPU banner for `device: auto`, the NOT-emulated banner only on the
local backend), a verdict table only where there is a verdict, and `run`'s closing lines say what the report
says."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from distro_bench.report import write_run_report
from distro_bench.report.verdict import closing_lines, decision, verdicts
from tests.unit.runfolders import make_run

GPU_BANNER = "Hardware profile not present"
UNEMULATED_BANNER = "The network was NOT emulated"


def _network(backend: str, ranks: int = 2) -> dict:
    if backend == "local":
        return {"backend": "local", "network_emulated": False,
                "nodes": [{"rank": r, "name": f"node{r}", "address": "127.0.0.1", "applied": None} for r in range(ranks)],
                "not_emulated": [f"node{r}: link not emulated (local backend runs on loopback)" for r in range(ranks)]}
    return {"backend": backend, "network_emulated": True, "not_emulated": [],
            "nodes": [{"rank": r, "name": f"node{r}", "address": f"10.0.0.{r + 2}", "applied": {"rate": "10Mbit"}}
                      for r in range(ranks)]}


def _run(tmp: Path, backend: str, hardware: dict, device: str = "cpu", post_hoc: bool = True) -> tuple[Path, dict]:
    run = make_run(tmp, backend, network=_network(backend), starts={r: {"device": device} for r in range(2)})
    scen = yaml.safe_load((run / "scenario.yaml").read_text())
    scen["hardware"] = hardware
    scen["workers"][0]["hardware"] = next(iter(hardware))
    (run / "scenario.yaml").write_text(yaml.safe_dump(scen, sort_keys=False))
    summary = json.loads((run / "summary.json").read_text())
    summary["run"]["backend"] = backend
    summary["target"]["post_hoc"] = post_hoc  # as the shipped ci-smoke's (the worst best): descriptive, no test
    for seed, fig in summary["optimizers"]["adamw"]["per_seed"].items():  # the slower side's loss at equal time
        fig["val_loss_at_equal_time"] = fig["final_val_loss"] + 0.3 + 0.01 * int(seed)
    (run / "summary.json").write_text(json.dumps(summary))
    write_run_report(run)
    return run, summary


HOST = {"host": {"device": "auto", "compute_scale": 1.0}}  # what the shipped ci-smoke asks for
GPU_PROFILE = {"gaming-pc": {"device": "auto", "tflops": 80.0, "compute_scale": 1.0}}


@pytest.mark.parametrize("backend", ["local", "netns", "docker"])
def test_banners_verdict_and_closing_lines_agree_with_the_run(tmp_path, backend):
    run, summary = _run(tmp_path, backend, HOST)
    md = (run / "report.md").read_text()
    head = md.split("\n## ")[0]  # the banners sit above the first section
    assert GPU_BANNER not in md, "device: auto asks for no GPU: a CPU host is what it asked for"
    assert (UNEMULATED_BANNER in head) == (backend == "local")
    decisions = [decision(v, summary) for v in verdicts(summary)]
    assert decisions
    closing = closing_lines(summary)
    assert len(closing) == len(decisions)
    if backend == "local":  # loopback decides nothing: no section titled a verdict, every table labelled
        assert not any(d.decided for d in decisions)
        assert "## Verdict" not in md and "## Comparison (no verdict)" in md
        assert "| difference (no verdict) |" in md and "| comparison |" not in md
        assert "not a verdict" in md.split("## Comparison (no verdict)")[1].split("\n## ")[0]
        for line in closing:
            assert ": no verdict (local backend" in line and "measured on loopback, not a verdict:" in line
            assert line.index("no verdict") < line.index("steps")  # the decision before any figure
    else:  # emulated links, three paired seeds: the loss gap at equal time decides
        assert all(d.decided for d in decisions)
        assert "## Verdict" in md and "## Comparison (no verdict)" not in md and "| comparison |" in md
        for d, line in zip(decisions, closing):
            assert f" {d.outcome} vs adamw; " in line and "no verdict" not in line and "loopback" not in line
    headline = md.split("In one line: ")[1].split("\n")[0]
    for d, v in zip(decisions, verdicts(summary)):
        assert (f"{v.optimizer} {d.outcome} vs" in headline) if d.decided else ("no verdict" in headline)


def test_gpu_banner_only_where_a_gpu_was_asked_for_and_absent(tmp_path):
    cpu_run, _ = _run(tmp_path / "cpu", "netns", GPU_PROFILE)
    assert GPU_BANNER in (cpu_run / "report.md").read_text()  # 80 TFLOPS asked for, the host's CPU stood in
    gpu_run, _ = _run(tmp_path / "gpu", "netns", GPU_PROFILE, device="cuda:0")
    assert GPU_BANNER not in (gpu_run / "report.md").read_text()
    cuda_run, _ = _run(tmp_path / "cuda", "docker", {"big": {"device": "cuda"}})
    assert GPU_BANNER in (cuda_run / "report.md").read_text()


def test_a_target_set_in_advance_decides_on_any_backend_and_every_line_says_so(tmp_path):
    run, summary = _run(tmp_path, "local", HOST, post_hoc=False)
    md = (run / "report.md").read_text()
    decisions = [decision(v, summary) for v in verdicts(summary)]
    assert all(d.decided for d in decisions)  # the time-to-target interval decides
    assert "## Verdict" in md and "## Comparison (no verdict)" not in md
    for d, line in zip(decisions, closing_lines(summary)):
        assert f" {d.outcome} vs adamw; " in line and "not a verdict" not in line
