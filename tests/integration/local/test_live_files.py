"""Issue 51 item 4 "Must show": a worker's files are read during the run as a stored run folder's are.

A FIFO put in the place of rank0.jsonl while the run trains (or before the coordinator first reads it) held the
root coordinator in open() for 240 s after every worker had exited. Now the coordinator opens it non-blocking,
sees a FIFO, refuses it naming the file, stops the workers and finishes its folder (status "failed", the reason
naming the file). The bound below is far above what it takes (about 3 s here) and far below the old hang.
"""

from __future__ import annotations

import json
import os
import subprocess
import time

import pytest
import yaml

from tests.helpers import start_cli, tiny_scenario_dict

# 3,000 steps: minutes of training, so a run that ends soon after the swap ended because of it
LONG = tiny_scenario_dict(train={"steps": 3000, "eval_every": 1000, "seed": 0})
FINISH_BOUND_S = 120.0  # from the swap to the coordinator's exit


def _wait_for(cond, proc: subprocess.Popen, what: str, limit_s: float = 300.0):
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        found = cond()
        if found:
            return found
        if proc.poll() is not None:
            pytest.fail(f"the run ended before {what}: {proc.communicate()[1][-2000:]}")
        time.sleep(0.05)
    pytest.fail(f"no {what} within {limit_s}s")


@pytest.mark.parametrize("when", ["mid-run", "before-first-read"])
def test_a_fifo_rank0_jsonl_does_not_hang_the_coordinator(tmp_path, when):
    scenario = tmp_path / "s.yaml"
    scenario.write_text(yaml.safe_dump(LONG))
    out = tmp_path / "out"
    proc = start_cli(["run", str(scenario), "--backend", "local", "--out", str(out)], stdout=subprocess.PIPE,
                     stderr=subprocess.PIPE, text=True)
    try:
        if when == "mid-run":
            def stepping():
                logs = list(out.glob("*/workers/adamw/rank0.jsonl"))
                return logs[0] if logs and logs[0].read_text().count('"type": "step"') >= 2 else None
            records = _wait_for(stepping, proc, "two steps of rank 0")
            records.unlink()  # the worker writes on into the unlinked file; the coordinator meets the FIFO
        else:  # the worker folder exists before the workers start (their imports take seconds)
            folder = _wait_for(lambda: next(iter(out.glob("*/workers/adamw")), None), proc, "worker folder")
            records = folder / "rank0.jsonl"
            try:
                records.unlink()
            except FileNotFoundError:
                pass
        os.mkfifo(records)
        swapped = time.monotonic()
        _, err = proc.communicate(timeout=FINISH_BOUND_S + 60)
        took = time.monotonic() - swapped
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    print(f"{when}: the coordinator exited {took:.1f}s after the swap (rc {proc.returncode})")
    assert took < FINISH_BOUND_S, err[-2000:]
    assert proc.returncode == 2, err[-2000:]
    assert "rank0.jsonl: a FIFO, not a regular file; refused" in err, err[-2000:]
    run_dir = next(p for p in out.iterdir() if p.is_dir())  # beside it: the runs' index.parquet (issue 52)
    status = json.loads((run_dir / "status.json").read_text())
    assert status["state"] == "failed" and "rank0.jsonl" in status["reason"], status
