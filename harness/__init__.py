"""distro-bench: network-emulation benchmarks for low-communication distributed training.

The public API is harness.api (`run`, `load_run`, `check`, `compare`, `project`, `clean`, ...); most of it is also
reachable as `harness.run` etc. (`report`, `schema` and `export` only as harness.api.*). It is imported on
first use, so `import harness` stays light (no torch).
"""

__version__ = "0.1.0"

_API = ("run", "load_run", "check", "compare", "project", "clean", "validate",
        "Run", "Summary", "CleanResult", "ReportFiles")


def __getattr__(name: str):
    if name in _API:
        from harness import api

        return getattr(api, name)
    raise AttributeError(f"module 'harness' has no attribute {name!r}")


def __dir__():
    return sorted([*globals(), *_API])


__all__ = ["__version__", *_API]
