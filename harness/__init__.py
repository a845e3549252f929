"""distro-bench: network-emulation benchmarks for low-communication distributed training."""

__version__ = "0.1.0"
