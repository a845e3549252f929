"""Launch recipes for a multi-host run: an sbatch script for Slurm and a Kubernetes manifest (an indexed
Job, a headless Service for the rendezvous, the scenario as a ConfigMap, a claim for the results). Both
start `distro-bench node` once per host with the placement the export computed (`--placement`, so every
host and the recipe agree on it); text generation from the scenario and a few settings, so tests can run
and validate them offline.

Slurm: one task per node; the first host of the allocation (`scontrol show hostnames`) serves the
rendezvous, and each task's SLURM_NODEID is its --node-rank. The scenario is named relative to the
script's folder, the job's working directory when it is submitted from there (copied next to the script,
with the files it names, when it lies elsewhere).

Kubernetes: an Indexed Job of N pods (JOB_COMPLETION_INDEX is the --node-rank) whose `subdomain` is a
headless Service, so pod 0 is reachable as `<job>-0.<service>`: the rendezvous. The scenario file and the
trace or corpus files it names travel in a ConfigMap mounted at /scenario; the run folder goes to a
PersistentVolumeClaim at /results (ReadWriteMany: every pod mounts it, so --out is a shared path). The
image is the node image (`distro-bench image build --node`, containers/Dockerfile.node). Shaping: the
agent shapes the pod's own eth0 (its network namespace; the node's NIC is untouched) with NET_ADMIN, and
starts torchrun and the workers without it (harness/distro_bench/net/enter.py drops it from their bounding set,
which needs SETPCAP); a privileged init container loads the ifb/u32/mirred modules on the node. Not the
CNI bandwidth annotations: CNIs apply them unreliably, and never delay.
"""

from __future__ import annotations

import base64
import os
import re
import secrets
import shlex
import shutil
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from distro_bench.errors import InputError
from distro_bench.scenario import hfcorpus
from distro_bench.scenario.model import BUILTIN_CORPORA, LinkSpec, Scenario
from distro_bench.scenario.placement import Placement, from_scenario

DNS_LABEL = r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$"
DNS_SUBDOMAIN = r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$"
CONFIGMAP_KEY = r"^[-._a-zA-Z0-9]{1,253}$"
# The API server refuses a ConfigMap over 1 MiB; keep room for its metadata.
CONFIGMAP_MAX_BYTES = 1_000_000
RDZV_PORT = 29400
SCENARIO_MOUNT = "/scenario"
RESULTS_MOUNT = "/results"
SECRET_MOUNT = "/secret"
SECRET_KEY = "agents.secret"  # the agents' store secret (multihost/secret.py), a file on every host, never in argv
# The init container's modules: ifb (the downlink) and the ingress redirect; harmless if loaded or built in.
MODPROBE = "modprobe -a ifb sch_ingress cls_u32 act_mirred sch_tbf sch_netem || true"


@dataclass(frozen=True)
class RecipeSettings:
    nnodes: int
    placement: str | None = None  # Placement.encode(); given to every `distro-bench node` as --placement
    iface: str = "eth0"
    port: int = RDZV_PORT
    out: str = "results"  # slurm: --out (relative to the job's working directory); k8s: always /results
    image: str = "distro-bench-node:latest"
    time_limit: str = "01:00:00"
    cpus_per_task: int | None = None
    gpus_per_node: int = 0
    i_know: bool = False  # the interface carries the default route (always so in a pod)
    results_claim: str | None = None  # k8s: an existing claim for /results; None: the manifest declares one
    results_size: str = "10Gi"  # k8s: the storage the declared claim requests
    extra: tuple[str, ...] = ()  # more `distro-bench node` flags, e.g. --optimizer adamw


def _dns_name(text: str) -> str:
    name = re.sub(r"[^a-z0-9-]+", "-", text.lower()).strip("-")[:40].strip("-")
    return f"dbench-{name}" if name else "dbench"


def _placement_of(scenario: Scenario, s: RecipeSettings) -> str:
    return from_scenario(scenario, s.nnodes, s.placement).encode()


# ---- the files a scenario needs on every host -----------------------------------------------------

@dataclass(frozen=True)
class ShippedFile:
    rel: str  # POSIX path relative to the scenario's folder, as the scenario names it
    src: Path


