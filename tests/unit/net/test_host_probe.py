"""The host probe's pure parts: binaries by PATH, GPUs from nvidia-smi, offload feature matching, the
namespace launcher's capability names, and which tool measures goodput."""

from __future__ import annotations

import os
import stat

import pytest

from distro_bench.net import host, linktest
from distro_bench.net.enter import cap_numbers
from distro_bench.net.ns import NetnsRef, features_to_turn_off


def _fake_bin(folder, name: str, script: str = "exit 0") -> None:
    p = folder / name
    p.write_text(f"#!/bin/sh\n{script}\n")
    p.chmod(p.stat().st_mode | stat.S_IEXEC)


def test_binaries_follow_path(monkeypatch, tmp_path):
    _fake_bin(tmp_path, "tc")
    monkeypatch.setenv("PATH", str(tmp_path))
    found = host.binaries()
    assert found["tc"] == str(tmp_path / "tc")
    assert found["iperf3"] is None and found["nvidia-smi"] is None
    # Nothing a run needs is asked of ip, ethtool, nsenter or setpriv (pyroute2, harness/distro_bench/net/enter.py).
    assert not {"ip", "ethtool", "nsenter", "setpriv", "ping"} & set(found)


def test_gpus_are_enumerated_from_nvidia_smi_without_torch(monkeypatch, tmp_path):
    _fake_bin(tmp_path, "nvidia-smi", 'echo "GPU 0: NVIDIA H200 (UUID: GPU-1)"; echo "GPU 1: NVIDIA H200 (UUID: GPU-2)"')
    monkeypatch.setenv("PATH", str(tmp_path))
    host.gpus.cache_clear()
    try:
        assert host.gpus(use_torch=False) == ("NVIDIA H200", "NVIDIA H200")
    finally:
        host.gpus.cache_clear()
    monkeypatch.setenv("PATH", str(tmp_path / "none"))
    try:
        assert host.gpus(use_torch=False) == ()
    finally:
        host.gpus.cache_clear()


def test_offload_patterns_catch_every_tcp_segmentation_variant():
    feats = {
        "tx-tcp-segmentation": (True, True), "tx-tcp-ecn-segmentation": (True, True),
        "tx-tcp-mangleid-segmentation": (True, True), "tx-tcp6-segmentation": (True, True),
        "tx-tcp-accecn-segmentation": (True, True),  # new in 6.18: `ethtool -K tso off` leaves it on
        "tx-generic-segmentation": (True, True), "rx-gro": (True, True), "rx-gro-list": (False, True),
        "rx-lro": (True, False),  # fixed: cannot be changed, so not asked for
        "tx-checksum-ip-generic": (True, True),  # checksums stay on
        "tx-gre-segmentation": (True, True),  # tunnels: not ours
    }
    assert features_to_turn_off(feats) == [
        "rx-gro", "tx-generic-segmentation", "tx-tcp-accecn-segmentation", "tx-tcp-ecn-segmentation",
        "tx-tcp-mangleid-segmentation", "tx-tcp-segmentation", "tx-tcp6-segmentation"]
    assert features_to_turn_off(feats, ["tx-tcp*-segmentation"])[0] == "tx-tcp-accecn-segmentation"


def test_launcher_argv_and_capabilities():
    ref = NetnsRef.named("dbench-x-n0")
    argv = ref.wrap(["python", "-m", "w"], drop_caps=["net_admin", "sys_admin"])
    assert argv[1:3] == ["-I", argv[2]] and argv[2].endswith("distro_bench/net/enter.py")
    assert argv[3:] == ["--net", "/run/netns/dbench-x-n0", "--drop-caps", "net_admin,sys_admin", "--", "python", "-m", "w"]
    assert NetnsRef.current().wrap(["tc"]) == ["tc"]
    assert ref.wrap(["tc", "-j", "qdisc", "show"]) == ["tc", "-n", "dbench-x-n0", "-j", "qdisc", "show"]
    assert NetnsRef.of_pid(42).wrap(["tc", "qdisc"])[-5:] == ["--net", "/proc/42/ns/net", "--", "tc", "qdisc"]
    assert cap_numbers("net_admin,-sys_admin,CAP_NET_RAW") == [12, 21, 13]
    with pytest.raises(ValueError):
        cap_numbers("net_admn")


def test_goodput_tool_falls_back_to_python_without_iperf3(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))
    assert linktest.goodput_tool("auto") == "python-tcp"
    _fake_bin(tmp_path, "iperf3")
    assert linktest.goodput_tool("auto") == "iperf3"
    assert linktest.goodput_tool("python") == "python-tcp"


def test_probe_without_root_says_so(monkeypatch):
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    host.probe.cache_clear()
    try:
        h = host.probe(docker=False, gpus=False)
    finally:
        host.probe.cache_clear()
    assert not h.root and not h.netns and h.netns_error == "needs root" and h.qdiscs == ()
    assert set(h.binaries) == set(host.BINARIES) and "pyroute2" in h.modules
