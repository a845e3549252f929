"""The Slurm and Kubernetes recipes of `distro-bench export`, read back as a cluster would read them: the
sbatch script run under a fake srun/scontrol whose `distro-bench` only records its arguments (the node
command as each host would run it), and the manifest parsed with yaml.safe_load_all, its ConfigMap
unpacked into a folder the way the kubelet mounts it, and checked against models of the kinds used."""

from __future__ import annotations

import copy
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path, PurePosixPath

import pytest
import yaml

from distro_bench.errors import InputError
from distro_bench.export.recipes import RecipeSettings, k8s_manifest, sbatch_script, shipped_files, validate_manifest
from distro_bench.scenario.loading import load_scenario
from distro_bench.scenario.placement import from_scenario
from tests.fake_slurm import SRUN_IN_TURN, install, install_slurm
from tests.helpers import REPO

CI_SMOKE = REPO / "scenarios" / "ci-smoke.yaml"
TRACED = REPO / "scenarios" / "trace-dsl-diurnal.yaml"  # names two trace files under traces/

RECORDING_NODE = f"""#!{sys.executable}
# Stands in for `distro-bench`: appends its arguments and the task's node rank to $NODE_LOG.
import json, os, sys
secret = sys.argv[sys.argv.index("--secret-file") + 1] if "--secret-file" in sys.argv else None
st = os.stat(secret) if secret else None
with open(os.environ["NODE_LOG"], "a") as f:
    f.write(json.dumps({{"argv": sys.argv[1:], "nodeid": os.environ.get("SLURM_NODEID"),
                         "secret": [open(secret).read(), st.st_mode & 0o777] if secret else None}}) + "\\n")
"""


