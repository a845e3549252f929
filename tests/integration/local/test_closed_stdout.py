"""`distro-bench ... | head -1`: the reader goes away and the command still ends as it would have (a run
completes and keeps its folder), quietly, instead of failing on a BrokenPipeError."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from tests.helpers import tiny_scenario_dict


def _with_stdout_closed_early(args: list[str]) -> tuple[int, str]:
    """Run `python -m distro_bench ARGS` with stdout a pipe whose reader closes before it prints anything;
    its exit code and stderr."""
    r, w = os.pipe()
    os.close(r)  # no reader from the start: the first write fails with EPIPE
    try:
        proc = subprocess.run([sys.executable, "-m", "distro_bench", *args], stdout=w, stderr=subprocess.PIPE,
                              text=True, timeout=600)
    finally:
        os.close(w)
    return proc.returncode, proc.stderr


def test_a_command_whose_reader_left_exits_0_without_a_word():
    rc, err = _with_stdout_closed_early(["project", "--published"])
    assert rc == 0 and "Error" not in err and "Traceback" not in err, (rc, err)


def test_a_run_whose_reader_left_completes_and_keeps_its_folder(write_scenario, tmp_path):
    scen = write_scenario(tiny_scenario_dict(train={"steps": 2, "eval_every": 2, "seed": 0}))
    out = tmp_path / "out"
    rc, err = _with_stdout_closed_early(["run", str(scen), "--backend", "local", "--out", str(out)])
    assert rc == 0, err
    (run,) = [p for p in out.iterdir() if p.is_dir()]  # beside it: index.parquet
    assert json.loads((run / "status.json").read_text())["state"] == "complete", err
    assert (run / "summary.json").is_file() and (run / "report.md").is_file()
