"""`python -I harness/distro_bench/net/enter.py [--net PATH] [--drop-caps net_admin,...] [--no-caps] [--user UID:GID] [--expose PATH]... -- ARGV...`

Runs ARGV inside the network namespace PATH (`/run/netns/<name>` or `/proc/<pid>/ns/net`), like
`nsenter --net=PATH` (`ip netns exec` for a named one), with less privilege than its caller, like
`setpriv`: `--drop-caps` takes the listed capabilities out of the bounding set (a root process exec'd
without a capability in its bounding set does not get it back); `--no-caps` leaves the command no
capability at all (effective, permitted, inheritable, ambient and bounding sets empty), sets
no_new_privs, so no setuid binary or file capability gives any back, and (Landlock ABI 6+) puts it in a
Landlock domain that may signal only itself and its own children; `--user` runs it as that uid and
gid with no supplementary groups; `--expose PATH` (with `--user`) makes PATH reachable to that uid where a
folder on the way is not (an interpreter under root's 0700 home): in a mount namespace of its own, the
topmost such folder is covered by an empty tmpfs into which PATH alone is bind-mounted at the same path,
as bubblewrap does; nothing else of that folder is visible, and no permission on the host changes. In that order: setns needs CAP_SYS_ADMIN and dropping the bounding
set CAP_SETPCAP, so both come before the capabilities and the uid go. This is how every worker of the
local and netns backends starts: as a uid that is not the coordinator's, or in its Landlock domain as
any uid, it can neither ptrace nor signal it, and without capabilities it can neither reshape its link (net_admin), enter another
namespace (sys_admin), ptrace a root process (sys_ptrace) nor write what it does not own
(dac_override). Pure Python (setns(2), prctl(2), capset(2)), so a run needs neither util-linux nor
iproute2 for it; imports nothing heavy, so it adds ~20 ms per start.
"""

from __future__ import annotations

import argparse
import ctypes
import os
import sys

PR_CAPBSET_DROP = 24
PR_SET_NO_NEW_PRIVS = 38
PR_CAP_AMBIENT = 47
PR_CAP_AMBIENT_CLEAR_ALL = 4
PR_SET_SECUREBITS = 28
# SECBIT_NOROOT and its lock: a uid-0 process no longer gains capabilities by exec'ing (the fallback where
# the worker keeps uid 0), and the bit cannot be unset again.
SECBITS_NOROOT_LOCKED = 0x3
CAP_SETPCAP = 8
LINUX_CAPABILITY_VERSION_3 = 0x20080522
# linux/capability.h
CAPS = {"chown": 0, "dac_override": 1, "fowner": 3, "kill": 5, "setgid": 6, "setuid": 7, "setpcap": 8,
        "net_bind_service": 10, "net_broadcast": 11, "net_admin": 12, "net_raw": 13, "sys_module": 16,
        "sys_rawio": 17, "sys_chroot": 18, "sys_ptrace": 19, "sys_admin": 21, "sys_boot": 22, "sys_nice": 23,
        "sys_resource": 24, "sys_time": 25, "mknod": 27, "audit_write": 29, "setfcap": 31, "bpf": 39}


# Landlock (linux/landlock.h): a domain scoped for signals cannot signal (nor, as any Landlock domain, ptrace)
# a process outside it. What keeps a worker that has to keep uid 0 from killing its uid-0 coordinator.
SYS_LANDLOCK_CREATE_RULESET, SYS_LANDLOCK_RESTRICT_SELF = 444, 446  # the same on every architecture
LANDLOCK_CREATE_RULESET_VERSION = 1
LANDLOCK_SCOPE_SIGNAL = 1 << 1
LANDLOCK_SIGNAL_ABI = 6  # the first ABI with scopes (Linux 6.12)


class _LandlockRulesetAttr(ctypes.Structure):
    _fields_ = [("handled_access_fs", ctypes.c_uint64), ("handled_access_net", ctypes.c_uint64),
                ("scoped", ctypes.c_uint64)]


