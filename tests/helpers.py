"""Plain helpers shared by test modules (fixtures live in the conftest.py files, never imported)."""

from __future__ import annotations

import importlib.util
import math
import signal
import socket
import subprocess
import sys
from pathlib import Path

import yaml

from distro_bench.results import metrics
from distro_bench.results.rundir import atomic_write_json, atomic_write_parquet
from distro_bench.scenario.methods import registrations

REPO = Path(__file__).resolve().parents[1]


def tiny_scenario_dict(**overrides) -> dict:
    """A scenario small enough to train in a few seconds on 2 cores."""
    d = {
        "name": "tiny-test",
        "workers": [{"count": 2, "hardware": "host"}],
        "model": {"preset": "tiny"},
        "data": {"corpus": "builtin:pydoc", "seq_len": 32, "batch_size": 4, "val_batches": 2},
        "train": {"steps": 6, "eval_every": 3, "seed": 0},
        "optimizers": {"adamw": {"lr": 3e-3}},
        "baseline": "adamw",
    }
    d.update(overrides)
    return d


def start_cli(args: list[str], **popen) -> subprocess.Popen:
    """`python -m distro_bench ARGS` started as a terminal starts it: with Ctrl-C's default action. A process
    inherits an ignored SIGINT (a shell's background job without job control ignores it, and so does all it
    starts), and Python then installs no KeyboardInterrupt: a suite launched that way saw every Ctrl-C test
    time out, though the harness handles Ctrl-C. Tests that signal a run start it here."""
    return subprocess.Popen([sys.executable, "-m", "distro_bench", *args],
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),  # noqa: PLW1509 - resets one signal before exec
                            **popen)


# ---- system tools: a Python equivalent where the test's point allows, else a skip that names the package ----

# The Debian/Ubuntu package of each external tool a test may call (README: a bare machine has only python3,
# python3-venv and iproute2).
APT_PACKAGE = {"ip": "iproute2", "tc": "iproute2", "bridge": "iproute2", "ping": "iputils-ping",
               "iperf3": "iperf3", "ethtool": "ethtool", "iptables-save": "iptables", "docker": "docker.io",
               "dockerd": "docker.io", "debootstrap": "debootstrap", "chromium": "chromium", "git": "git",
               "pgrep": "procps", "ss": "iproute2", "nsenter": "util-linux"}


def missing_tools(*tools: str) -> list[str]:
    """Those of `tools` not on PATH."""
    import shutil

    return [t for t in tools if shutil.which(t) is None]


def need(*tools: str) -> None:
    """Skip the calling test unless every one of `tools` is on PATH, naming each missing one and its package."""
    import pytest

    if gone := missing_tools(*tools):
        pkgs = " ".join(dict.fromkeys(APT_PACKAGE.get(t, t) for t in gone))
        pytest.skip(f"needs {', '.join(gone)} (not installed; apt-get install {pkgs})")


def processes_matching(pattern: str) -> list[str]:
    """`pgrep -af PATTERN` in Python (procps is not on a bare machine): 'pid cmdline' of every process
    whose whole command line matches the regular expression `pattern`, this process excluded."""
    import os
    import re

    rx, out = re.compile(pattern), []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                cmdline = f.read().rstrip(b"\0").replace(b"\0", b" ").decode(errors="replace")
        except OSError:  # gone meanwhile, or a kernel thread we may not read
            continue
        if cmdline and rx.search(cmdline):
            out.append(f"{entry} {cmdline}")
    return out


def wait_answering(ns, addr: str, within_s: float = 60.0) -> None:
    """Until `addr` answers an echo from `ns`: a new link's first frames wait for its carrier and for ARP
    (resolved, or retried after 1 s), which a busy host can stretch past a second, so a timed ping before
    this measures the link coming up, not its round trip (a CI run under load: 1011, 961, ... 811 ms)."""
    import time

    deadline = time.monotonic() + within_s
    while icmp_ping(ns, addr, 1, 0.05, timeout_s=1.0) == [None]:
        if time.monotonic() > deadline:
            raise AssertionError(f"{addr} did not answer an echo from {ns} within {within_s:g} s")


