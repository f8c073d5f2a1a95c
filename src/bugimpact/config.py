"""Load and validate ``config.yaml`` against ``schemas/config.schema.yaml``, filling defaults."""
import copy
import math
import re
from pathlib import Path

import jsonschema
import yaml
from packaging.specifiers import InvalidSpecifier, SpecifierSet

from .artifacts.kinds import runtime_kinds
from .artifacts.source_kinds import sources
from .challenges import challenges
from .harness.registry import FAULTS, METRICS, model_error
from .io import InputError
from .layout import ROOT
from .mine.releases import load_snapshot
from .stats.exact import metrics

CONFIG_SCHEMA = ROOT / "schemas" / "config.schema.yaml"
SHEET_SCHEMA = ROOT / "schemas" / "sheet.schema.yaml"


def _describe(error):
    path = ".".join(str(p) for p in error.absolute_path) or "(top level)"
    if error.validator == "additionalProperties":
        allowed = sorted(error.schema.get("properties", {}))
        extra = sorted(set(error.instance) - set(allowed))
        return f"key '{path}': unknown key(s) {', '.join(map(repr, extra))}; allowed: {', '.join(allowed)}"
    if error.validator == "required":
        return f"key '{path}': {error.message}"
    expected = error.schema.get("description")
    hint = f" (expected: {expected})" if expected else ""
    return f"key '{path}': {error.message}{hint}"


def _fill_defaults(schema, instance, root):
    """Insert ``default`` values of the schema's properties into the instance, recursively."""
    if "$ref" in schema:
        schema = root["$defs"][schema["$ref"].split("/")[-1]]
    if not isinstance(instance, dict):
        return
    for key, sub in schema.get("properties", {}).items():
        if key not in instance and "default" in sub:
            instance[key] = copy.deepcopy(sub["default"])
        if key in instance:
            _fill_defaults(sub, instance[key], root)
    extra = schema.get("additionalProperties")
    if isinstance(extra, dict):
        for key, value in instance.items():
            if key not in schema.get("properties", {}):
                _fill_defaults(extra, value, root)


def code_lists():
    """The lists the config schema takes from the code that owns them (``x-enum: <name>`` in the
    schema), so that a source, runtime kind, challenge or metric added in its registry (by a
    plugin: ``bugimpact.plugins``) is valid in a config with no edit to the schema."""
    return {"sources": list(sources()), "release sources": [n for n, s in sources().items() if s.a_release],
            "runtime kinds": list(runtime_kinds()), "faults": list(FAULTS),
            "challenges": list(challenges()), "metrics": list(metrics()),
            "recorded metrics": list(METRICS)}


def code_properties():
    """The settings the config schema takes from the code that owns them (``x-properties: <group>``
    in the schema): each runtime kind's ``runtime.<kind>`` and each source's ``artifacts.<source>``
    (their ``settings_schema``, where they have one), each challenge's raw file ``data.<name>``."""
    return {"runtime kind settings": {n: k.settings_schema for n, k in runtime_kinds().items() if k.settings_schema},
            "source settings": {n: s.settings_schema for n, s in sources().items() if s.settings_schema},
            "challenge files": {n: {"type": "string", "default": c.raw, "description": c.about}
                                for n, c in challenges().items() if c.raw}}


def load_schema(path=CONFIG_SCHEMA):
    """The config schema, its ``x-enum: <list>`` made ``enum`` (and ``x-default: <list>`` a
    default) from ``code_lists``, and its ``x-properties: <group>`` given the properties of
    ``code_properties`` (a name the schema itself has is refused: a plugin takes none)."""
    lists, groups = code_lists(), code_properties()

    def fill(node):
        if isinstance(node, dict):
            if "x-properties" in node:
                properties = node.setdefault("properties", {})
                for name, sub in groups[node.pop("x-properties")].items():
                    if name in properties:
                        raise InputError(path, f"the settings of {name!r} would take a key the "
                                         "schema has already: choose another name")
                    properties[name] = copy.deepcopy(sub)
            for marker, key in (("x-enum", "enum"), ("x-default", "default")):
                if marker in node:
                    if node[marker] not in lists:
                        raise KeyError(f"{path}: {marker}: {node[marker]!r} is none of {', '.join(lists)}")
                    node[key] = list(lists[node.pop(marker)])
            for value in node.values():
                fill(value)
        elif isinstance(node, list):
            for value in node:
                fill(value)
    schema = read_yaml(path)
    fill(schema)
    return schema


def validate_config(config, source="config.yaml", schema_path=CONFIG_SCHEMA):
    schema = load_schema(schema_path)
    validator = jsonschema.Draft202012Validator(schema)
    errors = sorted(validator.iter_errors(config), key=lambda e: (len(e.absolute_path), e.message))
    if errors:
        raise InputError(source, "; ".join(_describe(e) for e in errors[:10]))
    config = copy.deepcopy(config)
    _fill_defaults(schema, config, schema)
    problems = _beyond_schema(config)
    if problems:
        raise InputError(source, "; ".join(problems[:5]))
    return config


