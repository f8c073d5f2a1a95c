"""Step 3: the sheet is created, merged on re-mining without losing a person's edits, validated."""
import csv

import pytest

from bugimpact.config import SHEET_SCHEMA
from bugimpact.io import InputError, read_csv
from bugimpact.sheet import funnel, suggest_tags, update_sheet, validate

SHA_A, SHA_B = "a" * 40, "b" * 40


def bug(id_, text="Fix something", pr=""):
    return {"id": id_, "release": "v1", "area": "JIT", "pr": pr, "prs": pr, "text": text,
            "url": "https://example.invalid"}


def write_rows(path, columns, rows):
    with open(path, "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=columns)
        writer.writeheader()
        writer.writerows(rows)


def test_person_edits_survive_remining(tmp_path):
    sheet = tmp_path / "pytorch.csv"
    commits = [{"id": "pr1", "status": "resolved", "buggy_sha": SHA_A, "corrected_sha": SHA_B}]
    summary = update_sheet(sheet, [bug("pr1", pr="1"), bug("pr2", pr="2")], commits)
    assert summary["created"] and summary["appended"] == 2
    columns, rows = read_csv(sheet)
    # a person decides, explains, adds a column of their own and fixes a SHA by hand
    rows[0].update(decision="accept", notes="gradient path", reviewer="ana")
    rows[1].update(decision="reject", reason="crash", buggy_sha="c" * 40, reviewer="bo")
    write_rows(sheet, columns + ["reviewer"], rows)
    # mining later: pr2 vanished, pr3 is new, pr1 now also resolves differently
    commits2 = commits + [{"id": "pr3", "status": "resolved", "buggy_sha": SHA_B, "corrected_sha": SHA_A}]
    summary = update_sheet(sheet, [bug("pr1", pr="1"), bug("pr3", pr="3")], commits2)
    assert summary == {"existing": 2, "appended": 1, "cells_filled": 0, "flagged_gone": 1,
                       "total": 3, "created": False}
    columns, rows = read_csv(sheet)
    assert "reviewer" in columns
    by_id = {r["id"]: r for r in rows}
    assert by_id["pr1"]["decision"] == "accept" and by_id["pr1"]["notes"] == "gradient path"
    assert by_id["pr1"]["reviewer"] == "ana"
    assert by_id["pr2"]["mined"] == "gone" and by_id["pr2"]["reason"] == "crash"
    assert by_id["pr2"]["buggy_sha"] == "c" * 40 and by_id["pr2"]["reviewer"] == "bo"
    assert by_id["pr3"]["decision"] == "" and by_id["pr3"]["corrected_sha"] == SHA_A
    assert [r["id"] for r in rows] == ["pr1", "pr2", "pr3"]
    validate(sheet, SHEET_SCHEMA)
    stages = {r["stage"]: r["count"] for r in funnel(rows)}
    assert stages["mined"] == 2 and stages["accepted"] == 1 and stages["gone_from_mining"] == 1


def test_blank_cells_are_filled_when_resolution_improves(tmp_path):
    sheet = tmp_path / "s.csv"
    update_sheet(sheet, [bug("pr1", pr="1")], [{"id": "pr1", "status": "unresolved"}])
    summary = update_sheet(sheet, [bug("pr1", pr="1")],
                           [{"id": "pr1", "status": "resolved", "buggy_sha": SHA_A,
                             "corrected_sha": SHA_B}])
    assert summary["cells_filled"] == 3  # both SHAs, and the status they resolve to
    row = read_csv(sheet)[1][0]
    assert (row["buggy_sha"], row["corrected_sha"], row["resolve_status"]) == (SHA_A, SHA_B, "resolved")


def sheet_with(tmp_path, changes):
    path = tmp_path / "sheet.csv"
    update_sheet(path, [bug("pr1", pr="1"), bug("pr2", pr="2")],
                 [{"id": "pr1", "status": "resolved", "buggy_sha": SHA_A, "corrected_sha": SHA_B}])
    columns, rows = read_csv(path)
    for (index, column), value in changes.items():
        rows[index][column] = value
    write_rows(path, columns, rows)
    return path


@pytest.mark.parametrize("changes,row,field,message", [
    ({(0, "decision"): "maybe"}, 2, "decision", "'maybe'"),
    ({(0, "decision"): "reject", (0, "reason"): "boring"}, 2, "reason", "'boring'"),
    ({(1, "decision"): "reject"}, 3, "reason", "is not one of"),
    # an accepted row without SHAs is valid (not run, said at the start); a typed one is checked
    ({(1, "decision"): "accept", (1, "corrected_sha"): "b0rked"}, 3, "corrected_sha", "does not match"),
    ({(0, "buggy_sha"): "abc123"}, 2, "buggy_sha", "does not match"),
    ({(1, "id"): "../escape"}, 3, "id", "'../escape'"),
    ({(1, "id"): "pr1"}, 3, "id", "duplicate id 'pr1' (first on row 2)"),
])
def test_validation_names_file_row_and_column(tmp_path, changes, row, field, message):
    path = sheet_with(tmp_path, changes)
    with pytest.raises(InputError) as info:
        validate(path, SHEET_SCHEMA)
    text = str(info.value)
    assert text.startswith(f"{path}, row {row}, field '{field}'")
    assert message in text


def test_accepting_a_resolved_row_validates(tmp_path):
    path = tmp_path / "sheet.csv"
    update_sheet(path, [bug("pr1", pr="1")],
                 [{"id": "pr1", "status": "resolved", "buggy_sha": SHA_A, "corrected_sha": SHA_B}])
    columns, rows = read_csv(path)
    rows[0]["decision"] = "accept"
    write_rows(path, columns, rows)
    assert validate(path, SHEET_SCHEMA)[0]["decision"] == "accept"


def test_missing_column(tmp_path):
    path = tmp_path / "s.csv"
    path.write_text("id,decision\npr1,\n")
    with pytest.raises(InputError, match=r"row 1: missing column\(s\): reason, buggy_sha"):
        validate(path, SHEET_SCHEMA)


def test_suggested_tags():
    assert suggest_tags("Fix incorrect gradient for large target sizes in CUDA kernel") == \
        "gradient;cuda"
    assert suggest_tags("Fix segmentation fault in FileStore") == "crash"
    assert suggest_tags("Documentation: fixed link to java docs.") == "docs"
    assert "cpu_only" in suggest_tags("torch.lu Fix thread local issue on cpu")
    assert "build" in suggest_tags("C++ Extensions: fixed compilation error with older nvcc")
    assert "end_user" in suggest_tags("Better error message for quantized dispatch")


def sheet_text(rows=("pr1,,,,,keep me",)):
    return "id,decision,reason,buggy_sha,corrected_sha,notes\n" + "".join(r + "\n" for r in rows)


def test_excel_csv_utf8_with_a_bom_is_read_and_kept(tmp_path):
    from bugimpact.sheet import read_sheet
    sheet = tmp_path / "s.csv"
    sheet.write_bytes(b"\xef\xbb\xbf" + sheet_text(["pr1,reject,crash,,,café"]).encode())
    assert validate(sheet, SHEET_SCHEMA)[0]["id"] == "pr1"
    update_sheet(sheet, [bug("pr1", pr="1"), bug("pr2", pr="2")], [], SHEET_SCHEMA)
    columns, rows, bom = read_sheet(sheet)
    assert bom and [r["id"] for r in rows] == ["pr1", "pr2"]  # not doubled, edits kept by id
    assert rows[0]["decision"] == "reject" and rows[0]["notes"] == "café"


def test_a_semicolon_sheet_says_the_delimiter_is_the_problem(tmp_path):
    sheet = tmp_path / "s.csv"
    sheet.write_text(sheet_text().replace(",", ";"))
    before = sheet.read_bytes()
    with pytest.raises(InputError, match=r"s\.csv, row 1: the columns are separated by semicolons"):
        validate(sheet, SHEET_SCHEMA)
    with pytest.raises(InputError, match="semicolons"):  # merging validates first
        update_sheet(sheet, [bug("pr1", pr="1")], [], SHEET_SCHEMA)
    assert sheet.read_bytes() == before


def test_a_latin1_byte_names_the_row_and_column(tmp_path):
    sheet = tmp_path / "s.csv"
    sheet.write_bytes(sheet_text(["pr1,,,,,ok", "pr2,,,,,caf\xe9"]).encode("latin-1"))
    with pytest.raises(InputError, match=r"s\.csv, row 3, field 'notes': not UTF-8: byte 0xe9"):
        validate(sheet, SHEET_SCHEMA)


def test_outputs_honour_the_umask_and_the_sheet_keeps_its_mode(tmp_path):
    import os
    sheet = tmp_path / "s.csv"
    sheet.write_text(sheet_text())
    os.chmod(sheet, 0o664)
    old = os.umask(0o022)
    try:
        update_sheet(sheet, [bug("pr1", pr="1")], [], SHEET_SCHEMA)
        from bugimpact.io import write_json
        write_json(tmp_path / "record.json", {"a": 1})
    finally:
        os.umask(old)
    assert os.stat(sheet).st_mode & 0o777 == 0o664
    assert os.stat(tmp_path / "record.json").st_mode & 0o777 == 0o644


def test_resolution_and_device_facts_refresh_what_nobody_typed(tmp_path):
    sheet = tmp_path / "s.csv"
    update_sheet(sheet, [bug("pr1", "Fix the kernel", pr="1"), bug("pr2", pr="2")],
                 [{"id": "pr1", "status": "unresolved", "reason": "known: PR #1 not in the table"},
                  {"id": "pr2", "status": "unresolved"}])
    columns, rows = read_csv(sheet)
    rows[1].update(buggy_sha=SHA_A, corrected_sha=SHA_B, notes="typed by hand")
    write_rows(sheet, columns, rows)
    rows[0]["onefix"] = "no: compiled or build files (aten/src/ATen/native/Loss.cpp)"  # an older reading
    write_rows(sheet, columns, rows)
    update_sheet(sheet, [bug("pr1", "Fix the kernel", pr="1"), bug("pr2", pr="2")],
                 [{"id": "pr1", "status": "non_contiguous", "reason": "the PRs landed apart",
                   "diff_tags": "cuda", "onefix": "yes: kernels (op: aten/src/ATen/native/Loss.cpp)"},
                  {"id": "pr2", "status": "unresolved", "reason": "landed only off master"}])
    by_id = {r["id"]: r for r in read_csv(sheet)[1]}
    # what the diff says follows this package's reading of it: an upgrade that takes kernel fixes
    # is not held back by a sheet written before
    assert by_id["pr1"]["onefix"] == "yes: kernels (op: aten/src/ATen/native/Loss.cpp)"
    assert by_id["pr1"]["resolve_status"] == "non_contiguous"
    assert by_id["pr1"]["resolve_note"] == "the PRs landed apart"
    assert by_id["pr1"]["tags"].split(";")[-1] == "cuda"  # read from the diff, added to the tags
    # commits a person typed stand: the row stays resolved and its note is not replaced
    assert (by_id["pr2"]["resolve_status"], by_id["pr2"]["resolve_note"]) == ("resolved", "")
    assert by_id["pr2"]["buggy_sha"] == SHA_A
