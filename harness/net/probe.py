"""Compatibility: the host probe moved to harness/host.py (one probe for doctor, preflight, the backends
and the environment record). Backends and link engines still import it from here."""

from harness.host import (  # noqa: F401 - re-exported
    QDISC_TRIALS,
    Capabilities,
    HostInfo,
    probe,
    probe_delayline,
    probe_docker,
    probe_qdiscs,
)
