"""A resolved scenario as a plain JSON document: what `validate --json` prints and `api.validate_document` returns
(presets expanded, units normalised: rates in bit/s, durations in s, percentages as fractions)."""

from __future__ import annotations

from typing import Any

from distro_bench.scenario.impairments import IMPAIRMENTS
from distro_bench.scenario.model import LinkSpec, Scenario, region_matrix, site_layout
from distro_bench.scenario.regions import describe_json as regions_json
from distro_bench.scenario.sites import describe_json as sites_json


def scenario_document(s: Scenario) -> dict[str, Any]:
    """`{"valid": true, "name": ..., "nodes": [...], ...}`: every node with its link's rates and impairments."""
    return {
        "valid": True, "name": s.name, "world_size": s.world_size, "baseline": s.baseline,
        "model": s.resolved_model(),
        "train": s.train.model_dump(mode="json"),
        "nodes": [{"rank": n.rank, "name": n.name, "hardware": n.hardware_name, "compute_scale": n.compute_scale,
                   "link": n.link_name,
                   "up_bps": n.link.up if n.link else None, "down_bps": n.link.down if n.link else None,
                   **impairments_document(n.link), "region": n.region, "site": n.site} for n in s.nodes()],
        "optimizers": {k: v.model_dump() for k, v in s.optimizer_configs().items()},
        "regions": _regions(s),
        "sites": _sites(s),
    }


def impairments_document(link: LinkSpec | None) -> dict[str, float]:
    """Every impairment of the table by its Impairment field (`delay_s`, `loss`, `duplicate`, ...), one-way."""
    return {row.attr: getattr(link, row.key) if link else 0.0 for row in IMPAIRMENTS}


def _regions(s: Scenario) -> list[dict[str, Any]] | None:
    m = region_matrix(s)
    return regions_json(m, [n.region for n in s.nodes() if n.region is not None]) if m is not None else None


def _sites(s: Scenario) -> dict[str, Any] | None:
    lay = site_layout(s)
    return sites_json(lay, [n.name for n in s.nodes()]) if lay is not None else None
