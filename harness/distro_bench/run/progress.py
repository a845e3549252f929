"""Progress of a run as the runner sees it: records of every rank turned into one record per step.

`AcrossRanks` feeds a sink (runner.ProgressSink; the CLI's Rich bars or plain lines, harness/distro_bench/cli/progress.py)
one record per step, so the step time shown live is the one the summary, verdict and report use: the slowest
rank's `step_time_s` of that step (docs/run-folder.md, "Step time"). No terminal code here: the runner stays
importable without typer and Rich.
"""

from __future__ import annotations


def step_time_of(records: list[dict]) -> float:
    """A step's time: the slowest rank's `step_time_s` (a synchronous step ends with its slowest rank; a
    periodic method's local steps are timed the same way, its sync steps carry the sync). metrics.py's
    summary applies the same rule per step before its mean and median."""
    return max(float(r["step_time_s"]) for r in records)


class AcrossRanks:
    """Feeds `sink` one record per step once every rank has written it: step time by `step_time_of`, loss and
    payload bytes the mean over ranks (as the summary's). Ranks write their steps in order, so steps come out
    in order; a step some rank never wrote (it died) is not shown."""

    def __init__(self, sink, ranks: int):
        self.sink, self.ranks = sink, ranks
        self.pending: dict[tuple[str, int], dict[int, dict]] = {}

    def step(self, optimizer: str, r: dict) -> None:
        if int(r["step"]) < 0:  # the evaluation before the first step (train/loop.py initial_evaluation): no step
            return
        got = self.pending.setdefault((optimizer, int(r["step"])), {})
        got[int(r.get("rank", 0))] = r
        if len(got) < int(r.get("members") or self.ranks):  # with churn, the workers present at that step
            return
        del self.pending[(optimizer, int(r["step"]))]
        recs = [got[k] for k in sorted(got)]
        n = len(recs)
        self.sink.step(optimizer, {
            **recs[0], "rank": None, "ranks": n, "step_time_s": step_time_of(recs),
            "slowest_rank": max(recs, key=lambda x: float(x["step_time_s"]))["rank"],
            # a replay trains nothing: no loss (train/replay.py)
            "loss": None if any(x["loss"] is None for x in recs) else sum(float(x["loss"]) for x in recs) / n,
            "payload_tx_bytes": sum(x["payload_tx_bytes"] for x in recs) / n,
            "payload_rx_bytes": sum(x["payload_rx_bytes"] for x in recs) / n,
        })
