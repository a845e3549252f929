"""The coordinator-side scheduler that applies a scenario's changes during one optimizer/seed run (issue 18).

A thread in the harness process (workers have no NET_ADMIN). Its clock starts when rank 0 begins its
first step: it polls rank 0's heartbeat file every POLL_S (the worker writes `0 compute <time>` just
before the step's `t_start`) and corrects the origin to the step record's exact `t_start` once that
arrives. Each change of harness/distro_bench/scenario/timeline.py is applied when due (`at`: origin + at; `at_step`: when
the heartbeat shows rank 0 beginning that step) through harness/distro_bench/net/emulation.py, read back, and
logged as harness/distro_bench/results/events.py rows. An outage is restored `outage` seconds after it began; a trace
direction gets tbf's rate of each window. When the run ends, every link is put back as planned, so
the next optimizer starts on the same network: every optimizer and seed sees the same wall-clock
schedule from its own first step.

A failed read-back is a row with ok=False and `failure` set: the runner stops the run with it, since a
measurement on a network other than the one asked for is not one.
"""

from __future__ import annotations

import threading
import time
from dataclasses import replace
from pathlib import Path

from distro_bench.net.engines import directions
from distro_bench.results import runfiles
from distro_bench.scenario.impairments import BY_KEY as IMPAIRMENTS_BY_KEY
from distro_bench.scenario.timeline import FIELD_DIRECTIONS, Change, Timeline, TraceFollow
from distro_bench.scenario.trace import load_trace
from distro_bench.scenario.units import format_duration, format_rate

POLL_S = 0.02
LINK_KINDS = ("schedule", "outage")
_FIELD_NAME = {"up": "rate", "down": "rate"}  # events.parquet names a rate change `rate` (with its direction)


def read_back(field: str, direction: str, result: dict) -> str:
    """The value of `field` on `direction` as Emulation.change read it back, in scenario units ('' if none)."""
    if field in ("up", "down"):
        tbf = next((q for q in result.get("tc") or [] if q.get("kind") == "tbf"), None)
        if result.get("tc") is None:
            return ""
        return format_rate(int(tbf["options"]["rate"]) * 8) if tbf else "unlimited"
    row = IMPAIRMENTS_BY_KEY[field]
    line = result.get("delay_line")
    if line is not None:
        v = line.get(row.attr, 0.0)
    else:
        netem = next((q for q in result.get("tc") or [] if q.get("kind") == "netem"), None)
        outer, inner = row.read_back
        v = float(((netem or {}).get("options", {}).get(outer) or {}).get(inner, 0.0))
    return row.format(v)


def _read_heartbeat(path: Path) -> tuple[int, str, float] | None:
    """distro_bench.train.worker.read_heartbeat's format (`step phase time`), read without importing the worker
    (torch: seconds to import on a busy host, which would delay the first changes)."""
    try:  # as every run-folder file is read (results/runfiles.py): no link, no FIFO, 4 KiB at most
        step, phase, t = runfiles.read_bytes(path.parent, path.name, "rank.hb").decode().split()
        return int(step), phase, float(t)
    except (OSError, ValueError, runfiles.RunFileError):
        return None


