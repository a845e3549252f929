"""What the Kubernetes recipe (export/k8s.py) relies on, checked on the manifest as plain data: the five objects
are there once each, the Job's pods can run as one multi-host run (Indexed, all at once, never restarted), the
Service selects them and is their subdomain, the rendezvous names pod 0 through it, the scenario the agent reads is
a file of the ConfigMap, the results folder is on a claim, the agents' secret is a private file of the Secret, and
the placement has one host per pod. Field-by-field conformance to the API is the API server's to judge
(`kubectl apply --dry-run=server`); ValueError naming the field otherwise."""

from __future__ import annotations

import re
from pathlib import PurePosixPath
from typing import Any

import yaml

from distro_bench.scenario.placement import Placement

DNS_LABEL = r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$"
DNS_SUBDOMAIN = r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$"
CONFIGMAP_KEY = r"^[-._a-zA-Z0-9]{1,253}$"
# The API server refuses a ConfigMap over 1 MiB; keep room for its metadata.
CONFIGMAP_MAX_BYTES = 1_000_000
API_VERSIONS = {"Job": "batch/v1", "Service": "v1", "ConfigMap": "v1", "Secret": "v1", "PersistentVolumeClaim": "v1"}
VOLUME_SOURCES = ("hostPath", "emptyDir", "configMap", "secret", "persistentVolumeClaim")


def _at(obj: Any, path: str, kind: type | tuple[type, ...] = dict) -> Any:
    """obj's field at the dotted `path`, of type `kind`; ValueError naming the path otherwise."""
    value = obj
    for key in path.split("."):
        value = value.get(key) if isinstance(value, dict) else None
    if not isinstance(value, kind):
        raise ValueError(f"{path}: missing or not a {getattr(kind, '__name__', kind)}")
    return value


def _arg(args: list[str], flag: str) -> str | None:
    return args[args.index(flag) + 1] if flag in args and args.index(flag) + 1 < len(args) else None


def _mount_of(container: dict, volumes: dict[str, dict], path: str) -> tuple[dict, dict] | None:
    """The container's volume mount that holds `path` (the longest mount path that is a prefix of it)."""
    best = None
    for m in container.get("volumeMounts") or []:
        if PurePosixPath(path).is_relative_to(m["mountPath"]) and (
                best is None or len(m["mountPath"]) > len(best["mountPath"])):
            best = m
    return (best, volumes[best["name"]]) if best is not None and best["name"] in volumes else None


