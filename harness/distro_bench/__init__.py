"""distro-bench: network-emulation benchmarks for low-communication distributed training.

The public Python API is `distro_bench.api` (`run`, `sweep`, `links`, `doctor`, `project`, `report`, `check`,
`export`, `node`, ...). `import distro_bench` stays light: it loads no torch and no API.
"""

__version__ = "0.1.0"
