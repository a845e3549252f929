"""What the userspace delay line costs and how far it goes on this machine (needs root).

Prints, for a two-node star with a delay line on each access link:
1. CPU per 100 Mbit/s: one TCP flow shaped by tbf to each given rate (30 ms RTT); the CPU time the
   sender-side delay line used (data one way, ACKs the other) over the bits it forwarded.
2. Maximum sustained rate: no tbf; the TCP goodput one flow reaches through two delay lines, the
   line's CPU share and whether it dropped anything. (A UDP sweep with iperf3 measured iperf3: on
   2 cores its receiver lost datagrams at 100 Mbit/s while the lines lost none.)
3. RTT accuracy: ping over 4 x 5 ms one-way delays, mean error against 20 ms.

    python benchmarks/delayline_cpu.py [--seconds 5] [--rates 10,50,100] [--no-realtime]

The figures depend on how busy the host is: the load average is printed with them.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the tests' lab
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "harness"))  # the harness's source

from distro_bench.net.delayline import DelayLine, Impairment
from tests.delayline_lab import Lab, LabLink

STATS_PERIOD_S = 0.5  # how often the forwarder rewrites its stats file


@dataclass
class Window:
    """What the sender-side delay line did during the steady part of a transfer."""

    seconds: float
    user_s: float  # the forwarder's own work
    sys_s: float  # syscalls, and the kernel delivering what it sends (runs in its context)
    bits: int  # forwarded, both directions (data one way, ACKs the other)
    dropped: int  # frames the lines themselves lost since they started (socket buffer, queue, send)

    @property
    def core_pct(self) -> float:
        return 100 * (self.user_s + self.sys_s) / self.seconds

    @property
    def user_pct(self) -> float:
        return 100 * self.user_s / self.seconds

    @property
    def mbit(self) -> float:
        return self.bits / self.seconds / 1e6


def window(lab: Lab, seconds: float) -> tuple[dict, Window]:
    """Run iperf3 from node 0 to node 1; its summary, and the line's figures from two stats
    snapshots taken after slow start and before the end."""
    server = subprocess.Popen(
        lab.exec(1, ["iperf3", "-s", "-1", "-B", lab.ip(1)]), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        time.sleep(0.4)
        argv = ["iperf3", "-c", lab.ip(1), "-t", str(seconds), "-J"]
        client = subprocess.Popen(lab.exec(0, argv), stdout=subprocess.PIPE, text=True)
        try:
            time.sleep(1.0 + STATS_PERIOD_S)
            s0 = lab.lines[0].stats()
            time.sleep(max(seconds - 1.5 - 2 * STATS_PERIOD_S, STATS_PERIOD_S))
            s1 = lab.lines[0].stats()
            out, _ = client.communicate(timeout=seconds + 60)
        finally:
            client.kill()
            client.wait()
    finally:
        server.kill()
        server.wait()

    def bits(s: dict) -> int:
        return 8 * (s["a_to_b"]["bytes_out"] + s["b_to_a"]["bytes_out"])

    def dropped(s: dict) -> int:
        return sum(s[d][k] for d in ("a_to_b", "b_to_a") for k in ("dropped_overflow", "dropped_socket", "send_errors"))

    lost_in_lines = sum(dropped(line.stats()) for line in lab.lines)
    w = Window(
        s1["updated"] - s0["updated"],
        s1["cpu_user_s"] - s0["cpu_user_s"],
        s1["cpu_sys_s"] - s0["cpu_sys_s"],
        bits(s1) - bits(s0),
        lost_in_lines,
    )
    return json.loads(out)["end"], w


def link(delay_s: float, rate_bit: int | None = None) -> LabLink:
    return LabLink(
        up=Impairment(delay_s, 0.0005),
        down=Impairment(delay_s, 0.0005),
        up_rate_bit=rate_bit,
        down_rate_bit=rate_bit,
        rtt_s=4 * delay_s,
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seconds", type=float, default=5)
    ap.add_argument("--rates", default="10,50,100", help="Mbit/s for the CPU measurement")
    ap.add_argument("--no-realtime", action="store_true")
    args = ap.parse_args()
    ok, why = DelayLine.available()
    if not ok:
        raise SystemExit(why)
    rt = not args.no_realtime
    print(f"host: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}; realtime={rt}")

    print("\n1. CPU per 100 Mbit/s (one TCP flow, tbf at the rate, 30 ms RTT)")
    per100 = []
    for mbit in [float(r) for r in args.rates.split(",")]:
        with Lab([link(0.0075, int(mbit * 1e6))] * 2, realtime=rt) as lab:
            end, w = window(lab, args.seconds)
        per = w.core_pct / (w.mbit / 100)
        per100.append(per)
        print(
            f"  {mbit:6.0f} Mbit: goodput {end['sum_received']['bits_per_second'] / 1e6:6.1f} Mbit/s; the line "
            f"forwarded {w.mbit:6.1f} Mbit/s using {w.core_pct:5.1f}% of a core ({w.user_pct:.1f}% user) "
            f"= {per:5.1f}% per 100 Mbit/s"
        )
    print(f"  => {min(per100):.0f}..{max(per100):.0f}% of one core per 100 Mbit/s forwarded")

    print("\n2. Maximum sustained rate (no tbf, 2 ms one-way per hop)")
    with Lab([link(0.002)] * 2, realtime=rt) as lab:
        end, w = window(lab, args.seconds)
        tcp = end["sum_received"]["bits_per_second"]
        print(
            f"  TCP: {tcp / 1e6:.0f} Mbit/s goodput, {end['sum_sent'].get('retransmits')} retransmits; the "
            f"sender-side line forwarded {w.mbit:.0f} Mbit/s at {w.core_pct:.0f}% of a core, "
            f"{w.dropped} frames lost in the lines"
        )
        # When the lines lost nothing and ran below a full core, the host (iperf3, the stack) was
        # the limit; the line's own ceiling is then at least what it carried, scaled to one core.
        ceiling = w.mbit / (w.core_pct / 100) if w.core_pct else float("nan")
        print(
            f"  => max sustained: TCP {tcp / 1e6:.0f} Mbit/s goodput through two lines"
            + (f" (the lines lost nothing: the host was the limit); one line at a full core ~ {ceiling:.0f} Mbit/s"
               if not w.dropped else f"; the lines lost {w.dropped} frames: they were the limit")
        )

    print("\n3. RTT accuracy (4 x 5 ms one-way, 0.5 ms jitter; 100 pings)")
    with Lab([link(0.005)] * 2, realtime=rt) as lab:
        subprocess.run(lab.exec(0, ["ping", "-c", "1", lab.ip(1)]), capture_output=True)
        p = subprocess.run(lab.exec(0, ["ping", "-c", "100", "-i", "0.02", lab.ip(1)]), capture_output=True, text=True)
        rtts = [float(x) for x in re.findall(r"time=([\d.]+) ms", p.stdout)]
        lead = lab.lines[0].stats()["lead_s"]
    mean = sum(rtts) / len(rtts)
    print(
        f"  mean {mean:.2f} ms (error {mean - 20:+.2f} ms), min {min(rtts):.2f}, max {max(rtts):.2f}; "
        f"learnt send lead {lead * 1e6:.0f} us"
    )


if __name__ == "__main__":
    main()
