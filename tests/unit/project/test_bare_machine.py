"""The suite on a bare machine (README: python3, python3-venv and iproute2 only): a test that calls another
tool checks for it first and skips naming the tool and its package, or uses a Python equivalent
(tests/helpers.py: processes_matching for pgrep, icmp_ping for ping)."""

from __future__ import annotations

import ast
import subprocess
import sys
import time

import pytest

from tests.helpers import APT_PACKAGE, REPO, need, processes_matching

# On every machine the README supports: iproute2's tools, and the interpreter itself.
BARE = {"ip", "tc", "bridge", "ss"}
GUARDS = {"need", "missing_tools", "which"}


def _guarded_tools(node: ast.AST) -> set[str]:
    """Tools named as string arguments of need(...), missing_tools(...) or shutil.which(...) under `node`."""
    found = set()
    for call in ast.walk(node):
        if isinstance(call, ast.Call):
            name = call.func.attr if isinstance(call.func, ast.Attribute) else getattr(call.func, "id", "")
            if name in GUARDS:
                found |= {a.value for a in call.args if isinstance(a, ast.Constant) and isinstance(a.value, str)}
    return found


def unguarded_tool_calls(source: str) -> list[tuple[int, str]]:
    """(line, tool) of every argument list `["TOOL", ...]` naming a tool a bare machine lacks, where neither
    its function nor its module checks for that tool."""
    tree = ast.parse(source)
    module_guards = {t for stmt in tree.body if not isinstance(stmt, (ast.FunctionDef, ast.ClassDef))
                     for t in _guarded_tools(stmt)}
    out = []

    def visit(node: ast.AST, guards: set[str]) -> None:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            guards = guards | _guarded_tools(node)
        if isinstance(node, ast.List) and node.elts:  # an argument list
            first = node.elts[0]
            if isinstance(first, ast.Constant) and first.value in set(APT_PACKAGE) - BARE and first.value not in guards:
                out.append((node.lineno, first.value))
        for child in ast.iter_child_nodes(node):
            visit(child, guards)

    visit(tree, module_guards)
    return out


def test_no_test_calls_a_tool_a_bare_machine_lacks_without_checking_for_it():
    found = {f"{p.relative_to(REPO)}:{line} {tool}"
             for p in (REPO / "tests").rglob("*.py") for line, tool in unguarded_tool_calls(p.read_text())}
    assert not found, sorted(found)


def test_the_scan_sees_an_unguarded_call_and_accepts_a_guarded_one():
    bare = 'import subprocess\ndef test_x():\n    subprocess.run(["pgrep", "-f", "w"])\n'
    guarded = 'def test_x():\n    need("ping")\n    run(["ping", "-c", "1", "h"])\n'
    which = 'import shutil\ndef f():\n    if shutil.which("iperf3"):\n        run(["iperf3", "-c", "h"])\n'
    assert unguarded_tool_calls(bare) == [(3, "pgrep")]
    assert unguarded_tool_calls(guarded) == [] and unguarded_tool_calls(which) == []
    assert unguarded_tool_calls('run(["ip", "link"]); run(["tc", "qdisc"])') == []  # iproute2 is there


def test_need_skips_naming_the_tool_and_its_package(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))  # nothing on PATH
    with pytest.raises(pytest.skip.Exception, match=r"needs ping, iperf3 .*apt-get install iputils-ping iperf3"):
        need("ping", "iperf3")
    (tmp_path / "ping").write_text("#!/bin/sh\n")
    (tmp_path / "ping").chmod(0o755)
    need("ping")  # there: no skip


def test_processes_matching_finds_a_process_by_its_command_line_as_pgrep_does():
    token = f"dbench-probe-{time.monotonic_ns()}"
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", token])
    try:
        deadline = time.monotonic() + 10
        while not (found := processes_matching(rf"sleep\(60\).*{token}")) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert [line.split()[0] for line in found] == [str(proc.pid)], found
    finally:
        proc.kill()
        proc.wait()
    assert processes_matching(token) == []


def test_fresh_machine_runs_both_readme_lines_as_the_readme_has_them():
    """.ci/fresh-machine takes the install-and-run line and the test command from README.md itself (its
    first fenced bash block), so a README edit cannot leave the bare-machine check running something else."""
    script = (REPO / ".ci" / "fresh-machine").read_text()
    fn = next(line for line in script.splitlines() if line.startswith("readme_line() {"))
    lines = [subprocess.run(["bash", "-c", f"{fn}\nreadme_line {n}"], cwd=REPO, capture_output=True, text=True,
                            check=True).stdout.strip() for n in (1, 2)]
    block = (REPO / "README.md").read_text().split("```bash\n", 1)[1].split("```", 1)[0].splitlines()
    assert lines == block[:2] and "pytest" in lines[1]
    assert 'bash -c "$second_line"' in script  # and runs it in the container
