"""Step 3: the filter sheet, the one CSV a person edits to accept or reject bugs.

The sheet is merged, never regenerated: new mined entries are appended, blank machine cells are
filled, the resolution columns follow the latest resolution (unless a person typed the commits),
and so does ``onefix``, what this package reads in the fix's diff (a newer version takes more),
a ``cuda`` tag read from the fix's diff is added, and everything a person wrote (decision, reason,
notes, extra columns, even corrected SHAs) is kept. Entries that mining no longer finds stay in the
sheet, flagged ``mined=gone``.
"""
import csv
import io
import re
from collections import Counter
from pathlib import Path

import jsonschema
import yaml

from .io import InputError, write_csv

MACHINE_COLUMNS = ("id", "release", "area", "subarea", "pr", "prs", "text", "url", "buggy_sha",
                   "corrected_sha", "resolve_status", "resolve_note", "onefix", "tags", "mined")
# What the latest resolution says of a row whose commits nobody typed: refreshed on every merge.
RESOLUTION_COLUMNS = ("resolve_status", "resolve_note", "onefix")  # onefix: what its diff says
PERSON_COLUMNS = ("decision", "reason", "notes", "workloads")
COLUMNS = MACHINE_COLUMNS + PERSON_COLUMNS
REASONS = ("compile_error", "crash", "end_user", "cpu_only", "no_application", "other")

_TAG_WORDS = {
    "gradient": r"\b(grad\w*|autograd|backward|derivative|jacobian)\b",
    "math": r"\b(exp|log\w*|pow|sqrt|sin|cos|tanh|sigmoid|softmax|norm|mean|sum|prod|max|min|cdist|"
            r"matmul|addmm|div\w*|floor|nan|inf|precision|accuracy|numerical\w*|pool\w*|conv\w*|"
            r"quantiz\w*)\b",
    "cuda": r"\b(cuda|gpu|cudnn|nccl|magma|kernels?)\b",
    "cpu_only": r"\b(cpu|mkl\w*|avx\w*|openmp|threadpool)\b",
    "crash": r"\b(crash\w*|segfault|segmentation|illegal memory|deadlock|hang|errored|error|"
             r"exception|assert\w*|out of bound)\b",
    "build": r"\b(compil\w*|build|nvcc|cmake|gcc|linker|c\+\+ extensions?)\b",
    "docs": r"\b(doc\w*|comments?|typo|link to)\b",
    "end_user": r"\b(error message|warning message|better error|misleading|deprecat\w*|"
                r"added checks?|check for)\b",
}


def suggest_tags(text):
    text = text.lower()
    tags = [tag for tag, pattern in _TAG_WORDS.items() if re.search(pattern, text)]
    if "cpu_only" in tags and "cuda" in tags:
        tags.remove("cpu_only")
    return ";".join(tags)


def _join_tags(*groups):
    tags = []
    for group in groups:
        tags += [t for t in group.split(";") if t and t not in tags]
    return ";".join(tags)


def rows_from_mining(bugs, commits):
    by_id = {c["id"]: c for c in commits}
    rows = []
    for bug in bugs:
        c = by_id.get(bug["id"], {})
        rows.append({"id": bug["id"], "release": bug["release"], "area": bug["area"],
                     "subarea": bug.get("subarea", ""),
                     "pr": bug["pr"], "prs": bug["prs"], "text": bug["text"], "url": bug["url"],
                     "buggy_sha": c.get("buggy_sha", ""), "corrected_sha": c.get("corrected_sha", ""),
                     "resolve_status": c.get("status", "") or "unresolved",
                     "resolve_note": c.get("reason", ""), "onefix": c.get("onefix", ""),
                     "tags": _join_tags(suggest_tags(bug["text"] + " " + bug["area"]),
                                        c.get("diff_tags", "")), "mined": "yes",
                     "decision": "", "reason": "", "notes": ""})
    return rows


