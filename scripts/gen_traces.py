"""Generate the small bandwidth traces shipped under scenarios/traces/ (issue 18). Deterministic (seeded):
`python scripts/gen_traces.py` rewrites them byte for byte.

- `dsl-diurnal.csv`: a home DSL line's downstream over one "day" compressed into 240 s (1 s = 6 min):
  40 Mbit at night, sagging to 12 Mbit in the evening peak (contention in the street cabinet), a smooth
  cosine with small noise. CSV, `t_s,rate_bit_s`, one row a second.
- `lte-drive.mahi`: an LTE-drive-like pattern in Mahimahi's format (one line per 1500-byte delivery
  opportunity, ms), 60 s: a random walk of the rate between 0.5 and 12 Mbit with handover dips (about
  1 s near zero every 15-20 s), the shape of the published Mahimahi cellular drive traces, not a recording.
- `flaky-cable.csv`: a cable line that halves for a few seconds now and then, 120 s, 0.5 s rows.
"""

from __future__ import annotations

import math
import random
from pathlib import Path

OUT = Path(__file__).resolve().parents[1] / "scenarios" / "traces"


def dsl_diurnal(seconds: int = 240) -> str:
    rng = random.Random(18)
    rows = ["t_s,rate_bit_s"]
    for t in range(seconds):
        day = t / seconds  # 0 = midnight
        # evening peak at 21:00 (0.875 of the day): cosine sag of 28 Mbit around it
        sag = 28e6 * max(0.0, math.cos((day - 0.875) * 2 * math.pi)) ** 2
        rate = 40e6 - sag + rng.gauss(0, 0.5e6)
        rows.append(f"{t},{int(max(1e6, rate))}")
    return "\n".join(rows) + "\n"


def lte_drive(seconds: int = 60) -> str:
    rng = random.Random(4)
    rate, lines, t_ms = 6e6, [], 0
    next_handover = rng.uniform(15, 20)
    credit = 0.0
    while t_ms < seconds * 1000:
        t = t_ms / 1000
        if t >= next_handover:
            dip = rate * 0.02
            if t >= next_handover + 1.0:
                next_handover = t + rng.uniform(15, 20)
            current = dip
        else:
            if t_ms % 100 == 0:
                rate = min(12e6, max(0.5e6, rate * math.exp(rng.gauss(0, 0.08))))
            current = rate
        credit += current / 8 / 1000  # bytes this millisecond
        while credit >= 1500:
            lines.append(str(t_ms))
            credit -= 1500
        t_ms += 1
    lines.append(str(seconds * 1000))  # the last line is the period (Mahimahi loops there)
    return "\n".join(lines) + "\n"


def flaky_cable(seconds: int = 120) -> str:
    rng = random.Random(7)
    rows, t, bad_until = ["t_s,rate_bit_s"], 0.0, -1.0
    while t < seconds:
        if t > bad_until and rng.random() < 0.02:
            bad_until = t + rng.uniform(2, 5)
        rate = 25e6 if t <= bad_until else 50e6
        rows.append(f"{t:g},{int(rate)}")
        t += 0.5
    return "\n".join(rows) + "\n"


def main() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    for name, text in (("dsl-diurnal.csv", dsl_diurnal()), ("lte-drive.mahi", lte_drive()),
                       ("flaky-cable.csv", flaky_cable())):
        (OUT / name).write_text(text)
        print(f"wrote {OUT / name} ({len(text.splitlines())} lines)")


if __name__ == "__main__":
    main()
