"""A run over a network that was not emulated is never mistaken for one that was (issue 38): as root, `--backend
auto` stops instead of falling back to loopback for shaped links, and a loopback run of shaped links says so
on the verdict's screen."""

from __future__ import annotations

import os

import pytest
import yaml
from typer.testing import CliRunner

from distro_bench.backends.registry import BACKENDS, select_backend
from distro_bench.cli.app import app
from distro_bench.errors import InputError
from distro_bench.scenario.loading import scenario_from_dict
from tests.helpers import tiny_scenario_dict

SHAPED = tiny_scenario_dict(workers=[{"count": 2, "hardware": "host", "link": {"up": "10Mbit", "down": "10Mbit"}}])


def _no_emulating_backend(monkeypatch, why_netns="tc failed: \"mount --make-rslave /\" failed: Invalid argument"):
    monkeypatch.setattr(BACKENDS["docker"], "probe", classmethod(lambda cls, s=None: (False, "no engine reachable")))
    monkeypatch.setattr(BACKENDS["netns"], "probe", classmethod(lambda cls, s=None: (False, why_netns)))


def test_auto_as_root_stops_for_shaped_links_with_the_cause_and_the_flag(monkeypatch):
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    _no_emulating_backend(monkeypatch)
    with pytest.raises(InputError) as e:
        select_backend("auto", scenario_from_dict(SHAPED))
    msg = str(e.value)
    assert "--backend local" in msg and "mount --make-rslave" in msg and "no engine reachable" in msg, msg
    assert e.value.exit_code == 2
    # Unshaped links, or not root (no backend could emulate anyway): loopback is the honest choice.
    cls, why = select_backend("auto", scenario_from_dict(tiny_scenario_dict()))
    assert cls.name == "local" and "skipped" in why
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    assert select_backend("auto", scenario_from_dict(SHAPED))[0].name == "local"


def test_auto_through_the_cli_exits_2_naming_the_flag(monkeypatch, tmp_path):
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    _no_emulating_backend(monkeypatch)
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(SHAPED))
    r = CliRunner().invoke(app, ["run", str(path), "--out", str(tmp_path / "out")])
    assert r.exit_code == 2, r.output
    assert "--backend local" in r.output and "Traceback" not in r.output
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())


@pytest.mark.slow
def test_a_loopback_run_of_shaped_links_says_not_emulated_above_the_verdict(tmp_path):
    path = tmp_path / "s.yaml"
    d = {**SHAPED, "optimizers": {"adamw": {"lr": 3e-3}, "other": {"type": "adamw", "lr": 1e-3}}}
    path.write_text(yaml.safe_dump(d))
    r = CliRunner().invoke(app, ["run", str(path), "--backend", "local", "--out", str(tmp_path / "out")])
    assert r.exit_code == 0, r.output
    assert "NOT EMULATED" in r.output and "not the scenario's network" in " ".join(r.output.split()), r.output