def merge(existing_columns, existing_rows, mined_rows):
    """The merged sheet and a change summary; nothing a person wrote is altered."""
    columns = list(existing_columns) or list(COLUMNS)
    for col in COLUMNS:
        if col not in columns:
            columns.append(col)
    mined = {r["id"]: r for r in mined_rows}
    seen, merged, filled = set(), [], 0
    gone = appended = 0
    for row in existing_rows:
        row = {c: (row.get(c) or "") for c in columns}
        new = mined.get(row["id"])
        if new is None:
            if row["mined"] != "gone":
                gone += 1
            row["mined"] = "gone"
        else:
            typed = row["buggy_sha"] and row["corrected_sha"] and not (
                row["resolve_status"] == "resolved" and new["resolve_status"] == "resolved")
            for col in MACHINE_COLUMNS:
                if col in RESOLUTION_COLUMNS:  # the latest resolution, unless commits were typed
                    change = not typed and new.get(col) and new[col] != row[col]
                else:
                    change = not row[col] and new.get(col)
                if change:
                    row[col] = new[col]
                    filled += 1
            # a device tag read from the fix's diff is a fact, added to the tags a person kept
            if "cuda" in new.get("tags", "").split(";") and "cuda" not in row["tags"].split(";"):
                row["tags"] = _join_tags(row["tags"], "cuda")
                filled += 1
            if row["resolve_status"] != "resolved" and row["buggy_sha"] and row["corrected_sha"]:
                row["resolve_status"] = "resolved"
            row["mined"] = "yes"
        seen.add(row["id"])
        merged.append(row)
    for row in mined_rows:
        if row["id"] not in seen:
            merged.append({c: row.get(c, "") for c in columns})
            appended += 1
    return columns, merged, {"existing": len(existing_rows), "appended": appended,
                             "cells_filled": filled, "flagged_gone": gone, "total": len(merged)}


def update_sheet(path, bugs, commits, schema_path=None):
    """Create the sheet, or merge new mining into it; returns the change summary. An existing
    sheet is validated first: a sheet that cannot be read right is never rewritten."""
    path = Path(path)
    mined_rows = rows_from_mining(bugs, commits)
    bom = False
    if path.exists():
        if schema_path is not None:
            validate(path, schema_path)
        columns, rows, bom = read_sheet(path)
    else:
        columns, rows = [], []
    columns, merged, summary = merge(columns, rows, mined_rows)
    summary["created"] = not rows  # new, or the header-only sheet a first run starts from
    write_csv(path, merged, columns, encoding="utf-8-sig" if bom else "utf-8",
              as_typed=[c for c in columns if c not in MACHINE_COLUMNS])  # a person's cells
    return summary


def read_sheet(path):
    """(columns, rows, had_bom) of a sheet as spreadsheets save it: UTF-8 with or without a BOM
    (Excel's "CSV UTF-8"). Other encodings and delimiters are errors that say what to do."""
    data = Path(path).read_bytes()
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        start = data.rfind(b"\n", 0, exc.start) + 1
        header = next(csv.reader([data.split(b"\n", 1)[0].decode("utf-8-sig", "replace")]), [])
        before = data[start:exc.start].decode("utf-8", "replace")
        cells = next(csv.reader([before]), [""]) if before else [""]
        column = header[len(cells) - 1] if 0 < len(cells) <= len(header) else None
        raise InputError(path, f"not UTF-8: byte 0x{data[exc.start]:02x}; save the sheet as "
                         f"\"CSV UTF-8\"", row=line, field=column) from None
    first = text.split("\n", 1)[0]
    if "," not in first:
        for name, delimiter in (("semicolons", ";"), ("tabs", "\t")):
            if delimiter in first:
                raise InputError(path, f"the columns are separated by {name}, not commas; save "
                                 f"the sheet as comma-separated CSV (\"CSV UTF-8\")", row=1)
    reader = csv.DictReader(io.StringIO(text, newline=""))
    columns, rows = list(reader.fieldnames or []), list(reader)
    _check_header(path, columns, rows)
    return columns, rows, data.startswith(b"\xef\xbb\xbf")


