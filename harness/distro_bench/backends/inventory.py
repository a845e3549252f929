"""The ssh backend's inventory: the hosts a run spans, in node-rank order, and how to reach each (docs/backends.md).

    hosts:                                   # the first one serves the rendezvous (node-rank 0)
      - {host: 10.0.0.1, iface: eth1}
      - {host: lab-box.local, address: 10.0.0.2, iface: enp3s0, user: bob}
    defaults: {user: alice, key: ~/.ssh/id_ed25519, python: /opt/distro-bench/.venv/bin/python}
    known_hosts: ~/.ssh/known_hosts          # host keys are checked; an unknown one stops the run

Validated once, with pydantic, before anything connects: each problem names the field, the value and what is valid.
"""

from __future__ import annotations

import ipaddress
import re
from pathlib import Path

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from distro_bench.errors import InputError
from distro_bench.scenario.problems import pydantic_problems

# What ssh, the shell and `ip` accept as a host name, a user name and an interface name, and nothing that
# ssh would read as an option (a leading '-'): these travel on ssh's command line.
_HOSTNAME = r"[A-Za-z0-9][A-Za-z0-9.-]{0,252}"
_USER = r"[a-z_][a-z0-9_.-]{0,31}"
_IFACE = r"[A-Za-z0-9][A-Za-z0-9_.:@-]{0,14}"
MAX_HOSTS = 64  # the scenario limit on workers: one node per host at most that many hosts


def _host_text(v: str) -> str:
    try:
        return str(ipaddress.ip_address(v.strip("[]")))
    except ValueError:
        pass
    if not re.fullmatch(_HOSTNAME, v):
        raise ValueError(f"{v!r} is not a host name or IP address (letters, digits, '.', '-'; no leading '-')")
    return v


