"""A host that is not what we expect gets the real cause (issue 38): tc's own stderr and a fix that fixes it,
never "the kernel has no tbf qdisc" / "modprobe sch_tbf" for a tc that could not enter a namespace."""

from __future__ import annotations

import dataclasses
import os
import shutil
import subprocess
import uuid

import pytest

from distro_bench.backends.requirements import Needs, Qdisc
from distro_bench.net.host import HostInfo, diagnose_tc
from distro_bench.run import preflight

# What `tc -n NS ...` prints in a chroot (Debian bookworm's iproute2 6.1; reproduced below where possible).
CHROOT_STDERR = '"mount --make-rslave /" failed: Invalid argument'

BASE = HostInfo(root=True, kernel="test", iproute2="iproute2-6.1.0", nsenter=True, netns=True, netns_error=None,
                qdiscs=("pfifo", "tbf", "htb", "netem"), iperf3=True, ping=True, ethtool=True, delayline=True,
                delayline_detail="AF_PACKET", docker=True, docker_detail="engine 24", gpus=(),
                binaries={"tc": "/usr/sbin/tc", "iperf3": "/usr/bin/iperf3", "nvidia-smi": None, "docker": None},
                modules={"pyroute2": "0.7", "docker": "7", "torch": "2.4"})
# Every trial failed the same way: tc never reached the kernel.
CHROOT = dataclasses.replace(BASE, qdiscs=(), qdisc_errors=dict.fromkeys(("pfifo", "tbf", "htb", "netem"), CHROOT_STDERR))


def test_the_chroot_error_maps_to_its_cause_and_a_fix_that_works():
    f = diagnose_tc(CHROOT_STDERR)
    assert f is not None and f.stderr == CHROOT_STDERR
    assert "not a mount point" in f.cause and "chroot" in f.cause
    assert "mount --rbind DIR DIR" in f.fix and "unshare -m" in f.fix and "modprobe" not in f.fix


@pytest.mark.parametrize("stderr", ["Error: Specified qdisc kind is unknown.",
                                    "Error: Specified qdisc not found.",
                                    'Unknown qdisc "cake", hence option "bandwidth" is unparsable',
                                    "RTNETLINK answers: No such file or directory"])
def test_a_missing_qdisc_is_still_a_missing_qdisc(stderr):
    assert diagnose_tc(stderr) is None
    host = dataclasses.replace(BASE, qdiscs=("pfifo",), qdisc_errors={"tbf": stderr})
    (p,) = Qdisc(kind="tbf", needed_for="link rates").problems(host)
    assert "modprobe sch_tbf" in p.fix and host.qdisc_missing("tbf") == "the kernel has no tbf qdisc"


def test_a_root_without_sys_is_named():
    # Seen building the chroot below without a /sys folder: "No such file or directory", but not a missing qdisc.
    f = diagnose_tc("mount of /sys failed: No such file or directory")
    assert f is not None and "/sys" in f.cause and "mkdir /sys" in f.fix and "modprobe" not in f.fix


def test_another_tc_failure_is_carried_not_guessed():
    f = diagnose_tc("Error: Exclusivity flag on, cannot modify.")
    assert f is not None and "Exclusivity flag on" in f.cause and "modprobe" not in f.fix


def test_preflight_and_doctor_carry_tcs_words_not_modprobe():
    (p,) = Qdisc(kind="tbf", needed_for="link rates (up/down)").problems(CHROOT)
    assert CHROOT_STDERR in p.line() and "not a mount point" in p.line() and "modprobe" not in p.line(), p.line()
    # `doctor`'s readiness table and a run's preflight come from the same requirements.
    lines = [line for engines in preflight.readiness(CHROOT).values() for ls in engines.values() for line in ls]
    assert any(CHROOT_STDERR in line for line in lines), lines
    assert not any("modprobe sch_tbf" in line for line in lines), lines
    with pytest.raises(preflight.PreflightError) as e:
        preflight.check("netns", _shaped_scenario(), host=CHROOT)
    assert CHROOT_STDERR in str(e.value) and "modprobe sch_tbf" not in str(e.value)
    assert Needs.of(_shaped_scenario()).shaped


def test_the_netns_probe_names_tcs_failure(monkeypatch):
    from distro_bench.backends import netns

    monkeypatch.setattr(netns.os, "geteuid", lambda: 0)
    monkeypatch.setattr(netns.net_probe, "probe", lambda **kw: CHROOT)
    ok, why = netns.NetnsBackend.probe(None)
    assert not ok and "not a mount point" in why and "kernel has no tbf" not in why, why


def _shaped_scenario():
    from distro_bench.scenario.loading import scenario_from_dict
    from tests.helpers import tiny_scenario_dict

    return scenario_from_dict(tiny_scenario_dict(workers=[{"count": 2, "hardware": "host",
                                                           "link": {"up": "10Mbit", "down": "10Mbit"}}]))


CHROOT_SCRIPT = """
set -e
cr="$1"; ns="$2"
mkdir -p "$cr/usr" "$cr/etc" "$cr/proc" "$cr/sys" "$cr/run" "$cr/dev"
ln -s usr/bin "$cr/bin"; ln -s usr/sbin "$cr/sbin"; ln -s usr/lib "$cr/lib"; ln -s usr/lib64 "$cr/lib64"
mount --bind /usr "$cr/usr"; mount --bind /etc "$cr/etc"; mount --rbind /proc "$cr/proc"
mount --rbind /run "$cr/run"; mount --rbind /dev "$cr/dev"
echo "== plain"; chroot "$cr" tc -n "$ns" qdisc show 2>&1 || echo "rc=$?"
echo "== fixed"; mount --rbind "$cr" "$cr"; chroot "$cr" tc -n "$ns" qdisc show 2>&1 && echo "rc=0"
"""


def test_the_real_chroot_error_and_the_fix_on_this_host(tmp_path):
    # The mapping's text checked against this host's tc, and the fix it gives shown to work. All mounts live in
    # a private mount namespace that ends with the script; the namespace is removed in `finally`.
    if os.geteuid() != 0:
        pytest.skip("needs root (a network namespace, mounts)")
    for tool in ("tc", "ip", "unshare", "chroot"):
        if shutil.which(tool) is None:
            pytest.skip(f"needs {tool}")
    if not os.path.isdir("/usr/lib64"):
        pytest.skip("the chroot below assumes a merged /usr with lib64 (Debian/Ubuntu)")
    ns = f"dbtest-chroot-{uuid.uuid4().hex[:6]}"
    subprocess.run(["ip", "netns", "add", ns], check=True)
    try:
        out = subprocess.run(["unshare", "-m", "--propagation", "private", "sh", "-c", CHROOT_SCRIPT, "sh",
                              str(tmp_path / "root"), ns], capture_output=True, text=True, timeout=60)
    finally:
        subprocess.run(["ip", "netns", "del", ns], check=False)
    plain, _, fixed = out.stdout.partition("== fixed")
    assert CHROOT_STDERR in plain, out.stdout + out.stderr
    assert diagnose_tc(plain.replace("== plain", "")) is not None
    assert "rc=0" in fixed and "failed" not in fixed, out.stdout + out.stderr