def run_sbatch(script: Path, tmp_path: Path, nnodes: int) -> tuple[subprocess.CompletedProcess, list[dict]]:
    """The script as sbatch runs it: from the folder it was submitted in (its own), under fake Slurm tools."""
    bin_dir = tmp_path / "fakebin"
    bin_dir.mkdir(exist_ok=True)
    install_slurm(bin_dir, SRUN_IN_TURN)
    node = install(bin_dir, "recording-node", RECORDING_NODE)
    log = tmp_path / "node-calls.jsonl"
    log.unlink(missing_ok=True)
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "SLURM_JOB_NODELIST": "node-[a-d]",
           "FAKE_SLURM_HOSTS": "node-a node-b node-c node-d", "SLURM_JOB_NUM_NODES": str(nnodes),
           "DISTRO_BENCH": str(node), "NODE_LOG": str(log)}
    proc = subprocess.run(["bash", script.name], env=env, cwd=script.parent, capture_output=True, text=True,
                          timeout=60)
    calls = [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
    return proc, calls


def _flag(argv: list[str], name: str) -> str:
    return argv[argv.index(name) + 1]


# ---- Slurm ------------------------------------------------------------------------------------------

def test_sbatch_script_starts_one_agent_per_node_with_the_first_host_as_rendezvous():
    text = sbatch_script(load_scenario(CI_SMOKE), "scenarios/ci-smoke.yaml", RecipeSettings(nnodes=2, iface="ib0"))
    assert text.startswith("#!/bin/bash\n") and "#SBATCH --nodes=2" in text and "#SBATCH --ntasks-per-node=1" in text
    assert 'HEAD=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | sed -n 1p)' in text
    assert '--rdzv "$HEAD:$PORT" --node-rank "$SLURM_NODEID"' in text and "IFACE=${DISTRO_BENCH_IFACE:-ib0}" in text


@pytest.mark.parametrize("placement, nnodes", [(None, 2), ("0,3;1,2", 2), ("0;1,2;3", 3)])
def test_sbatch_node_command_has_the_exports_placement_and_a_scenario_found_from_the_job_folder(
        cli, tmp_path, placement, nnodes):
    """The scenario lies outside the script's folder: copied next to it with its traces, named relative."""
    jobs = tmp_path / "jobs"
    jobs.mkdir()
    script = jobs / "run.sbatch"
    r = cli("export", "slurm", TRACED, "--dest", script, *(["--placement", placement] if placement else
                                                          ["--nnodes", str(nnodes)]))
    assert r.exit_code == 0, r.output
    proc, calls = run_sbatch(script, tmp_path, nnodes)
    assert proc.returncode == 0, proc.stderr
    assert sorted(c["nodeid"] for c in calls) == [str(i) for i in range(nnodes)]
    expected = from_scenario(load_scenario(TRACED), nnodes, placement).encode()
    for c in calls:
        argv = c["argv"]
        assert argv[0] == "node" and _flag(argv, "--placement") == expected
        assert _flag(argv, "--node-rank") == c["nodeid"] and _flag(argv, "--nnodes") == str(nnodes)
        assert _flag(argv, "--rdzv") == "node-a:29400"
        # `distro-bench node` resolves the placement from what it was given exactly as the export did.
        given = load_scenario(jobs / argv[1])
        assert from_scenario(given, int(_flag(argv, "--nnodes")), _flag(argv, "--placement")).encode() == expected
        assert not Path(argv[1]).is_absolute() and argv[1].startswith("run-scenario/")
    # One secret for all hosts, in a file only the job's user reads, named (not spelled) on the command line, and
    # gone once the job ends.
    secrets_seen = {(c["secret"][0], c["secret"][1]) for c in calls}
    assert len(secrets_seen) == 1 and len(next(iter(secrets_seen))[0]) == 64, secrets_seen
    assert next(iter(secrets_seen))[1] == 0o600
    assert all(next(iter(secrets_seen))[0] not in " ".join(c["argv"]) for c in calls)
    assert not list(jobs.glob(".distro-bench-*.secret"))
    copied = jobs / "run-scenario"
    for name in ("trace-dsl-diurnal.yaml", "traces/dsl-diurnal.csv", "traces/flaky-cable.csv"):
        assert (copied / name).read_bytes() == (TRACED.parent / name).read_bytes()


def test_sbatch_names_a_scenario_inside_its_folder_relative_to_it_without_copying(cli, tmp_path):
    (tmp_path / "scen").mkdir()
    scen = tmp_path / "scen" / "s.yaml"
    scen.write_text(CI_SMOKE.read_text())
    r = cli("export", "slurm", scen, "--nnodes", "2", "--dest", tmp_path)
    assert r.exit_code == 0, r.output
    proc, calls = run_sbatch(tmp_path / "ci-smoke.sbatch", tmp_path, 2)
    assert proc.returncode == 0, proc.stderr
    assert {c["argv"][1] for c in calls} == {"scen/s.yaml"}
    assert not (tmp_path / "ci-smoke-scenario").exists()


def test_sbatch_refuses_an_allocation_the_placement_does_not_fit_and_a_missing_scenario(cli, tmp_path):
    r = cli("export", "slurm", CI_SMOKE, "--nnodes", "2", "--dest", tmp_path / "a.sbatch")
    assert r.exit_code == 0, r.output
    proc, calls = run_sbatch(tmp_path / "a.sbatch", tmp_path, 4)
    assert proc.returncode == 2 and "placement 0,1;2,3 needs 2" in proc.stderr and not calls
    (tmp_path / "a-scenario" / "ci-smoke.yaml").unlink()
    proc, calls = run_sbatch(tmp_path / "a.sbatch", tmp_path, 2)
    assert proc.returncode == 2 and "not found" in proc.stderr and not calls


# ---- Kubernetes -------------------------------------------------------------------------------------

def manifest_docs(text: str) -> dict[str, dict]:
    return {d["kind"]: d for d in yaml.safe_load_all(text) if d}


def unpack_configmap(docs: dict[str, dict], root: Path) -> Path:
    """The scenario volume as the kubelet fills it: each item's key written at its path."""
    pod = docs["Job"]["spec"]["template"]["spec"]
    (vol,) = [v for v in pod["volumes"] if "configMap" in v]
    cm = docs["ConfigMap"]
    assert vol["configMap"]["name"] == cm["metadata"]["name"]
    for item in vol["configMap"]["items"]:
        dest = root / item["path"]
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_text(cm["data"][item["key"]])
    (mount,) = [m for m in pod["containers"][0]["volumeMounts"] if m["name"] == vol["name"]]
    return root / PurePosixPath(pod["containers"][0]["args"][1]).relative_to(mount["mountPath"])


def test_k8s_manifest_ships_the_scenario_and_its_traces_in_a_configmap(tmp_path):
    text = k8s_manifest(load_scenario(TRACED), str(TRACED), RecipeSettings(nnodes=2, i_know=True))
    docs = manifest_docs(text)
    assert set(docs) == {"Service", "Job", "ConfigMap", "PersistentVolumeClaim", "Secret"}
    data = docs["ConfigMap"]["data"]
    assert data["trace-dsl-diurnal.yaml"] == TRACED.read_text()  # the file as written, comments and all
    assert sorted(data.values()) == sorted((TRACED.parent / p).read_text() for p in
                                           ("trace-dsl-diurnal.yaml", "traces/dsl-diurnal.csv", "traces/flaky-cable.csv"))
    path = unpack_configmap(docs, tmp_path / "mnt")
    assert path == tmp_path / "mnt" / "trace-dsl-diurnal.yaml"
    loaded = load_scenario(path)  # validation reads and parses every trace the scenario names
    assert loaded.resolved_dict()["links"]["dsl-day"]["down_trace"] == str(tmp_path / "mnt" / "traces" / "dsl-diurnal.csv")


@pytest.mark.parametrize("placement, nnodes", [(None, 4), ("0,1;2,3", 2), ("3;0,1,2", 2)])
def test_k8s_agents_get_the_exports_placement_and_write_to_the_claim(cli, tmp_path, placement, nnodes):
    dest = tmp_path / "job.yaml"
    r = cli("export", "k8s", CI_SMOKE, "--dest", dest, *(["--placement", placement] if placement else []))
    assert r.exit_code == 0, r.output
    docs = manifest_docs(dest.read_text())
    job, claim = docs["Job"], docs["PersistentVolumeClaim"]
    pod = job["spec"]["template"]["spec"]
    args = pod["containers"][0]["args"]
    assert _flag(args, "--placement") == from_scenario(load_scenario(CI_SMOKE), None, placement).encode()
    assert job["spec"]["completions"] == job["spec"]["parallelism"] == nnodes == int(_flag(args, "--nnodes"))
    assert pod["containers"][0]["image"].startswith("distro-bench-node:")
    (results,) = [v for v in pod["volumes"] if v["name"] == "results"]
    assert results["persistentVolumeClaim"]["claimName"] == claim["metadata"]["name"]
    assert claim["spec"]["accessModes"] == ["ReadWriteMany"] and claim["spec"]["resources"]["requests"]["storage"]
    (mount,) = [m for m in pod["containers"][0]["volumeMounts"] if m["name"] == "results"]
    assert _flag(args, "--out") == mount["mountPath"] == "/results"


def test_k8s_results_claim_is_configurable(cli, tmp_path):
    r = cli("export", "k8s", CI_SMOKE, "--dest", tmp_path / "j.yaml", "--results-claim", "team-nfs")
    assert r.exit_code == 0, r.output
    docs = manifest_docs((tmp_path / "j.yaml").read_text())
    assert "PersistentVolumeClaim" not in docs  # an existing claim: the manifest neither declares nor deletes it
    (results,) = [v for v in docs["Job"]["spec"]["template"]["spec"]["volumes"] if v["name"] == "results"]
    assert results["persistentVolumeClaim"] == {"claimName": "team-nfs"}
    r = cli("export", "k8s", CI_SMOKE, "--dest", tmp_path / "j.yaml", "--results-claim", "Not_A_Name")
    assert r.exit_code == 2 and "--results-claim" in r.output


def test_k8s_agent_shapes_with_net_admin_and_its_workers_start_without_it(tmp_path, monkeypatch):
    text = k8s_manifest(load_scenario(CI_SMOKE), str(CI_SMOKE), RecipeSettings(nnodes=2, i_know=True))
    job = next(o for o in validate_manifest(text) if o["kind"] == "Job")
    agent = job["spec"]["template"]["spec"]["containers"][0]
    assert "NET_ADMIN" in agent["securityContext"]["capabilities"]["add"]
    assert not agent["securityContext"].get("privileged")
    assert "SETPCAP" in agent["securityContext"]["capabilities"]["add"]  # what dropping NET_ADMIN for the workers takes
    assert job["spec"]["template"]["spec"]["initContainers"][0]["securityContext"]["privileged"] is True
    # The agent (root in the pod) starts torchrun through enter.py with no capability at all (net_admin gone from
    # every set, the bounding one too), as the local and netns backends start their workers.
    from distro_bench.multihost.agent import Agent, NodeOptions
    from distro_bench.run.overrides import RunSettings

    a = Agent(NodeOptions(scenario=CI_SMOKE, rdzv="127.0.0.1:29400", node_rank=0, nnodes=2, shaping=False,
                          settings=RunSettings(out=tmp_path / "out")))
    a.prepare()
    a.run_dir = tmp_path / "run"
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    # As the agent has them before it builds the argv: its worker folder, and the run's scenario the workers read.
    (tmp_path / "out").mkdir()
    (tmp_path / "run").mkdir()
    shutil.copy(CI_SMOKE, tmp_path / "run" / "scenario.yaml")
    argv = a._torchrun_argv("adamw", 0, tmp_path / "out")
    assert argv[2].endswith("net/enter.py") and "--no-caps" in argv
    assert argv.index("--no-caps") < argv.index("--") < argv.index("distro_bench.multihost.torchrun")


def test_k8s_model_accepts_the_manifest():
    text = k8s_manifest(load_scenario(CI_SMOKE), str(CI_SMOKE), RecipeSettings(nnodes=4, i_know=True))
    kinds = sorted(o["kind"] for o in validate_manifest(text))
    assert kinds == ["ConfigMap", "Job", "PersistentVolumeClaim", "Secret", "Service"]


def _pod(docs):
    return docs[1]["spec"]["template"]["spec"]


@pytest.mark.parametrize("break_it, match", [
    (lambda docs: _pod(docs).update(restartPolicy="Always"), "restartPolicy"),
    (lambda docs: docs[1]["spec"].pop("completions"), "Indexed Job needs spec.completions"),
    (lambda docs: docs[0]["spec"].update(clusterIP="10.0.0.1"), "headless"),
    (lambda docs: docs[0]["spec"]["selector"].update({"distro-bench/job": "other"}), "does not select"),
    (lambda docs: _pod(docs).update(subdomain="other"), "subdomain"),
    (lambda docs: docs[1].update(apiVersion="batch/v2"), "apiVersion"),
    (lambda docs: _pod(docs)["containers"][0]["ports"][0].update(containerPort=70000), "containerPort"),
    (lambda docs: docs[2]["data"].clear(), "does not have"),
    (lambda docs: docs[2]["data"].update({"bad/key": "x"}), "not \\[-._a-zA-Z0-9\\]"),
    (lambda docs: _pod(docs)["volumes"][0].update(configMap=None, hostPath={"path": "/srv"}), "not on a volume"),
    (lambda docs: _pod(docs)["volumes"][0]["configMap"]["items"][0].update(path="../x.yaml"), "no '..'"),
    (lambda docs: _pod(docs)["volumes"][1].update(persistentVolumeClaim=None, emptyDir={}), "run folder would be lost"),
    (lambda docs: _pod(docs)["volumes"][1]["persistentVolumeClaim"].update(claimName="other"), "declares"),
    (lambda docs: docs[3]["spec"].update(resources={"requests": {}}), "requests.storage"),
    (lambda docs: docs.pop(2), "one ConfigMap"),
    (lambda docs: docs.pop(4), "one Secret"),
    (lambda docs: _pod(docs)["volumes"][3]["secret"].update(defaultMode=0o644), "owner alone"),
    (lambda docs: _pod(docs)["containers"][0]["args"].__setitem__(
        _pod(docs)["containers"][0]["args"].index("--placement") + 1, "0,1,2,3"), "one host per pod"),
])
def test_k8s_model_rejects_broken_manifests(break_it, match):
    text = k8s_manifest(load_scenario(CI_SMOKE), str(CI_SMOKE), RecipeSettings(nnodes=2, i_know=True))
    docs = copy.deepcopy([d for d in yaml.safe_load_all(text) if d])
    assert [d["kind"] for d in docs] == ["Service", "Job", "ConfigMap", "PersistentVolumeClaim", "Secret"]
    break_it(docs)
    with pytest.raises(ValueError, match=match):
        validate_manifest(yaml.safe_dump_all(docs))


def test_files_the_recipes_cannot_ship_are_refused(tmp_path, monkeypatch):
    monkeypatch.setenv("DISTRO_BENCH_ALLOW_TRACE_OUTSIDE", "1")
    (tmp_path / "s").mkdir()
    (tmp_path / "far.csv").write_text((TRACED.parent / "traces" / "flaky-cable.csv").read_text())
    d = yaml.safe_load(TRACED.read_text())
    d["links"]["dsl-day"].update(up_trace="../far.csv", down="20Mbit")
    del d["links"]["dsl-day"]["down_trace"]
    (tmp_path / "s" / "x.yaml").write_text(yaml.safe_dump(d))
    far = load_scenario(tmp_path / "s" / "x.yaml")
    with pytest.raises(InputError, match=r"links\.dsl-day\.up_trace: '\.\./far\.csv' lies outside"):
        shipped_files(far, tmp_path / "s" / "x.yaml")
    # Each file within its own cap (a scenario file at most 1 MiB, a trace 16 MiB), together over the ConfigMap's.
    (tmp_path / "s" / "big.csv").write_text("t_s,rate_bit_s\n" + "".join(f"{i * 0.5:g},50000000\n"
                                                                          for i in range(120_000)))
    d["links"]["dsl-day"].update(up_trace="big.csv")
    big = tmp_path / "s" / "big.yaml"
    big.write_text(yaml.safe_dump(d))
    with pytest.raises(InputError, match="a ConfigMap holds at most 1 MiB"):
        k8s_manifest(load_scenario(big), str(big), RecipeSettings(nnodes=2))


def test_export_cli_writes_recipes_and_keeps_tracker_export(cli, tmp_path):
    r = cli("export", "slurm", CI_SMOKE, "--nnodes", "2", "--dest", tmp_path)
    assert r.exit_code == 0, r.output
    assert (tmp_path / "ci-smoke.sbatch").read_text().count("#SBATCH --nodes=2") == 1
    r = cli("export", "k8s", CI_SMOKE, "--dest", tmp_path / "m.yaml")
    assert r.exit_code == 0, r.output
    assert len(validate_manifest((tmp_path / "m.yaml").read_text())) == 5
    assert (tmp_path / "m.yaml").stat().st_mode & 0o077 == 0  # it holds the run's Secret
    r = cli("export", tmp_path)  # a run folder without --to: a clear error, exit 2
    assert r.exit_code == 2 and "--to mlflow|tensorboard|wandb is required" in r.output
    r = cli("export", "slurm", CI_SMOKE, "--nnodes", "3")
    assert r.exit_code == 2 and "--nnodes: 3 hosts cannot share" in r.output
    r = cli("export", "k8s", CI_SMOKE, "--placement", "0,1;2")
    assert r.exit_code == 2 and "--placement: ranks [3] are placed on no host" in r.output
