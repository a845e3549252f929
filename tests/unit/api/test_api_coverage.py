"""Every command of the CLI is a function of distro_bench.api (issue 28): `api.COMMANDS` maps each registered
Typer command to the api functions it calls, so a new command without an api function fails here, and the
command's module must call them (the CLI parses, calls the api, prints)."""

from __future__ import annotations

import inspect

import typer

from distro_bench import api
from distro_bench.cli import app


def _leaf_commands(group, prefix: tuple[str, ...] = ()) -> dict:
    out = {}
    for name, cmd in group.commands.items():
        if hasattr(cmd, "commands"):  # a group (duck-typed: newer Typer vendors its own click)
            out.update(_leaf_commands(cmd, (*prefix, name)))
        else:
            out[" ".join((*prefix, name))] = cmd
    return out


COMMANDS = _leaf_commands(typer.main.get_command(app))


def test_every_command_has_an_api_function():
    missing = sorted(set(COMMANDS) - set(api.COMMANDS))
    assert not missing, f"commands without an entry in distro_bench.api.COMMANDS (and an api function): {missing}"
    stale = sorted(set(api.COMMANDS) - set(COMMANDS))
    assert not stale, f"api.COMMANDS names commands the CLI does not have: {stale}"
    # the fourteen the issue counts, by name
    assert {"run", "sweep", "links", "doctor", "project", "report", "check", "export", "node", "validate", "schema",
            "clean", "image build"} <= set(COMMANDS)


def test_each_mapped_name_is_a_public_api_function():
    for command, names in api.COMMANDS.items():
        assert names, command
        for name in names:
            assert name in api.__all__, f"{command}: api.{name} is not in api.__all__"
            assert inspect.isfunction(getattr(api, name, None)), f"{command}: api.{name} is not a function"


def test_each_command_calls_its_api_functions():
    for command, names in api.COMMANDS.items():
        source = inspect.getsource(inspect.getmodule(COMMANDS[command].callback))
        for name in names:
            assert f"api.{name}(" in source, f"`{command}` does not call api.{name}"


def test_the_api_functions_are_typed():
    for name in api.__all__:
        obj = getattr(api, name)
        if not inspect.isfunction(obj):
            continue
        sig = inspect.signature(obj)
        assert sig.return_annotation is not inspect.Signature.empty, f"api.{name} has no return type"
        untyped = [p for p in sig.parameters.values() if p.annotation is inspect.Parameter.empty]
        assert not untyped, f"api.{name}: untyped parameters {[p.name for p in untyped]}"
        assert (obj.__doc__ or "").strip(), f"api.{name} has no docstring"


def test_the_api_prints_nothing():
    # printing is the CLI's: the api module has no print, console or typer
    source = inspect.getsource(api)
    for word in ("print(", "console", "typer", "rich"):
        assert word not in source, f"harness/distro_bench/api.py uses {word!r}"
