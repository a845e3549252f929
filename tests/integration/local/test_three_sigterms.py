"""Three SIGTERMs in a row (a supervisor repeating its TERM) still give a finished run folder: status, summary
and report written, exit 130, not death by the signal (-15) with no report (issue 39, item 11)."""

from __future__ import annotations

import json
import signal
import subprocess
import time
from pathlib import Path

import pytest
import yaml

from tests.helpers import start_cli, tiny_scenario_dict

LONG = tiny_scenario_dict(train={"time_budget": "10min", "eval_every": 50, "seed": 0})


@pytest.mark.slow
def test_three_sigterms_write_status_summary_and_report_and_exit_130(tmp_path):
    scenario = tmp_path / "s.yaml"
    scenario.write_text(yaml.safe_dump(LONG))
    out = tmp_path / "out"
    proc = start_cli(["run", str(scenario), "--backend", "local", "--out", str(out)], stdout=subprocess.PIPE,
                     stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline and proc.poll() is None:
            logs = list(out.glob("*/workers/adamw/rank0.jsonl"))
            if logs and logs[0].read_text().count('"type": "step"') >= 2:
                break
            time.sleep(0.2)
        assert proc.poll() is None, proc.communicate()[1][-2000:]
        for _ in range(3):
            proc.send_signal(signal.SIGTERM)
            time.sleep(0.3)  # the second and third land in the teardown and the finish
        _, err = proc.communicate(timeout=600)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130, (proc.returncode, err[-2000:])
    run_dir = next(p for p in Path(out).iterdir() if p.is_dir())  # beside it: the runs' index.parquet
    assert json.loads((run_dir / "status.json").read_text())["state"] == "incomplete"
    assert (run_dir / "summary.json").is_file() and (run_dir / "report.md").is_file()
