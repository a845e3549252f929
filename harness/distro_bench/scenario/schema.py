"""The JSON Schema of a scenario file, for editors (yaml-language-server) and `distro-bench schema`.

Generated from the pydantic models (harness/distro_bench/scenario/model.py, harness/distro_bench/scenario/optimizers.py), so it cannot drift;
docs/scenario.schema.json is a committed copy that a unit test compares with this. The schema checks shape:
unit spellings, option names and ranges per optimizer type. References between sections (a worker's link
name, the baseline) and cross-field rules (jitter <= delay) are `distro-bench validate`'s job.
"""

from __future__ import annotations

import copy
import re

import yaml

from distro_bench.scenario import methods, presets
from distro_bench.scenario.model import NAME_PATTERN, Scenario
from distro_bench.scenario.optimizers import StrategyConfig

SCHEMA_ID = "https://distro-bench.dev/scenario.schema.json"
COMMITTED_PATH = "docs/scenario.schema.json"


def _option_schemas() -> tuple[dict, dict]:
    """($defs of every shipped option model, name -> $ref). Methods of other distributions installed here are
    left out: the committed schema is the project's, whatever else this environment holds; their entries
    validate against the open branch (any other name, or an import path)."""
    defs, refs = {}, {}
    for name in [n for n in methods.registrations() if methods.is_shipped(n)]:  # in pyproject.toml's order
        cls = methods.options_class(name)
        sch = cls.model_json_schema(ref_template="#/$defs/{model}")
        defs.update(sch.pop("$defs", {}))
        key = cls.__name__
        sch["description"] = (cls.__doc__ or "").strip() or f"options of the {name} optimizer"
        defs[key] = sch
        refs[name] = {"$ref": f"#/$defs/{key}"}
    return defs, refs


def scenario_schema() -> dict:
    sch = copy.deepcopy(Scenario.model_json_schema(ref_template="#/$defs/{model}"))
    defs = sch.setdefault("$defs", {})
    # Preset names are known: complete them (and reject typos) where a spec names a preset.
    for model, known in (("LinkSpec", presets.LINKS), ("HardwareSpec", presets.HARDWARE), ("ModelSpec", presets.MODELS)):
        if model in defs:
            defs[model]["properties"]["preset"] = {"anyOf": [{"enum": sorted(known)}, {"type": "null"}],
                                                   "default": defs[model]["properties"]["preset"].get("default")}
    opt_defs, refs = _option_schemas()
    for name in [*opt_defs, "StrategyConfig"]:  # pydantic's own give way to the described ones
        defs.pop(name, None)
    defs.update(opt_defs)
    # Each optimizer entry: `type` picks the option model (one per shipped registered name); an entry named
    # after a type (`adamw: {lr: ...}`) may leave `type` out, as the loader defaults it to the name.
    # Any other method by import path ('package.module:Class'); its own options model checks the rest (`distro-bench
    # validate`). A name another installed distribution registers is not known to a static schema: validate
    # accepts it, an editor only the import path.
    base = StrategyConfig.model_json_schema(ref_template="#/$defs/{model}")
    defs["ImportedMethodOptions"] = {
        "type": "object", "required": ["type", "lr"], "additionalProperties": True, "title": "ImportedMethodOptions",
        "description": "a method from another distribution, named by import path; the other options are that "
                       "method's own (docs/extending.md)",
        "properties": {**{k: v for k, v in base["properties"].items() if k != "type"},
                       "type": {"type": "string", "pattern": methods.IMPORT_PATH.pattern}}}
    typed: list[dict] = [{"allOf": [ref], "required": ["type"]} for ref in refs.values()]
    typed.append({"$ref": "#/$defs/ImportedMethodOptions"})
    named = {name: {"if": {"type": "object", "required": ["type"]}, "then": {"oneOf": typed}, "else": ref}
             for name, ref in refs.items()}
    sch["properties"]["optimizers"] = {
        "type": "object", "minProperties": 1, "title": "Optimizers",
        "description": "run name -> options; `type` names the optimizer (default: the run name): a registered name "
                       "(" + ", ".join(refs) + "; `distro-bench validate` also knows the names installed "
                       "distributions register in the entry-point group distro_bench.optimizers) or an import path "
                       "'package.module:Class' (docs/extending.md)",
        "properties": named, "additionalProperties": {"oneOf": typed},
        # A run name is a folder name (RUN/workers/<name>/): harness/distro_bench/scenario/model.py NAME_PATTERN.
        "propertyNames": {"pattern": NAME_PATTERN},
    }
    return {"$schema": "http://json-schema.org/draft-07/schema#", "$id": SCHEMA_ID, **sch}


def yaml12_load(text: str):
    """Parse YAML as editors do (YAML 1.2 core schema: `3e-3` is a float; PyYAML's 1.1 reads it as a string,
    which the scenario loader converts anyway). Used to check files against the schema the way an editor does."""
    class Loader(yaml.SafeLoader):
        pass

    Loader.yaml_implicit_resolvers = {k: list(v) for k, v in yaml.SafeLoader.yaml_implicit_resolvers.items()}
    Loader.add_implicit_resolver("tag:yaml.org,2002:float", re.compile(
        r"^[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?$|^[-+]?\.(inf|Inf|INF)$|^\.(nan|NaN|NAN)$"),
        list("-+0123456789."))
    return yaml.load(text, Loader=Loader)
