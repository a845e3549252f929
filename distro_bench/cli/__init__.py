"""The `distro-bench` command line: a package of thin commands (options -> harness library -> Rich output)."""

from distro_bench.cli.app import app

__all__ = ["app"]
