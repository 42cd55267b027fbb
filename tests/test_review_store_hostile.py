"""The review store against hostile input (issue 41, items 9 and 14-18), each built in the test:

* one uid three times with two verdicts: refused, naming the uid; repeats counted truthfully;
* six processes creating a new database at once, three writers each: nothing refused or lost;
* a 1 MB note: refused with the limit, never cut short;
* bad field values (lone surrogates, ``p_judge_right: "abc"``, ``created_at: 9999``, a reviewer
  given as a list, a note given as an object, ...): one message naming the field;
* another application's SQLite file: refused untouched (no table added, journal mode kept)
  unless asked;
* a read-only file in a read-only folder: opened read-only, decisions read, saving refused.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd
import pytest

from puaudit.cli import main
from puaudit.errors import PUAuditError
from puaudit.review.store import ReviewStore
from tests.conftest import ROOT


def _url(path: Path) -> str:
    return f"sqlite:///{path}"


def _db(tmp_path, name="review.sqlite") -> Path:
    return tmp_path / name


# --- item 9: one uid, two verdicts --------------------------------------------------------------
def _jsonl(path: Path, recs: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in recs))
    return path


def test_one_uid_with_two_verdicts_is_refused_naming_it(tmp_path, capsys):
    recs = [{"uid": "u1", "row_key": "k1", "verdict": v, "reviewer": "alice"}
            for v in ("A", "B", "A")]
    f = _jsonl(tmp_path / "d.jsonl", recs)
    db = _db(tmp_path)
    rc = main(["review", "import", str(f), "--db", str(db)])
    err = capsys.readouterr().err
    assert rc == 2
    assert "'u1'" in err and "verdict 'A' vs 'B'" in err and "decisions 1 and 2" in err
    assert ReviewStore(_url(db)).count() == 0  # nothing of the file is saved


def test_repeats_are_counted_as_repeats_not_as_already_there(tmp_path, capsys):
    recs = [{"uid": "u1", "row_key": "k1", "verdict": "A", "reviewer": "alice"}] * 3
    f = _jsonl(tmp_path / "d.jsonl", recs)
    db = _db(tmp_path)
    assert main(["review", "import", str(f), "--db", str(db)]) == 0
    out = capsys.readouterr().out
    assert "imported 1 decisions" in out and "2 repeated in the file" in out
    assert "already there" not in out
    assert main(["review", "import", str(f), "--db", str(db)]) == 0
    out = capsys.readouterr().out
    assert "imported 0 decisions" in out and "3 already there" in out
    assert ReviewStore(_url(db)).decisions()["verdict"].tolist() == ["A"]


def test_a_stored_uid_coming_back_with_another_verdict_is_refused(tmp_path):
    s = ReviewStore(_url(_db(tmp_path)))
    s.add("k1", "A", "alice", uid="u1")
    with pytest.raises(PUAuditError, match="'u1' names two different decisions") as info:
        s.add_many([{"uid": "u2", "row_key": "k2", "verdict": "A", "reviewer": "bob"},
                    {"uid": "u1", "row_key": "k1", "verdict": "B", "reviewer": "alice"}])
    assert info.value.column == "uid" and info.value.row == 2
    assert s.decisions()["uid"].tolist() == ["u1"]  # u2 was not saved either


# --- item 14: six processes create a new database at once ---------------------------------------
_RACE = """
import os, sys, threading, time
from puaudit.review.store import ReviewStore
url, who, start = sys.argv[1], sys.argv[2], float(sys.argv[3])
errors = []
def writer(j):
    try:
        while time.time() < start:
            time.sleep(0.001)
        s = ReviewStore(url)
        s.add(f"k-{who}-{j}", "A", f"{who}-{j}")
        s.dispose()
    except Exception as exc:
        errors.append(f"{type(exc).__name__}: {exc}")
threads = [threading.Thread(target=writer, args=(j,)) for j in range(3)]
for t in threads:
    t.start()
for t in threads:
    t.join()