def _check_header(path, columns, rows):
    """Every cell a person typed must have a column to stay in: a merge would drop text under no
    header, or in a column whose name a former column already has. Refused, naming the place."""
    seen = set()
    for number, name in enumerate(columns, start=1):
        if name in seen:
            raise InputError(path, f"two columns are named {name!r} (column {number}): rename "
                             "one, so that the merge can keep both", row=1, field=name)
        seen.add(name)
    for line, row in enumerate(rows, start=2):
        extra = [v for v in row.get(None) or [] if v.strip()]
        blank = [c for c in columns if not c.strip() and (row.get(c) or "").strip()]
        if extra or blank:
            raise InputError(path, f"text {(extra or [row[blank[0]]])[0]!r} is in a column with no "
                             "header: give the column a name (the merge keeps every named column)",
                             row=line)


def load_schema(schema_path):
    with open(schema_path, encoding="utf-8") as handle:
        return yaml.safe_load(handle)


def validate(path, schema_path):
    """Rows of a valid sheet; otherwise an InputError naming the file, row (CSV line) and column."""
    columns, rows, _ = read_sheet(path)
    missing = [c for c in ("id", "decision", "reason", "buggy_sha", "corrected_sha")
               if c not in columns]
    if missing:
        raise InputError(path, f"missing column(s): {', '.join(missing)}", row=1)
    validator = jsonschema.Draft202012Validator(load_schema(schema_path))
    first_line = {}
    for index, row in enumerate(rows):
        line = index + 2  # the header is line 1
        errors = sorted(validator.iter_errors(row), key=lambda e: list(e.absolute_path))
        if errors:
            err = errors[0]
            field = err.absolute_path[0] if err.absolute_path else _field_of(err)
            value = row.get(field, "") if field else ""
            raise InputError(path, f"{value!r}: {err.message}", row=line, field=field)
        if row["id"] in first_line:
            raise InputError(path, f"duplicate id {row['id']!r} (first on row {first_line[row['id']]})",
                             row=line, field="id")
        first_line[row["id"]] = line
    return rows


def _field_of(error):
    """The column a whole-row error is about (e.g. a required SHA of an accepted row)."""
    if error.validator == "required":
        match = re.search(r"'([^']+)' is a required property", error.message)
        return match.group(1) if match else None
    return None


def accepted(rows):
    return [r for r in rows if r.get("decision") == "accept"]


def funnel(sheet_rows):
    """The paper's funnel: mined, resolved, accepted, rejected by reason."""
    rows = [r for r in sheet_rows if r.get("mined", "yes") != "gone"]
    reasons = Counter(r["reason"] or "unspecified" for r in rows if r["decision"] == "reject")
    out = [("mined", len(rows)),
           ("with_pr", sum(1 for r in rows if r.get("pr"))),
           ("nested", sum(1 for r in rows if r.get("subarea"))),
           ("multi_pr", sum(1 for r in rows if len((r.get("prs") or "").split()) > 1)),
           ("resolved", sum(1 for r in rows if r.get("buggy_sha") and r.get("corrected_sha"))),
           ("non_contiguous", sum(1 for r in rows if r.get("resolve_status") == "non_contiguous")),
           ("undecided", sum(1 for r in rows if not r["decision"])),
           ("accepted", sum(1 for r in rows if r["decision"] == "accept")),
           ("rejected", sum(reasons.values()))]
    out += [(f"rejected:{reason}", count) for reason, count in sorted(reasons.items())]
    out.append(("gone_from_mining", sum(1 for r in sheet_rows if r.get("mined") == "gone")))
    return [{"stage": s, "count": c} for s, c in out]


def sheet_missing(path):
    """Said at the start where the config's sheet is not there: a first run makes it, and so does a
    mistyped path, and either way the study has its controls only (the other sheets beside it
    named, the one meant among them)."""
    others = sorted(str(p) for p in path.parent.glob("*.csv")) if path.parent.is_dir() else []
    beside = f"; beside it: {', '.join(others)}" if others else ""
    return (f"the sheet {path} does not exist: this run makes it from the mined bugs, with no "
            f"decisions, so the study has its controls only until rows there are accepted{beside}")
