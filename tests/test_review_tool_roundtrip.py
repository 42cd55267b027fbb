"""Rows that need a person go out to Label Studio or Argilla and come back as review decisions:
export tasks → the tool's people vote (simulated by adding what the tool's export holds) →
``puaudit review import`` → the store has the decisions keyed to the right rows."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from puaudit.cli.commands import main
from puaudit.data.load import load_input
from puaudit.data.io import read_table
from puaudit.data.schema import load_comparisons
from puaudit.review.keys import row_keys
from puaudit.review.store import ReviewStore


@pytest.fixture
def audit_export(tmp_path):
    """An audit export in our own words: six rows, two unlabelled uncertain, one unlabelled
    escalated, one unlabelled positive, two labelled."""
    df = pd.DataFrame({
        "question_id": [1, 2, 3, 4, 5, 6],
        "prompt": [f"question {i}" for i in range(6)],
        "response_a": [f"first answer {i}" for i in range(6)],
        "response_b": [f"second answer {i}" for i in range(6)],
        "judge_winner": ["A", "B", "A", "B", "A", "B"],
        "human_winner": ["", "", "", "", "A", "A"],
        "puaudit_split": ["unlabelled"] * 4 + ["P", "validation"],
        "puaudit_group": ["uncertain", "positive", "uncertain", "negative", "verified",
                          "uncertain"],
        "puaudit_trusted": [False, False, False, True, True, False],
        "puaudit_p_judge_right": [0.52, 0.61, 0.48, 0.2, 0.9, 0.5],
    })
    path = tmp_path / "audited.csv"
    df.to_csv(path, index=False)
    return path


def _keys(path) -> list:
    return list(row_keys(load_comparisons(read_table(path))))


def test_label_studio_round_trip(tmp_path, audit_export, capsys):
    tasks_path = tmp_path / "tasks.json"
    assert main(["review", "export", "--table", str(audit_export), "--to", "label-studio",
                 "-o", str(tasks_path)]) == 0
    tasks = json.loads(tasks_path.read_text())
    keys = _keys(audit_export)
    # uncertain or escalated, unlabelled: rows 0, 1 (escalated), 2; every column travels along
    assert [t["data"]["puaudit_row_key"] for t in tasks] == [keys[0], keys[1], keys[2]]
    assert tasks[0]["data"]["puaudit_p_judge_right"] == "0.52"  # CSV cells are text
    config = (tmp_path / "tasks.label_config.xml").read_text()
    assert '<Pairwise name="puaudit_verdict" toName="response_a,response_b"/>' in config
    assert 'value="$response_a"' in config

    # what Label Studio's JSON export holds after two people voted (one skipped a task)
    for n, task in enumerate(tasks, start=1):
        task.update(id=500 + n, predictions=[], annotations=[])
    tasks[0]["annotations"] = [
        {"id": 1, "completed_by": 7, "was_cancelled": False, "updated_at": "2024-06-01T09:00:00Z",
         "result": [{"type": "pairwise", "from_name": "puaudit_verdict",
                     "to_name": "response_a,response_b", "value": {"selected": "right"}}]},
        {"id": 2, "completed_by": 8, "was_cancelled": False,
         "result": [{"type": "choices", "from_name": "puaudit_tie", "to_name": "prompt",
                     "value": {"choices": ["Tie"]}}]}]
    tasks[2]["annotations"] = [
        {"id": 3, "completed_by": 7, "was_cancelled": False,
         "result": [{"type": "pairwise", "value": {"selected": "left"}}]},
        {"id": 4, "completed_by": 8, "was_cancelled": True, "result": []}]
    export = tmp_path / "project-1-at-2024.json"
    export.write_text(json.dumps(tasks))
    # the tool's export is also an input the audit reads
    assert load_input(export)["human_winner"].tolist() == ["B", "tie", "", "A"]

    db = tmp_path / "review.sqlite"
    assert main(["review", "import", str(export), "--db", str(db)]) == 0
    assert main(["review", "import", str(export), "--db", str(db)]) == 0
    assert "imported 0 decisions" in capsys.readouterr().out  # twice adds nothing
    got = ReviewStore(f"sqlite:///{db}").decisions().sort_values(["row_key", "reviewer"])
    want = sorted([(keys[0], "7", "B"), (keys[0], "8", "tie"), (keys[2], "7", "A")])
    assert sorted(zip(got["row_key"], got["reviewer"], got["verdict"])) == want
    first = got[got["reviewer"] == "7"].set_index("row_key").loc[keys[0]]
    assert first["audit_group"] == "uncertain" and first["p_judge_right"] == 0.52
    assert str(first["created_at"]).startswith("2024-06-01 09:00")


def test_argilla_round_trip(tmp_path, audit_export, capsys):
    folder = tmp_path / "for_argilla"
    assert main(["review", "export", "--table", str(audit_export), "--to", "argilla",
                 "-o", str(folder)]) == 0
    settings = json.loads((folder / "settings.json").read_text())
    assert settings["questions"][0]["settings"]["type"] == "label_selection"
    records = json.loads((folder / "records.json").read_text())
    keys = _keys(audit_export)
    assert [r["id"] for r in records] == [keys[0], keys[1], keys[2]]
    assert records[1]["fields"]["response_b"] == "second answer 1"
    assert records[1]["metadata"]["puaudit_row_key"] == keys[1]

    # what Dataset.to_disk writes once people answered (one draft: no vote)
    records[1]["responses"] = {"puaudit_verdict": [
        {"value": "A", "user_id": "u-ana", "status": "submitted"},
        {"value": "B", "user_id": "u-bo", "status": "draft"}]}
    records[2]["responses"] = {"puaudit_verdict": [
        {"value": "tie", "user_id": "u-bo", "status": "submitted"}]}
    back = tmp_path / "from_argilla"
    back.mkdir()
    for name in ("settings.json", "dataset.json"):
        (back / name).write_text((folder / name).read_text())
    (back / "records.json").write_text(json.dumps(records))

    db = tmp_path / "review.sqlite"
    assert main(["review", "import", str(back), "--db", str(db)]) == 0
    assert main(["review", "import", str(back), "--db", str(db)]) == 0
    assert "imported 0 decisions" in capsys.readouterr().out
    got = ReviewStore(f"sqlite:///{db}").decisions()
    assert sorted(zip(got["row_key"], got["reviewer"], got["verdict"])) == sorted(
        [(keys[1], "u-ana", "A"), (keys[2], "u-bo", "tie")])

    # flat records (records.to_list(flatten=True) saved as JSON Lines) come back the same way
    flat = [{**r["fields"], **r["metadata"], "id": r["id"],
             "puaudit_verdict.responses": ["B"], "puaudit_verdict.responses.users": ["u-cy"],
             "puaudit_verdict.responses.status": ["submitted"]} for r in records[:1]]
    flat_path = tmp_path / "flat.jsonl"
    flat_path.write_text(json.dumps(flat[0]))
    assert main(["review", "import", str(flat_path), "--db", str(db)]) == 0
    got = ReviewStore(f"sqlite:///{db}").decisions(reviewer="u-cy")
    assert got["row_key"].tolist() == [keys[0]] and got["verdict"].tolist() == ["B"]


def test_refusals_are_one_clear_message(tmp_path, audit_export, capsys):
    assert main(["review", "export", "--to", "label-studio", "-o", str(tmp_path / "t.json")]) == 2
    assert "--table AUDIT_EXPORT" in capsys.readouterr().err
    plain = tmp_path / "plain.csv"
    read_table(audit_export).drop(columns=["puaudit_group"]).to_csv(plain, index=False)
    assert main(["review", "export", "--table", str(plain), "--to", "argilla",
                 "-o", str(tmp_path / "f")]) == 2
    assert "'puaudit_group'" in capsys.readouterr().err
    taken = tmp_path / "taken"
    taken.mkdir()
    (taken / "x").write_text("x")
    assert main(["review", "export", "--table", str(audit_export), "--to", "argilla",
                 "-o", str(taken)]) == 2
    assert "not an empty folder" in capsys.readouterr().err
    assert main(["review", "import", str(plain), "--db", str(tmp_path / "x.sqlite")]) == 2
    err = capsys.readouterr().err
    assert "Label Studio JSON export or Argilla records" in err and "Traceback" not in err


def test_an_argilla_folder_is_bounded_by_the_row_limit(tmp_path, audit_export, capsys):
    """Issue 41 item 3: a ``to_disk`` folder's votes are counted against ``--max-rows`` as they
    expand (the Label Studio file already was); refused with exit 2 naming the flag, nothing
    stored, and within the limit it imports."""
    folder = tmp_path / "for_argilla"
    assert main(["review", "export", "--table", str(audit_export), "--to", "argilla",
                 "-o", str(folder)]) == 0
    records = json.loads((folder / "records.json").read_text())
    # one record answered by 40 people: 3 records expand to 40 + 1 + 1 = 42 rows
    records[0]["responses"] = {"puaudit_verdict": [
        {"value": "AB"[i % 2], "user_id": f"u{i}", "status": "submitted"} for i in range(40)]}
    (folder / "records.json").write_text(json.dumps(records))
    db = tmp_path / "review.sqlite"
    capsys.readouterr()
    assert main(["review", "import", str(folder), "--db", str(db), "--max-rows", "41"]) == 2
    err = capsys.readouterr().err
    assert "more than 41 rows" in err and "--max-rows" in err and "Traceback" not in err
    assert not db.exists() or len(ReviewStore(f"sqlite:///{db}").decisions()) == 0
    assert main(["review", "import", str(folder), "--db", str(db), "--max-rows", "42"]) == 0
    assert len(ReviewStore(f"sqlite:///{db}").decisions()) == 40