def _numbers(node, path=""):
    if isinstance(node, dict):
        for key, value in node.items():
            yield from _numbers(value, f"{path}.{key}" if path else str(key))
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from _numbers(value, f"{path}[{i}]")
    elif isinstance(node, float):
        yield path, node


def _beyond_schema(config):
    """What JSON Schema cannot say, checked here so that the workflow and ``validate-config``
    refuse the same configs: finite numbers, patterns that compile, a version range that parses,
    a model that can be built, a group-sequential design that can run, a monitored metric that is
    tested, ids used once."""
    problems = [f"key '{path}': {value} is not a finite number" for path, value in _numbers(config)
                if not math.isfinite(value)]
    mine = config.get("mine", {})
    for i, pattern in enumerate(mine.get("section_patterns") or []):
        try:
            re.compile(pattern)
        except re.error as exc:
            problems.append(f"key 'mine.section_patterns[{i}]': not a regular expression: {exc}")
    if mine.get("versions"):
        try:
            SpecifierSet(mine["versions"])
        except InvalidSpecifier:
            problems.append(f"key 'mine.versions': {mine['versions']!r} is not a version range "
                            "(e.g. '>=1.1.0,<1.7.0')")
    if model_error(config["train"]["model"]):
        problems.append(f"key 'train.model': {model_error(config['train']['model'])}")
    names = [w["name"] for w in config.get("workloads") or []]
    for index, workload in enumerate(config.get("workloads") or []):
        if model_error(workload["model"]):
            problems.append(f"key 'workloads[{index}].model': {model_error(workload['model'])}")
        if names.count(workload["name"]) > 1:
            problems.append(f"key 'workloads[{index}].name': {workload['name']!r} names two workloads")
    sequential = config["train"]["sequential"]
    if sequential["enabled"] and config["train"]["seed_policy"] != "paired":
        problems.append("key 'train.sequential.enabled': the group-sequential design tests paired "
                        "seeds: set train.seed_policy to paired")
    if sequential["enabled"] and sequential["stages"] != sorted(set(sequential["stages"])):
        problems.append(f"key 'train.sequential.stages': {sequential['stages']} do not increase")
    monitored, metrics = sequential["metric"], config["stats"]["metrics"]
    if monitored not in metrics:
        problems.append(f"key 'train.sequential.metric': {monitored!r} is not among the metrics "
                        f"tested (stats.metrics: {', '.join(metrics)})")
    bugs = config.get("bugs", {})
    for key in sorted(set(bugs.get("fixes") or {}) & set(bugs.get("controls") or {})):
        problems.append(f"key 'bugs.fixes.{key}': the id is also a control (bugs.controls.{key})")
    return problems


def emptied_in_vain(overrides, config, path=""):
    """The keys ``--config`` gives an empty mapping that the merged ``config`` still fills, dotted:
    Snakemake merges a mapping given there into the config file's key by key, so
    ``bugs={controls: {}}`` removes no control (the study would run them without a word)."""
    found = []
    for key, value in (overrides or {}).items():
        merged = config.get(key) if isinstance(config, dict) else None
        if isinstance(value, dict) and not value and merged:
            found.append(f"{path}{key}")
        elif isinstance(value, dict):
            found += emptied_in_vain(value, merged, f"{path}{key}.")
    return found


def check_paths(config, source="config.yaml"):
    """The paths a config names, of the right kind, relative to the folder the workflow runs in:
    checked at the start by the workflow and ``validate-config`` alike (a wrong path otherwise
    fails late, or is ignored once its outputs exist, or makes an empty sheet)."""
    problems = []
    sheet = Path(config["sheet"])
    if sheet.exists() and not sheet.is_file():
        problems.append(f"key 'sheet': {sheet} is a folder, not the sheet's CSV file")
    mine = config["mine"]
    if mine["source"] == "snapshot":
        snapshot = Path(mine["snapshot"])
        if not snapshot.exists():
            problems.append(f"key 'mine.snapshot': {snapshot} does not exist (a folder of "
                            "<tag>.md files or an API-shaped JSON file)")
        elif mine.get("tags"):
            have = {r["tag_name"] for r in load_snapshot(snapshot)}
            missing = [t for t in mine["tags"] if t not in have]
            if missing:
                problems.append(f"key 'mine.tags': {', '.join(missing)} not in {snapshot} "
                                f"(it has {', '.join(sorted(have)[:8])}{', ...' if len(have) > 8 else ''})")
    resolve = config["resolve"]
    if "known" in resolve["resolvers"] and resolve.get("known") and not Path(resolve["known"]).is_file():
        problems.append(f"key 'resolve.known': {resolve['known']} is not a file")
    if "git" in resolve["resolvers"] and resolve.get("clone") and not Path(resolve["clone"]).is_dir():
        problems.append(f"key 'resolve.clone': {resolve['clone']} is not a folder (a clone)")
    if problems:
        raise InputError(source, "; ".join(problems))


def read_yaml(path):
    """A YAML file's content; a syntax error names the file, the line and the column."""
    path = Path(path)
    try:
        return yaml.safe_load(path.read_text("utf-8")) or {}
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or str(exc)
        raise InputError(path, f"not valid YAML{where}: {problem}") from None


def load_config(path):
    return validate_config(read_yaml(path), source=path)
