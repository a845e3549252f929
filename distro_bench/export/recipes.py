"""Launch recipes for a multi-host run: an sbatch script for Slurm and a Kubernetes manifest (an indexed
Job plus a headless Service for the rendezvous). Both start `distro-bench node` once per host; pure text
generation from the scenario and a few settings, so tests can run and validate them offline.

Slurm: one task per node; the first host of the allocation (`scontrol show hostnames`) serves the
rendezvous, and each task's SLURM_NODEID is its --node-rank.

Kubernetes: an Indexed Job of N pods (JOB_COMPLETION_INDEX is the --node-rank) whose `subdomain` is a
headless Service, so pod 0 is reachable as `<job>-0.<service>`: the rendezvous. Shaping: the agent in the
pod's container shapes the pod's own eth0 (its network namespace; the node's NIC is untouched) with
NET_ADMIN, and starts the workers without it; a privileged init container loads the ifb/u32/mirred
modules on the node. Not the CNI bandwidth annotations: CNIs apply them unreliably, and never delay.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, model_validator

from distro_bench.errors import InputError
from distro_bench.scenario.model import Scenario

DNS_LABEL = r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$"
RDZV_PORT = 29400


@dataclass(frozen=True)
class RecipeSettings:
    nnodes: int
    iface: str = "eth0"
    port: int = RDZV_PORT
    out: str = "results"
    image: str = "distro-bench-worker:latest"
    time_limit: str = "01:00:00"
    cpus_per_task: int | None = None
    gpus_per_node: int = 0
    i_know: bool = False  # the interface carries the default route (always so in a pod)
    extra: tuple[str, ...] = ()  # more `distro-bench node` flags, e.g. --optimizer adamw


def _dns_name(text: str) -> str:
    name = re.sub(r"[^a-z0-9-]+", "-", text.lower()).strip("-")[:40].strip("-")
    return f"dbench-{name}" if name else "dbench"


# ---- Slurm ------------------------------------------------------------------------------------------

def sbatch_script(scenario: Scenario, scenario_path: str, s: RecipeSettings) -> str:
    """An sbatch script: one `distro-bench node` per allocated node, node 0's host the rendezvous."""
    flags = " ".join(shlex.quote(x) for x in s.extra)
    gpu = f"#SBATCH --gpus-per-node={s.gpus_per_node}\n" if s.gpus_per_node else ""
    cpus = f"#SBATCH --cpus-per-task={s.cpus_per_task}\n" if s.cpus_per_task else ""
    iknow = " --i-know" if s.i_know else ""
    return f"""#!/bin/bash
# distro-bench across {s.nnodes} Slurm nodes: scenario {scenario.name} ({scenario.world_size} workers).
# Written by `distro-bench export slurm`; docs/scaling-out.md. Shaping needs root (or CAP_NET_ADMIN) on the
# compute nodes; without it set DISTRO_BENCH_SHAPING=--no-shaping to measure the network as it is.
#SBATCH --job-name={_dns_name(scenario.name)}
#SBATCH --nodes={s.nnodes}
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

# The first host of the allocation serves torchrun's c10d rendezvous (PORT) and the agents' store (PORT+1).
HEAD=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)
NNODES=${{SLURM_JOB_NUM_NODES:-{s.nnodes}}}
export HEAD PORT SCENARIO IFACE OUT DISTRO_BENCH SHAPING NNODES

# One agent per node; SLURM_NODEID is its node rank. --kill-on-bad-exit stops the others if one fails
# (each removes its own shaping on SIGTERM).
srun --nodes="$NNODES" --ntasks-per-node=1 --kill-on-bad-exit=1 bash -c '
  exec $DISTRO_BENCH node "$SCENARIO" --rdzv "$HEAD:$PORT" --node-rank "$SLURM_NODEID" --nnodes "$NNODES" \\
    --iface "$IFACE" --out "$OUT" $SHAPING{iknow} {flags}'
"""


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


class Volume(_K):
    name: str = Field(pattern=DNS_LABEL)
    hostPath: dict[str, str] | None = None
    emptyDir: dict | None = None
    persistentVolumeClaim: dict[str, str] | None = None


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


KINDS = {"Job": Job, "Service": Service}


def validate_manifest(text: str) -> list[BaseModel]:
    """Every document parsed as its kind's model (pydantic ValidationError otherwise), then the cross-checks
    that bind them: the Service selects the Job's pods and is their subdomain, the rendezvous address names
    pod 0 of the Job through the Service."""
    docs = [d for d in yaml.safe_load_all(text) if d]
    objs = []
    for d in docs:
        kind = d.get("kind")
        if kind not in KINDS:
            raise ValueError(f"unexpected kind {kind!r}; this manifest uses {', '.join(KINDS)}")
        objs.append(KINDS[kind].model_validate(d))
    jobs = [o for o in objs if isinstance(o, Job)]
    services = [o for o in objs if isinstance(o, Service)]
    if len(jobs) != 1 or len(services) != 1:
        raise ValueError(f"expected one Job and one Service, got {len(jobs)} and {len(services)}")
    job, svc = jobs[0], services[0]
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
    rdzv = args[args.index("--rdzv") + 1] if "--rdzv" in args else ""
    if rdzv.split(":")[0] != f"{job.metadata.name}-0.{svc.metadata.name}":
        raise ValueError(f"--rdzv {rdzv!r} does not name pod 0 of the Job through the Service")
    if "--node-rank" not in args or args[args.index("--node-rank") + 1] != "$(JOB_COMPLETION_INDEX)" or not any(
            e.name == "JOB_COMPLETION_INDEX" for e in agent.env):
        raise ValueError("--node-rank must be $(JOB_COMPLETION_INDEX), declared in the agent's env")
    if job.spec.completionMode != "Indexed" or job.spec.completions != job.spec.parallelism:
        raise ValueError("the Job must be Indexed with completions == parallelism (all hosts at once)")
    return objs


