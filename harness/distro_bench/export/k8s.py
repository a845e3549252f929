"""The Kubernetes recipe of a multi-host run: an Indexed Job of N pods (JOB_COMPLETION_INDEX is the --node-rank)
whose `subdomain` is a headless Service, so pod 0 is reachable as `<job>-0.<service>`: the rendezvous. The
scenario file and the trace or corpus files it names travel in a ConfigMap mounted at /scenario; the run folder
goes to a PersistentVolumeClaim at /results (ReadWriteMany: every pod mounts it, so --out is a shared path). The
image is the node image (`distro-bench image build --node`, containers/Dockerfile.node). Shaping: the agent shapes
the pod's own eth0 (its network namespace; the node's NIC is untouched) with NET_ADMIN, and starts torchrun and the
workers without it (harness/distro_bench/net/enter.py drops it from their bounding set, which needs SETPCAP); a
privileged init container loads the ifb/u32/mirred modules on the node. Not the CNI bandwidth annotations: CNIs
apply them unreliably, and never delay.

The objects are plain data: dicts as the API documents them, dumped by PyYAML. No copy of the API's types is kept
here (the `kubernetes` client's models are a large dependency for five objects, and a hand-kept subset drifts):
whether each object is valid Kubernetes is the API server's to say (`kubectl apply --dry-run=server -f`).
What is checked here, before the file is written, is what this recipe relies on and the API cannot know: the
objects fit together (k8s_checks.py).
"""

from __future__ import annotations

import base64
import re
import secrets
from pathlib import Path

import yaml

from distro_bench.errors import InputError
from distro_bench.export.hostfiles import ShippedFile, shipped_files
from distro_bench.export.k8s_checks import CONFIGMAP_MAX_BYTES, DNS_SUBDOMAIN, validate_manifest
from distro_bench.export.recipe_settings import RecipeSettings, dns_name, placement_of
from distro_bench.scenario.model import Scenario
from distro_bench.scenario.placement import Placement
from distro_bench.train.launch import node_args, threads_env

SCENARIO_MOUNT = "/scenario"
RESULTS_MOUNT = "/results"
SECRET_MOUNT = "/secret"
SECRET_KEY = "agents.secret"  # the agents' store secret (multihost/secret.py), a file on every host, never in argv
# The init container's modules: ifb (the downlink) and the ingress redirect; harmless if loaded or built in.
MODPROBE = "modprobe -a ifb sch_ingress cls_u32 act_mirred sch_tbf sch_netem || true"


class _BlockDumper(yaml.SafeDumper):
    """Multi-line strings (the files in the ConfigMap) as literal blocks, readable in the manifest; PyYAML
    falls back to a quoted style where a block cannot hold the text exactly (trailing spaces)."""


def _str(dumper: yaml.SafeDumper, text: str) -> yaml.ScalarNode:
    return dumper.represent_scalar("tag:yaml.org,2002:str", text, style="|" if "\n" in text else None)


_BlockDumper.add_representer(str, _str)


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
    name = dns_name(scenario.name)
    svc = f"{name}-rdzv"
    rdzv = f"{name}-0.{svc}:{s.port}"
    labels = {"app.kubernetes.io/name": "distro-bench", "distro-bench/job": name}
    placement = placement_of(scenario, s)
    nnodes = Placement.decode(placement).nnodes
    files = shipped_files(scenario, Path(scenario_path))
    configmap, items = _configmap(f"{name}-scenario", labels, files)
    claim = s.results_claim or f"{name}-results"
    if not re.match(DNS_SUBDOMAIN, claim):
        raise InputError(f"--results-claim: {claim!r} is not a claim name (lower-case letters, digits, '-' and '.')")
    # `distro-bench node` as every launcher starts it (train/launch.py); the Job's index is the node rank.
    args = node_args(f"{SCENARIO_MOUNT}/{files[0].rel}", rdzv=rdzv, node_rank="$(JOB_COMPLETION_INDEX)",
                     nnodes=str(nnodes), placement=placement, iface=s.iface, out=RESULTS_MOUNT,
                     secret_file=f"{SECRET_MOUNT}/{SECRET_KEY}", flags=[*(["--i-know"] if s.i_know else []), *s.extra])
    resources = {"limits": {"nvidia.com/gpu": s.gpus_per_node}} if s.gpus_per_node else None
    agent = {
        "name": "agent", "image": s.image, "command": ["distro-bench"], "args": args,
        # The Job controller's index annotation, spelled out so that $(JOB_COMPLETION_INDEX) in args expands.
        "env": [{"name": "JOB_COMPLETION_INDEX", "valueFrom": {"fieldRef": {
                    "fieldPath": "metadata.annotations['batch.kubernetes.io/job-completion-index']"}}},
                # each worker's torch threads, passed on by the agent (train/launch.py)
                *({"name": k, "value": v} for k, v in threads_env(s.cpus_per_task or 1).items())],
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
    validate_manifest(text)  # never write a manifest whose parts do not fit together
    return text
