#!/usr/bin/env python3
"""The package's structure from its source (an AST scan, nothing imported), and the rules it must keep (issue 28):

- rooms: every top-level module of distro_bench plus every package folder, nested ones included (at most 20);
- the room-level dependency graph among the top-level rooms (scenario, train, net, ...), printed in layers;
- module-level import cycles (strongly connected components; `if TYPE_CHECKING:` blocks are ignored): none allowed;
- typer, Rich and click only in distro_bench.cli (the terminal is the CLI's; the runner and the API run without it);
- imports inside functions: of distro_bench modules only at the CLI/API edge (harness/distro_bench/cli/, harness/distro_bench/api.py)
  or where LAZY_INTERNAL_ALLOWED names the module with its reason; of third-party libraries only for the heavy or
  optional ones (HEAVY_LIBS) in the modules LAZY_HEAVY_ALLOWED names, which must stay importable without them.

    python scripts/structure.py           print it all
    python scripts/structure.py --check   also exit 1 on any violation (tests/unit/project/test_structure.py runs the rules)

An edge goes to the module an import names: `import a.b` -> a.b; `from a import b` -> a.b where a.b is a module,
else a. Parent packages that Python also runs on the way are not edges.
"""

from __future__ import annotations

import argparse
import ast
import sys
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PACKAGE = "distro_bench"
MAX_ROOMS = 20
EDGE = ("distro_bench.cli", "distro_bench.api")  # where lazy imports keep `distro-bench --help` fast

# Libraries heavy or optional enough that a module which must stay importable without them may import them late
# (pyroute2 too: 0.7 s to import, Linux netlink only, and every backend's module loads net/ns.py).
HEAVY_LIBS = frozenset({"torch", "matplotlib", "pandas", "pyarrow", "datasets", "mlflow", "tensorboard", "wandb",
                        "docker", "pyroute2", "numpy", "tokenizers", "transformers", "huggingface_hub", "scipy"})

_DOCKER = "the docker SDK loads only when the docker backend talks to the engine; the registry imports this module"
_NETLINK = "pyroute2 loads only when a host's interfaces or namespaces are read or changed (not to plan or report)"
# module -> (the heavy libraries it imports inside functions, why it must stay importable without them)
LAZY_HEAVY_ALLOWED: dict[str, tuple[frozenset[str], str]] = {
    "distro_bench.backends.docker.backend": (frozenset({"docker"}), _DOCKER),
    "distro_bench.backends.docker.image": (frozenset({"docker"}), _DOCKER),
    "distro_bench.backends.docker.leftovers": (frozenset({"docker"}), _DOCKER + " (`clean` without docker)"),
    "distro_bench.backends.docker.placement": (frozenset({"docker"}), _DOCKER),
    "distro_bench.backends.docker.worker": (frozenset({"docker"}), _DOCKER),
    "distro_bench.export.trackers": (frozenset({"matplotlib", "mlflow", "pandas", "tensorboard", "torch", "wandb"}),
                                     "each tracker's library is optional and loads only when that tracker is used"),
    "distro_bench.multihost.endpoints": (frozenset({"pyroute2", "torch"}), _NETLINK + "; torch for the "
                                         "rendezvous store node-rank 0 serves, once it runs (`distro-bench node "
                                         "--help` needs none)"),
    "distro_bench.multihost.hostshaping": (frozenset({"pyroute2"}), _NETLINK),
    "distro_bench.multihost.iface": (frozenset({"pyroute2"}), _NETLINK),
    "distro_bench.net.host": (frozenset({"docker", "torch"}), ("the host probe (doctor) reports docker and the GPUs "
                              "when they are there, and must run without either")),
    "distro_bench.net.ns": (frozenset({"pyroute2"}), _NETLINK),
    "distro_bench.results.stats": (frozenset({"scipy"}), ("scipy.stats takes ~0.3 s to import and only a computed "
                                   "interval or p-value needs it: `import distro_bench.api` and `--help` stay fast")),
    "distro_bench.run.environment": (frozenset({"torch"}), ("records torch's version; the runner imports it on "
                                     "the CLI's path, where torch must not load before a worker needs it")),
    "distro_bench.scenario.hfcorpus": (frozenset({"datasets", "huggingface_hub"}),
                                       "Hugging Face datasets is optional (hf: corpora)"),
    "distro_bench.scenario.datafiles": (frozenset({"numpy", "pyarrow", "datasets", "tokenizers"}),
                                        ("token files and tokenizers load their libraries only where a scenario "
                                         "names one; `validate` of every other scenario stays light")),
    "distro_bench.train.data": (frozenset({"tokenizers"}), "tokenizers is optional (the hf extra): a tokenizer.json corpus"),
    "distro_bench.train.hfmodel": (frozenset({"transformers"}), "transformers is optional (the hf extra): hf_config models"),
    "distro_bench.studies.sweep": (frozenset({"pandas"}), ("the sweep table is built after the runs; "
                                   "`distro-bench sweep --help` must not load pandas")),
}

