"""The scenario, summary and environment of a run as text and tables (shared by Markdown and HTML)."""

from __future__ import annotations

import json
import math

from distro_bench.report import analysis
from distro_bench.report.document import Block, Bullets, Para, Table
from distro_bench.report.load import LoadedRun
from distro_bench.results import runfiles
from distro_bench.scenario.impairments import IMPAIRMENTS, ImpairmentRow
from distro_bench.scenario.model import LinkSpec
from distro_bench.scenario.units import format_rate


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


def _model_words(model: dict, facts: dict) -> str:
    """The model as its run folder stores it (the resolved scenario's `model`, the summary's `model`): no code of
    the model's is needed to describe it."""
    params = facts.get("parameters")
    size = f" ({params / 1e6:.2f}M parameters" if isinstance(params, (int, float)) and params else ""
    if size and facts.get("flops_per_token"):
        size += f"; {float(facts['flops_per_token']):.3g} training FLOPs per token, {facts.get('flops_basis')}"
    size = size + ")." if size else "."
    if "factory" in model:
        return f"Model: factory {model.get('factory')}, args {model.get('args') or {}}, vocabulary {model.get('vocab_size')}" + size
    if isinstance(model.get("hf_config"), dict):
        cfg = model["hf_config"]
        return f"Model: transformers {cfg.get('model_type')} from its config, vocabulary {cfg.get('vocab_size')}" + size
    return (f"Model: {model.get('preset') or 'custom'}, dim {model.get('dim')}, {model.get('n_layers')} layers, "
            f"{model.get('n_heads')} heads, FFN {model.get('ffn_dim')}, vocabulary {model.get('vocab_size')}" + size)


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
    model_words = _model_words(model if isinstance(model, dict) else {}, run.summary.model or {})
    loss = run.summary.loss or {}
    unit = f" Losses in {loss['unit']}." if isinstance(loss.get("unit"), str) else ""
    source = data.get("tokens") or data.get("corpus")
    if data.get("tokenizer"):
        source = f"{source} through tokenizer {data.get('tokenizer')}"
    data_words = (f"Data: {source}, sequence length {data.get('seq_len')}, batch {data.get('batch_size')} "
                  f"sequences per worker; {_budget_words(train)}, evaluation every {train.get('eval_every')} steps, "
                  f"{_seed_words(train)}.{unit}")
    return [Para(intro), Bullets(lines), Para(model_words), Para(data_words),
            Para("Optimizers:"), Bullets(opt_words)]


def _budget_words(train: dict) -> str:
    """The budget the scenario set (a time or token budget has no `steps`: never 'None steps')."""
    if train.get("target_val_loss") is not None:
        cap = (f"at most {train['time_budget']}" if train.get("time_budget") is not None
               else f"at most {train.get('steps')} steps")
        return f"until val loss {train['target_val_loss']} ({cap})"
    if train.get("time_budget") is not None:
        return f"{train['time_budget']} of training per optimizer"
    if train.get("tokens") is not None:
        return f"{train['tokens']} tokens per optimizer"
    return f"{train.get('steps')} steps"


def _seed_words(train: dict) -> str:
    seeds = train.get("seeds")
    if seeds and len(seeds) > 1:
        return f"{len(seeds)} seeds ({', '.join(map(str, seeds))}), paired across optimizers"
    return f"seed {seeds[0] if seeds else train.get('seed', 0)}"


def summary_table(run: LoadedRun) -> Table:
    headers = ["optimizer", "steps", "step time s (mean)", "step time s (p50)", "compute s", "comm s", "wait s",
               "payload MB/step", "wire MB/step", "reduction vs baseline", "final loss", "final val loss",
               "replicas", "tokens/s"]
    rows = []
    for name, s in run.summary.optimizers.items():
        payload, wire = analysis.total_bytes(s, "payload"), analysis.total_bytes(s, "wire")
        replicas = {True: "identical", False: "DIFFER", None: "n/a"}[s.replicas_identical]
        if s.replicas_identical is False and s.replicas_diverged_at_step is not None:
            replicas += f" (from step {s.replicas_diverged_at_step})"
        rows.append([name + (" (baseline)" if name == run.baseline else ""),
                     fmt(s.steps, "d" if isinstance(s.steps, int) else ".1f"),
                     fmt(s.step_time_s_mean), fmt(s.step_time_s_p50), fmt(s.compute_s_mean),
                     fmt(s.comm_s_mean), fmt(s.wait_s_mean),
                     fmt(payload / 1e6 if payload is not None else None, ".4g"),
                     fmt(wire / 1e6 if wire is not None else None, ".4g", none="not measured"),
                     fmt_reduction(s.reduction_vs_baseline, s.reduction_basis),
                     fmt(s.final_loss, ".4f"), fmt(s.final_val_loss, ".4f"), replicas,
                     fmt(s.tokens_per_s, ",.0f")])
    return Table(headers, rows)


