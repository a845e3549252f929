"""The package's structure (scripts/structure.py, issue 28): no import cycles between modules or top-level rooms,
at most 20 rooms, imports inside functions only at the CLI/API edge, and heavy third-party libraries imported late
only where a module must load without them. Each rule is also shown catching a violation in a synthetic package."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.helpers import load_script

REPO = Path(__file__).resolve().parents[3]
structure = load_script(REPO / "scripts" / "structure.py")

# The exceptions, spelled out here so that growing them is a change a reviewer sees in this file; each one's
# reason is beside it in scripts/structure.py (LAZY_INTERNAL_ALLOWED, LAZY_HEAVY_ALLOWED).
LAZY_INTERNAL = {"distro_bench.report"}  # the package re-exports its renderers without loading matplotlib
LAZY_HEAVY = {
    "distro_bench.backends.docker.backend": {"docker"},
    "distro_bench.backends.docker.image": {"docker"},
    "distro_bench.backends.docker.leftovers": {"docker"},
    "distro_bench.backends.docker.placement": {"docker"},
    "distro_bench.backends.docker.worker": {"docker"},
    "distro_bench.export.trackers": {"matplotlib", "mlflow", "pandas", "tensorboard", "torch", "wandb"},
    "distro_bench.multihost.endpoints": {"pyroute2", "torch"},
    "distro_bench.multihost.hostshaping": {"pyroute2"},
    "distro_bench.multihost.iface": {"pyroute2"},
    "distro_bench.net.host": {"docker", "torch"},
    "distro_bench.net.ns": {"pyroute2"},
    "distro_bench.results.stats": {"scipy"},
    "distro_bench.run.environment": {"torch"},
    "distro_bench.scenario.hfcorpus": {"datasets", "huggingface_hub"},
    "distro_bench.scenario.datafiles": {"numpy", "pyarrow", "datasets", "tokenizers"},
    "distro_bench.train.data": {"tokenizers"},
    "distro_bench.train.hfmodel": {"transformers"},
    "distro_bench.studies.sweep": {"pandas"},
}


@pytest.fixture(scope="module")
def scan():
    return structure.scan(REPO / "harness" / "distro_bench")


def _rule(problems: list[str], prefix: str) -> list[str]:
    return [p for p in problems if p.startswith(prefix)]


# ---- the package ------------------------------------------------------------------------------------


def test_no_module_import_cycles(scan):
    assert _rule(structure.violations(scan), "module cycle") == []


def test_no_cycles_among_the_top_level_rooms(scan):
    assert _rule(structure.violations(scan), "room cycle") == []
    # the layers put the data flow's order in view: scenario below train, results below report; the cli is the
    # edge: no room but `python -m distro_bench` imports it (its own imports of the rest are mostly made late,
    # to keep `--help` fast, so its module-level layer is low)
    graph = structure.room_graph(scan, lazy=True)
    layers = structure.layers(structure.top_rooms(scan), structure.room_graph(scan))
    order = {room: n for n, layer in enumerate(layers) for room in layer}
    assert order["errors"] < order["scenario"] < order["train"] and order["results"] < order["report"]
    assert [r for r, deps in graph.items() if "cli" in deps and r != "cli"] == ["__main__"]
    assert {"run", "report", "scenario"} <= graph["cli"]


def test_at_most_20_rooms(scan):
    assert len(scan.rooms) <= 20, scan.rooms
    assert {"distro_bench.api", "distro_bench.net.delayline", "distro_bench.train.optim"} <= set(scan.rooms)


def test_imports_inside_functions_only_at_the_cli_and_api_edge(scan):
    assert _rule(structure.violations(scan), "lazy internal import") == []


def test_third_party_imports_inside_functions_only_for_heavy_libraries_where_listed(scan):
    assert _rule(structure.violations(scan), "lazy third-party import") == []


def test_the_allowlists_are_the_ones_named_here_each_with_a_reason_and_in_use(scan):
    assert set(structure.LAZY_INTERNAL_ALLOWED) == LAZY_INTERNAL
    assert {m: set(libs) for m, (libs, _) in structure.LAZY_HEAVY_ALLOWED.items()} == LAZY_HEAVY
    reasons = [*structure.LAZY_INTERNAL_ALLOWED.values(), *(why for _, why in structure.LAZY_HEAVY_ALLOWED.values())]
    assert all(len(why.split()) >= 5 for why in reasons), reasons
    lazy = {(i.module, i.target.split(".")[0]) for i in scan.imports if i.lazy}
    internal = {i.module for i in scan.imports if i.lazy and i.target.startswith("distro_bench")}
    stale = [m for m in LAZY_INTERNAL if m not in internal]
    stale += [f"{m}: {lib}" for m, libs in LAZY_HEAVY.items() for lib in libs if (m, lib) not in lazy]
    assert stale == [], "allowlisted but no longer imported inside a function: drop the entry"


def test_check_passes_on_the_package():
    r = subprocess.run([sys.executable, str(REPO / "scripts" / "structure.py"), "--check"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr
    assert "module cycles: 0" in r.stdout and "violations: 0" in r.stdout


# ---- each rule catches a violation (a synthetic package) ---------------------------------------------


def _package(tmp_path: Path, files: dict[str, str]) -> Path:
    root = tmp_path / "distro_bench"
    for rel, text in {"__init__.py": "", **files}.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        for parent in path.relative_to(root).parents:
            (root / parent / "__init__.py").touch()
        path.write_text(textwrap.dedent(text))
    return root


def _problems(tmp_path: Path, files: dict[str, str], **rules) -> list[str]:
    """The violations under the package's rules, but with allowlists of the test's own (empty unless given)."""
    rules = {"lazy_heavy_allowed": {}, "lazy_internal_allowed": {}, **rules}
    return structure.violations(structure.scan(_package(tmp_path, files)), structure.Rules(**rules))


def test_a_module_cycle_is_caught_even_when_a_lazy_import_closes_it(tmp_path):
    problems = _problems(tmp_path, {
        "a/one.py": "from distro_bench.a import two\n",  # `from package import module`: an edge to the module
        "a/two.py": "def f():\n    from distro_bench.a.one import X\n",
    }, edge=("distro_bench.a",))
    assert _rule(problems, "module cycle") == ["module cycle: distro_bench.a.one <-> distro_bench.a.two"]


def test_a_relative_import_is_an_edge_and_type_checking_imports_are_not(tmp_path):
    files = {
        "a/__init__.py": "from .one import X\n",
        "a/one.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from distro_bench.a import two\nX = 1\n",
        "a/two.py": "from . import one\n",
    }
    assert _problems(tmp_path, files) == []
    (tmp_path / "distro_bench" / "a" / "one.py").write_text("from . import two\nX = 1\n")
    problems = _problems(tmp_path, {})
    assert _rule(problems, "module cycle") == ["module cycle: distro_bench.a.one <-> distro_bench.a.two"]


def test_a_cycle_between_top_level_rooms_is_caught(tmp_path):
    problems = _problems(tmp_path, {
        "scenario/model.py": "from distro_bench.report.text import fmt\n",
        "report/text.py": "fmt = str\n",
        "report/check.py": "from distro_bench.scenario.model import fmt\n",
    })
    assert _rule(problems, "room cycle") == ["room cycle: report <-> scenario"]
    assert _rule(problems, "module cycle") == []  # no module imports itself round the loop


def test_more_than_20_rooms_is_caught(tmp_path):
    files = {f"room{i}/m.py": "" for i in range(19)}
    assert _rule(_problems(tmp_path, files), "rooms") == []  # 19 folders + the package's __init__
    problems = _problems(tmp_path, {"room19/m.py": ""})
    assert problems == ["21 rooms, more than 20"]


def test_an_internal_import_inside_a_function_is_caught_outside_the_edge(tmp_path):
    files = {
        "errors.py": "",
        "cli/app.py": "def main():\n    from distro_bench import errors\n",
        "api.py": "def run():\n    import distro_bench.errors\n",
        "net/host.py": "async def probe():\n    from ..errors import X\n",
        "report/load.py": "class Run:\n    def data(self):\n        from distro_bench.errors import X\n",
    }
    problems = _problems(tmp_path, files)
    assert [p.split(":")[1].strip() for p in _rule(problems, "lazy internal import")] == [
        "distro_bench.net.host", "distro_bench.report.load"]
    assert _problems(tmp_path, {}, lazy_internal_allowed={"distro_bench.net.host": "why",
                                                          "distro_bench.report.load": "why"}) == []


def test_a_lazy_third_party_import_is_caught_unless_heavy_and_listed(tmp_path):
    files = {
        "report/load.py": "import json\ndef read():\n    import yaml\n    import csv\n",  # stdlib is fine
        "net/ns.py": "def links():\n    from pyroute2 import IPRoute\n",
        "run/env.py": "def collect():\n    import torch\n",
        "cli/app.py": "def main():\n    import rich\n",  # the edge
    }
    problems = _rule(_problems(tmp_path, files), "lazy third-party import")
    assert problems == [
        "lazy third-party import: distro_bench.net.ns:2 imports pyroute2 inside a function (module not listed)",
        ("lazy third-party import: distro_bench.report.load:3 imports yaml inside a function "
        "(not a heavy or optional library)"),
        "lazy third-party import: distro_bench.run.env:2 imports torch inside a function (module not listed)",
    ]
    listed = {"distro_bench.net.ns": (frozenset({"pyroute2"}), "why"),
              "distro_bench.run.env": (frozenset({"pandas"}), "why")}  # torch is not the listed library
    left = _rule(_problems(tmp_path, {}, lazy_heavy_allowed=listed), "lazy third-party import")
    assert [p.split(":")[1].strip() for p in left] == ["distro_bench.report.load", "distro_bench.run.env"]


def test_check_exits_1_on_a_violation(tmp_path):
    root = _package(tmp_path, {"a/one.py": "from distro_bench.a import two\n", "a/two.py": "from . import one\n"})
    script = [sys.executable, str(REPO / "scripts" / "structure.py"), "--package", str(root)]
    r = subprocess.run([*script, "--check"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 1 and "module cycle: distro_bench.a.one <-> distro_bench.a.two" in r.stdout, r.stdout
    assert subprocess.run(script, capture_output=True, timeout=60).returncode == 0  # without --check: a report
    (root / "a" / "two.py").write_text("")
    assert subprocess.run([*script, "--check"], capture_output=True, timeout=60).returncode == 0


def test_terminal_libraries_only_in_the_cli(tmp_path):
    """Issue 36: typer and Rich draw on a terminal, which is the CLI's; the runner and the API run without them."""
    problems = _problems(tmp_path, {
        "cli/app.py": "import typer\nfrom rich.table import Table\n",
        "run/progress.py": "from rich.progress import Progress\n",
        "api.py": "def f():\n    import typer\n",
    }, edge=("distro_bench.cli", "distro_bench.api"))
    assert sorted(_rule(problems, "terminal library")) == [
        "terminal library outside the CLI: distro_bench.api:2 imports typer",
        "terminal library outside the CLI: distro_bench.run.progress:1 imports rich"]


def test_the_runner_and_the_api_import_without_typer_or_rich():
    done = subprocess.run([sys.executable, "-c", (
        "import sys, distro_bench.run.runner, distro_bench.api\n"
        "print(sorted(m for m in ('typer', 'rich', 'click') if m in sys.modules))")],
        capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"