print("\\n".join(errors))
sys.stdout.flush()
os._exit(1 if errors else 0)  # no interpreter teardown (see test_review_store)
"""


@pytest.mark.slow
def test_six_processes_creating_a_new_database_at_once_lose_nothing(tmp_path):
    db = _db(tmp_path)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    start = time.time() + 8  # every process imported and waiting: they start together
    procs = [subprocess.Popen([sys.executable, "-c", _RACE, _url(db), f"p{i}", str(start)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              cwd=ROOT, env=env) for i in range(6)]
    outs = [p.communicate(timeout=300) for p in procs]
    refused = [o[0].strip() for o in outs if o[0].strip()]
    assert not refused, refused
    assert [p.returncode for p in procs] == [0] * 6, [o[1][-500:] for o in outs]
    d = ReviewStore(_url(db)).decisions()
    assert len(d) == 18 and d["reviewer"].nunique() == 18


# --- item 15: a 1 MB note -----------------------------------------------------------------------
def test_a_long_note_is_refused_with_the_limit_never_cut(tmp_path, capsys):
    s = ReviewStore(_url(_db(tmp_path)))
    with pytest.raises(PUAuditError, match="1,000,000 characters long; the limit is 10,000"):
        s.add("k1", "A", "alice", note="n" * 1_000_000)
    assert s.count() == 0
    s.add("k1", "A", "alice", note="n" * 10_000)  # at the limit: kept whole
    assert len(s.decisions().loc[0, "note"]) == 10_000
    f = _jsonl(tmp_path / "d.jsonl", [{"row_key": "k2", "verdict": "B", "reviewer": "bob",
                                       "note": "x" * 1_000_000}])
    assert main(["review", "import", str(f), "--db", str(_db(tmp_path))]) == 2
    err = capsys.readouterr().err
    assert "note is 1,000,000 characters long; the limit is 10,000" in err
    assert s.count() == 1


# --- item 16: every field checked ---------------------------------------------------------------
GOOD = {"uid": "u1", "row_key": "k1", "verdict": "A", "reviewer": "alice", "note": "",
        "created_at": "2026-01-31T12:00:00Z", "dataset": "d.csv", "judge_verdict": "B",
        "p_judge_right": 0.4, "audit_group": "uncertain", "settings": "{}"}
# raw JSON lines: a lone surrogate can only be written as an escape
BAD_LINES = [
    ('"reviewer": "\\ud800al"', "reviewer", "lone surrogate"),
    ('"note": "ok \\udfff"', "note", "lone surrogate"),
    ('"row_key": "k\\ud83d"', "row_key", "lone surrogate"),
    ('"dataset": "\\ud800"', "dataset", "lone surrogate"),
    ('"p_judge_right": "abc"', "p_judge_right", "not a number"),
    ('"p_judge_right": 1.5', "p_judge_right", "not a probability"),
    ('"p_judge_right": true', "p_judge_right", "must be a number"),
    ('"created_at": 9999', "created_at", "is a number"),
    ('"created_at": "9999"', "created_at", "outside the possible range"),
    ('"created_at": "yesterday"', "created_at", "not a date and time"),
    ('"reviewer": ["alice", "bob"]', "reviewer", "must be text, not list"),
    ('"reviewer": true', "reviewer", "must be text, not bool"),
    ('"note": {"text": "x"}', "note", "must be text, not dict"),
    ('"verdict": ["A"]', "verdict", "must be text, not list"),
    ('"uid": {"a": 1}', "uid", "must be text, not dict"),
    ('"uid": "u 1; drop table"', "uid", "not a decision id"),
    ('"judge_verdict": "AAAAAAAAAAAA"', "judge_verdict", "the limit is 8"),
    ('"settings": "[1, 2]"', "settings", "must be a JSON object"),
    ('"settings": 7', "settings", "must be an object"),
    ('"dataset": "' + "d" * 600 + '"', "dataset", "the limit is 500"),
]


@pytest.mark.parametrize("field_json, field, words", BAD_LINES,
                         ids=[f"{f}-{i}" for i, (_, f, _) in enumerate(BAD_LINES)])
def test_every_bad_field_gets_one_message_naming_it(tmp_path, capsys, field_json, field, words):
    good = json.dumps({**GOOD, "uid": "u0"})
    key = field_json.split(":")[0]
    rec = {k: v for k, v in GOOD.items() if f'"{k}"' != key}
    bad = json.dumps(rec)[:-1] + ", " + field_json + "}"
    f = tmp_path / "d.jsonl"
    f.write_text(good + "\n" + bad + "\n")
    db = _db(tmp_path)
    rc = main(["review", "import", str(f), "--db", str(db)])
    err = capsys.readouterr().err
    assert rc == 2, err
    assert "This is a bug" not in err and "Traceback" not in err
    if words == "lone surrogate":  # the reader refuses it: no table column can hold it
        assert f"record 2, field '{field}'" in err, err
    else:
        assert err.startswith(f"error: decision 2: {field} "), err
    assert words in err, err
    assert ReviewStore(_url(db)).count() == 0  # the good line is not saved either


def test_the_store_api_names_the_field_too(tmp_path):
    s = ReviewStore(_url(_db(tmp_path)))
    with pytest.raises(PUAuditError, match="lone surrogate") as info:
        s.add("k1", "A", "alice", note="ok \udfff")
    assert info.value.column == "note"
    with pytest.raises(PUAuditError) as info:
        s.add("k1", "A", ["alice"])
    assert info.value.column == "reviewer"
    with pytest.raises(PUAuditError) as info:
        s.add_many([GOOD, {**GOOD, "uid": "u2", "created_at": 9999}])
    assert (info.value.column, info.value.row) == ("created_at", 2)
    assert s.count() == 0


def test_ordinary_values_from_csv_still_import(tmp_path):
    """Numbers where text is expected, as a CSV reader gives them (annotator ids, a numeric
    note, an id read as 7.0), are text; a created_at as pandas reads it is kept."""
    s = ReviewStore(_url(_db(tmp_path)))
    n = s.add_many([{**GOOD, "uid": "u1", "reviewer": 7, "note": 1.5},
                    {**GOOD, "uid": "u2", "reviewer": 8.0, "note": None, "p_judge_right": "0.25",
                     "created_at": pd.Timestamp("2026-02-01 10:00")}])
    assert n == 2
    d = s.decisions()
    assert d["reviewer"].tolist() == ["7", "8"] and d["note"].tolist() == ["1.5", ""]
    assert d["p_judge_right"].tolist() == [0.4, 0.25]
    assert str(d.loc[1, "created_at"]) == "2026-02-01 10:00:00+00:00"


# --- item 17: another application's SQLite file -------------------------------------------------
def _foreign(path: Path) -> bytes:
    con = sqlite3.connect(path)
    con.execute("CREATE TABLE invoices (id INTEGER PRIMARY KEY, total REAL)")
    con.execute("INSERT INTO invoices (total) VALUES (12.5)")
    con.commit()
    con.close()
    return path.read_bytes()


def _tables_and_mode(path: Path) -> tuple[list, str]:
    con = sqlite3.connect(path)
    try:
        names = sorted(r[0] for r in con.execute("SELECT name FROM sqlite_master "
                                                 "WHERE type = 'table'"))
        return names, con.execute("PRAGMA journal_mode").fetchone()[0]
    finally:
        con.close()


def test_another_applications_file_is_refused_untouched(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("PUAUDIT_REVIEW_ALLOW_OTHER_TABLES", raising=False)
    db = tmp_path / "app.sqlite"
    before = _foreign(db)
    with pytest.raises(PUAuditError, match=r"tables of another application \(invoices\)") as info:
        ReviewStore(_url(db))
    assert info.value.kind == "other-tables" and "--allow-other-tables" in str(info.value)
    assert db.read_bytes() == before  # no table added, not switched to WAL
    assert _tables_and_mode(db) == (["invoices"], "delete")
    f = _jsonl(tmp_path / "d.jsonl", [GOOD])
    assert main(["review", "import", str(f), "--db", str(db)]) == 2
    assert "tables of another application" in capsys.readouterr().err
    assert db.read_bytes() == before


def test_another_applications_file_is_shared_when_asked(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("PUAUDIT_REVIEW_ALLOW_OTHER_TABLES", raising=False)
    db = tmp_path / "app.sqlite"
    _foreign(db)
    f = _jsonl(tmp_path / "d.jsonl", [GOOD])
    assert main(["review", "import", str(f), "--db", str(db), "--allow-other-tables"]) == 0
    # our table is added, the journal mode stays the application's own
    assert _tables_and_mode(db) == (["invoices", "puaudit_review_decisions"], "delete")
    monkeypatch.setenv("PUAUDIT_REVIEW_ALLOW_OTHER_TABLES", "1")
    assert ReviewStore(_url(db)).decisions()["uid"].tolist() == ["u1"]


# --- item 18: a read-only folder ----------------------------------------------------------------
_READ_ONLY_PAGE = """
import sys
from puaudit.errors import PUAuditError
from puaudit.review.store import ReviewStore
s = ReviewStore(sys.argv[1])
print("READ_ONLY", s.read_only)
print("KEYS", s.decisions()["row_key"].tolist())
try:
    s.add("k2", "A", "alice")
