"""Which live process owns a run's namespaces and containers, so `distro-bench clean` removes only what
a dead run left behind and never pulls the network out from under a run that is still going.

A backend claims its run id before creating anything and releases it after teardown. The claim is a
file holding the owner's pid and the kernel's start time of that pid (so a recycled pid is not
mistaken for the owner). No library covers this; it is a dozen lines.

What lives outside this host's runtime folder carries its owner itself (`record()`: host, boot id, pid
namespace, pid, start time): Docker containers and networks as labels, a delay line's temporary folder as
a file. `judge()` says alive, proven dead, or cannot tell, from what the kernel says now; a claim file
under /run is invisible from another mount namespace, and under /tmp for a user without /run, so judging
from it alone made every container of a live run look dead.
"""

from __future__ import annotations

import json
import os
import socket
import tempfile
from pathlib import Path

from distro_bench.results import runfiles

# What record() holds; Docker labels carry them as distro-bench.owner.<key>.
OWNER_KEYS = ("host", "boot", "pidns", "pid", "start")


def runtime_dir() -> Path:
    for base in (Path("/run"), Path(tempfile.gettempdir())):
        d = base / "distro-bench"
        try:
            d.mkdir(parents=True, exist_ok=True)
            if os.access(d, os.W_OK):
                return d
        except OSError:
            continue
    raise OSError("no writable runtime folder for run ownership")


def _start_time(pid: int) -> str | None:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return None


def _read_claim(path: Path) -> str:
    """A claim file, read as a run folder's files are (results/runfiles.py): a link, a FIFO or a device in the
    runtime folder (/tmp/distro-bench for a user without /run) is an OSError, not followed or waited on."""
    try:
        return runfiles.read_bytes(path.parent, path.name, "owner.json").decode("utf-8", "replace")
    except runfiles.RunFileError as e:
        raise OSError(str(e)) from None


def claim(run_id: str, run_dir: Path | None = None) -> None:
    """`run_dir` (a second line) lets `clean` mark the folder of a run whose process was killed."""
    text = f"{os.getpid()} {_start_time(os.getpid())}\n" + (f"{Path(run_dir).resolve()}\n" if run_dir else "")
    (runtime_dir() / f"{run_id}.owner").write_text(text)


def release(run_id: str) -> None:
    (runtime_dir() / f"{run_id}.owner").unlink(missing_ok=True)


def owner_alive(run_id: str) -> bool:
    """True while the process that claimed `run_id` is still running."""
    try:
        pid, start = _read_claim(runtime_dir() / f"{run_id}.owner").splitlines()[0].split()
    except (OSError, ValueError, IndexError):
        return False
    return _start_time(int(pid)) == start


def abandoned_runs() -> list[tuple[str, int, Path]]:
    """(run id, pid, run folder) of every claim with a run folder whose owner died without releasing it
    (SIGKILL, out of memory, a power cut of the terminal)."""
    out = []
    for f in sorted(runtime_dir().glob("*.owner")):
        try:
            lines = _read_claim(f).splitlines()
            pid = int(lines[0].split()[0])
        except (OSError, ValueError, IndexError):
            continue
        if len(lines) > 1 and lines[1] and not owner_alive(f.stem):
            out.append((f.stem, pid, Path(lines[1])))
    return out


# ---- owners recorded on what they made (Docker labels, a delay line's folder) --------------------------

def _boot_id() -> str:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return ""


def _pidns() -> str:
    try:
        return str(os.stat("/proc/self/ns/pid").st_ino)
    except OSError:
        return ""


def record(pid: int | None = None) -> dict[str, str]:
    """This process (or `pid` of this host) as an owner: host name, boot id, pid namespace, pid, start time."""
    pid = os.getpid() if pid is None else pid
    return {"host": socket.gethostname(), "boot": _boot_id(), "pidns": _pidns(), "pid": str(pid),
            "start": _start_time(pid) or ""}


def judge(rec: dict[str, str]) -> tuple[bool | None, str]:
    """(True: the owner lives, False: proven dead, None: cannot tell) and why. Dead only on evidence: the
    same host and boot with the pid gone or recycled (another start time), or the same host rebooted since."""
    if not all(rec.get(k) for k in OWNER_KEYS):
        return None, "no owner recorded (made by an older distro-bench, or by hand)"
    me = record()
    if rec["host"] != me["host"]:
        return None, f"owned by pid {rec['pid']} on host {rec['host']!r}, not this host ({me['host']!r})"
    if rec["boot"] != me["boot"]:
        return False, f"its owner (pid {rec['pid']}) ran before this host last booted"
    if rec["pidns"] != me["pidns"]:
        return None, f"owned by pid {rec['pid']} of another pid namespace (a container?), which this one cannot see"
    try:
        pid = int(rec["pid"])
    except ValueError:
        return None, f"owner pid {rec['pid']!r} is not a number"
    now = _start_time(pid)
    if now is None:
        return False, f"its owner (pid {pid}) has exited"
    if now != rec["start"]:
        return False, f"its owner (pid {pid}) has exited (the pid now belongs to another process)"
    return True, f"its owner (pid {pid}) is still running"


OWNER_FILE = "owner.json"


def stamp(folder: Path) -> None:
    """Record this process as the owner of `folder` (a delay line's temporary folder), for `clean`."""
    (Path(folder) / OWNER_FILE).write_text(json.dumps(record()))


def folder_owner(folder: Path) -> dict[str, str]:
    """The owner stamped on `folder` ({} when none or unreadable as one). The folder is in /tmp, anyone's:
    owner.json is read as a run folder's files are (results/runfiles.py: not followed, not waited on, 64 KiB
    at most); a link, a FIFO, a device or a file above the cap is a RunFileError naming it."""
    try:
        data = runfiles.parse_json(runfiles.read_bytes(Path(folder), OWNER_FILE), Path(folder) / OWNER_FILE)
    except FileNotFoundError:
        return {}
    except runfiles.RunFileError as e:
        if "not valid JSON" in str(e):  # half-written by a line just starting: no owner yet
            return {}
        raise
    except OSError:
        return {}
    return {str(k)[:64]: str(v)[:256] for k, v in data.items()} if isinstance(data, dict) else {}


# ---- runs that `clean --force` ended ------------------------------------------------------------------

def mark_ended_by_clean(rec: dict[str, str], what: str) -> None:
    """`clean --force` removed `what` from under the live run owned by `rec`: leave it a note, so the run's
    status says clean ended it rather than only "worker exited -9"."""
    if not rec.get("pid") or not rec.get("start"):
        return
    try:
        with open(runtime_dir() / f"ended-{rec['pid']}-{rec['start']}.txt", "a") as f:
            f.write(what + "\n")
    except OSError:
        pass


def ended_by_clean(pid: int | None = None) -> str | None:
    """What `clean --force` removed from under this process's run (None: nothing), once: the note is consumed."""
    pid = os.getpid() if pid is None else pid
    try:
        path = runtime_dir() / f"ended-{pid}-{_start_time(pid)}.txt"
        text = path.read_text()
        path.unlink()
    except OSError:
        return None
    items = sorted({x for x in text.splitlines() if x})
    return ", ".join(items) or None


def claim_record(run_id: str) -> dict[str, str]:
    """The owner of a claim on this host (pid and start time), as record() names them; {} if none."""
    try:
        pid, start = _read_claim(runtime_dir() / f"{run_id}.owner").splitlines()[0].split()
    except (OSError, ValueError, IndexError):
        return {}
    return {"pid": pid, "start": start}
