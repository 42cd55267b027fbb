"""Argilla records (a ``Dataset.to_disk`` folder, a nested records file, flat records) become
one row per submitted response; the suggestion is the judge's verdict; a file that is almost the
format gets one message naming the field and the record; the format is told from content."""

from __future__ import annotations

import json

import pytest

from puaudit.data.formats import argilla, detect
from puaudit.data.load import load_input
from puaudit.data.io import read_table
from puaudit.data.schema import load_comparisons
from puaudit.errors import PUAuditError

SETTINGS = {
    "guidelines": "Pick the better response.",
    "fields": [{"name": n, "title": n, "required": True,
                "settings": {"type": "text", "use_markdown": False}}
               for n in ("prompt", "response1", "response2")],
    "questions": [
        {"name": "comment", "title": "Why?", "required": False,
         "settings": {"type": "text", "use_markdown": False}},
        {"name": "preference", "title": "Which is better?", "required": True,
         "settings": {"type": "label_selection", "visible_options": None,
                      "options": [{"value": "response1", "text": "Response 1"},
                                  {"value": "response2", "text": "Response 2"},
                                  {"value": "tie", "text": "Tie"}]}}],
    "vectors": [], "metadata": [], "allow_extra_metadata": True}


def _records() -> list:
    """Nested records as records.to_json writes them: two people and a draft on the first,
    nobody on the second, a judge's suggestion on both."""
    return [
        {"id": "rec-1", "_server_id": "9f1c", "status": "completed",
         "fields": {"prompt": "Capital of France?", "response1": "Paris", "response2": "Lyon"},
         "metadata": {"source": "dev", "model_1": "m-small", "model_2": "m-large"},
         "suggestions": {"preference": {"value": "response2", "score": 0.7, "agent": "gpt-4o"}},
         "responses": {"preference": [
             {"value": "response1", "user_id": "u-ana", "status": "submitted"},
             {"value": "tie", "user_id": "u-bo", "status": "submitted"},
             {"value": "response2", "user_id": "u-cy", "status": "draft"}],
             "comment": [{"value": "close call", "user_id": "u-bo", "status": "submitted"}]},
         "vectors": {}},
        {"id": "rec-2", "_server_id": None, "status": "pending",
         "fields": {"prompt": "2+2?", "response1": "4", "response2": "5"},
         "metadata": {"source": "dev", "model_1": "m-small", "model_2": "m-large"},
         "suggestions": {"preference": {"value": "response1", "score": 0.9, "agent": "gpt-4o"}},
         "responses": {}, "vectors": {}},
    ]


def _to_disk(folder, records, settings=SETTINGS):
    folder.mkdir()
    (folder / "settings.json").write_text(json.dumps(settings))
    (folder / "dataset.json").write_text(json.dumps({"name": "pairs", "status": "ready"}))
    (folder / "records.json").write_text(json.dumps(records))
    return folder


def test_to_disk_folder_one_row_per_submitted_response(tmp_path):
    df = load_input(_to_disk(tmp_path / "pairs", _records()))
    assert df["id"].tolist() == ["rec-1", "rec-1", "rec-2"]
    assert df["human_winner"].tolist() == ["A", "tie", ""]
    assert df["annotator"].tolist() == ["u-ana", "u-bo", ""]
    assert df.groupby("id")["human_winner"].apply(lambda v: (v != "").sum()).tolist() == [2, 0]
    # the suggestion is the judge's verdict, its score the judge's confidence, its agent the judge
    assert df["judge_winner"].tolist() == ["B", "B", "A"]
    assert df["p_B"].tolist() == pytest.approx([0.7, 0.7, 0.1])
    assert df["verdict_source"].tolist() == ["gpt-4o"] * 3
    # fields and metadata as columns; each vote row carries its own person's answers (the
    # comment is u-bo's), the draft no row carries is kept once, on the record's first row
    assert df["response_a"].tolist() == ["Paris", "Paris", "4"]
    assert df["source"].tolist() == ["dev"] * 3
    assert df["preference.responses"].tolist()[:2] == ["response1", "tie"]
    assert df["preference.responses.users"].tolist()[:2] == ["u-ana", "u-bo"]
    assert df["comment.responses"].isna().tolist()[:2] == [True, False]
    assert df["comment.responses"].iloc[1] == "close call"
    other = json.loads(df["argilla_other_responses"].iloc[0])
    assert other == {"preference": [{"value": "response2", "user_id": "u-cy",
                                     "status": "draft"}]}
    assert df["argilla_other_responses"].iloc[1:].isna().all()
    table = load_comparisons(df)
    assert table.columns["annotator"] == "annotator"
    assert table.item_id[0] == table.item_id[1] != table.item_id[2]


def test_flat_records_with_a_ranking_question(tmp_path):
    flat = [{"id": "a", "prompt": "p", "response1": "x", "response2": "y",
             "rank.responses": [["response2", "response1"],
                                [{"value": "response1", "rank": 1},
                                 {"value": "response2", "rank": 1}]],
             "rank.responses.users": ["u1", "u2"],
             "rank.responses.status": ["submitted", "submitted"],
             "rank.suggestion": ["response1", "response2"], "rank.suggestion.score": None,
             "rank.suggestion.agent": "judge-x"}]
    path = tmp_path / "records.txt"
    path.write_text("\n".join(json.dumps(r) for r in flat))
    df = load_input(path)
    assert df["human_winner"].tolist() == ["B", "tie"]
    assert df["annotator"].tolist() == ["u1", "u2"]
    assert df["judge_winner"].tolist() == ["A", "A"] and "p_A" not in df.columns