class ChangeScheduler:
    """Applies `timeline` to `emulation` (None: a backend without emulated links; only compute rows are
    logged) during one optimizer/seed run whose worker files are in `worker_dir`."""

    def __init__(self, timeline: Timeline, emulation, worker_dir: Path, optimizer: str, seed: int,
                 ):
        self.timeline = timeline
        self.emulation = emulation
        self.hb_path = Path(worker_dir) / "rank0.hb"
        self.jsonl_path = Path(worker_dir) / "rank0.jsonl"
        self.optimizer, self.seed = optimizer, seed
        self.notes: list[str] = []  # for the runner to show from its own thread (take_notes)
        self.base_plan = emulation.plan if emulation is not None else None
        self.rows: list[dict] = []
        self.failure: str | None = None
        self.origin: float | None = None  # epoch seconds of rank 0's first step
        self.step: int | None = None
        self.outages: list[dict] = []  # {node, link, rank, start (epoch), start_s, until_s, restored}
        self._pending = list(timeline.changes)
        self._follows = list(timeline.traces)  # started by _start_traces into _traces
        self._traces: list[tuple[TraceFollow, list[int], int]] = []  # (follow, windows, last index)
        self._touched: set[int] = set()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    # ---- lifecycle ------------------------------------------------------------------------------------
    def start(self) -> None:
        self._start_traces()
        self._thread = threading.Thread(target=self._run, name=f"netchange-{self.optimizer}", daemon=True)
        self._thread.start()

    def stop(self) -> list[dict]:
        """Stop the thread, put every link back as planned, return the rows."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
        if self.failure is None:
            try:  # what came due between the last poll and the end (a step trigger at the last step)
                self._observe()
                if self.origin is not None:
                    self._tick()
            except Exception as e:
                self.failure = f"network change scheduler: {type(e).__name__}: {e}"
        self._restore_all()
        return list(self.rows)

    def __enter__(self) -> ChangeScheduler:
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    # ---- the clock ----------------------------------------------------------------------------------------
    def _observe(self) -> None:
        beat = _read_heartbeat(self.hb_path)
        if beat is not None and beat[0] >= 0:
            step, phase, t = beat
            if self.origin is None:
                # The first step's heartbeat is written just before its t_start; a later one (missed poll) is
                # a fallback until the step record gives the exact time.
                self.origin = t if (step, phase) == (0, "compute") else None
                if self.origin is None:
                    self.origin = self._first_step_start() or t
            self.step = step if phase == "compute" else max(self.step or 0, step)
        if self.origin is not None and not getattr(self, "_exact", False):
            exact = self._first_step_start()
            if exact is not None:
                self.origin, self._exact = exact, True

    def _first_step_start(self) -> float | None:
        import json

        try:  # the worker's records, read as the runner reads them (results/runfiles.py: no link, no FIFO, capped)
            for line in runfiles.iter_lines(self.jsonl_path.parent, self.jsonl_path.name, "rank.jsonl"):
                if '"type": "step"' in line and line.endswith("\n"):
                    return float(json.loads(line)["t_start"])
        except (OSError, ValueError, KeyError, TypeError, runfiles.RunFileError):
            return None
        return None

    def t_s(self, now: float | None = None) -> float | None:
        return None if self.origin is None else (now or time.time()) - self.origin

    def _origin_s(self) -> float:
        """`origin` where it must be known: the schedule ticks, and rows are written, only once it is."""
        assert self.origin is not None, "the change schedule ran before rank 0's first step"
        return self.origin

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self._observe()
                if self.origin is not None:
                    self._tick()
            except Exception as e:  # never die silently: the runner stops the run with it
                self.failure = self.failure or f"network change scheduler: {type(e).__name__}: {e}"
                return
            self._stop.wait(POLL_S)

    def _tick(self) -> None:
        now_s = time.time() - self._origin_s()
        for c in list(self._pending):
            due = (c.at_s is not None and now_s >= c.at_s) or (c.at_step is not None and self.step is not None
                                                                and self.step >= c.at_step)
            if not due:
                if c.at_s is not None:
                    break  # time triggers are sorted; step triggers come after them
                continue
            self._pending.remove(c)
            self._apply(c, scheduled_s=c.at_s if c.at_s is not None else now_s)
        for o in self.outages:
            if not o["restored"] and now_s >= o["until_s"]:
                self._restore_outage(o)
        self._follow_traces(now_s)

    # ---- applying ---------------------------------------------------------------------------------------------
    def _row(self, c_or_node, kind: str, direction: str, field: str, requested: str, verified: str,
             ok: bool | None, scheduled_s: float, applied_at: float, until_s: float | None = None,
             detail: str = "") -> None:
        node = c_or_node if isinstance(c_or_node, str) else c_or_node.node
        self.rows.append({
            "optimizer": self.optimizer, "seed": self.seed, "time": applied_at, "t_s": applied_at - self._origin_s(),
            "scheduled_s": scheduled_s, "step": self.step, "node": node, "direction": direction, "kind": kind,
            "field": field, "requested": requested, "verified": verified, "ok": ok, "until_s": until_s,
            "detail": detail})
        if ok is False and self.failure is None:
            self.failure = f"{detail} (at {scheduled_s:.1f}s)"

    def _apply(self, c: Change, scheduled_s: float) -> None:
        if c.kind == "compute":
            # The worker applies its own schedule by its own clock; this row says when it was due.
            self._row(c, "compute", "", "compute_scale", c.fields["compute_scale"], "", None, scheduled_s,
                      self._origin_s() + scheduled_s, detail=c.describe())
            return
        if self.emulation is None:
            return
        self._touched.add(c.rank)
        if c.kind == "outage":
            self._start_outage(c, scheduled_s)
            return
        specs = dict(zip(("up", "down"), directions(c.link)))
        results = {}
        for d in c.directions:
            spec = specs[d]
            if any(t.rank == c.rank and t.direction == d for t, _, _ in self._traces):
                spec = replace(spec, rate_bps=self.emulation._node_plan(c.rank).direction(d).spec.rate_bps)
            try:
                results[d] = self.emulation.change(c.rank, d, spec)
            except Exception as e:
                results[d] = {"error": f"{type(e).__name__}: {e}", "applied_at": time.time()}
        for f, requested in c.fields.items():
            for d in FIELD_DIRECTIONS[f]:
                r = results[d]
                if "error" in r:
                    verified, ok = "", False
                    detail = f"{c.node} {d} {f} {c.previous.get(f)} -> {requested}: not applied: {r['error']}"
                else:
                    verified = read_back(f, d, r)
                    ok = True if r.get("pending") and not verified else verified == requested
                    detail = f"{c.node} {d} {_FIELD_NAME.get(f, f)} {c.previous.get(f)} -> {requested}" + (
                        " (link down: applies when it returns)" if r.get("pending") else "")
                    if not ok:
                        detail += f": read back {verified!r}"
                direction = d if f in ("up", "down") else "both"
                if direction == "both" and d == "down":
                    continue  # one row for a field both directions share (its up read-back; both are checked)
                if direction == "both" and "error" not in results.get("down", {}):
                    other = read_back(f, "down", results["down"]) if "down" in results else verified
                    if other != verified:
                        ok, detail = False, detail + f"; down read back {other!r}"
                self._row(c, "schedule", direction, _FIELD_NAME.get(f, f), requested, verified, ok, scheduled_s,
                          r["applied_at"], detail=detail)
        self.notes.append(f"{self.optimizer}: {c.describe()} at {self.t_s():.1f}s")

    def _start_outage(self, c: Change, scheduled_s: float) -> None:
        start = time.time()
        down_s = c.duration_s or 0.0  # an outage always has its duration
        until = scheduled_s + down_s
        try:
            r = self.emulation.outage(c.rank, True)
            ok = all(any(q.get("root") and q.get("kind") == "blackhole" for q in r[d]) for d in ("up", "down"))
            verified, applied_at = "blackhole" if ok else "not blackhole", r["applied_at"]
        except Exception as e:
            ok, verified, applied_at = False, f"error: {e}", time.time()
        label = c.link_name or "inline"
        self.outages.append({"node": c.node, "link": label, "rank": c.rank, "start": start, "start_s": scheduled_s,
                             "until_s": until, "duration_s": c.duration_s, "restored": False})
        self._row(c, "outage", "both", "down", format_duration(down_s), verified, ok, scheduled_s, applied_at,
                  until_s=until, detail=f"{c.node} link {label!r} down for {format_duration(down_s)}")
        self.notes.append(f"{self.optimizer}: {c.node} link {label!r} down for {format_duration(down_s)} "
                  f"at {self.t_s():.1f}s")

    def _restore_outage(self, o: dict) -> None:
        o["restored"] = True
        try:
            r = self.emulation.outage(o["rank"], False)
            ok = not any(q.get("kind") == "blackhole" for d in ("up", "down") for q in r[d])
            verified, applied_at = "restored" if ok else "still blackhole", r["applied_at"]
        except Exception as e:
            ok, verified, applied_at = False, f"error: {e}", time.time()
        self._row(o["node"], "restore", "both", "down", "0s", verified, ok, o["until_s"], applied_at,
                  detail=f"{o['node']} link {o['link']!r} back after {format_duration(o['duration_s'])}")
        self.notes.append(f"{self.optimizer}: {o['node']} link {o['link']!r} back at {self.t_s():.1f}s")

    # ---- traces ------------------------------------------------------------------------------------------------
    def _start_traces(self) -> None:
        if self.emulation is None:  # nothing to shape (preflight refuses this unless --allow-unemulated)
            self._traces = []
            return
        started = []
        for t in self._follows:
            windows = load_trace(t.path).windows(t.resolution_s)
            self._set_trace_rate(t, windows[0], None, 0.0)  # the link starts at the trace's first rate
            started.append((t, windows, 0))
            self._touched.add(t.rank)
        self._traces = started

    def _set_trace_rate(self, t: TraceFollow, rate: int, prev: int | None, scheduled_s: float) -> None:
        # During an outage change() records the rate in the plan; it takes effect when the link returns.
        spec = self.emulation._node_plan(t.rank).direction(t.direction).spec
        try:
            r = self.emulation.change(t.rank, t.direction, replace(spec, rate_bps=rate))
            verified = read_back(t.direction, t.direction, r)
            ok = True if r.get("pending") else verified == format_rate(rate)
            applied_at = r["applied_at"]
        except Exception as e:
            verified, ok, applied_at = f"error: {e}", False, time.time()
        if self.origin is not None:
            self._row(t.node, "trace", t.direction, "rate", format_rate(rate), verified, ok, scheduled_s, applied_at,
                      detail=f"{t.node} {t.direction} rate {format_rate(prev) if prev else '?'} -> {format_rate(rate)} "
                             f"(trace {t.path.name})")

    def _follow_traces(self, now_s: float) -> None:
        out: list[tuple[TraceFollow, list[int], int]] = []
        for t, windows, last in self._traces:
            k = int(now_s / t.resolution_s)
            if k != last:
                i, j = k % len(windows), last % len(windows)
                if windows[i] != windows[j]:
                    self._set_trace_rate(t, windows[i], windows[j], k * t.resolution_s)
                last = k
            out.append((t, windows, last))
        self._traces = out

    # ---- the end ------------------------------------------------------------------------------------------------
    def _restore_all(self) -> None:
        """Every link back to the plan it started with (outages ended, schedule and trace changes undone)."""
        if self.emulation is None or self.base_plan is None:
            return
        base = {p.rank: p for p in self.base_plan.nodes}
        for rank in sorted(self._touched):
            try:
                for d in ("up", "down"):
                    self.emulation.change(rank, d, base[rank].direction(d).spec)
                if rank in self.emulation.down:
                    self.emulation.outage(rank, False)
            except Exception as e:
                self.failure = self.failure or f"restoring the links after {self.optimizer}: {e}"

    def take_notes(self) -> list[str]:
        out, self.notes = self.notes, []
        return out

    # ---- for the runner's error -------------------------------------------------------------------------------
    def outage_cause(self, within_s: float) -> dict | None:
        """The outage in progress, or the latest one that began within the last `within_s` seconds, with
        `nodes`: every node whose link went down in that same scheduled outage (a shared link profile takes
        all its nodes down at once; which of them is applied last varies with the machine's load)."""
        now = time.time()
        recent = [o for o in self.outages if not o["restored"] or now - o["start"] <= within_s]
        if not recent:
            return None
        last = recent[-1]
        same = [o["node"] for o in recent if (o["link"], o["start_s"]) == (last["link"], last["start_s"])]
        return {**last, "nodes": sorted(set(same))}