def icmp_ping(ns, addr: str, count: int, interval_s: float, *, timeout_s: float = 2.0) -> list[float | None]:
    """`ping -n -c COUNT -i INTERVAL -W TIMEOUT ADDR` from namespace `ns` (a NetnsRef or a name under
    /run/netns) in Python, as root, for tests where iputils-ping is absent: the same ICMP echo requests, so
    the far side's kernel answers them as it answers ping. One entry per request, in order: its round
    trip in ms (send to reply, timed here as ping times them without SO_TIMESTAMP), or None when no
    reply came within `timeout_s` of the last request. Replies are timed by the kernel on arrival
    (SO_TIMESTAMPNS, as ping does), so a busy CPU that wakes this process late does not add to the RTT."""
    import os
    import select
    import struct
    import time

    from distro_bench.net.ns import NetnsRef, entered

    ref = NetnsRef.named(ns) if isinstance(ns, str) else ns
    with entered(ref):  # the socket stays in the namespace it was made in
        sock = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)
    so_timestampns = 35  # Linux's SO_TIMESTAMPNS (Python does not name it): a struct timespec per datagram
    sock.setsockopt(socket.SOL_SOCKET, so_timestampns, 1)
    timespec = struct.Struct("@ll")
    ident = (os.getpid() ^ id(sock)) & 0xFFFF
    sent: dict[int, float] = {}
    rtts: list[float | None] = [None] * count

    def checksum(data: bytes) -> int:
        data += b"\0" * (len(data) % 2)
        total = sum(struct.unpack(f"!{len(data) // 2}H", data))
        total = (total >> 16) + (total & 0xFFFF)
        return ~(total + (total >> 16)) & 0xFFFF

    def send(seq: int) -> None:
        payload = b"distro-bench" + bytes(44)  # 56 bytes, as ping's default
        header = struct.pack("!BBHHH", 8, 0, 0, ident, seq)
        packet = struct.pack("!BBHHH", 8, 0, checksum(header + payload), ident, seq) + payload
        sent[seq] = time.time()  # the kernel's stamps are CLOCK_REALTIME
        sock.sendto(packet, (addr, 0))

    def receive_until(deadline: float) -> None:
        while (left := deadline - time.monotonic()) > 0:
            if not select.select([sock], [], [], left)[0]:
                return
            data, ancillary, _, _ = sock.recvmsg(65536, socket.CMSG_SPACE(timespec.size))
            now = time.time()
            for level, kind, value in ancillary:
                if level == socket.SOL_SOCKET and kind == so_timestampns and len(value) >= timespec.size:
                    sec, nsec = timespec.unpack(value[:timespec.size])
                    now = sec + nsec / 1e9
            icmp = data[(data[0] & 0x0F) * 4:]  # past the IP header
            kind, _, _, rid, seq = struct.unpack("!BBHHH", icmp[:8])
            if kind == 0 and rid == ident and seq in sent and seq < count and rtts[seq] is None:
                rtts[seq] = (now - sent[seq]) * 1000
                if len(sent) == count and None not in rtts:
                    return  # every reply is in: ping -c ends here too

    try:
        start = time.monotonic()
        for seq in range(count):
            send(seq)
            receive_until(start + (seq + 1) * interval_s if seq + 1 < count else time.monotonic() + timeout_s)
    finally:
        sock.close()
    return rtts


