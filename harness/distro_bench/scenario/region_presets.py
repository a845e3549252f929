"""Named region matrices (`regions: preset:NAME`): one-way delays between cloud regions, with their source.

Published tables give round-trip times; a preset stores half of each (the one-way delay), symmetric,
as the published RTTs of the two directions of a pair agree within 1 ms.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class RegionPreset:
    description: str
    source: str
    one_way_s: dict[str, dict[str, float]]  # from -> to -> one-way delay in seconds (the other direction mirrors it)

    @property
    def regions(self) -> list[str]:
        return sorted(set(self.one_way_s) | {b for row in self.one_way_s.values() for b in row})


def _half(rtt_ms: float) -> float:
    return round(rtt_ms / 2) / 1e3  # whole milliseconds one way: the tables' own spread is larger


# "Latency Between AWS Global Regions", average RTT between EC2 instances per region pair, as tabulated
# in https://acomputerscientistlearnsaws.blogspot.com/2017/04/aws-regions.html (2017):
# us-east-1 <-> eu-west-1 80.55 / 80.52 ms, us-east-1 <-> ap-southeast-1 216.7 / 216.7 ms,
# eu-west-1 <-> ap-southeast-1 239 / 238.1 ms. A current matrix (cloudping.co, AWS) is within a few ms.
CLOUD_3 = RegionPreset(
    description="three AWS regions: N. Virginia (us-east), Ireland (eu-west), Singapore (ap-southeast)",
    source="AWS inter-region average RTT (us-east-1, eu-west-1, ap-southeast-1), "
           "https://acomputerscientistlearnsaws.blogspot.com/2017/04/aws-regions.html; one-way = RTT / 2",
    one_way_s={
        "us-east": {"eu-west": _half(80.5), "ap-southeast": _half(216.7)},
        "eu-west": {"ap-southeast": _half(238.6)},
    },
)

# The same table, five regions: adds US West (Oregon, us-west-2) and Asia Pacific (Tokyo, ap-northeast-1).
CLOUD_5 = RegionPreset(
    description="five AWS regions: us-east, us-west (Oregon), eu-west, ap-northeast (Tokyo), ap-southeast",
    source=CLOUD_3.source,
    one_way_s={
        "us-east": {"us-west": _half(87.8), "eu-west": _half(80.5), "ap-northeast": _half(145.3),
                    "ap-southeast": _half(216.7)},
        "us-west": {"eu-west": _half(137.0), "ap-northeast": _half(89.1), "ap-southeast": _half(161.4)},
        "eu-west": {"ap-northeast": _half(212.4), "ap-southeast": _half(238.6)},
        "ap-northeast": {"ap-southeast": _half(73.8)},
    },
)

REGION_PRESETS: dict[str, RegionPreset] = {"cloud-3": CLOUD_3, "cloud-5": CLOUD_5}
