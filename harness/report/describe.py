"""The scenario, summary and environment of a run as text and tables (shared by Markdown and HTML)."""

from __future__ import annotations

import json
import math

from harness.report import analysis
from harness.report.document import Bullets, Para, Table
from harness.report.load import LoadedRun


def fmt(v, spec: str = ".3g", none: str = "n/a") -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return none
    return format(v, spec) if isinstance(v, (int, float)) and not isinstance(v, bool) else str(v)


def fmt_reduction(red, basis=None) -> str:
    if red is None:
        return "n/a"
    text = f"{red:,.0f}x" if red >= 100 else f"{red:.3g}x"
    return text + (f" ({basis})" if basis else "")


def _link_words(spec: dict | None) -> str:
    if not spec:
        return "unshaped"
    try:
        from harness.scenario import LinkSpec

        return LinkSpec(**spec).describe()
    except Exception:  # an older or hand-edited folder: show what is stored
        return ", ".join(f"{k} {v}" for k, v in spec.items() if k != "preset")


def _hardware_words(name: str, spec: dict | None) -> str:
    spec = spec or {}
    parts = [f"device {spec.get('device', 'auto')}"]
    if spec.get("compute_scale") is not None:
        parts.append(f"{float(spec['compute_scale']):.2f}x this host's speed")
    if spec.get("tflops") is not None:
        parts.append(f"{spec['tflops']} TFLOPS")
    if spec.get("memory") is not None:
        parts.append(f"memory {spec['memory']}")
    return f"{name} ({', '.join(parts)})"


def _param_count(model: dict) -> int | None:
    try:
        from harness.model import ModelConfig, parameter_shapes

        keys = ("dim", "n_layers", "n_heads", "ffn_dim", "vocab_size", "max_seq_len")
        return sum(math.prod(s) for s in parameter_shapes(ModelConfig(**{k: model[k] for k in keys if k in model})).values())
    except Exception:
        return None


def scenario_blocks(run: LoadedRun) -> list:
    s = run.data.scenario
    links, hardware = s.get("links") or {}, s.get("hardware") or {}
    workers = s.get("workers") or []
    total = sum(int(g.get("count", 1)) for g in workers if isinstance(g, dict))
    lines = []
    for g in workers:
        if not isinstance(g, dict):
            continue
        count = int(g.get("count", 1))
        who = g.get("name") or (f"{count} worker" + ("s" if count > 1 else ""))
        hw = g.get("hardware", "host")
        hw_words = _hardware_words(hw, hardware.get(hw)) if isinstance(hw, str) else _hardware_words("custom", hw)
        link = g.get("link")
        if link is None:
            link_words = "no link shaping"
        elif isinstance(link, str):
            link_words = f"link {link}: {_link_words(links.get(link))}"
        else:
            link_words = f"link: {_link_words(link)}"
        lines.append(f"{who} on {hw_words}, {link_words}")
    model = s.get("model") or {}
    params = _param_count(model)
    data, train = s.get("data") or {}, s.get("train") or {}
    opts = s.get("optimizers") or {}
    opt_words = []
    for name, cfg in opts.items():
        cfg = cfg or {}
        keys = [k for k in cfg if k != "type"]  # every method's own options (DiLoCo's inner_steps, PowerSGD's rank)
        tag = " (baseline)" if name == run.baseline else ""
        opt_words.append(f"{name}{tag}: type {cfg.get('type', name)}, " + ", ".join(f"{k} {cfg[k]}" for k in keys))
    intro = (f"{s.get('name', run.data.name)}: {s.get('description', '')}".rstrip(": ")
             + f" {total} workers in a star: each node's access link (up = node to switch, down = switch to node) "
               "meets a core switch.")
    model_words = (f"Model: {model.get('preset') or 'custom'}, dim {model.get('dim')}, {model.get('n_layers')} layers, "
                   f"{model.get('n_heads')} heads, FFN {model.get('ffn_dim')}, vocabulary {model.get('vocab_size')}"
                   + (f" ({params / 1e6:.2f}M parameters)." if params else "."))
    data_words = (f"Data: {data.get('corpus')}, sequence length {data.get('seq_len')}, batch {data.get('batch_size')} "
                  f"sequences per worker; {train.get('steps')} steps, evaluation every {train.get('eval_every')} steps, "
                  f"seed {train.get('seed')}.")
    return [Para(intro), Bullets(lines), Para(model_words), Para(data_words),
            Para("Optimizers:"), Bullets(opt_words)]


