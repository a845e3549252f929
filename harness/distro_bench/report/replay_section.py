"""What a byte replay (issue 34, train/replay.py) measured, for the console and the report: per optimizer the step
as replayed (the profile's compute, the codec timed apart, the communication over the links) with the projection's
communication time beside it and their ratio, the bytes counted against the prediction, the share of the step that
was compute, the fraction of the predicted bytes replayed, and each worker's peak resident memory (the message
buffers and the runtime: no model or optimizer state). A replay trains nothing, so it has no loss and no verdict
on training quality: only what the predicted messages cost over the links."""

from __future__ import annotations

from distro_bench.report.document import Para, Section, Table
from distro_bench.results.format import fmt_bytes, fmt_seconds, fmt_times
from distro_bench.results.summary import Summary

COLUMNS = ["optimizer", "step", "compute (profile)", "codec", "comm", "payload/step", "wire sent/step",
           "predicted sent", "wire / predicted", "compute share", "fraction of bytes replayed",
           "peak RSS/worker (buffers, no model)", "comm predicted", "comm / predicted"]


def is_replay(summary: Summary | dict) -> bool:
    return Summary.of(summary).run.mode == "replay"


def _share(x: float | None) -> str:
    return "n/a" if x is None else f"{100 * x:.0f}%"


def replay_rows(summary: Summary | dict, prediction: dict) -> list[list[str]]:
    """One row per optimizer (COLUMNS). `prediction`: prediction.json's `optimizers` ({} where absent)."""
    rows = []
    for name, s in Summary.of(summary).optimizers.items():
        r = s.replay or {}
        wire = s.wire_tx_bytes_per_step
        predicted = (prediction.get(name) or {}).get("wire_tx_bytes")
        fraction = r.get("fraction")
        comm, comm_predicted = s.comm_s_mean, (prediction.get(name) or {}).get("comm_s")
        rows.append([
            name, fmt_seconds(s.step_time_s_mean), fmt_seconds(r.get("compute_s")),
            fmt_seconds(r.get("codec_s")), fmt_seconds(s.comm_s_mean),
            fmt_bytes(_sum(s.payload_tx_bytes_per_step, s.payload_rx_bytes_per_step)),
            fmt_bytes(wire), fmt_bytes(predicted),
            fmt_times(wire / predicted) if wire is not None and predicted else "n/a",
            _share(r.get("utilisation")),
            "all" if fraction in (None, 1, 1.0) else f"{fraction:g} of the bytes",
            fmt_bytes(s.max_rss_bytes),
            fmt_seconds(comm_predicted),
            fmt_times(comm / comm_predicted) if comm is not None and comm_predicted else "n/a",
        ])
    return rows


def _sum(a: float | None, b: float | None) -> float | None:
    return None if a is None and b is None else (a or 0) + (b or 0)


EXPLAINED = ("A byte replay: the workers trained nothing. Each step every worker waited out the compute its hardware "
             "profile gives (6 x parameters x tokens / (TFLOPS x mfu)) and its method's codec seconds (the codec is "
             "not run on these messages: it was timed apart, on this CPU at the run's start and scaled, or stated), "
             "then sent the messages the byte model predicts for its method at that step (Strategy.predict_step), "
             "with synthetic contents, over the emulated links. Payload therefore equals the prediction by "
             "construction; what is measured is the links, the framing and the collectives' timing. Comm is the "
             "measured communication, beside the projection's for the same messages and links (comm predicted) "
             "and their ratio. Wire bytes are the interface counters; predicted sent is the projection's framed "
             "bytes. Where a method replayed a fraction of its bytes, every byte and time figure is for that "
             "fraction. Peak RSS counts the replay's buffers and the runtime, not a model: a training worker also "
             "holds its weights, gradients and optimizer state (16 bytes a parameter in fp32 with AdamW). There is "
             "no loss: a replay says what the predicted messages cost over these links, not how well the method "
             "trains.")


def replay_lines(summary: Summary | dict, prediction: dict) -> list[str]:
    """Plain text for the end of `distro-bench run` on a replay: the explanation's first line and the table."""
    rows = replay_rows(summary, prediction)
    if not rows:
        return []
    cols = ["optimizer", "step", "compute", "codec", "comm", "comm predicted", "comm ratio", "wire sent",
            "predicted", "ratio", "compute share", "fraction", "peak RSS (buffers)"]
    pick = [0, 1, 2, 3, 4, 12, 13, 6, 7, 8, 9, 10, 11]
    table = [cols] + [[r[i] for i in pick] for r in rows]
    w = [max(len(r[i]) for r in table) for i in range(len(cols))]
    fractions = ", ".join(f"{r[0]} {r[10]}" for r in rows)
    lines = [(f"byte replay (predicted messages, synthetic contents, codec timed apart; nothing trained), fraction "
              f"of predicted bytes replayed: {fractions}: per worker per step, compute from the profile, "
              "communication measured")]
    lines += ["  " + "  ".join(c.ljust(w[i]) if i == 0 else c.rjust(w[i]) for i, c in enumerate(row)) for row in table]
    for r in rows:
        if r[10] != "all":
            lines.append(f"  {r[0]} replayed {r[10]}: its figures are for that fraction")
    return lines


def replay_section(summary: Summary | dict, prediction: dict) -> Section | None:
    rows = replay_rows(summary, prediction)
    if not rows:
        return None
    return Section("Replay", [Para(EXPLAINED), Table(COLUMNS, rows, numeric=[False] + [True] * (len(COLUMNS) - 1))])