def k8s_manifest(scenario: Scenario, scenario_path: str, s: RecipeSettings) -> str:
    """An indexed Job (one pod per host) and the headless Service its pods rendezvous through."""
    name = _dns_name(scenario.name)
    svc = f"{name}-rdzv"
    rdzv = f"{name}-0.{svc}:{s.port}"
    labels = {"app.kubernetes.io/name": "distro-bench", "distro-bench/job": name}
    mount = "/scenario"
    scen_file = f"{mount}/{Path(scenario_path).name}"
    args = ["node", scen_file, "--rdzv", rdzv, "--node-rank", "$(JOB_COMPLETION_INDEX)", "--nnodes", str(s.nnodes),
            "--iface", s.iface, "--out", s.out, *(["--i-know"] if s.i_know else []), *s.extra]
    resources = {"limits": {"nvidia.com/gpu": s.gpus_per_node}} if s.gpus_per_node else None
    agent = {
        "name": "agent", "image": s.image, "command": ["distro-bench"], "args": args,
        # The Job controller's index annotation, spelled out so that $(JOB_COMPLETION_INDEX) in args expands.
        "env": [{"name": "JOB_COMPLETION_INDEX", "valueFrom": {"fieldRef": {
                    "fieldPath": "metadata.annotations['batch.kubernetes.io/job-completion-index']"}}},
                {"name": "DISTRO_BENCH_THREADS", "value": str(s.cpus_per_task or 1)}],
        "ports": [{"containerPort": s.port, "name": "rdzv"}, {"containerPort": s.port + 1, "name": "agents"}],
        # NET_ADMIN for the agent's tc on the pod's own eth0; the agent starts torchrun and the workers
        # without it (distro_bench/net/enter.py drops it from their bounding set).
        "securityContext": {"runAsUser": 0, "capabilities": {"add": ["NET_ADMIN"]}},
        "volumeMounts": [{"name": "scenario", "mountPath": mount, "readOnly": True},
                         {"name": "results", "mountPath": "/results"}],
        "workingDir": "/",
        **({"resources": resources} if resources else {}),
    }
    init = {
        # ifb (the downlink) and the ingress redirect need these modules on the node; harmless if loaded.
        "name": "load-modules", "image": s.image, "command": ["sh", "-c", "modprobe -a ifb sch_ingress cls_u32 "
                                                                           "act_mirred sch_tbf sch_netem || true"],
        "securityContext": {"privileged": True},
        "volumeMounts": [{"name": "modules", "mountPath": "/lib/modules", "readOnly": True}],
    }
    job = {
        "apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name, "labels": dict(labels)},
        "spec": {"completionMode": "Indexed", "completions": s.nnodes, "parallelism": s.nnodes, "backoffLimit": 0,
                 "template": {"metadata": {"labels": dict(labels)}, "spec": {
                     "subdomain": svc, "restartPolicy": "Never", "terminationGracePeriodSeconds": 60,
                     "initContainers": [init], "containers": [agent],
                     "volumes": [{"name": "scenario", "hostPath": {"path": str(Path(scenario_path).resolve().parent),
                                                                   "type": "Directory"}},
                                 {"name": "results", "emptyDir": {}},
                                 {"name": "modules", "hostPath": {"path": "/lib/modules", "type": "Directory"}}]}}},
    }
    service = {
        "apiVersion": "v1", "kind": "Service", "metadata": {"name": svc, "labels": dict(labels)},
        # Headless: pod DNS names, no virtual IP; published before the pods are ready, as the rendezvous
        # must be reachable while they start.
        "spec": {"clusterIP": "None", "selector": dict(labels), "publishNotReadyAddresses": True,
                 "ports": [{"name": "rdzv", "port": s.port}, {"name": "agents", "port": s.port + 1}]},
    }
    header = (f"# distro-bench across {s.nnodes} pods: scenario {scenario.name} ({scenario.world_size} workers).\n"
              "# Written by `distro-bench export k8s`; docs/scaling-out.md. The scenario folder is mounted from the\n"
              "# node (hostPath): replace it with a ConfigMap or a shared volume on a real cluster; node-rank 0's\n"
              "# pod writes the run folder under /results (mount a PersistentVolumeClaim there to keep it).\n")
    text = header + yaml.safe_dump(service, sort_keys=False) + "---\n" + yaml.safe_dump(job, sort_keys=False)
    validate_manifest(text)  # never write a manifest our own model of the API rejects
    return text


def default_nnodes(scenario: Scenario, nnodes: int | None) -> int:
    from distro_bench.scenario.placement import from_scenario

    return from_scenario(scenario, nnodes).nnodes


def write(kind: str, scenario_path: Path, dest: Path | None, s: RecipeSettings, scenario: Scenario) -> Path:
    if kind == "slurm":
        text, default = sbatch_script(scenario, str(scenario_path), s), f"{scenario.name}.sbatch"
    elif kind == "k8s":
        text, default = k8s_manifest(scenario, str(scenario_path), s), f"{scenario.name}.k8s.yaml"
    else:
        raise InputError(f"export: unknown recipe {kind!r}; one of slurm, k8s")
    path = dest or Path(default)
    if path.is_dir():
        path = path / default
    path.write_text(text)
    if kind == "slurm":
        path.chmod(0o755)
    return path