def landlock_abi(libc=None) -> int:
    """The kernel's Landlock ABI version; 0 where it has none (too old, not among the enabled LSMs, or the
    syscall refused, as a seccomp filter may)."""
    libc = libc or ctypes.CDLL(None, use_errno=True)
    abi = libc.syscall(ctypes.c_long(SYS_LANDLOCK_CREATE_RULESET), None, ctypes.c_size_t(0),
                       ctypes.c_uint32(LANDLOCK_CREATE_RULESET_VERSION))
    return max(abi, 0)


def signal_scope_missing(libc=None) -> str | None:
    """Why a worker's signals cannot be scoped here (None: they can)."""
    abi = landlock_abi(libc)
    if abi >= LANDLOCK_SIGNAL_ABI:
        return None
    return (f"this kernel's Landlock ABI is {abi}; scoping signals needs ABI {LANDLOCK_SIGNAL_ABI} (Linux 6.12)"
            if abi else "this kernel offers no Landlock (not built, not among its enabled LSMs, or refused)")


def scope_signals(libc) -> None:
    """Puts this process in a Landlock domain that may signal only itself and what it starts (needs
    no_new_privs, set before). Only signals are scoped: abstract unix sockets stay open (NCCL's proxies use
    them between a node's ranks), and no file or network access is restricted."""
    if signal_scope_missing(libc):
        return  # the coordinator says so in each worker's first log line (backends/base.py signal_scope)
    attr = _LandlockRulesetAttr(0, 0, LANDLOCK_SCOPE_SIGNAL)
    fd = libc.syscall(ctypes.c_long(SYS_LANDLOCK_CREATE_RULESET), ctypes.byref(attr),
                      ctypes.c_size_t(ctypes.sizeof(attr)), ctypes.c_uint32(0))
    if fd < 0:
        raise Failed(f"creating a Landlock ruleset that scopes signals: {os.strerror(ctypes.get_errno())}")
    try:
        if libc.syscall(ctypes.c_long(SYS_LANDLOCK_RESTRICT_SELF), ctypes.c_int(fd), ctypes.c_uint32(0)) != 0:
            raise Failed(f"entering the Landlock domain that scopes signals: {os.strerror(ctypes.get_errno())}")
    finally:
        os.close(fd)


CLONE_NEWNS = 0x00020000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_BIND, MS_REC, MS_PRIVATE = 0x1, 0x2, 0x4, 0x1000, 0x4000, 0x40000


def can_traverse(st: os.stat_result, uid: int, gid: int) -> bool:
    """Whether (uid, gid), with no supplementary group and no capability, may search the folder `st`."""
    if st.st_uid == uid:
        return bool(st.st_mode & 0o100)
    if st.st_gid == gid:
        return bool(st.st_mode & 0o010)
    return bool(st.st_mode & 0o001)


def blocking_folder(path: str, uid: int, gid: int) -> str | None:
    """The topmost folder above `path` that (uid, gid) cannot search, or None."""
    parts = os.path.abspath(path).split("/")[1:-1]
    here = ""
    for name in ["", *parts]:
        here = here + "/" + name if name else "/"
        here = here.replace("//", "/")
        try:
            if not can_traverse(os.stat(here), uid, gid):
                return here
        except OSError:
            return None
    return None


def _walkable(top: str, path: str, uid: int, gid: int) -> bool:
    """Whether (uid, gid) can search every folder from `top` (included) down to `path`'s parent."""
    here = top
    for name in os.path.relpath(os.path.dirname(path), top).split("/"):
        here = os.path.normpath(os.path.join(here, name))
        try:
            if not can_traverse(os.stat(here), uid, gid):
                return False
        except OSError:
            return False
    try:
        return can_traverse(os.stat(top), uid, gid)
    except OSError:
        return False