_DIRS = ("up", "down")
_BY_ATTR = {row.attr: row for row in IMPAIRMENTS}


def _configured(spec: dict | None) -> dict[str, dict]:
    """Per direction: rate_bps and every impairment of the table (by its Impairment field, delay_s, ...) from the
    scenario's link spec (as stored)."""
    if not spec:
        return {d: {} for d in _DIRS}
    try:
        link = LinkSpec(**spec)
        common = {row.attr: getattr(link, row.key) for row in IMPAIRMENTS}
        return {"up": {"rate_bps": link.up, **common}, "down": {"rate_bps": link.down, **common}}
    except Exception:  # an older or hand-edited folder: the text as stored, under each figure
        return {d: {"rate_bps": spec.get(d), **{row.attr: spec.get(row.key) for row in IMPAIRMENTS}} for d in _DIRS}


def _applied_direction(applied: dict | None, direction: str) -> tuple[dict, str]:
    """What the backend applied and verified for one direction, and the engine(s) doing it."""
    if not isinstance(applied, dict):
        return {}, "none"
    out, engines = {}, []
    keys = [row.attr for row in IMPAIRMENTS]
    tc = applied.get(direction)
    plan = tc.get("plan") if isinstance(tc, dict) else None
    if isinstance(plan, dict):
        if plan.get("rate_bps"):
            out["rate_bps"] = plan["rate_bps"]
            engines.append("tc tbf")
        if any(plan.get(k) for k in keys):
            out.update({k: plan.get(k) for k in keys})
            engines.append("tc netem")
    line = (applied.get("delay_line") or {}).get(direction) if isinstance(applied.get("delay_line"), dict) else None
    if isinstance(line, dict):
        out.update({k: line.get(k) for k in keys})
        engines.append("userspace delay line")
    return out, " + ".join(engines) or "none"


def _measured_direction(node: dict, direction: str) -> dict:
    m = node.get("measured")
    m = m.get(direction) if isinstance(m, dict) else None
    return m if isinstance(m, dict) else {}


def _value(key: str, v) -> str:
    if v is None:
        return "-"
    if isinstance(v, str):
        return v
    try:
        if key == "rate_bps":
            return format_rate(int(v)) if v else "unlimited"
        row = _BY_ATTR.get(key)
        if row is not None:
            return row.format(float(v)) if v else ("0" if row.unit == "duration" else "0%")
    except Exception:
        pass
    return fmt(v)


def _sig3(v):
    """A measured figure to 3 significant digits (5022902.9 -> 5020000.0): the probe is not finer than that."""
    return float(f"{v:.3g}") if isinstance(v, float) else v


def _cell(conf: dict, appl: dict, meas: dict, key: str, *, applied_known: bool, measured_known: bool) -> str:
    """'configured / applied / measured' for one figure, each '-' where absent."""
    asked = conf.get(key) if conf else None
    nothing = not asked or _nothing(asked)  # 0, 0ms, 0%: nothing to apply
    parts = [_value(key, asked) if conf else "-",
             (_value(key, appl.get(key)) if key in appl else "-" if nothing else "not applied") if applied_known
             else "-" if nothing else "not applied",
             _value(key, _sig3(meas.get(key))) if measured_known and key in meas else "not measured"]
    return " / ".join(parts)


def link_columns(run: LoadedRun) -> list[ImpairmentRow]:
    """The impairments the link table shows: those always shown (delay, jitter, loss), and any other that a link
    configures or a node applied (duplicate, ...)."""
    links = _links(run)
    used: set[str] = set()
    for spec in links.values():
        conf = _configured(spec if isinstance(spec, dict) else None)
        used |= {k for d in _DIRS for k, v in conf[d].items() if v and not _nothing(v)}
    for n in run.network_nodes:
        used |= {k for d in _DIRS for k, v in _applied_direction(n.get("applied"), d)[0].items() if v}
    return [row for row in IMPAIRMENTS if row.always_shown or row.attr in used]


def _links(run: LoadedRun) -> dict:
    links = run.data.scenario.get("links")
    return links if isinstance(links, dict) else {}


def _nothing(v) -> bool:
    return isinstance(v, str) and v.strip("0.%msu ") == ""


