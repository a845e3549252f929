"""The per-round host cost calibration: the workers' probe measures a gather as training measures
communication (from the last rank's entry), after the same compute, and the report's prediction uses it."""

from __future__ import annotations

import json
import os
import time
from datetime import timedelta
from pathlib import Path

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from distro_bench.report.load import load_for_report
from distro_bench.report.prediction import prediction_rows
from tests.helpers import free_port as _free_port
from tests.helpers import make_run

SLOW_WORK_S = 0.3
CALLS = 3


def _probe_worker(rank: int, world: int, port: int, out: str) -> None:
    from distro_bench.train.distributed import latency_probe

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), GLOO_SOCKET_IFNAME="lo")
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=world, timeout=timedelta(seconds=60))
    try:
        worked = []

        def work() -> None:  # the last rank is the slow one: everyone else waits for it in each gather
            worked.append(time.time())
            if rank == world - 1:
                time.sleep(SLOW_WORK_S)

        start = time.perf_counter()
        times = latency_probe(torch.device("cpu"), work, calls=CALLS)
        Path(out, f"rank{rank}.json").write_text(json.dumps(
            {"times": times, "elapsed": time.perf_counter() - start, "worked": len(worked)}))
    finally:
        dist.destroy_process_group()


def test_probe_leaves_out_the_wait_for_the_slowest_rank(tmp_path):
    if not dist.is_gloo_available():
        pytest.skip("this torch build has no gloo backend")
    world = 3
    mp.spawn(_probe_worker, args=(world, _free_port(), str(tmp_path)), nprocs=world, join=True)
    ranks = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in range(world)]
    for r in ranks:
        assert r["worked"] == CALLS, "the work runs before every timed gather"
        assert len(r["times"]) == CALLS and all(t >= 0 for t in r["times"])
        # every rank waited for the slow one in every call ...
        assert r["elapsed"] >= CALLS * SLOW_WORK_S
        # ... and none of that wait is counted as the gather's own time
        assert max(r["times"]) < SLOW_WORK_S / 2, r["times"]


def _with_prediction(run: Path, probe_s: float | None, hop_delay_s: float) -> Path:
    summary = json.loads((run / "summary.json").read_text())
    summary["run"]["probe_allgather_s"] = probe_s
    (run / "summary.json").write_text(json.dumps(summary))
    pred = {"network_emulated": True, "world_size": 4, "max_hop_delay_s": hop_delay_s, "optimizers": {
        name: {"payload_tx_bytes": 1, "payload_rx_bytes": 3, "wire_tx_bytes": 4.0, "wire_rx_bytes": 4.0, "rounds": rounds,
               "latency_s": rounds * hop_delay_s, "transfer_s": transfer, "comm_s": 0.123}
        for name, rounds, transfer in (("adamw", 6, 0.2), ("distro", 3, 0.001))}}
    (run / "prediction.json").write_text(json.dumps(pred))
    return run


def test_prediction_adds_the_calibrated_cost_of_each_round(tmp_path):
    # 3 rounds per probe gather (4 workers): 36 ms is 12 ms a round, of which the links' 2 ms round trip
    run = _with_prediction(make_run(tmp_path), probe_s=0.036, hop_delay_s=0.002)
    rows = {r["optimizer"]: r for r in prediction_rows(load_for_report(run))}
    assert rows["adamw"]["overhead_per_round"] == pytest.approx(0.010)
    assert rows["adamw"]["comm_predicted"] == pytest.approx(6 * 0.002 + 0.2 + 6 * 0.010)
    assert rows["distro"]["comm_predicted"] == pytest.approx(3 * 0.002 + 0.001 + 3 * 0.010)
    r = rows["distro"]
    assert r["comm_ratio"] == pytest.approx(r["comm_measured"] / r["comm_predicted"])


def test_prediction_without_a_probe_keeps_the_model_default(tmp_path):
    run = _with_prediction(make_run(tmp_path), probe_s=None, hop_delay_s=0.002)
    rows = prediction_rows(load_for_report(run))
    assert rows and all(r["overhead_per_round"] is None and r["comm_predicted"] == 0.123 for r in rows)