def exposures(paths: list[str], uid: int, gid: int) -> dict[str, list[str]]:
    """Blocking folder -> the paths below it to bind (real paths, each once, none inside another)."""
    # A folder the uid cannot search itself is no use to it exposed (and would hide what is bound below it).
    real = sorted({r for r in (os.path.realpath(p) for p in paths if os.path.exists(p))
                   if not os.path.isdir(r) or can_traverse(os.stat(r), uid, gid)})
    kept: list[str] = []
    for p in real:
        # A path inside a kept one comes with its bind, where the uid can walk down to it from there.
        if not any(p == k or (p.startswith(k.rstrip("/") + "/") and _walkable(k, p, uid, gid)) for k in kept):
            kept.append(p)
    out: dict[str, list[str]] = {}
    for p in kept:
        top = blocking_folder(p, uid, gid)
        if top is not None:
            out.setdefault(top, []).append(p)
    # A blocking folder inside another one's bound path is reached through that bind: only the topmost count.
    return {t: ps for t, ps in out.items() if not any(t != u and t.startswith(u.rstrip("/") + "/") for u in out)}


def _mount(libc, source: str | None, target: str, fstype: str | None, flags: int, data: str | None) -> None:
    if libc.mount(source.encode() if source else None, target.encode(), fstype.encode() if fstype else None,
                  ctypes.c_ulong(flags), data.encode() if data else None) != 0:
        raise Failed(f"mount {source or fstype} on {target}: {os.strerror(ctypes.get_errno())}")


def expose(libc, paths: list[str], uid: int, gid: int) -> None:
    """Make `paths` reachable to (uid, gid) in a new mount namespace of this process (module docstring)."""
    plan = exposures(paths, uid, gid)
    if not plan:
        return
    if libc.unshare(CLONE_NEWNS) != 0:
        raise Failed(f"a mount namespace for the worker: {os.strerror(ctypes.get_errno())}")
    _mount(libc, None, "/", None, MS_REC | MS_PRIVATE, None)  # nothing done here reaches the host's mounts
    cwd = os.getcwd()
    fds: dict[str, int] = {}
    try:
        for ps in plan.values():
            for p in ps:
                fds[p] = os.open(p, os.O_PATH | os.O_CLOEXEC)  # held before the tmpfs hides them
        for top, ps in sorted(plan.items()):
            _mount(libc, "tmpfs", top, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=64k")
            for p in ps:
                if os.path.isdir(f"/proc/self/fd/{fds[p]}"):
                    os.makedirs(p, mode=0o755, exist_ok=True)
                else:
                    os.makedirs(os.path.dirname(p), mode=0o755, exist_ok=True)
                    open(p, "a").close()
                _mount(libc, f"/proc/self/fd/{fds[p]}", p, None, MS_BIND | MS_REC, None)
            _mount(libc, None, top, None, MS_REMOUNT_RO_BIND, None)
    finally:
        for fd in fds.values():
            os.close(fd)
    # The working folder again, through the new mounts: a relative path (a relative --out) resolves as it did,
    # where the old one, under a covered folder, is out of the uid's reach.
    try:
        os.chdir(cwd)
    except OSError:
        pass


MS_REMOUNT_RO_BIND = 0x20 | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV  # MS_REMOUNT: the tmpfs itself read-only


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]


def cap_numbers(names: str) -> list[int]:
    out = []
    for n in (x.strip().lower().removeprefix("cap_").removeprefix("-") for x in names.split(",") if x.strip()):
        if n not in CAPS:
            raise ValueError(f"unknown capability {n!r}; known: {', '.join(sorted(CAPS))}")
        out.append(CAPS[n])
    return out


def parse_user(text: str) -> tuple[int, int]:
    uid, _, gid = text.partition(":")
    try:
        u, g = int(uid), int(gid or uid)
    except ValueError:
        raise ValueError(f"--user: {text!r} is not UID:GID (numbers, e.g. 65534:65534)") from None
    if u < 0 or g < 0:
        raise ValueError(f"--user: {text!r}: uid and gid must be >= 0")
    return u, g


def last_cap() -> int:
    try:
        with open("/proc/sys/kernel/cap_last_cap") as f:
            return int(f.read())
    except (OSError, ValueError):
        return 40


def effective_caps() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("CapEff:"):
                return int(line.split()[1], 16)
    return 0


class Failed(Exception):
    pass


def _prctl(libc, what: str, *args: int, ok_errnos: tuple[int, ...] = ()) -> None:
    if libc.prctl(*(ctypes.c_ulong(x) for x in (*args, 0, 0, 0, 0)[:5])) != 0:
        err = ctypes.get_errno()
        if err not in ok_errnos:
            raise Failed(f"{what}: {os.strerror(err)}")