class HostDefaults(BaseModel):
    """Fields every host takes unless it names its own."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    user: str | None = Field(default=None, pattern=f"^{_USER}$", description="login name (default: ssh's own choice)")
    key: Path | None = Field(default=None, description="private key file (default: ssh's own keys and agent)")
    port: int = Field(default=22, ge=1, le=65535)
    python: str = Field(default="python3", min_length=1, description="the Python with distro-bench installed on the host")
    sudo: bool = Field(default=False, description="run the agent through `sudo -n` (shaping needs root; no password prompt)")
    i_know: bool = Field(default=False, description="shape `iface` even though it carries the default route, or replace "
                                            "shaping another tool left on it (`distro-bench node --i-know`)")


class HostEntry(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    host: str = Field(description="what ssh connects to: a name or an address")
    iface: str = Field(pattern=f"^{_IFACE}$", description="the interface to shape, count and train over")
    address: str | None = Field(default=None, description="where the other hosts reach this one on `iface` (default: "
                                                  "`host`); host 0's is the rendezvous")
    user: str | None = Field(default=None, pattern=f"^{_USER}$")
    key: Path | None = None
    port: int | None = Field(default=None, ge=1, le=65535)
    python: str | None = Field(default=None, min_length=1)
    sudo: bool | None = None
    i_know: bool | None = None

    @field_validator("host", "address")
    @classmethod
    def _host_or_address(cls, v: str | None) -> str | None:
        return None if v is None else _host_text(v)


class Inventory(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    hosts: list[HostEntry] = Field(min_length=1, max_length=MAX_HOSTS)
    defaults: HostDefaults = HostDefaults()
    known_hosts: Path | None = Field(default=None, description="known_hosts file to check host keys against "
                                                      "(default: ssh's own, ~/.ssh/known_hosts)")
    rdzv_port: int = Field(default=29400, ge=1, le=65534, description="torchrun's rendezvous port on host 0 (the agents' "
                                                              "store takes the next one)")
    connect_timeout_s: float = Field(default=15.0, gt=0, le=600)
    strict_host_keys: bool = Field(default=True, description="refuse a host whose key is not in known_hosts (false: "
                                                     "accept and record a new host's key, never a changed one)")
    workdir: str | None = Field(default=None, pattern=r"^/[A-Za-z0-9_./-]*$",
                                description="folder on every host for the scenario and the records (default: a "
                                            "new temporary folder per run, removed at the end)")

    @model_validator(mode="after")
    def _distinct(self) -> Inventory:
        seen: dict[tuple[str, int], int] = {}
        for i, h in enumerate(self.hosts):
            key = (h.host, h.port or self.defaults.port)
            if key in seen:
                raise ValueError(f"hosts[{i}] and hosts[{seen[key]}] are the same host ({h.host} port {key[1]}); "
                                 "list each host once (placement puts several scenario nodes on one host)")
            seen[key] = i
        return self

    def resolved(self, i: int) -> ResolvedHost:
        h, d = self.hosts[i], self.defaults
        key = h.key if h.key is not None else d.key
        return ResolvedHost(node_rank=i, host=h.host, iface=h.iface, address=h.address or h.host,
                            user=h.user or d.user, key=key.expanduser() if key else None, port=h.port or d.port,
                            python=h.python or d.python, sudo=d.sudo if h.sudo is None else h.sudo,
                            i_know=d.i_know if h.i_know is None else h.i_know)

    def all(self) -> list[ResolvedHost]:
        return [self.resolved(i) for i in range(len(self.hosts))]


class ResolvedHost(BaseModel):
    """One host with the defaults filled in."""

    model_config = ConfigDict(frozen=True)

    node_rank: int
    host: str
    iface: str
    address: str  # where the other hosts reach this one
    user: str | None
    key: Path | None
    port: int
    python: str
    sudo: bool
    i_know: bool

    def label(self) -> str:
        return f"host {self.node_rank} ({self.host})"


def load_inventory(path: Path) -> Inventory:
    """The inventory at `path`, validated; InputError with one line per problem (field, value, what is valid)."""
    try:
        data = yaml.safe_load(path.read_text())
    except OSError as e:
        raise InputError(f"--inventory {path}: cannot read it ({e.strerror or e})") from None
    except yaml.YAMLError as e:
        raise InputError(f"--inventory {path}: not YAML ({str(e).splitlines()[0]})") from None
    if not isinstance(data, dict):
        raise InputError(f"--inventory {path}: expected a mapping with `hosts:` (a list of {{host, iface, ...}}), "
                         f"got {type(data).__name__}")
    try:
        inv = Inventory.model_validate(data)
    except ValidationError as e:
        raise InputError(f"--inventory {path}: " + "; ".join(pydantic_problems(e))) from None
    problems = []
    base = path.parent
    if inv.known_hosts is not None:
        kh = _relative_to(inv.known_hosts, base)
        if not kh.is_file():
            problems.append(f"known_hosts: {str(inv.known_hosts)!r} is not a file")
        inv = inv.model_copy(update={"known_hosts": kh})
    keys = {h.key for h in inv.all() if h.key is not None}
    for key in sorted(keys):
        if not _relative_to(key, base).is_file():
            problems.append(f"key: {str(key)!r} is not a file (a private key ssh can read)")
    if problems:
        raise InputError(f"--inventory {path}: " + "; ".join(problems))
    return _with_keys_relative_to(inv, base)


def _relative_to(p: Path, base: Path) -> Path:
    p = p.expanduser()
    return p if p.is_absolute() else base / p


def _with_keys_relative_to(inv: Inventory, base: Path) -> Inventory:
    """Key paths relative to the inventory's folder, as a user reading the file expects."""
    hosts = [h.model_copy(update={"key": _relative_to(h.key, base)}) if h.key else h for h in inv.hosts]
    d = inv.defaults
    defaults = d.model_copy(update={"key": _relative_to(d.key, base)}) if d.key else d
    return inv.model_copy(update={"hosts": hosts, "defaults": defaults})
