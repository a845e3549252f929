"""The one registry of optimizer methods: the entry-point group `distro_bench.optimizers`, and import paths.

A scenario's `optimizers.<run>.type` names a method either
- by a name registered in the entry-point group `distro_bench.optimizers` by an installed distribution
  (distro-bench registers its own methods there too, in pyproject.toml: there is no other list of names), or
- by an import path, `"pkg.module:Class"`.
Either way the target is a `distro_bench.Strategy` subclass (its options model is its `Config`) or a
`distro_bench.StrategyConfig` subclass whose `strategy` names the Strategy by import path. Naming the Config
keeps `validate` light: only `run` imports the strategy (and torch). The shipped methods register their
Config classes (harness/distro_bench/scenario/optimizers.py) for that reason. docs/extending.md.

Torch-free: the scenario schema, `validate` and the readers of run folders use it.
"""

from __future__ import annotations

import functools
import inspect
import re
import tomllib
from dataclasses import dataclass
from importlib import import_module, metadata
from pathlib import Path
from typing import Any

from pydantic import ValidationError
from pydantic_core import InitErrorDetails, PydanticCustomError

from distro_bench.scenario.optimizers import StoredOptions, StrategyConfig, option_names

GROUP = "distro_bench.optimizers"
PROJECT = "distro-bench"
IMPORT_PATH = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*:[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")
IMPORT_PATH_RULE = "an import path 'package.module:Class' naming a distro_bench.Strategy or StrategyConfig subclass"


class MethodError(ValueError):
    """A method that cannot be found or loaded; the message says what was looked for and what would be valid."""


@dataclass(frozen=True)
class Registration:
    """One name in the entry-point group: what it points at and which distribution registered it."""

    name: str
    target: str  # "module:Attr"
    origin: str  # the distribution ("distro-bench" for the shipped methods)


def is_import_path(kind: str) -> bool:
    return ":" in kind


def _project_pyproject() -> Path | None:
    """The pyproject.toml of the source tree this distro_bench runs from (a checkout, an editable install, or the
    worker image's copy), or None for an installed wheel (its metadata then holds the entry points)."""
    package = Path(__file__).resolve().parents[1]
    for folder in (package.parent, package.parent.parent):
        candidate = folder / "pyproject.toml"
        if candidate.is_file():
            try:
                doc = tomllib.loads(candidate.read_text())
            except (OSError, tomllib.TOMLDecodeError):
                continue
            if doc.get("project", {}).get("name") == PROJECT:
                return candidate
    return None


def _shipped() -> dict[str, Registration]:
    """distro-bench's own registrations: read from the pyproject.toml of the tree it runs from where there is one
    (the metadata of an installed copy may be another version's), else from the installed distribution."""
    path = _project_pyproject()
    if path is not None:
        doc = tomllib.loads(path.read_text())
        group = doc.get("project", {}).get("entry-points", {}).get(GROUP, {})
        return {name: Registration(name, str(target), PROJECT) for name, target in group.items()}
    try:
        eps = metadata.distribution(PROJECT).entry_points
    except metadata.PackageNotFoundError:
        return {}
    return {ep.name: Registration(ep.name, ep.value, PROJECT) for ep in eps if ep.group == GROUP}


@functools.cache
def registrations() -> dict[str, list[Registration]]:
    """Every name in the group -> its registrations (more than one: a clash, refused when that name is used)."""
    out: dict[str, list[Registration]] = {name: [r] for name, r in _shipped().items()}
    for ep in metadata.entry_points(group=GROUP):
        origin = ep.dist.name if ep.dist is not None else "an unnamed distribution"
        if re.sub(r"[-_.]+", "-", origin).lower() == PROJECT:
            continue  # the shipped ones, read above from the tree that runs
        if any(r.target == ep.value or r.origin == PROJECT for r in out.get(ep.name, [])):
            continue  # the same distribution seen twice on sys.path, or a shipped name: that stays the project's
        out.setdefault(ep.name, []).append(Registration(ep.name, ep.value, origin))
    return out


def names() -> list[str]:
    return sorted(registrations())


def shipped_names() -> list[str]:
    return sorted(n for n, regs in registrations().items() if any(r.origin == PROJECT for r in regs))


def is_shipped(kind: str) -> bool:
    return any(r.origin == PROJECT for r in registrations().get(kind, []))


def known_text() -> str:
    return f"{', '.join(names())}; or {IMPORT_PATH_RULE}"


def target_of(kind: str) -> str:
    """The import path `kind` stands for: itself, or its registration's."""
    if is_import_path(kind):
        if not IMPORT_PATH.match(kind):
            raise MethodError(f"{kind!r} is not an import path; write {IMPORT_PATH_RULE}")
        return kind
    regs = registrations().get(kind)
    if not regs:
        raise MethodError(f"unknown optimizer {kind!r}; known: {known_text()}")
    if len(regs) > 1:
        raise MethodError(f"optimizer {kind!r} is registered by more than one distribution ("
                          + ", ".join(f"{r.origin}: {r.target}" for r in regs)
                          + "); uninstall one, or name the method by its import path")
    return regs[0].target


def load(path: str, what: str) -> Any:
    """The object an import path names; MethodError saying which part could not be found."""
    module_name, _, attr = path.partition(":")
    try:
        obj: Any = import_module(module_name)
    except ModuleNotFoundError as e:
        raise MethodError(f"{what} {path!r}: module {e.name!r} cannot be imported here (is its package installed "
                          "in this environment?)") from None
    except Exception as e:  # the user's module raised while importing: say so, without a traceback
        raise MethodError(f"{what} {path!r}: importing {module_name!r} failed ({type(e).__name__}: {e})") from None
    for part in attr.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise MethodError(f"{what} {path!r}: module {module_name!r} has no {attr!r}") from None
    return obj


def _is_config(obj: Any) -> bool:
    return inspect.isclass(obj) and issubclass(obj, StrategyConfig)


@functools.cache
def options_class(kind: str) -> type[StrategyConfig]:
    """The options model of the method `kind` names (a name or an import path); MethodError otherwise. Imports
    the target's module: for a Config registration (the shipped ones) that is all `validate` imports."""
    path = target_of(kind)
    obj = load(path, f"optimizer {kind!r}" if path != kind else "optimizer")
    if _is_config(obj):
        return obj
    config = getattr(obj, "Config", None)
    if inspect.isclass(obj) and _is_config(config):
        assert config is not None
        return config
    raise MethodError(f"optimizer {kind!r}: {path!r} is neither a distro_bench.Strategy with a Config nor a "
                      "distro_bench.StrategyConfig subclass")


def strategy_target(kind: str) -> Any:
    """The strategy class `kind` names, not yet checked to be one (train/optim/get_strategy checks it)."""
    path = target_of(kind)
    obj = load(path, f"optimizer {kind!r}" if path != kind else "optimizer")
    if _is_config(obj):
        if not obj.strategy:
            raise MethodError(f"optimizer {kind!r}: its options model {obj.__name__} names no strategy (set "
                              "`strategy = 'pkg.module:Class'` on it, or register the Strategy class itself)")
        return load(obj.strategy, f"the strategy of {kind!r}")
    return obj


def canonical_type(kind: str, cls: type[StrategyConfig]) -> str:
    """The `type` a run folder records: the name the options model declares (its `type` default, as each shipped
    model does) where that name is registered for this very model, else the name or import path as written."""
    default = cls.model_fields["type"].default
    if isinstance(default, str) and default and default != kind and not is_import_path(default):
        try:
            if options_class(default) is cls:
                return default
        except MethodError:
            pass
    return kind


def _escaped(text: str) -> str:
    return text.replace("{", "{{").replace("}", "}}")  # pydantic formats a custom message with its context


def _error(kind: str, message: str, loc: tuple, value: Any) -> Any:
    return InitErrorDetails(type=PydanticCustomError(kind, _escaped(message)), loc=loc, input=value)


def validate_entries(entries: dict, *, stored: bool = False) -> dict:
    """`optimizers:` of a scenario, each entry validated by the options model its `type` names (default: the run
    name, where that is a registered name). One ValidationError locating every problem (`optimizers.<run>...`).
    `stored`: a run folder's recorded scenario, read where a method's code may be missing: an entry whose method
    cannot be loaded here is kept as data (StoredOptions) instead of refused."""
    out: dict[str, Any] = {}
    errors: list[InitErrorDetails] = []
    for name, entry in entries.items():
        if isinstance(entry, StrategyConfig) or not isinstance(entry, dict):
            out[name] = entry  # already validated (a copy), or a shape pydantic itself refuses
            continue
        kind = entry.get("type")
        if kind is None:
            if not isinstance(name, str) or name not in registrations():
                errors.append(_error("optimizer_unnamed", f"unknown optimizer {name!r}; known: {known_text()}; a run "
                                     "named otherwise names its type (type: distro)", (name,), entry))
                continue
            kind = name
        if not isinstance(kind, str):
            errors.append(_error("optimizer_type", f"type {kind!r} is not a name; known: {known_text()}",
                                 (name,), kind))
            continue
        try:
            cls = options_class(kind)
        except MethodError as e:
            if stored and not is_shipped(kind):
                out[name] = StoredOptions.model_validate(entry)
                continue
            errors.append(_error("optimizer_type", str(e), (name,), kind))
            continue
        try:
            out[name] = cls.model_validate({**entry, "type": canonical_type(kind, cls)})
        except ValidationError as e:
            if stored and not is_shipped(kind):
                out[name] = StoredOptions.model_validate(entry)
                continue
            for d in e.errors(include_url=False):
                loc = (name, *d["loc"])
                if d["type"] == "extra_forbidden":
                    errors.append(_error("unknown_option", f"unknown field {d['loc'][-1]!r} for optimizer {name!r} "
                                         f"(type {kind}); valid: {', '.join(option_names(cls))}", loc, d["input"]))
                else:
                    errors.append(InitErrorDetails(type=d["type"], loc=loc, input=d["input"],
                                                   ctx=d.get("ctx", {})))
        except (TypeError, RecursionError) as e:  # a plugin's validator that raised something else
            errors.append(_error("optimizer_options", f"options of {kind!r} could not be validated "
                                 f"({type(e).__name__}: {e})", (name,), entry))
    if errors:
        raise ValidationError.from_exception_data("optimizers", errors)
    return out


def foreign_types(types: list[str]) -> list[str]:
    """The `type`s among these that another distribution (or an import path) provides: what every host of a
    multi-host run must be able to import as well as this one."""
    return sorted({t for t in types if not is_shipped(t)})


def top_module(kind: str) -> str:
    """The top-level module the method `kind` lives in (what a worker's environment must hold); MethodError for an
    unknown name."""
    return target_of(kind).partition(":")[0].split(".")[0]


def loadable_problems(types: list[str]) -> list[str]:
    """Each of these methods that cannot be loaded in this environment (options model and strategy), in words.
    Imports the strategy modules, and with them torch: a host's check before it runs, not `validate`."""
    problems = []
    for kind in types:
        try:
            options_class(kind)
            strategy_target(kind)
        except MethodError as e:
            problems.append(str(e))
    return problems


if __name__ == "__main__":  # `python -m distro_bench.scenario.methods TYPE...`: run on each host by the ssh backend
    import sys

    for line in loadable_problems(sys.argv[1:]):
        print("method-missing: " + line.replace("\n", " "))
