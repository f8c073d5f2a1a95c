"""docs/configuration.md, written from schemas/config.schema.yaml: the schema is the one place a
key, its type, default and meaning are stated, and a test checks that the page is what this
module makes of it (``bugimpact config-docs --out docs/configuration.md`` remakes it)."""
import json

HEADER = """# Configuration

<!-- Generated from schemas/config.schema.yaml by `bugimpact config-docs --out docs/configuration.md`;
edit the schema, not this page (a test checks they agree). -->

A study is one YAML file: `config.yaml` (the calibration study), or one given with
`--configfile` (`configs/releases.yaml`, `configs/paper.yaml`), which is then the whole study.
Every key is checked against the schema when the workflow starts, by `bugimpact validate-config
FILE` too: an unknown key or a wrong type stops it with the file, the key and what was expected, and
defaults are filled from the schema. What a schema cannot say is checked in the same place: every
number finite (no `.nan`, `.inf`), `stats.metrics` without repeats, `mine.section_patterns` that
compile, `mine.versions` a version range, an id used once across `bugs.fixes` and `bugs.controls`,
`train.model` and each arm's `fault` known to the harness, and every path that must exist.

`--config key=value` on the command line overrides a top-level text key (e.g.
`--config sheet=data/filter/mine.csv`); numbers and sections go in a config file of your own (a
copy of `config.yaml`). Snakemake merges a section given with `--config` into the file's key by
key, so an empty one (`--config bugs={controls: {}}`) would remove nothing: it is refused.

Required keys are marked **required**. Types in `code`; `a | b` lists the allowed values.
"""


def render(schema):
    """The page for a config schema (a dict, as loaded from YAML)."""
    lines = [HEADER]
    required = set(schema.get("required", []))
    sections = {k: v for k, v in schema["properties"].items() if v.get("type") == "object"}
    lines += ["## Top-level keys", ""]
    lines += _table(_rows({"properties": {k: v for k, v in schema["properties"].items() if k not in sections},
                           "required": list(required)}, ""))
    for key, node in sections.items():
        lines += ["", f"## `{key}`" + (" (required)" if key in required else ""), ""]
        if node.get("description"):
            lines += [_sentence(node["description"]), ""]
        lines += _table(_rows(node, key))
    lines += [""]
    lines += ["## Shapes used above", ""]
    for name, node in schema.get("$defs", {}).items():
        lines += [f"### `{name}`", "", _sentence(node.get("description", "")), ""]
        if node.get("anyOf"):
            lines += ["Needs " + " or ".join(
                " and ".join(f"`{k}`" for k in alt["required"]) for alt in node["anyOf"]) + ".", ""]
        if node.get("properties"):
            lines += _table(_rows(node, "")) + [""]
    return "\n".join(lines).rstrip() + "\n"


def _rows(node, prefix):
    """(dotted key, schema node, required) for every leaf under an object node, depth first."""
    needed = set(node.get("required", []))
    for key, child in node.get("properties", {}).items():
        path = f"{prefix}.{key}" if prefix else key
        if child.get("type") == "object" and child.get("properties"):
            yield path, dict(child, _group=True), key in needed
            yield from _rows(child, path)
        elif child.get("type") == "object" and isinstance(child.get("additionalProperties"), dict):
            value = child["additionalProperties"]
            if "$ref" in value or not value.get("properties"):
                yield f"{path}.<id>" if "$ref" in value else path, child, key in needed
            else:
                yield f"{path}.<id>", child, key in needed
                yield from _rows(value, f"{path}.<id>")
        elif child.get("type") == "array" and child.get("items", {}).get("properties"):
            yield path, child, key in needed
            yield from _rows(child["items"], f"{path}[]")
        else:
            yield path, child, key in needed


def _table(rows):
    out = ["| key | type | default | meaning |", "|---|---|---|---|"]
    for path, node, needed in rows:
        meaning = node.get("description", "")
        if needed:
            meaning = "**required**" + (f"; {meaning}" if meaning else "")
        default = "" if "default" not in node or node.get("_group") else f"`{_yaml(node['default'])}`"
        out.append(f"| `{path}` | {_type(node)} | {default} | {_cell(meaning)} |")
    return out


def _type(node):
    if "$ref" in node:
        name = node["$ref"].rsplit("/", 1)[1]
        return f"[{name}](#{name})"
    if "enum" in node:
        return " \\| ".join(f"`{_yaml(v)}`" for v in node["enum"])
    if node.get("type") == "object" and isinstance(node.get("additionalProperties"), dict):
        value = node["additionalProperties"]
        if "$ref" in value:
            name = value["$ref"].rsplit("/", 1)[1]
            return f"map of [{name}](#{name})"
        if not node.get("properties") and value.get("properties"):
            return "map"
        return f"map of {_type(value)}"
    kind = node.get("type", "")
    if kind == "array":
        items = node.get("items", {})
        return f"list of {_type(items)}" if items else "list"
    if isinstance(kind, list):
        return " or ".join(f"`{k}`" for k in kind)
    return f"`{kind}`" if kind else ""


def _yaml(value):
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return value if value else '""'
    return json.dumps(value).replace('"', "")


def _sentence(text):
    text = text.strip()
    return _escape(text[:1].upper() + text[1:] + ("" if text.endswith(".") else ".")) if text else ""


def _cell(text):
    return _escape(text).replace("|", "\\|").replace("\n", " ")


def _escape(text):
    """<study> in a description is a placeholder, not an HTML tag for a Markdown viewer to drop."""
    return text.replace("<", "\\<")