except PUAuditError as exc:
    print("REFUSED", exc.kind, exc)
"""


def _drop_dac_override() -> list[str]:
    """root writes to read-only files anyway: run as root without that capability."""
    if os.geteuid() != 0:
        return []
    if shutil.which("setpriv") is None:
        pytest.skip("running as root without setpriv to drop CAP_DAC_OVERRIDE")
    return ["setpriv", "--bounding-set", "-dac_override", "--inh-caps", "-dac_override"]


def test_read_only_folder_opens_read_only_and_shows_decisions():
    prefix = _drop_dac_override()
    folder = Path(tempfile.mkdtemp(prefix="puaudit-ro-"))
    try:
        os.chmod(folder, 0o755)
        url = _url(folder / "review.sqlite")
        s = ReviewStore(url)  # a WAL file, as the store makes them
        s.add("k1", "A", "alice")
        s.dispose()
        os.chmod(folder / "review.sqlite", 0o444)
        os.chmod(folder, 0o555)
        proc = subprocess.run([*prefix, sys.executable, "-c", _READ_ONLY_PAGE, url],
                              capture_output=True, text=True, cwd=ROOT, timeout=120,
                              env={**os.environ, "PYTHONPATH": str(ROOT), "HOME": str(folder)})
        assert proc.returncode == 0, proc.stderr
        assert "READ_ONLY True" in proc.stdout and "KEYS ['k1']" in proc.stdout, proc.stdout
        assert "REFUSED read-only" in proc.stdout and "saving is off" in proc.stdout
        assert sorted(p.name for p in folder.iterdir()) == ["review.sqlite"]  # nothing written
    finally:
        os.chmod(folder, 0o755)
        shutil.rmtree(folder, ignore_errors=True)


def test_a_table_from_an_earlier_version_gains_the_reviewer_name_column(tmp_path):
    db = _db(tmp_path)
    con = sqlite3.connect(db)
    con.execute("CREATE TABLE puaudit_review_decisions (id INTEGER PRIMARY KEY, uid VARCHAR(32) "
                "UNIQUE, row_key VARCHAR(64), verdict VARCHAR(8), reviewer VARCHAR(200), note "
                "TEXT, created_at DATETIME, dataset VARCHAR(500), judge_verdict VARCHAR(8), "
                "p_judge_right FLOAT, audit_group VARCHAR(32), settings TEXT)")
    con.execute("INSERT INTO puaudit_review_decisions (uid, row_key, verdict, reviewer, note, "
                "created_at, dataset, settings) VALUES ('u0', 'k0', 'A', 'old', '', "
                "'2026-01-01 00:00:00.000000', '', '{}')")
    con.commit()
    con.close()
    # read-only, it is read as it is (no reviewer names)
    ro = ReviewStore(f"sqlite:///file:{db}?mode=ro&uri=true")
    assert ro.read_only and ro.decisions()["reviewer_name"].isna().all()
    ro.dispose()
    s = ReviewStore(_url(db))
    s.add("k1", "B", "a@x.org", reviewer_name="Alex")
    d = s.decisions()
    assert d["reviewer"].tolist() == ["old", "a@x.org"]
    assert d["reviewer_name"].tolist()[1] == "Alex" and d["reviewer_name"].isna().tolist()[0]