def link_rows(run: LoadedRun) -> list[list[str]]:
    """One row per group of nodes with the same link and the same applied and measured state, per direction:
    nodes, link, direction, rate, each of `link_columns`, engine."""
    columns = ["rate_bps", *(row.attr for row in link_columns(run))]
    links = _links(run)
    nodes = run.network_nodes
    groups: dict[tuple, list[str]] = {}
    payload: dict[tuple, list[str]] = {}
    for n in nodes:
        link = n.get("link") or _node_link(run, n.get("rank"))
        conf_all = _configured(links.get(link)) if isinstance(link, str) else _configured(None)
        for d in _DIRS:
            conf = conf_all[d]
            appl, engine = _applied_direction(n.get("applied"), d)
            meas = _measured_direction(n, d)
            applied_known = isinstance(n.get("applied"), dict)
            cells = [_cell(conf, appl, meas, k, applied_known=applied_known, measured_known=bool(meas))
                     for k in columns]
            row = [str(link or "unshaped"), d, *cells, engine]
            key = tuple(row)
            groups.setdefault(key, []).append(str(n.get("name", n.get("rank"))))
            payload[key] = row
    return [[_names(names), *payload[k]] for k, names in groups.items()]


def _names(names: list[str]) -> str:
    return names[0] if len(names) == 1 else f"{names[0]} .. {names[-1]} ({len(names)} nodes)"


def _node_link(run: LoadedRun, rank) -> str | None:
    """The link name of a rank from the scenario's worker groups (environment.json may not name it)."""
    if not isinstance(rank, int) or isinstance(rank, bool):
        return None
    workers = run.data.scenario.get("workers")
    i = 0
    for g in workers if isinstance(workers, list) else []:
        if not isinstance(g, dict):
            continue
        count = g.get("count", 1)
        if not isinstance(count, int) or isinstance(count, bool):
            return None
        if i <= rank < i + count:
            link = g.get("link")
            return link if isinstance(link, str) else ("inline" if link else None)
        i += count
    return None


def worker_starts(run: LoadedRun) -> dict[int, dict]:
    """The first `start` record of each rank (the device it really used, its compute_scale), any optimizer."""
    starts: dict[int, dict] = {}
    root = run.data.path
    for path in runfiles.iter_files(root, "workers", "rank*.jsonl"):  # no link followed (results/runfiles.py)
        try:
            head = runfiles.read_bytes(root, path, "rank.jsonl", head=64 * 1024).decode("utf-8", "replace")
            for line in head.splitlines():
                rec = json.loads(line)
                if isinstance(rec, dict) and rec.get("type") == "start" and isinstance(rec.get("rank"), int):
                    starts.setdefault(rec["rank"], rec)
                    break
        except (OSError, ValueError, RecursionError):
            continue
    return starts


def compute_rows(run: LoadedRun) -> list[list[str]]:
    """Per group of nodes: the hardware profile asked for, the device that really trained, and how its speed was
    emulated (stretching each step's compute by sleeping, to 1/compute_scale of this host's time)."""
    s = run.data.scenario
    hardware = s.get("hardware") or {}
    starts = worker_starts(run)
    host = run.data.environment.get("host") or "this host"
    rows: dict[tuple, list[str]] = {}
    rank = 0
    for g in s.get("workers") or []:
        if not isinstance(g, dict):
            continue
        hw = g.get("hardware", "host")
        spec = hardware.get(hw) if isinstance(hw, str) else (hw if isinstance(hw, dict) else {})
        name = hw if isinstance(hw, str) else "inline"
        for _i in range(int(g.get("count", 1))):
            st = starts.get(rank, {})
            device = str(st.get("device") or "not recorded")
            scale = st.get("compute_scale", (spec or {}).get("compute_scale"))
            asked = _hardware_words(name, spec)
            ran = f"{device} on {host}" if st else "not recorded (no worker start record)"
            if scale is None:
                how = "not recorded"
            elif float(scale) >= 0.999:
                how = "not slowed: this host's own speed"
            else:
                how = f"stretched: each step's compute slept to {1 / float(scale):.2f}x this host's time"
            gpu_profile = (spec or {}).get("tflops") and (spec or {}).get("device", "auto") != "cpu"
            if gpu_profile and spec and device.startswith("cpu"):
                how += f"; the profile's {spec['tflops']} TFLOPS GPU was NOT present: the compute ran on the CPU"
            key = (asked, ran, how)
            who = g.get("name") or f"node{rank}"
            rows.setdefault(key, []).append(who)
            rank += 1
    return [[_names(names), *k] for k, names in rows.items()]