# Terminal libraries: only the CLI draws on a terminal; the runner, the API and the rest stay importable and usable
# without them (issue 36: console and progress moved to the edge).
TERMINAL_LIBS = frozenset({"typer", "rich", "click"})
TERMINAL_ROOM = "distro_bench.cli"

# module -> why it imports a distro_bench module inside a function (keep this tiny)
LAZY_INTERNAL_ALLOWED: dict[str, str] = {
    "distro_bench.report": "the package re-exports the two renderers; importing them eagerly would load "
                           "matplotlib and pandas for every distro_bench.report.* import (report.check, the CLI)",
}


@dataclass(frozen=True)
class Import:
    module: str  # the importing module
    target: str  # the imported module (absolute)
    line: int
    lazy: bool  # inside a function


@dataclass
class Scan:
    modules: dict[str, Path]
    rooms: list[str]
    imports: list[Import] = field(default_factory=list)

    @property
    def root(self) -> str:
        return min(self.modules, key=len)


def _is_internal(target: str, root: str) -> bool:
    return target == root or target.startswith(root + ".")


def module_name(path: Path, package_dir: Path) -> str:
    parts = list(path.relative_to(package_dir.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def rooms_of(package_dir: Path) -> list[str]:
    """Top-level modules (the package's own __init__ among them) and every package folder below the root."""
    top = [module_name(p, package_dir) if p.stem != "__init__" else f"{package_dir.name}.__init__"
           for p in sorted(package_dir.glob("*.py"))]
    folders = [module_name(p, package_dir) for p in sorted(package_dir.rglob("__init__.py")) if p.parent != package_dir]
    return top + folders


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


class _Visitor(ast.NodeVisitor):
    def __init__(self, module: str, is_package: bool, modules: set[str]):
        self.module, self.is_package, self.modules = module, is_package, modules
        self.depth = 0
        self.found: list[Import] = []

    def _base(self, node: ast.ImportFrom) -> str:
        if not node.level:
            return node.module or ""
        parts = self.module.split(".")
        if not self.is_package:
            parts.pop()
        parts = parts[: len(parts) - (node.level - 1)]
        return ".".join([*parts, *([node.module] if node.module else [])])

    def _add(self, target: str, line: int) -> None:
        self.found.append(Import(self.module, target, line, self.depth > 0))

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            self._add(alias.name, node.lineno)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        base = self._base(node)
        if base == "__future__":
            return
        for alias in node.names:
            sub = f"{base}.{alias.name}"
            self._add(sub if sub in self.modules else base, node.lineno)

    def visit_If(self, node: ast.If) -> None:
        if _is_type_checking(node.test):
            for stmt in node.orelse:
                self.visit(stmt)
        else:
            self.generic_visit(node)

    def _function(self, node: ast.AST) -> None:
        self.depth += 1
        self.generic_visit(node)
        self.depth -= 1

    visit_FunctionDef = visit_AsyncFunctionDef = visit_Lambda = _function


def scan(package_dir: Path) -> Scan:
    files = {module_name(p, package_dir): p for p in sorted(package_dir.rglob("*.py"))}
    result = Scan(modules=files, rooms=rooms_of(package_dir))
    for name, path in files.items():
        visitor = _Visitor(name, path.name == "__init__.py", set(files))
        visitor.visit(ast.parse(path.read_text(), str(path)))
        result.imports.extend(dict.fromkeys(visitor.found))  # one edge per (target, line)
    return result


def cycles(nodes: list[str], edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one node, or a node importing itself (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for start in nodes:
        if start in index:
            continue
        work = [(start, iter(sorted(edges.get(start, ()))))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, it = work[-1]
            nxt = next(it, None)
            if nxt is None:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    comp = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        comp.append(member)
                        if member == node:
                            break
                    if len(comp) > 1 or node in edges.get(node, ()):
                        found.append(sorted(comp))
            elif nxt not in index:
                index[nxt] = low[nxt] = len(index)
                stack.append(nxt)
                on_stack.add(nxt)
                work.append((nxt, iter(sorted(edges.get(nxt, ())))))
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
    return sorted(found)


def module_graph(s: Scan) -> dict[str, set[str]]:
    """Module -> the modules it imports, inside functions too: a lazy import hides a cycle, it does not break it."""
    graph: dict[str, set[str]] = defaultdict(set)
    for i in s.imports:
        if i.target in s.modules:
            graph[i.module].add(i.target)
    return graph


def top_room(module: str, root: str) -> str:
    rest = module[len(root) + 1:]
    return rest.split(".")[0] if rest else "__init__"


def top_rooms(s: Scan) -> list[str]:
    return sorted({top_room(m, s.root) for m in s.modules})


def room_graph(s: Scan, *, lazy: bool = False) -> dict[str, set[str]]:
    """Top-level room -> the top-level rooms it imports (module level; with lazy=True, imports in functions too)."""
    graph: dict[str, set[str]] = defaultdict(set)
    for i in s.imports:
        if (lazy or not i.lazy) and _is_internal(i.target, s.root):
            a, b = top_room(i.module, s.root), top_room(i.target, s.root)
            if a != b:
                graph[a].add(b)
    return graph


def layers(nodes: list[str], edges: dict[str, set[str]]) -> list[list[str]]:
    """Layer 0 imports no other room; each room sits one above the highest room it imports (cycles collapse)."""
    level: dict[str, int] = {}

    def depth(node: str, seen: frozenset[str]) -> int:
        if node not in level:
            below = [depth(n, seen | {node}) for n in edges.get(node, ()) if n not in seen | {node}]
            level[node] = 1 + max(below, default=-1)
        return level[node]

    for n in nodes:
        depth(n, frozenset())
    out: list[list[str]] = [[] for _ in range(max(level.values(), default=-1) + 1)]
    for n in sorted(nodes):
        out[level[n]].append(n)
    return out


def third_party(target: str, root: str) -> str | None:
    top = target.split(".")[0]
    if _is_internal(target, root) or top in sys.stdlib_module_names or not top:
        return None
    return top


@dataclass(frozen=True)
class Rules:
    max_rooms: int = MAX_ROOMS
    edge: tuple[str, ...] = EDGE
    heavy_libs: frozenset[str] = HEAVY_LIBS
    lazy_heavy_allowed: dict[str, tuple[frozenset[str], str]] = field(default_factory=lambda: LAZY_HEAVY_ALLOWED)
    lazy_internal_allowed: dict[str, str] = field(default_factory=lambda: LAZY_INTERNAL_ALLOWED)
    terminal_libs: frozenset[str] = TERMINAL_LIBS
    terminal_room: str = TERMINAL_ROOM

    def at_edge(self, module: str) -> bool:
        return any(module == e or module.startswith(e + ".") for e in self.edge)


def violations(s: Scan, rules: Rules | None = None) -> list[str]:
    """One line per broken rule; empty when the structure keeps them all."""
    rules = rules or Rules()
    out = []
    if len(s.rooms) > rules.max_rooms:
        out.append(f"{len(s.rooms)} rooms, more than {rules.max_rooms}")
    for comp in cycles(sorted(s.modules), module_graph(s)):
        out.append("module cycle: " + " <-> ".join(comp))
    tops = top_rooms(s)
    for comp in cycles(tops, room_graph(s)):
        out.append("room cycle: " + " <-> ".join(comp))
    for i in s.imports:
        lib = third_party(i.target, s.root)
        outside = not (i.module == rules.terminal_room or i.module.startswith(rules.terminal_room + "."))
        if lib in rules.terminal_libs and outside:
            out.append(f"terminal library outside the CLI: {i.module}:{i.line} imports {lib}")
    for i in s.imports:
        if not i.lazy or rules.at_edge(i.module):
            continue
        if _is_internal(i.target, s.root):
            if i.module not in rules.lazy_internal_allowed:
                out.append(f"lazy internal import: {i.module}:{i.line} imports {i.target} inside a function")
        elif lib := third_party(i.target, s.root):
            allowed = rules.lazy_heavy_allowed.get(i.module, (frozenset(), ""))[0]
            if lib not in rules.heavy_libs or lib not in allowed:
                why = "not a heavy or optional library" if lib not in rules.heavy_libs else "module not listed"
                out.append(f"lazy third-party import: {i.module}:{i.line} imports {lib} inside a function ({why})")
    return out


def _short(module: str, root: str) -> str:
    return module[len(root) + 1:] or module


def report(s: Scan) -> str:
    root = s.root
    lines = [f"rooms: {len(s.rooms)} (at most {MAX_ROOMS})", "  " + ", ".join(_short(r, root) for r in s.rooms)]
    tops = top_rooms(s)
    graph = room_graph(s)
    lines.append("room layers (module-level imports; each room imports only rooms in lower layers):")
    for n, layer in enumerate(layers(tops, graph)):
        lines.append(f"  {n}: " + ", ".join(f"{r} -> {{{', '.join(sorted(graph.get(r, ())))}}}" for r in layer))
    room_cycles = cycles(tops, graph)
    lines.append(f"room cycles: {len(room_cycles)}")
    lines += ["  " + " <-> ".join(c) for c in room_cycles]
    lazy_room_cycles = cycles(tops, room_graph(s, lazy=True))
    lines.append(f"room cycles counting imports inside functions: {len(lazy_room_cycles)}")
    lines += ["  " + " <-> ".join(c) for c in lazy_room_cycles]
    mod_cycles = cycles(sorted(s.modules), module_graph(s))
    lines.append(f"module cycles: {len(mod_cycles)}")
    lines += ["  " + " <-> ".join(_short(m, root) for m in c) for c in mod_cycles]

    lazy_internal: dict[str, list[Import]] = defaultdict(list)
    lazy_third: dict[str, list[Import]] = defaultdict(list)
    for i in s.imports:
        if i.lazy and _is_internal(i.target, root):
            lazy_internal[i.module].append(i)
        elif i.lazy and third_party(i.target, root):
            lazy_third[i.module].append(i)
    edge = sum(len(v) for m, v in lazy_internal.items() if Rules().at_edge(m))
    total = sum(len(v) for v in lazy_internal.values())
    lines.append(f"internal imports inside functions: {total} ({edge} at the CLI/API edge, {total - edge} elsewhere)")
    for m in sorted(lazy_internal, key=lambda m: (-len(lazy_internal[m]), m)):
        targets = sorted({_short(i.target, root) for i in lazy_internal[m]})
        lines.append(f"  {len(lazy_internal[m]):3d} {_short(m, root)}{' (edge)' if Rules().at_edge(m) else ''}: "
                     + ", ".join(targets))
    lines.append(f"third-party imports inside functions: {sum(len(v) for v in lazy_third.values())}")
    for m in sorted(lazy_third):
        libs = sorted({third_party(i.target, root) or "" for i in lazy_third[m]})
        lines.append(f"  {len(lazy_third[m]):3d} {_short(m, root)}{' (edge)' if Rules().at_edge(m) else ''}: "
                     + ", ".join(libs))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="exit 1 on any violation of the rules")
    parser.add_argument("--package", type=Path, default=REPO / "harness" / PACKAGE, help="the package folder to scan")
    args = parser.parse_args(argv)
    s = scan(args.package)
    print(report(s))
    if args.check:
        problems = violations(s)
        print(f"violations: {len(problems)}")
        for p in problems:
            print("  " + p)
        return 1 if problems else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
