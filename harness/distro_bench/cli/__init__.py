"""The `distro-bench` command line: a package of thin commands (options -> distro_bench.api -> Rich output)."""

from distro_bench.cli.app import app

__all__ = ["app"]
