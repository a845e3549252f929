"""Plain helpers shared by test modules (fixtures live in the conftest.py files, never imported)."""

from __future__ import annotations

import socket
from pathlib import Path

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
    for k, v in overrides.items():
        d[k] = v
    return d


def free_port() -> int:
    """A TCP port free on 127.0.0.1 right now (for a gloo rendezvous)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# ---- Docker (for tests/integration/docker) ---------------------------------------------------------

def ours(engine, run_id: str | None = None) -> list[str]:
    """Names of our containers and networks: one run's, or every run's."""
    from harness.backends.docker import LABEL_OWNER, LABEL_RUN

    label = f"{LABEL_RUN}={run_id}" if run_id else f"{LABEL_OWNER}=1"
    return ([c.name for c in engine.containers.list(all=True, filters={"label": label})]
            + [n.name for n in engine.networks.list(filters={"label": label})])


def exec_as_worker(engine, container_id: str, argv: list[str]) -> tuple[int, str]:
    """Run a command in a node container exactly as a worker runs: same user, no extra privileges."""
    ex = engine.api.exec_create(container_id, argv)
    out = engine.api.exec_start(ex["Id"]).decode(errors="replace")
    return engine.api.exec_inspect(ex["Id"])["ExitCode"], out