def test_no_votes_yet_is_fine(tmp_path):
    recs = _records()
    for r in recs:
        r["responses"], r["suggestions"] = {}, {}
    df = load_input(_to_disk(tmp_path / "fresh", recs))
    assert df["human_winner"].tolist() == ["", ""]


def test_told_from_content_not_extension(tmp_path):
    path = tmp_path / "dump.csv"
    path.write_text(json.dumps(_records()))
    assert detect(read_table(path)) is argilla
    assert argilla.disk_folder(_to_disk(tmp_path / "d", _records()))
    assert not argilla.disk_folder(tmp_path)


@pytest.mark.parametrize("change, field, where", [
    (lambda r: r[0]["responses"]["preference"][1].pop("user_id"), "'user_id'",
     "record 1, response 2 to 'preference'"),
    (lambda r: r[1].pop("fields"), "'fields'", "record 2"),
])
def test_almost_the_format_names_the_field_and_record(tmp_path, change, field, where):
    recs = _records()
    change(recs)
    path = tmp_path / "records.json"
    path.write_text(json.dumps(recs))
    with pytest.raises(PUAuditError) as err:
        load_input(path)
    msg = str(err.value)
    assert field in msg and where in msg and "Argilla" in msg


def test_flat_responses_without_users_name_the_field_and_line(tmp_path):
    rows = [{"id": "a", "prompt": "p", "response1": "x", "response2": "y",
             "pref.responses": ["response1"], "pref.responses.users": ["u1"]},
            {"id": "b", "prompt": "q", "response1": "x", "response2": "y",
             "pref.responses": ["response2"]}]
    path = tmp_path / "flat.jsonl"
    path.write_text("\n\n".join(json.dumps(r) for r in rows))
    with pytest.raises(PUAuditError, match=r"line 3 has no 'pref.responses.users'"):
        load_input(path)


def test_a_question_that_names_no_side_is_refused(tmp_path):
    rows = [{"id": "a", "prompt": "p", "response1": "x", "response2": "y",
             "quality.responses": ["great"], "quality.responses.users": ["u1"]}]
    path = tmp_path / "flat.jsonl"
    path.write_text(json.dumps(rows[0]))
    with pytest.raises(PUAuditError, match=r"\['quality'\].*LabelQuestion"):
        load_input(path)


def test_hub_layout_parquet(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    # to_hub's records: flat columns, one list item per person
    pq.write_table(pa.table({
        "id": ["a", "b"], "prompt": ["p", "q"], "response1": ["x", "y"], "response2": ["z", "w"],
        "pref.responses": [["response1", "tie"], None],
        "pref.responses.users": [["u1", "u2"], None],
        "pref.responses.status": [["submitted", "submitted"], None],
        "pref.suggestion": ["response2", "response1"], "pref.suggestion.score": [0.6, 0.9],
        "pref.suggestion.agent": ["j", "j"]}), tmp_path / "train.parquet")
    df = load_input(tmp_path / "train.parquet")
    assert df["human_winner"].tolist() == ["A", "tie", ""]
    assert df["annotator"].tolist() == ["u1", "u2", ""]
    assert df["p_A"].tolist() == pytest.approx([0.4, 0.4, 0.9])


def test_hub_parquet_with_parquet_output_goes_through_the_reader(tmp_path, monkeypatch):
    """Parquet in and out streams a comparison table of our own, but a tool's Parquet file
    (Argilla's Hub records) becomes other rows: the export holds the converted rows, one per
    vote, not the file's rows."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from puaudit.cli.commands import main

    monkeypatch.setenv("PUAUDIT_TEST_ENCODER", "hashing")
    n = 40
    pq.write_table(pa.table({
        "id": [f"r{i}" for i in range(n)],
        "prompt": [f"question {i}" for i in range(n)],
        "response1": [f"answer one {i} " * (1 + i % 3) for i in range(n)],
        "response2": [f"answer two {i} " * (1 + i % 2) for i in range(n)],
        "pref.responses": [["response1", "response2"] if i % 2 else ["tie"] for i in range(n)],
        "pref.responses.users": [["u1", "u2"] if i % 2 else ["u3"] for i in range(n)],
        "pref.responses.status": [["submitted", "submitted"] if i % 2 else ["submitted"]
                                  for i in range(n)],
        "pref.suggestion": ["response1" if i % 3 else "response2" for i in range(n)]}),
        tmp_path / "records.parquet")
    out = tmp_path / "out.parquet"
    rc = main(["audit", str(tmp_path / "records.parquet"), "-o", str(out)])
    assert rc == 0
    export = pq.read_table(out).to_pandas()
    assert len(export) == 60  # 20 records with two votes, 20 with one
    assert set(export["annotator"]) == {"u1", "u2", "u3"}
    assert "puaudit_adjusted" in export.columns