def shipped_files(scenario: Scenario, scenario_path: Path) -> list[ShippedFile]:
    """The scenario file and every local file it names (link traces, a corpus file, token files, a tokenizer, a
    model config), each at the path
    relative to the scenario's folder that the scenario reads it from. A file outside that folder cannot
    travel with it (the copy would name another path): InputError saying so."""
    folder = scenario_path.parent
    files = [ShippedFile(scenario_path.name, scenario_path)]
    named: list[tuple[str, str]] = []
    links = [(f"links.{n}", spec) for n, spec in scenario.links.items()]
    links += [(f"workers[{i}].link", g.link) for i, g in enumerate(scenario.workers) if isinstance(g.link, LinkSpec)]
    for where, spec in links:
        named += [(f"{where}.{d}_trace", getattr(spec, f"{d}_trace")) for d in ("up", "down")
                  if getattr(spec, f"{d}_trace")]
    corpus = scenario.data.corpus
    if scenario.data.tokens is None and corpus not in BUILTIN_CORPORA and not hfcorpus.is_hf(corpus) \
            and (folder / corpus).is_file():
        named.append(("data.corpus", corpus))
    # the model's and data's own files (docs/models-and-data.md): a token file, a tokenizer, a transformers config
    for where in ("data.tokens", "data.val_tokens", "data.tokenizer", "model.hf_config"):
        section, key = where.split(".")
        value = getattr(getattr(scenario, section), key)
        if isinstance(value, str) and (folder / value).is_file():
            named.append((where, value))
    seen = {scenario_path.name}
    for where, text in named:
        rel = PurePosixPath(os.path.normpath(text).replace(os.sep, "/"))
        if rel.is_absolute() or rel.parts[:1] == ("..",):
            raise InputError(f"{where}: {text!r} lies outside the scenario's folder {folder}, so the recipe cannot "
                             "ship it with the scenario; copy it into that folder and name it relative to it")
        if str(rel) not in seen:
            seen.add(str(rel))
            files.append(ShippedFile(str(rel), folder / rel))
    return files


# ---- Slurm ------------------------------------------------------------------------------------------

def sbatch_script(scenario: Scenario, scenario_path: str, s: RecipeSettings) -> str:
    """An sbatch script: one `distro-bench node` per allocated node, node 0's host the rendezvous.
    `scenario_path` is read from the job's working directory (the folder sbatch is run in)."""
    placement = _placement_of(scenario, s)
    flags = "".join(f" {shlex.quote(x)}" for x in (*(["--i-know"] if s.i_know else []), *s.extra))
    gpu = f"#SBATCH --gpus-per-node={s.gpus_per_node}\n" if s.gpus_per_node else ""
    cpus = f"#SBATCH --cpus-per-task={s.cpus_per_task}\n" if s.cpus_per_task else ""
    nnodes = Placement.decode(placement).nnodes
    return f"""#!/bin/bash
# distro-bench across {nnodes} Slurm nodes: scenario {scenario.name} ({scenario.world_size} workers).
# Written by `distro-bench export slurm`; docs/scaling-out.md. Submit it from the folder it is in: the
# scenario path below is relative to that folder, the job's working directory. Shaping needs root (or
# CAP_NET_ADMIN) on the compute nodes; without it set DISTRO_BENCH_SHAPING=--no-shaping to measure the
# network as it is.
#SBATCH --job-name={_dns_name(scenario.name)}
#SBATCH --nodes={nnodes}
#SBATCH --ntasks-per-node=1
{cpus}{gpu}#SBATCH --time={s.time_limit}
#SBATCH --output=distro-bench-%j.out
set -euo pipefail

SCENARIO=${{DISTRO_BENCH_SCENARIO:-{shlex.quote(scenario_path)}}}
IFACE=${{DISTRO_BENCH_IFACE:-{shlex.quote(s.iface)}}}
OUT=${{DISTRO_BENCH_OUT:-{shlex.quote(s.out)}}}
PORT=${{DISTRO_BENCH_RDZV_PORT:-{s.port}}}
DISTRO_BENCH=${{DISTRO_BENCH:-distro-bench}}
SHAPING=${{DISTRO_BENCH_SHAPING:---shaping}}
# Scenario ranks per host, in node-rank order: what the export computed, given to every agent (re-export
# to change it: the node count above follows from it).
PLACEMENT={shlex.quote(placement)}
NNODES={nnodes}

if [ ! -f "$SCENARIO" ]; then
  echo "distro-bench: scenario $SCENARIO not found from $PWD; submit this script from its own folder," \\
       "or set DISTRO_BENCH_SCENARIO" >&2
  exit 2
fi
if [ "${{SLURM_JOB_NUM_NODES:-$NNODES}}" != "$NNODES" ]; then
  echo "distro-bench: the allocation has $SLURM_JOB_NUM_NODES nodes, the placement $PLACEMENT needs $NNODES" >&2
  exit 2
fi

# The first host of the allocation serves torchrun's c10d rendezvous (PORT) and the agents' store (PORT+1).
# sed reads every line: `head -n 1` would close the pipe early, and pipefail fail the job on scontrol's SIGPIPE.
HEAD=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | sed -n 1p)

# The agents' store answers only hosts holding this run's secret: a file only the job's user reads, in the job's
# working directory (which every node reads, as it reads the scenario), made here unless one is given; its path
# goes on the command line, the secret itself never does. Removed when the job ends.
SECRET_FILE=${{DISTRO_BENCH_SECRET_FILE:-}}
if [ -z "$SECRET_FILE" ]; then
  SECRET_FILE=.distro-bench-${{SLURM_JOB_ID:-$$}}.secret
  (umask 077; od -An -tx1 -N32 /dev/urandom | tr -d ' \n' >"$SECRET_FILE")
  trap 'rm -f "$SECRET_FILE"' EXIT
fi
export HEAD PORT SCENARIO IFACE OUT DISTRO_BENCH SHAPING NNODES PLACEMENT SECRET_FILE

# One agent per node; SLURM_NODEID is its node rank. --kill-on-bad-exit stops the others if one fails
# (each removes its own shaping on SIGTERM).
srun --nodes="$NNODES" --ntasks-per-node=1 --kill-on-bad-exit=1 bash -c '
  exec $DISTRO_BENCH node "$SCENARIO" --rdzv "$HEAD:$PORT" --node-rank "$SLURM_NODEID" --nnodes "$NNODES" \\
    --placement "$PLACEMENT" --iface "$IFACE" --out "$OUT" --secret-file "$SECRET_FILE" $SHAPING{flags}'
"""