def free_port() -> int:
    """A TCP port free on 127.0.0.1 right now (for a gloo rendezvous)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# ---- Docker (for tests/integration/docker) ---------------------------------------------------------

def ours(engine, run_id: str | None = None) -> list[str]:
    """Names of our containers and networks: one run's, or every run's."""
    from distro_bench.backends.docker import LABEL_OWNER, LABEL_RUN

    label = f"{LABEL_RUN}={run_id}" if run_id else f"{LABEL_OWNER}=1"
    return ([c.name for c in engine.containers.list(all=True, filters={"label": label})]
            + [n.name for n in engine.networks.list(filters={"label": label})])


def exec_as_worker(engine, container_id: str, argv: list[str]) -> tuple[int, str]:
    """Run a command in a node container exactly as a worker runs: same user, no extra privileges."""
    ex = engine.api.exec_create(container_id, argv)
    out = engine.api.exec_start(ex["Id"]).decode(errors="replace")
    return engine.api.exec_inspect(ex["Id"])["ExitCode"], out


# ---- synthetic run folders (report, check and export tests) ----

ENV = {"harness_version": "0.1.0", "git_commit": "a" * 40, "git_dirty": False, "python": "3.11.7",
       "torch": "2.13.0+cpu", "host": "vm", "kernel": "6.18", "backend": "netns"}

# name -> (payload bytes tx per step, rx per step, final loss, compute seconds)
DEFAULT_OPTS = {"adamw": (2_000_000, 2_000_000, 2.40, 0.10), "distro": (1_000, 3_000, 2.55, 0.10)}


def make_run(root: Path, name: str = "synth", *, scenario: str = "synth", optimizers: dict | None = None,
             ranks: int = 4, steps: int = 20, straggler: int | None = None, wire: bool = True,
             state: str = "complete", reason: str | None = None, env: dict | None = None,
             checks: dict | None = None, diverge: str | None = None, link: dict | None = None,
             step_time_noise: float = 0.002, noise_seed: int = 0) -> Path:
    """A run folder as the runner writes it, from made-up but consistent per-step records."""
    optimizers = optimizers or DEFAULT_OPTS
    run = root / name
    run.mkdir(parents=True)
    records, events = [], []
    t0 = 1_800_000_000.0
    for oi, (opt, (tx, rx, final, compute)) in enumerate(optimizers.items()):
        t = t0 + 1000 * oi
        for step in range(steps):
            loss = final + 3.0 * math.exp(-step / 4)
            comps = [compute * (3.0 if r == straggler else 1.0) + 0.001 * ((step * 7 + r) % 3) for r in range(ranks)]
            ready = [t + c for c in comps]
            comm_end = max(ready) + 0.01 + (tx + rx) / 1e8
            for r in range(ranks):
                st = comm_end + 0.005 - t + step_time_noise * ((step * 3 + noise_seed) % 5 + r % 2)
                records.append({
                    "type": "step", "optimizer": opt, "rank": r, "step": step, "loss": loss + 0.01 * r,
                    "val_loss": loss + 0.05 if step % 5 == 4 or step == steps - 1 else None, "lr": 1e-3,
                    "step_time_s": st, "data_s": 0.001, "compute_s": comps[r] - 0.001, "stretch_s": 0.0,
                    "compress_s": 0.002 if opt != "adamw" else 0.0, "comm_s": comm_end - ready[r],
                    "apply_s": 0.003, "t_start": t, "t_ready": ready[r],
                    "payload_tx_bytes": tx, "payload_rx_bytes": rx, "collectives": 2,
                    "wire_tx_bytes": int(tx * 1.04) if wire else None, "wire_rx_bytes": int(rx * 1.04) if wire else None,
                    "tokens": 512, "param_checksum": None,
                })
            t += max(r["step_time_s"] for r in records[-ranks:])
        for r in range(ranks):
            events.append({"type": "end", "optimizer": opt, "rank": r,
                           "param_checksum": f"{opt}-sum" + (str(r) if opt == diverge else "")})
    df = metrics.records_to_frame(records)
    baseline = next(iter(optimizers))
    summary = {"schema_version": 1,
               "run": {"scenario": scenario, "backend": "netns", "state": state, "reason": reason,
                       "started": "2026-11-30T00:00:00+00:00", "finished": "2026-11-30T00:01:00+00:00",
                       "world_size": ranks},
               "baseline": baseline, "optimizers": metrics.summarize(df, events, baseline)}
    scen = {"name": scenario, "description": "synthetic", "workers": [{"count": ranks, "hardware": "host", "link": "dsl"}],
            "links": {"dsl": link or {"up": "10Mbit", "down": "50Mbit", "delay": "15ms", "jitter": "3ms", "loss": "0.1%"}},
            "hardware": {"host": {"device": "cpu", "compute_scale": 1.0}},
            "model": {"preset": "tiny", "dim": 128, "n_layers": 2, "n_heads": 4, "ffn_dim": 384, "vocab_size": 256,
                      "max_seq_len": 512},
            "data": {"corpus": "builtin:pydoc", "seq_len": 64, "batch_size": 8},
            "train": {"steps": steps, "eval_every": 5, "seed": 0},
            # a made-up name (demo-bf16) is a DisTrO run: report and check validate scenario.yaml (issue 39)
            "optimizers": {k: {"type": k if k in registrations() else "distro", "lr": 1e-3} for k in optimizers},
            "baseline": baseline,
            "checks": checks if checks is not None else {"min_reduction": 100, "max_loss_gap": 0.3}}
    (run / "scenario.yaml").write_text(yaml.safe_dump(scen, sort_keys=False))
    network = {"backend": "netns", "network_emulated": True,
               "nodes": [{"rank": r, "name": f"node{r}", "address": f"10.0.0.{r + 2}", "applied": {"up": "tbf 10Mbit"}}
                         for r in range(ranks)],
               "not_emulated": ["delay, jitter, loss: no netem in this kernel"]}
    atomic_write_json(run / "environment.json", {**ENV, **(env or {}), "network": network})
    atomic_write_parquet(run / "metrics.parquet", df)
    atomic_write_json(run / "summary.json", summary)
    atomic_write_json(run / "status.json", {"state": state, "reason": reason})
    return run


def netns_host():
    """The host probe when network namespaces and tbf work here; else the test skips, saying why."""
    import os

    import pytest

    from distro_bench.net.host import probe

    if os.geteuid() != 0:
        pytest.skip("needs root: network namespaces and tc")
    caps = probe(docker=False, gpus=False)
    if not caps.netns:
        pytest.skip(f"network namespaces unavailable here: {caps.netns_error}")
    if not caps.rate_shaping:
        pytest.skip("this kernel has no tbf qdisc")
    return caps


def own_run_ids(monkeypatch, prefix: str):
    """A generator for a fixture: this test's runs get ids `<prefix><hex><n>` (other tests on the machine may
    hold namespaces meanwhile), and none of their namespaces may remain afterwards. Yields the token."""
    import itertools
    import secrets
    import time

    from distro_bench.net import naming

    token = prefix + secrets.token_hex(3)  # 24 bits: two lanes of one CI run must not draw the same
    counter = itertools.count()
    monkeypatch.setattr(naming, "new_run_id", lambda: f"{token}{next(counter)}")
    yield token
    deadline = time.monotonic() + 5
    while namespaces_of(token) and time.monotonic() < deadline:
        time.sleep(0.2)  # namespace teardown is asynchronous in the kernel
    assert not namespaces_of(token), "namespaces left behind"


def namespaces_of(token: str) -> list[str]:
    """The network namespaces of the runs whose ids start with `token` (a test's own, from its run-id token)."""
    from distro_bench.net.cleanup import list_namespaces

    return [n for n in list_namespaces() if n.startswith(f"dbench-{token}")]


def make_timed_run(root: Path, name: str = "timed", *, step_times: dict[str, list], seeds: int = 1,
                   ranks: int = 2, events: list[dict] | None = None) -> Path:
    """A run folder (make_run's scaffolding) whose steps take exactly `step_times[optimizer]` seconds (a list
    for every seed, or one list per seed), back to back from `timed_start(...)`, and `events` in
    events.parquet (written by harness/distro_bench/results/events.py). An event's `time` defaults to its run's first step +
    `t_s`, `scheduled_s` to `t_s`, `seed` to 0."""
    from distro_bench.results.events import write_events

    names = list(step_times)
    run = make_run(root, name, optimizers={n: DEFAULT_OPTS.get(n, (1_000, 1_000, 2.5, 0.1)) for n in names},
                   ranks=ranks, steps=20)
    records, ends = [], []
    for oi, opt in enumerate(names):
        for seed in range(seeds):
            t = timed_start(oi, seed, seeds)
            times = step_times[opt][seed] if isinstance(step_times[opt][0], list) else step_times[opt]
            for step, dur in enumerate(times):
                loss = 2.5 + 3.0 * math.exp(-step / 4)
                for r in range(ranks):
                    records.append({
                        "type": "step", "optimizer": opt, "seed": seed, "rank": r, "step": step, "loss": loss,
                        "val_loss": loss + 0.05 if step % 5 == 4 else None, "lr": 1e-3, "step_time_s": dur,
                        "data_s": 0.0, "compute_s": dur / 2, "stretch_s": 0.0, "compress_s": 0.0, "comm_s": dur / 2,
                        "apply_s": 0.0, "t_start": t, "t_ready": t + dur / 2,
                        "train_time_s": t + dur - timed_start(oi, seed, seeds),
                        "payload_tx_bytes": 1000, "payload_rx_bytes": 1000, "collectives": 1, "tokens": 512})
                t += dur
            ends += [{"type": "end", "optimizer": opt, "seed": seed, "rank": r, "param_checksum": f"{opt}-sum"}
                     for r in range(ranks)]
    df = metrics.records_to_frame(records)
    summary = {"schema_version": 1, "run": {"scenario": "synth", "backend": "netns", "state": "complete",
                                            "world_size": ranks},
               "baseline": names[0], "optimizers": metrics.summarize(df, ends, names[0])}
    atomic_write_parquet(run / "metrics.parquet", df)
    atomic_write_json(run / "summary.json", summary)
    if events is not None:
        rows = []
        for e in events:
            oi = names.index(e["optimizer"])
            row = {"seed": 0, "node": "node1", "direction": "up", "ok": True, "verified": e.get("requested"), **e}
            row.setdefault("scheduled_s", row["t_s"])
            row.setdefault("time", timed_start(oi, row["seed"], seeds) + row["t_s"])
            rows.append(row)
        write_events(run, rows)
    return run


def timed_start(optimizer_index: int, seed: int, seeds: int) -> float:
    """Epoch second at which make_timed_run's run of that optimizer and seed takes its first step."""
    return 1_800_000_000.0 + 10_000.0 * (optimizer_index * seeds + seed)


def load_script(path: Path):
    """A benchmark or script file imported as a module (they are not in a package)."""
    spec = importlib.util.spec_from_file_location(path.stem, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # dataclasses look their module up while being built
    spec.loader.exec_module(mod)
    return mod
