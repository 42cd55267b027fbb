"""`puaudit review export|import`: decisions round-trip between stores; a table export carries
the review columns with every input row and column; bad files get one clear message."""

from __future__ import annotations

import pandas as pd

from puaudit.cli.commands import main
from puaudit.data.io import read_table
from puaudit.data.schema import load_comparisons
from puaudit.review.keys import row_keys
from puaudit.review.store import ReviewStore


def test_export_import_round_trip(tmp_path, planted, capsys):
    df = planted[0].head(40)
    src = tmp_path / "table.csv"
    df.to_csv(src, index=False)
    keys = row_keys(load_comparisons(read_table(src)))
    a = tmp_path / "a.sqlite"
    s = ReviewStore(f"sqlite:///{a}")
    s.add(keys[0], "A", "ann", note="clear", settings={"p_ratio": 0.3})
    s.add(keys[0], "B", "bob")
    s.add(keys[3], "tie", "ann")
    out = tmp_path / "decisions.jsonl"
    assert main(["review", "export", "-o", str(out), "--db", str(a)]) == 0
    exported = read_table(out)
    assert len(exported) == 3 and set(exported["reviewer"]) == {"ann", "bob"}
    b = tmp_path / "b.sqlite"
    assert main(["review", "import", str(out), "--db", str(b)]) == 0
    assert main(["review", "import", str(out), "--db", str(b)]) == 0  # twice: nothing added
    assert "imported 0 decisions" in capsys.readouterr().out
    got = ReviewStore(f"sqlite:///{b}").decisions()
    assert sorted(got["uid"]) == sorted(exported["uid"])
    assert got.set_index("uid").loc[exported["uid"][0], "note"] == "clear"

    table_out = tmp_path / "reviewed.csv"
    assert main(["review", "export", "--table", str(src), "-o", str(table_out),
                 "--db", str(b)]) == 0
    t = read_table(table_out)
    assert len(t) == len(df)
    assert list(t.columns[:len(df.columns)]) == list(df.columns)
    assert t.loc[0, "puaudit_review_votes"] == "ann: A; bob: B"
    assert str(t.loc[0, "puaudit_review_disagreement"]).lower() == "true"
    assert t.loc[3, "puaudit_review_verdict"] == "tie"


def test_import_refuses_bad_files_with_the_column_or_row(tmp_path, capsys):
    bad = tmp_path / "bad.csv"
    pd.DataFrame({"row_key": ["k"], "verdict": ["A"]}).to_csv(bad, index=False)
    assert main(["review", "import", str(bad), "--db", str(tmp_path / "x.sqlite")]) == 2
    assert "['reviewer'] missing" in capsys.readouterr().err
    bad2 = tmp_path / "bad2.csv"
    pd.DataFrame({"row_key": ["k", "j"], "verdict": ["A", "perhaps"],
                  "reviewer": ["r", "r"]}).to_csv(bad2, index=False)
    assert main(["review", "import", str(bad2), "--db", str(tmp_path / "x.sqlite")]) == 2
    err = capsys.readouterr().err
    assert "decision 2" in err and "perhaps" in err and "Traceback" not in err
    assert ReviewStore(f"sqlite:///{tmp_path / 'x.sqlite'}").count() == 0  # all or nothing


def test_corrupt_database_is_one_message(tmp_path, capsys):
    db = tmp_path / "junk.sqlite"
    db.write_bytes(b"x" * 4096)
    assert main(["review", "export", "-o", str(tmp_path / "o.csv"), "--db", str(db)]) == 2
    assert "not a valid SQLite database" in capsys.readouterr().err
