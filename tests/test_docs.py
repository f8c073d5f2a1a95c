"""The documentation: docs/configuration.md is what the schema says (made from it, checked
here), and every link of the README and docs/ leads to a file and heading that exist."""
import re
import subprocess
import sys

from conftest import ROOT

from bugimpact.config import CONFIG_SCHEMA, load_schema
from bugimpact.config_docs import render

SCHEMA = load_schema()


def test_the_configuration_page_is_the_one_the_schema_makes():
    page = (ROOT / "docs" / "configuration.md").read_text()
    assert page == render(SCHEMA), "docs/configuration.md is stale: bugimpact config-docs --out docs/configuration.md"


def test_every_key_of_the_schema_is_documented_with_its_type_default_and_meaning():
    page = render(SCHEMA)
    rows = {}  # a key's first row: a top-level key before a shape's key of the same name
    for line in page.splitlines():
        if line.startswith("| `"):
            rows.setdefault(line.split(" | ")[0].strip("| `"), line.split(" | ")[1:])

    def keys(node, prefix):
        for key, child in node.get("properties", {}).items():
            path = f"{prefix}.{key}" if prefix else key
            extra = child.get("additionalProperties")
            if isinstance(extra, dict) and ("$ref" in extra or extra.get("properties")):
                path += ".<id>"
            yield path, child
            yield from keys(child, path)
            if isinstance(extra, dict):
                yield from keys(extra, path)

    expected = list(keys(SCHEMA, "")) + [(key, child) for d in SCHEMA["$defs"].values()
                                         for key, child in keys(d, "")]
    assert len(expected) > 100
    for path, node in expected:
        if "." not in path and node.get("type") == "object":  # a section: its heading
            assert f"## `{path}`" in page and _first_line_after(page, f"## `{path}`"), path
            continue
        assert path in rows, path
        kind, default, meaning = rows[path]
        assert meaning.strip(" |"), f"{path} has no description in {CONFIG_SCHEMA.name}"
        if "default" in node and not node.get("properties"):
            assert default.strip("`") not in ("",), path
    # by hand: a few rows as a reader sees them
    assert rows["train.threads"] == ["`integer`", "`1`", "CPU threads per run (fixed: the thread count changes reduction order) |"]
    assert rows["runtime.installer"][:2] == ["`uv` \\| `pip`", "`uv`"]
    assert rows["bugs.controls.<id>"][0] == "map of [bug](#bug)"
    assert rows["train.model"][2].startswith("**required**")
    assert rows["train.early_decision.trigger_rate"][:2] == ["`number` or `null`", "`null`"]


def _first_line_after(page, heading):
    """The section's description: the first non-empty line under its heading."""
    after = page.split(heading, 1)[1].splitlines()[1:]
    return next(line for line in after if line.strip())


def test_the_command_prints_the_page():
    out = subprocess.run([sys.executable, "-m", "bugimpact", "config-docs"], capture_output=True,
                         text=True, cwd=ROOT, check=True).stdout
    assert out == render(SCHEMA)


def _anchor(heading):
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def test_every_link_of_the_readme_and_docs_leads_somewhere():
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    checked = 0
    for page in pages:
        text = page.read_text()
        for target in re.findall(r"\]\(([^)\s]+)\)", text):
            if re.match(r"[a-z]+://", target):
                continue
            path, _, anchor = target.partition("#")
            dest = (page.parent / path).resolve() if path else page
            assert dest.exists(), f"{page.name}: link to {target}: no {dest}"
            if anchor and dest.suffix == ".md":
                headings = {_anchor(h) for h in re.findall(r"(?m)^#+ (.+)$", dest.read_text())}
                assert anchor in headings, f"{page.name}: link to {target}: no such heading"
            checked += 1
    assert checked >= 15

