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

from distro_bench.scenario import presets
from distro_bench.scenario.model import NAME_PATTERN, Scenario
from distro_bench.scenario.optimizers import OPTIONS

SCHEMA_ID = "https://distro-bench.dev/scenario.schema.json"
COMMITTED_PATH = "docs/scenario.schema.json"


def _option_schemas() -> tuple[dict, dict]:
    """($defs of every option model, name -> $ref)."""
    defs, refs = {}, {}
    for name, cls in OPTIONS.items():
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
    for name in opt_defs:  # pydantic's own (from Scenario.optimizers' union) give way to the described ones
        defs.pop(name, None)
    defs.update(opt_defs)
    # Each optimizer entry: `type` picks the option model (a discriminated union over OPTIONS); an entry named
    # after a type (`adamw: {lr: ...}`) may leave `type` out, as the loader defaults it to the name.
    typed = [{"allOf": [ref], "required": ["type"]} for ref in refs.values()]
    named = {name: {"if": {"type": "object", "required": ["type"]}, "then": {"oneOf": typed}, "else": ref}
             for name, ref in refs.items()}
    sch["properties"]["optimizers"] = {
        "type": "object", "minProperties": 1, "title": "Optimizers",
        "description": "run name -> options; `type` names the optimizer (default: the run name). Known types: "
                       + ", ".join(refs),
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