def slurm_scenario_path(scenario: Scenario, scenario_path: Path, script: Path) -> str:
    """The scenario as the script names it, relative to the script's folder. One outside that folder is
    copied, with the files it names, to <script stem>-scenario/ next to the script: the folder then holds
    everything the job reads, and can be copied to the cluster as it is."""
    folder = script.resolve().parent
    src = scenario_path.resolve()
    if src.is_relative_to(folder):
        return src.relative_to(folder).as_posix()
    files = shipped_files(scenario, scenario_path)
    copy = folder / f"{script.stem}-scenario"
    if copy.exists():
        shutil.rmtree(copy)  # ours, from an earlier export of this script
    for f in files:
        (copy / f.rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(f.src, copy / f.rel)
    return f"{copy.name}/{files[0].rel}"


# ---- Kubernetes: the kinds used, as pydantic models (a subset of the API; extra fields are errors) ----

class _K(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)


class ObjectMeta(_K):
    name: str = Field(pattern=DNS_LABEL)
    labels: dict[str, str] = Field(default_factory=dict)


class ServicePort(_K):
    name: str = Field(pattern=DNS_LABEL)
    port: int = Field(ge=1, le=65535)
    targetPort: int | None = Field(default=None, ge=1, le=65535)
    protocol: Literal["TCP", "UDP", "SCTP"] = "TCP"


class ServiceSpec(_K):
    clusterIP: str | None = None
    selector: dict[str, str]
    ports: list[ServicePort] = Field(min_length=1)
    publishNotReadyAddresses: bool | None = None


class Service(_K):
    apiVersion: Literal["v1"]
    kind: Literal["Service"]
    metadata: ObjectMeta
    spec: ServiceSpec


class Secret(_K):
    apiVersion: Literal["v1"]
    kind: Literal["Secret"]
    metadata: ObjectMeta
    type: Literal["Opaque"] = "Opaque"
    stringData: dict[str, str] = Field(default_factory=dict)
    data: dict[str, str] = Field(default_factory=dict)


class ConfigMap(_K):
    apiVersion: Literal["v1"]
    kind: Literal["ConfigMap"]
    metadata: ObjectMeta
    data: dict[str, str] = Field(default_factory=dict)
    binaryData: dict[str, str] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _keys_and_size(self) -> ConfigMap:
        keys = [*self.data, *self.binaryData]
        bad = [k for k in keys if not re.match(CONFIGMAP_KEY, k)]
        if bad:
            raise ValueError(f"ConfigMap keys {bad} are not [-._a-zA-Z0-9]+")
        if len(set(keys)) != len(keys):
            raise ValueError("a ConfigMap key is in both data and binaryData")
        size = sum(len(v.encode()) for v in self.data.values()) + sum(len(v) * 3 // 4 for v in self.binaryData.values())
        if size > CONFIGMAP_MAX_BYTES:
            raise ValueError(f"the ConfigMap holds {size} bytes; the API server takes at most 1 MiB")
        return self


class EnvVarSource(_K):
    fieldRef: dict[str, str] | None = None


class EnvVar(_K):
    name: str = Field(pattern=r"^[-._a-zA-Z][-._a-zA-Z0-9]*$")
    value: str | None = None
    valueFrom: EnvVarSource | None = None


class ContainerPort(_K):
    containerPort: int = Field(ge=1, le=65535)
    name: str | None = Field(default=None, max_length=15)
    protocol: Literal["TCP", "UDP", "SCTP"] = "TCP"


class Capabilities(_K):
    add: list[str] = Field(default_factory=list)
    drop: list[str] = Field(default_factory=list)


class SecurityContext(_K):
    privileged: bool | None = None
    capabilities: Capabilities | None = None
    runAsUser: int | None = None


class VolumeMount(_K):
    name: str = Field(pattern=DNS_LABEL)
    mountPath: str
    readOnly: bool | None = None


class ResourceRequirements(_K):
    limits: dict[str, str | int] = Field(default_factory=dict)
    requests: dict[str, str | int] = Field(default_factory=dict)


class PVCSpec(_K):
    accessModes: list[Literal["ReadWriteOnce", "ReadOnlyMany", "ReadWriteMany", "ReadWriteOncePod"]] = Field(
        min_length=1)
    resources: ResourceRequirements
    storageClassName: str | None = None

    @field_validator("resources")
    @classmethod
    def _requests_storage(cls, r: ResourceRequirements) -> ResourceRequirements:
        if "storage" not in r.requests:
            raise ValueError("a PersistentVolumeClaim needs resources.requests.storage")
        return r


class PersistentVolumeClaim(_K):
    apiVersion: Literal["v1"]
    kind: Literal["PersistentVolumeClaim"]
    metadata: ObjectMeta
    spec: PVCSpec


class Container(_K):
    name: str = Field(pattern=DNS_LABEL)
    image: str = Field(min_length=1)
    command: list[str] | None = None
    args: list[str] | None = None
    env: list[EnvVar] = Field(default_factory=list)
    ports: list[ContainerPort] = Field(default_factory=list)
    securityContext: SecurityContext | None = None
    volumeMounts: list[VolumeMount] = Field(default_factory=list)
    resources: ResourceRequirements | None = None
    workingDir: str | None = None


class KeyToPath(_K):
    key: str = Field(pattern=CONFIGMAP_KEY)
    path: str = Field(min_length=1)

    @field_validator("path")
    @classmethod
    def _relative(cls, p: str) -> str:
        if p.startswith("/") or ".." in PurePosixPath(p).parts:
            raise ValueError(f"items path {p!r} must be relative and contain no '..'")
        return p


class ConfigMapVolumeSource(_K):
    name: str = Field(pattern=DNS_SUBDOMAIN)
    items: list[KeyToPath] = Field(default_factory=list)


class SecretVolumeSource(_K):
    secretName: str = Field(pattern=DNS_SUBDOMAIN)
    defaultMode: int | None = Field(default=None, ge=0, le=0o777)
    items: list[KeyToPath] = Field(default_factory=list)


class PVCVolumeSource(_K):
    claimName: str = Field(pattern=DNS_SUBDOMAIN)
    readOnly: bool | None = None


class Volume(_K):
    name: str = Field(pattern=DNS_LABEL)
    hostPath: dict[str, str] | None = None
    emptyDir: dict | None = None
    configMap: ConfigMapVolumeSource | None = None
    secret: SecretVolumeSource | None = None
    persistentVolumeClaim: PVCVolumeSource | None = None

    @model_validator(mode="after")
    def _one_source(self) -> Volume:
        n = sum(x is not None for x in (self.hostPath, self.emptyDir, self.configMap, self.secret,
                                        self.persistentVolumeClaim))
        if n != 1:
            raise ValueError(f"volume {self.name!r} needs exactly one source, has {n}")
        return self


class PodSpec(_K):
    subdomain: str | None = Field(default=None, pattern=DNS_LABEL)
    restartPolicy: Literal["Never", "OnFailure"]  # the only values a Job's pods may have
    initContainers: list[Container] = Field(default_factory=list)
    containers: list[Container] = Field(min_length=1)
    volumes: list[Volume] = Field(default_factory=list)
    terminationGracePeriodSeconds: int | None = Field(default=None, ge=0)


class PodTemplateSpec(_K):
    metadata: ObjectMeta | dict = Field(default_factory=dict)
    spec: PodSpec


class JobSpec(_K):
    completionMode: Literal["NonIndexed", "Indexed"] = "NonIndexed"
    completions: int | None = Field(default=None, ge=1)
    parallelism: int | None = Field(default=None, ge=0)
    backoffLimit: int | None = Field(default=None, ge=0)
    activeDeadlineSeconds: int | None = Field(default=None, ge=1)
    template: PodTemplateSpec

    @model_validator(mode="after")
    def _indexed_needs_completions(self) -> JobSpec:
        if self.completionMode == "Indexed" and self.completions is None:
            raise ValueError("an Indexed Job needs spec.completions")
        return self


class Job(_K):
    apiVersion: Literal["batch/v1"]
    kind: Literal["Job"]
    metadata: ObjectMeta
    spec: JobSpec


KINDS: dict[str, type[BaseModel]] = {"Job": Job, "Service": Service, "ConfigMap": ConfigMap, "Secret": Secret,
                                     "PersistentVolumeClaim": PersistentVolumeClaim}


def _arg(args: list[str], flag: str) -> str | None:
    return args[args.index(flag) + 1] if flag in args and args.index(flag) + 1 < len(args) else None


def _mount_of(container: Container, volumes: dict[str, Volume], path: str) -> tuple[VolumeMount, Volume] | None:
    """The container's volume mount that holds `path` (the longest mount path that is a prefix of it)."""
    best = None
    for m in container.volumeMounts:
        if PurePosixPath(path).is_relative_to(m.mountPath) and (best is None or len(m.mountPath) > len(best.mountPath)):
            best = m
    return (best, volumes[best.name]) if best is not None and best.name in volumes else None


class _BlockDumper(yaml.SafeDumper):
    """Multi-line strings (the files in the ConfigMap) as literal blocks, readable in the manifest; PyYAML
    falls back to a quoted style where a block cannot hold the text exactly (trailing spaces)."""


def _str(dumper: yaml.SafeDumper, text: str) -> yaml.ScalarNode:
    return dumper.represent_scalar("tag:yaml.org,2002:str", text, style="|" if "\n" in text else None)


_BlockDumper.add_representer(str, _str)


def validate_manifest(text: str) -> list[BaseModel]:
    """Every document parsed as its kind's model (pydantic ValidationError otherwise), then the cross-checks
    that bind them: the Service selects the Job's pods and is their subdomain, the rendezvous address names
    pod 0 of the Job through the Service, the scenario the agent reads is a file of the ConfigMap, the
    results folder is on the claim, and the placement has one host per pod."""
    docs = [d for d in yaml.safe_load_all(text) if d]
    objs = []
    for d in docs:
        kind = d.get("kind")
        if kind not in KINDS:
            raise ValueError(f"unexpected kind {kind!r}; this manifest uses {', '.join(KINDS)}")
        objs.append(KINDS[kind].model_validate(d))
    jobs = [o for o in objs if isinstance(o, Job)]
    services = [o for o in objs if isinstance(o, Service)]
    maps = [o for o in objs if isinstance(o, ConfigMap)]
    claims = [o for o in objs if isinstance(o, PersistentVolumeClaim)]
    if len(jobs) != 1 or len(services) != 1 or len(maps) != 1 or len(claims) > 1:
        raise ValueError(f"expected one Job, one Service, one ConfigMap and at most one PersistentVolumeClaim, got "
                         f"{len(jobs)}, {len(services)}, {len(maps)} and {len(claims)}")
    job, svc, cm = jobs[0], services[0], maps[0]
    pod = job.spec.template
    labels = pod.metadata.labels if isinstance(pod.metadata, ObjectMeta) else pod.metadata.get("labels", {})
    if svc.spec.clusterIP != "None":
        raise ValueError("the rendezvous Service must be headless (clusterIP: None)")
    if not svc.spec.selector or any(labels.get(k) != v for k, v in svc.spec.selector.items()):
        raise ValueError(f"the Service selector {svc.spec.selector} does not select the Job's pods ({labels})")
    if pod.spec.subdomain != svc.metadata.name:
        raise ValueError(f"the pods' subdomain {pod.spec.subdomain!r} is not the Service {svc.metadata.name!r}")
    agent = pod.spec.containers[0]
    args = agent.args or []
    rdzv = _arg(args, "--rdzv") or ""
    if rdzv.split(":")[0] != f"{job.metadata.name}-0.{svc.metadata.name}":
        raise ValueError(f"--rdzv {rdzv!r} does not name pod 0 of the Job through the Service")
    if _arg(args, "--node-rank") != "$(JOB_COMPLETION_INDEX)" or not any(
            e.name == "JOB_COMPLETION_INDEX" for e in agent.env):
        raise ValueError("--node-rank must be $(JOB_COMPLETION_INDEX), declared in the agent's env")
    if job.spec.completionMode != "Indexed" or job.spec.completions != job.spec.parallelism:
        raise ValueError("the Job must be Indexed with completions == parallelism (all hosts at once)")
    placement = _arg(args, "--placement")
    if placement is None or Placement.decode(placement).nnodes != job.spec.completions or (
            _arg(args, "--nnodes") != str(job.spec.completions)):
        raise ValueError(f"--placement {placement!r} and --nnodes must name one host per pod "
                         f"({job.spec.completions})")
    volumes = {v.name: v for v in pod.spec.volumes}
    # The scenario: a file the ConfigMap's volume puts where the agent reads it.
    scenario = args[1] if len(args) > 1 and args[0] == "node" else ""
    found = _mount_of(agent, volumes, scenario)
    if found is None or found[1].configMap is None or found[1].configMap.name != cm.metadata.name:
        raise ValueError(f"the scenario {scenario!r} is not on a volume of the ConfigMap {cm.metadata.name!r}")
    mount, vol = found
    items = vol.configMap.items if vol.configMap else []
    keys = {*cm.data, *cm.binaryData}
    missing = [i.key for i in items if i.key not in keys]
    if missing:
        raise ValueError(f"the scenario volume names keys {missing} that the ConfigMap does not have")
    rel = PurePosixPath(scenario).relative_to(mount.mountPath).as_posix()
    if rel not in {i.path for i in items}:
        raise ValueError(f"the scenario {scenario!r} is no item of the ConfigMap's volume")
    # The results: --out on the claim (the manifest's own, when it declares one).
    out = _arg(args, "--out") or ""
    found = _mount_of(agent, volumes, out) if out.startswith("/") else None
    if found is None or found[1].persistentVolumeClaim is None:
        raise ValueError(f"--out {out!r} is not on a PersistentVolumeClaim volume: the run folder would be lost")
    claim = found[1].persistentVolumeClaim.claimName
    if claims and claims[0].metadata.name != claim:
        raise ValueError(f"the results volume mounts claim {claim!r}, the manifest declares {claims[0].metadata.name!r}")
    # The agents' store secret: a file of the manifest's Secret, readable by its owner alone; never in args.
    held = [o for o in objs if isinstance(o, Secret)]
    secret_file = _arg(args, "--secret-file") or ""
    found = _mount_of(agent, volumes, secret_file) if secret_file.startswith("/") else None
    if len(held) != 1 or found is None or found[1].secret is None or found[1].secret.secretName != held[0].metadata.name:
        raise ValueError(f"--secret-file {secret_file!r} is not on a volume of the manifest's one Secret")
    if (found[1].secret.defaultMode or 0o644) & 0o077:
        raise ValueError("the Secret's volume must be readable by its owner alone (defaultMode 0400)")
    return objs


def _configmap(name: str, labels: dict[str, str], files: list[ShippedFile]) -> tuple[dict, list[dict]]:
    """The ConfigMap holding `files` (text as data, anything else as binaryData) and the volume items
    that put each back at its path relative to the scenario's folder."""
    data, binary, items = {}, {}, []
    used: set[str] = set()
    for f in files:
        key = re.sub(r"[^-._a-zA-Z0-9]", "_", f.rel)[-200:].lstrip(".") or "file"
        k, n = key, 1
        while k in used:
            n += 1
            k = f"{n}-{key}"
        used.add(k)
        raw = f.src.read_bytes()
        try:
            data[k] = raw.decode("utf-8")
        except UnicodeDecodeError:
            binary[k] = base64.b64encode(raw).decode()
        items.append({"key": k, "path": f.rel})
    size = sum(f.src.stat().st_size for f in files)
    if size > CONFIGMAP_MAX_BYTES:
        raise InputError(f"the scenario and the files it names are {size} bytes; a ConfigMap holds at most 1 MiB: "
                         "put large traces or a corpus in the image or on a volume instead")
    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "labels": dict(labels)},
          **({"data": data} if data else {}), **({"binaryData": binary} if binary else {})}
    return cm, items