def _check_configmap(cm: dict) -> None:
    data, binary = cm.get("data") or {}, cm.get("binaryData") or {}
    keys = [*data, *binary]
    bad = [k for k in keys if not re.match(CONFIGMAP_KEY, k)]
    if bad:
        raise ValueError(f"ConfigMap keys {bad} are not [-._a-zA-Z0-9]+")
    if len(set(keys)) != len(keys):
        raise ValueError("a ConfigMap key is in both data and binaryData")
    size = sum(len(v.encode()) for v in data.values()) + sum(len(v) * 3 // 4 for v in binary.values())
    if size > CONFIGMAP_MAX_BYTES:
        raise ValueError(f"the ConfigMap holds {size} bytes; the API server takes at most 1 MiB")


def _check_volumes(volumes: list[dict]) -> None:
    for v in volumes:
        n = sum(v.get(k) is not None for k in VOLUME_SOURCES)
        if n != 1:
            raise ValueError(f"volume {v.get('name')!r} needs exactly one source, has {n}")
        for item in (v.get("configMap") or v.get("secret") or {}).get("items") or []:
            p = item.get("path", "")
            if not p or p.startswith("/") or ".." in PurePosixPath(p).parts:
                raise ValueError(f"items path {p!r} must be relative and contain no '..'")


def _check_ports(objs: list[dict]) -> None:
    for o in objs:
        ports = [("port", p) for p in (o.get("spec") or {}).get("ports") or []]
        if o["kind"] == "Job":
            for c in _at(o, "spec.template.spec.containers", list):
                ports += [("containerPort", p) for p in c.get("ports") or []]
        for field, p in ports:
            if not isinstance(p.get(field), int) or not 1 <= p[field] <= 65535:
                raise ValueError(f"{o['kind']} {field} {p.get(field)!r} is not a port (1-65535)")


def validate_manifest(text: str) -> list[dict]:
    """Every document of the manifest, checked (ValueError naming what does not fit)."""
    objs = [d for d in yaml.safe_load_all(text) if d]
    for d in objs:
        kind = d.get("kind") if isinstance(d, dict) else None
        if kind not in API_VERSIONS:
            raise ValueError(f"unexpected kind {kind!r}; this manifest uses {', '.join(API_VERSIONS)}")
        if d.get("apiVersion") != API_VERSIONS[kind]:
            raise ValueError(f"{kind}: apiVersion {d.get('apiVersion')!r}, expected {API_VERSIONS[kind]!r}")
        if not re.match(DNS_LABEL, str(_at(d, "metadata.name", str))):
            raise ValueError(f"{kind}: metadata.name {d['metadata']['name']!r} is not a DNS label")
    by_kind = {k: [o for o in objs if o["kind"] == k] for k in API_VERSIONS}
    jobs, services, maps, claims = (by_kind[k] for k in ("Job", "Service", "ConfigMap", "PersistentVolumeClaim"))
    if len(jobs) != 1 or len(services) != 1 or len(maps) != 1 or len(claims) > 1:
        raise ValueError(f"expected one Job, one Service, one ConfigMap and at most one PersistentVolumeClaim, got "
                         f"{len(jobs)}, {len(services)}, {len(maps)} and {len(claims)}")
    job, svc, cm = jobs[0], services[0], maps[0]
    _check_configmap(cm)
    _check_ports(objs)
    spec, pod = _at(job, "spec"), _at(job, "spec.template.spec")
    if pod.get("restartPolicy") not in ("Never", "OnFailure"):  # the only values a Job's pods may have
        raise ValueError(f"spec.template.spec.restartPolicy {pod.get('restartPolicy')!r}: a Job's pods take Never "
                         "or OnFailure")
    if spec.get("completionMode") == "Indexed" and spec.get("completions") is None:
        raise ValueError("an Indexed Job needs spec.completions")
    labels = (job["spec"]["template"].get("metadata") or {}).get("labels") or {}
    selector = _at(svc, "spec.selector")
    if svc["spec"].get("clusterIP") != "None":
        raise ValueError("the rendezvous Service must be headless (clusterIP: None)")
    if not selector or any(labels.get(k) != v for k, v in selector.items()):
        raise ValueError(f"the Service selector {selector} does not select the Job's pods ({labels})")
    if pod.get("subdomain") != svc["metadata"]["name"]:
        raise ValueError(f"the pods' subdomain {pod.get('subdomain')!r} is not the Service {svc['metadata']['name']!r}")
    agent = _at(job, "spec.template.spec.containers", list)[0]
    args = agent.get("args") or []
    rdzv = _arg(args, "--rdzv") or ""
    if rdzv.split(":")[0] != f"{job['metadata']['name']}-0.{svc['metadata']['name']}":
        raise ValueError(f"--rdzv {rdzv!r} does not name pod 0 of the Job through the Service")
    if _arg(args, "--node-rank") != "$(JOB_COMPLETION_INDEX)" or not any(
            e.get("name") == "JOB_COMPLETION_INDEX" for e in agent.get("env") or []):
        raise ValueError("--node-rank must be $(JOB_COMPLETION_INDEX), declared in the agent's env")
    if spec.get("completionMode") != "Indexed" or spec.get("completions") != spec.get("parallelism"):
        raise ValueError("the Job must be Indexed with completions == parallelism (all hosts at once)")
    placement = _arg(args, "--placement")
    if placement is None or Placement.decode(placement).nnodes != spec["completions"] or (
            _arg(args, "--nnodes") != str(spec["completions"])):
        raise ValueError(f"--placement {placement!r} and --nnodes must name one host per pod ({spec['completions']})")
    _check_volumes(pod.get("volumes") or [])
    volumes = {v["name"]: v for v in pod.get("volumes") or []}
    # The scenario: a file the ConfigMap's volume puts where the agent reads it.
    scenario = args[1] if len(args) > 1 and args[0] == "node" else ""
    found = _mount_of(agent, volumes, scenario)
    if found is None or not found[1].get("configMap") or found[1]["configMap"].get("name") != cm["metadata"]["name"]:
        raise ValueError(f"the scenario {scenario!r} is not on a volume of the ConfigMap {cm['metadata']['name']!r}")
    mount, vol = found
    items = vol["configMap"].get("items") or []
    keys = {*(cm.get("data") or {}), *(cm.get("binaryData") or {})}
    missing = [i["key"] for i in items if i["key"] not in keys]
    if missing:
        raise ValueError(f"the scenario volume names keys {missing} that the ConfigMap does not have")
    if PurePosixPath(scenario).relative_to(mount["mountPath"]).as_posix() not in {i["path"] for i in items}:
        raise ValueError(f"the scenario {scenario!r} is no item of the ConfigMap's volume")
    # The results: --out on the claim (the manifest's own, when it declares one, requesting storage).
    out = _arg(args, "--out") or ""
    found = _mount_of(agent, volumes, out) if out.startswith("/") else None
    if found is None or not found[1].get("persistentVolumeClaim"):
        raise ValueError(f"--out {out!r} is not on a PersistentVolumeClaim volume: the run folder would be lost")
    claim = found[1]["persistentVolumeClaim"].get("claimName")
    if claims and claims[0]["metadata"]["name"] != claim:
        raise ValueError(f"the results volume mounts claim {claim!r}, the manifest declares "
                         f"{claims[0]['metadata']['name']!r}")
    if claims and "storage" not in ((claims[0].get("spec") or {}).get("resources") or {}).get("requests", {}):
        raise ValueError("a PersistentVolumeClaim needs resources.requests.storage")
    # The agents' store secret: a file of the manifest's Secret, readable by its owner alone; never in args.
    held = by_kind["Secret"]
    secret_file = _arg(args, "--secret-file") or ""
    found = _mount_of(agent, volumes, secret_file) if secret_file.startswith("/") else None
    source = (found[1].get("secret") or {}) if found is not None else {}
    if len(held) != 1 or not source or source.get("secretName") != held[0]["metadata"]["name"]:
        raise ValueError(f"--secret-file {secret_file!r} is not on a volume of the manifest's one Secret")
    if (source.get("defaultMode") or 0o644) & 0o077:
        raise ValueError("the Secret's volume must be readable by its owner alone (defaultMode 0400)")
    return objs