def drop_everything(libc, user: tuple[int, int] | None, expose_paths: list[str] | None = None) -> None:
    """Empty bounding and ambient sets, NOROOT securebits, then the uid/gid, then no_new_privs and empty
    effective/permitted/inheritable sets. A caller without CAP_SETPCAP (not root) has no bounding set to
    drop that matters: with no_new_privs nothing it execs can gain a capability."""
    can_setpcap = bool(effective_caps() & (1 << CAP_SETPCAP))
    if can_setpcap:
        for cap in range(last_cap() + 1):
            _prctl(libc, f"dropping capability {cap} from the bounding set", PR_CAPBSET_DROP, cap)
        _prctl(libc, "locking securebits (noroot)", PR_SET_SECUREBITS, SECBITS_NOROOT_LOCKED)
    _prctl(libc, "clearing the ambient capabilities", PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL,
           ok_errnos=(22,))  # EINVAL: a kernel before 4.3 has no ambient set
    if user is not None:
        uid, gid = user
        if expose_paths:
            expose(libc, expose_paths, uid, gid)  # needs CAP_SYS_ADMIN: before the capabilities go
        try:
            os.setgroups([])
            os.setresgid(gid, gid, gid)
            os.setresuid(uid, uid, uid)
        except OSError as e:
            raise Failed(f"switching to uid {uid}, gid {gid}: {e.strerror}") from None
    _prctl(libc, "setting no_new_privs", PR_SET_NO_NEW_PRIVS, 1)
    header, data = _CapHeader(LINUX_CAPABILITY_VERSION_3, 0), (_CapData * 2)()
    if libc.capset(ctypes.byref(header), data) != 0:
        raise Failed(f"clearing the capability sets: {os.strerror(ctypes.get_errno())}")
    scope_signals(libc)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="enter.py", description=(__doc__ or "").split("\n\n")[1])
    p.add_argument("--net", help="network namespace handle to enter")
    p.add_argument("--drop-caps", default="", help="capabilities to drop from the bounding set, comma-separated")
    p.add_argument("--no-caps", action="store_true", help="no capabilities at all, and no_new_privs")
    p.add_argument("--user", help="UID:GID to run as (no supplementary groups)")
    p.add_argument("--expose", action="append", default=[], help="with --user: a path to make reachable to it")
    p.add_argument("argv", nargs=argparse.REMAINDER)
    a = p.parse_args(argv)
    cmd = a.argv[1:] if a.argv[:1] == ["--"] else a.argv
    if not cmd:
        p.error("no command given")
    libc = ctypes.CDLL(None, use_errno=True)
    try:
        caps = cap_numbers(a.drop_caps)
        user = parse_user(a.user) if a.user else None
    except ValueError as e:
        p.error(str(e))
    if a.net:
        try:
            fd = os.open(a.net, os.O_RDONLY | os.O_CLOEXEC)
        except OSError as e:
            print(f"distro_bench.net.enter: cannot open {a.net}: {e.strerror}", file=sys.stderr)
            return 125
        if libc.setns(fd, 0x40000000) != 0:
            print(f"distro_bench.net.enter: setns {a.net}: {os.strerror(ctypes.get_errno())}", file=sys.stderr)
            return 125
        os.close(fd)
    try:
        for cap in caps:
            _prctl(libc, f"dropping capability {cap}", PR_CAPBSET_DROP, cap)
        if a.no_caps or user is not None:
            drop_everything(libc, user, a.expose)
    except Failed as e:
        print(f"distro_bench.net.enter: {e}", file=sys.stderr)
        return 125
    try:
        os.execvp(cmd[0], cmd)
    except OSError as e:
        # 127 as a shell says "not found"; the message names the command, so no one reads it as a network fault.
        print(f"distro_bench.net.enter: cannot run {cmd[0]!r}: {e.strerror}", file=sys.stderr)
        return 127 if isinstance(e, FileNotFoundError) else 126
    return 0  # not reached


if __name__ == "__main__":
    sys.exit(main())