def emulation_blocks(run: LoadedRun) -> list:
    net = run.data.environment.get("network")
    if not isinstance(net, dict):
        return [Para("The run folder does not record what the backend emulated (no `network` in environment.json).")]
    emulated = net.get("network_emulated")
    engine = net.get("link_engine")
    blocks: list[Block] = [Para(f"Backend: {net.get('backend', 'unknown')}. Network emulated: "
                   + ({True: "yes", False: "no", None: "unknown"}.get(emulated, str(emulated))
                      if isinstance(emulated, (bool, type(None))) else str(emulated))
                   + (f"; link engine for delay, jitter and loss: {engine}" if engine else "")
                   + (f" ({net['link_engine_reason']})" if net.get("link_engine_reason") else "") + ".")]
    rows = link_rows(run)
    headings = ["rate", *(row.heading or row.label for row in link_columns(run))]
    if rows:
        blocks.append(Para("Links, per direction (up = node to switch, down = switch to node). Each cell reads "
                           "configured / applied / measured: configured is the scenario, applied what the backend "
                           "installed and verified by reading it back, measured what a probe of the link saw "
                           "once the links were up, before training. " + _measurement_words(net)))
        blocks.append(Table(["nodes", "link", "direction", *headings, "engine"], rows,
                            numeric=[False] * (4 + len(headings))))
    not_emulated = net.get("not_emulated")
    missing = [str(x) for x in not_emulated] if isinstance(not_emulated, list) else []
    not_applied = any("not applied" in c for r in rows for c in r[3:3 + len(headings)] if not c.startswith("- /"))
    if missing:
        blocks += [Para("Not emulated:"), Bullets(missing)]
    elif emulated and not not_applied:
        blocks.append(Para("Every link figure the scenario configured was applied (see the table for what was "
                           "measured)."))
    else:
        blocks.append(Para("Not everything the scenario configured was applied: see the table."))
    compute = compute_rows(run)
    if compute:
        blocks.append(Para("Compute: the hardware profile each node asked for, what really trained it, and how its "
                           "speed was emulated."))
        blocks.append(Table(["nodes", "profile (configured)", "ran on", "speed emulation"], compute,
                            numeric=[False] * 4))
    nodes = run.network_nodes
    if nodes:
        rows = [[fmt(n.get("rank")), str(n.get("name", "")), str(n.get("address", "")), _applied(n.get("applied"))]
                for n in nodes]
        blocks.append(Para("Raw shaping state per node, as environment.json records it:"))
        blocks.append(Table(["rank", "node", "address", "shaping applied (read back)"], rows,
                            numeric=[True, False, False, False]))
    return blocks


def _measurement_words(net: dict) -> str:
    """How the 'measured' figures were taken (environment.json's network.link_measurement), and any node's error."""
    info = net.get("link_measurement")
    if not isinstance(info, dict):
        return "This run recorded no link measurement."
    if not info.get("measured"):
        return f"Links were not measured ({info.get('why', 'no reason recorded')})."
    listed = net.get("nodes")
    nodes = [n for n in listed if isinstance(n, dict) and isinstance(n.get("measured"), dict)] if isinstance(listed, list) else []
    m = nodes[0]["measured"] if nodes else {}
    dirs = [n["measured"].get(d) for n in nodes for d in _DIRS]
    spans: list[float | None] = [*sorted({float(x["seconds"]) for x in dirs if isinstance(x, dict) and x.get("seconds")})]
    spans = spans or [m.get("seconds")]
    span = fmt(spans[0]) if len(spans) == 1 else f"{fmt(spans[0])}-{fmt(spans[-1])}"
    words = (f"Measured: rate is TCP goodput ({m.get('tool', 'unknown tool')}) over {span} s per direction (slower "
             f"links longer), all {m.get('concurrent_nodes', len(nodes))} node(s) at once, in {fmt(info.get('took_s'))} s "
             "in all (goodput is TCP payload: ~95% of a shaped rate is the ceiling); delay is half the mean TCP "
             "handshake RTT to the switch.")
    errors = [f"{n.get('name')}: {n['measured']['error']}" for n in nodes if n["measured"].get("error")]
    return words + (" Not measured: " + "; ".join(errors) + "." if errors else "")


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
    run_info = run.summary.run
    for k, v in (("started", run_info.started), ("finished", run_info.finished)):
        if v:
            rows.append([k, str(v)])
    return Table(["key", "value"], rows or [["(none recorded)", ""]], numeric=[False, False])