def k8s_manifest(scenario: Scenario, scenario_path: str, s: RecipeSettings) -> str:
    """A headless Service, an indexed Job (one pod per host), the ConfigMap with the scenario and, unless
    `s.results_claim` names an existing one, the PersistentVolumeClaim the run folder is written to."""
    name = _dns_name(scenario.name)
    svc = f"{name}-rdzv"
    rdzv = f"{name}-0.{svc}:{s.port}"
    labels = {"app.kubernetes.io/name": "distro-bench", "distro-bench/job": name}
    placement = _placement_of(scenario, s)
    nnodes = Placement.decode(placement).nnodes
    files = shipped_files(scenario, Path(scenario_path))
    configmap, items = _configmap(f"{name}-scenario", labels, files)
    claim = s.results_claim or f"{name}-results"
    if not re.match(DNS_SUBDOMAIN, claim):
        raise InputError(f"--results-claim: {claim!r} is not a claim name (lower-case letters, digits, '-' and '.')")
    args = ["node", f"{SCENARIO_MOUNT}/{files[0].rel}", "--rdzv", rdzv, "--node-rank", "$(JOB_COMPLETION_INDEX)",
            "--nnodes", str(nnodes), "--placement", placement, "--iface", s.iface, "--out", RESULTS_MOUNT,
            "--secret-file", f"{SECRET_MOUNT}/{SECRET_KEY}", *(["--i-know"] if s.i_know else []), *s.extra]
    resources = {"limits": {"nvidia.com/gpu": s.gpus_per_node}} if s.gpus_per_node else None
    agent = {
        "name": "agent", "image": s.image, "command": ["distro-bench"], "args": args,
        # The Job controller's index annotation, spelled out so that $(JOB_COMPLETION_INDEX) in args expands.
        "env": [{"name": "JOB_COMPLETION_INDEX", "valueFrom": {"fieldRef": {
                    "fieldPath": "metadata.annotations['batch.kubernetes.io/job-completion-index']"}}},
                {"name": "DISTRO_BENCH_THREADS", "value": str(s.cpus_per_task or 1)}],
        "ports": [{"containerPort": s.port, "name": "rdzv"}, {"containerPort": s.port + 1, "name": "agents"}],
        # NET_ADMIN for the agent's tc on the pod's own eth0. The agent starts torchrun and the workers
        # without it: harness/distro_bench/net/enter.py drops it from their bounding set, which takes SETPCAP
        # (in the runtimes' default set; added so a restricted default cannot leave workers with NET_ADMIN).
        "securityContext": {"runAsUser": 0, "capabilities": {"add": ["NET_ADMIN", "SETPCAP"]}},
        "volumeMounts": [{"name": "scenario", "mountPath": SCENARIO_MOUNT, "readOnly": True},
                         {"name": "secret", "mountPath": SECRET_MOUNT, "readOnly": True},
                         {"name": "results", "mountPath": RESULTS_MOUNT}],
        "workingDir": "/tmp",
        **({"resources": resources} if resources else {}),
    }
    init = {
        "name": "load-modules", "image": s.image, "command": ["sh", "-c", MODPROBE],
        "securityContext": {"privileged": True},
        "volumeMounts": [{"name": "modules", "mountPath": "/lib/modules", "readOnly": True}],
    }
    job = {
        "apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name, "labels": dict(labels)},
        "spec": {"completionMode": "Indexed", "completions": nnodes, "parallelism": nnodes, "backoffLimit": 0,
                 "template": {"metadata": {"labels": dict(labels)}, "spec": {
                     "subdomain": svc, "restartPolicy": "Never", "terminationGracePeriodSeconds": 60,
                     "initContainers": [init], "containers": [agent],
                     "volumes": [{"name": "scenario", "configMap": {"name": configmap["metadata"]["name"],
                                                                    "items": items}},
                                 {"name": "results", "persistentVolumeClaim": {"claimName": claim}},
                                 {"name": "modules", "hostPath": {"path": "/lib/modules", "type": "Directory"}},
                                 {"name": "secret", "secret": {"secretName": f"{name}-secret", "defaultMode": 0o400}}]}}},
    }
    service = {
        "apiVersion": "v1", "kind": "Service", "metadata": {"name": svc, "labels": dict(labels)},
        # Headless: pod DNS names, no virtual IP; published before the pods are ready, as the rendezvous
        # must be reachable while they start.
        "spec": {"clusterIP": "None", "selector": dict(labels), "publishNotReadyAddresses": True,
                 "ports": [{"name": "rdzv", "port": s.port}, {"name": "agents", "port": s.port + 1}]},
    }
    # A fresh secret per export: the manifest file holds it, so it is written readable by its owner alone.
    secret = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": f"{name}-secret", "labels": dict(labels)},
              "type": "Opaque", "stringData": {SECRET_KEY: secrets.token_hex(32)}}
    docs = [service, job, configmap]
    if s.results_claim is None:
        # ReadWriteMany: every pod mounts it (--out is then a shared path, records need no shipping).
        docs.append({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                     "metadata": {"name": claim, "labels": dict(labels)},
                     "spec": {"accessModes": ["ReadWriteMany"], "resources": {"requests": {"storage": s.results_size}}}})
    docs.append(secret)
    claim_note = (f"the existing claim {claim}" if s.results_claim else
                  f"the claim {claim} declared\n# below (ReadWriteMany, {s.results_size}; `kubectl delete -f` on this "
                  "file deletes it with the results: delete the Job by name)")
    header = (f"# distro-bench across {nnodes} pods: scenario {scenario.name} ({scenario.world_size} workers), "
              f"placement {placement}.\n"
              "# Written by `distro-bench export k8s`; docs/scaling-out.md.\n"
              f"# Image {s.image}: built by `distro-bench image build --node` (push it where the cluster pulls from).\n"
              f"# The scenario and the files it names: the ConfigMap {configmap['metadata']['name']}, at {SCENARIO_MOUNT}.\n"
              f"# Node-rank 0's pod writes the run folder to {RESULTS_MOUNT}, on {claim_note}.\n"
              f"# The Secret {name}-secret holds the agents' store secret, made for this file (keep it private).\n")
    text = header + yaml.dump_all(docs, Dumper=_BlockDumper, sort_keys=False)
    validate_manifest(text)  # never write a manifest our own model of the API rejects
    return text


def default_nnodes(scenario: Scenario, nnodes: int | None, placement: str | None = None) -> int:
    return from_scenario(scenario, nnodes, placement).nnodes


def write(kind: str, scenario_path: Path, dest: Path | None, s: RecipeSettings, scenario: Scenario) -> Path:
    if kind == "slurm":
        default = f"{scenario.name}.sbatch"
    elif kind == "k8s":
        default = f"{scenario.name}.k8s.yaml"
    else:
        raise InputError(f"export: unknown recipe {kind!r}; one of slurm, k8s")
    path = dest or Path(default)
    if path.is_dir():
        path = path / default
    if kind == "slurm":
        text = sbatch_script(scenario, slurm_scenario_path(scenario, scenario_path, path), s)
    else:
        text = k8s_manifest(scenario, str(scenario_path), s)
    if kind == "slurm":
        path.write_text(text)
        path.chmod(0o755)
    else:  # it holds the run's secret (its Secret): its owner's alone from the first byte
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(text)
        path.chmod(0o600)
    return path