def summary_table(run: LoadedRun) -> Table:
    headers = ["optimizer", "steps", "step time s (mean)", "step time s (p50)", "compute s", "comm s", "wait s",
               "payload MB/step", "wire MB/step", "reduction vs baseline", "final loss", "final val loss",
               "replicas", "tokens/s"]
    rows = []
    for name, s in run.data.summary.get("optimizers", {}).items():
        payload, wire = analysis.total_bytes(s, "payload"), analysis.total_bytes(s, "wire")
        replicas = {True: "identical", False: "DIFFER", None: "n/a"}.get(s.get("replicas_identical"), "n/a")
        if s.get("replicas_identical") is False and s.get("replicas_diverged_at_step") is not None:
            replicas += f" (from step {s['replicas_diverged_at_step']})"
        rows.append([name + (" (baseline)" if name == run.baseline else ""), fmt(s.get("steps"), "d"),
                     fmt(s.get("step_time_s_mean")), fmt(s.get("step_time_s_p50")), fmt(s.get("compute_s_mean")),
                     fmt(s.get("comm_s_mean")), fmt(s.get("wait_s_mean")),
                     fmt(payload / 1e6 if payload is not None else None, ".4g"),
                     fmt(wire / 1e6 if wire is not None else None, ".4g", none="not measured"),
                     fmt_reduction(s.get("reduction_vs_baseline"), s.get("reduction_basis")),
                     fmt(s.get("final_loss"), ".4f"), fmt(s.get("final_val_loss"), ".4f"), replicas,
                     fmt(s.get("tokens_per_s"), ",.0f")])
    return Table(headers, rows)


def emulation_blocks(run: LoadedRun) -> list:
    net = run.data.environment.get("network")
    if not isinstance(net, dict):
        return [Para("The run folder does not record what the backend emulated (no `network` in environment.json).")]
    emulated = net.get("network_emulated")
    blocks = [Para(f"Backend: {net.get('backend', 'unknown')}. Network emulated: "
                   + {True: "yes.", False: "no.", None: "unknown."}.get(emulated, str(emulated)))]
    missing = [str(x) for x in net.get("not_emulated") or []]
    blocks.append(Para("Not emulated:" if missing else "Everything the scenario asked for was emulated."))
    if missing:
        blocks.append(Bullets(missing))
    nodes = [n for n in net.get("nodes") or [] if isinstance(n, dict)]
    if nodes:
        rows = [[fmt(n.get("rank")), str(n.get("name", "")), str(n.get("address", "")), _applied(n.get("applied"))]
                for n in nodes]
        blocks.append(Table(["rank", "node", "address", "shaping applied (read back)"], rows,
                            numeric=[True, False, False, False]))
    return blocks


def _applied(applied) -> str:
    if applied is None:
        return "none"
    text = applied if isinstance(applied, str) else json.dumps(applied, separators=(",", ":"), default=str)
    return text if len(text) <= 300 else text[:297] + "..."


ENV_KEYS = ["harness_version", "git_commit", "git_dirty", "python", "torch", "cuda", "gpus", "host", "kernel",
            "platform", "cpu_count", "backend", "backend_reason"]


def environment_table(run: LoadedRun) -> Table:
    env = run.data.environment
    keys = [k for k in ENV_KEYS if k in env] + [k for k in env if k not in ENV_KEYS and k != "network"]
    rows = [[k, _applied(env[k]) if isinstance(env[k], (dict, list)) else fmt(env[k], "")] for k in keys]
    run_info = run.data.summary.get("run", {})
    for k in ("started", "finished"):
        if run_info.get(k):
            rows.append([k, str(run_info[k])])
    return Table(["key", "value"], rows or [["(none recorded)", ""]], numeric=[False, False])
