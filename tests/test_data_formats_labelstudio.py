"""Label Studio's JSON export of a pairwise project becomes one row per person's vote; a file
that is almost the export gets one message naming the field and the record; the format is told
from the content, not the file name."""

from __future__ import annotations

import json

import pytest

from puaudit.data.formats import detect
from puaudit.data.load import load_input
from puaudit.data.formats import labelstudio
from puaudit.data.io import read_table
from puaudit.data.schema import load_comparisons
from puaudit.errors import PUAuditError


def _pairwise(side: str) -> list:
    return [{"id": "r1", "from_name": "pw", "to_name": "answer1,answer2", "type": "pairwise",
             "origin": "manual", "value": {"selected": side}}]


def _export() -> list:
    """Three tasks, written from the export's documented fields: votes by ids 7 and 9 and a
    user object, a skipped annotation, a task nobody voted on, and a model prediction."""
    return [
        {"id": 101, "inner_id": 1, "project": 3, "meta": {}, "total_annotations": 3,
         "data": {"prompt": "Name a prime.", "answer1": "7", "answer2": "8",
                  "judge_winner": "A", "human_winner": ""},
         "annotations": [
             {"id": 1, "completed_by": 7, "result": _pairwise("left"), "was_cancelled": False,
              "ground_truth": False, "lead_time": 3.5, "created_at": "2024-05-01T10:00:00Z",
              "updated_at": "2024-05-01T10:00:04Z", "task": 101, "project": 3},
             {"id": 2, "completed_by": {"id": 9, "email": "ana@example.org"},
              "result": [{"from_name": "tie", "to_name": "prompt", "type": "choices",
                          "value": {"choices": ["Tie"]}}],
              "was_cancelled": False, "lead_time": 8.0},
             {"id": 3, "completed_by": 11, "result": [], "was_cancelled": True}],
         "predictions": []},
        {"id": 102, "data": {"prompt": "Say hi.", "answer1": "hi", "answer2": "hello there",
                             "judge_winner": "B"},
         "annotations": [{"id": 4, "completed_by": 7, "result": _pairwise("right"),
                          "was_cancelled": False}],
         "predictions": []},
        {"id": 103, "data": {"prompt": "2+2?", "answer1": "4", "answer2": "5",
                             "judge_winner": "A"},
         "annotations": [], "predictions": []},
    ]


def _write(tmp_path, records, name="project_export.csv"):
    path = tmp_path / name
    path.write_text(json.dumps(records), encoding="utf-8")
    return path


def test_one_row_per_vote_with_annotators_and_every_field(tmp_path):
    path = _write(tmp_path, _export())
    df = load_input(path)
    assert df["ls_task_id"].tolist() == [101, 101, 102, 103]
    assert df["human_winner"].tolist() == ["A", "tie", "B", ""]
    assert df["annotator"].tolist() == ["7", "ana@example.org", "7", ""]
    assert df.groupby("ls_task_id")["human_winner"].apply(lambda v: (v != "").sum()).tolist() \
        == [2, 1, 0]
    # the two answers under their own names and as response_a / response_b (left = A)
    assert df["answer1"].tolist() == df["response_a"].tolist() == ["7", "7", "hi", "4"]
    assert df["judge_winner"].tolist() == ["A", "A", "B", "A"]
    # the task's own human_winner is kept apart: the tool's votes are the human verdicts
    assert df["data.human_winner"].iloc[0] == ""
    assert df["ls_annotation_lead_time"].iloc[0] == 3.5
    assert json.loads(df["ls_annotation_result"].iloc[0])[0]["value"] == {"selected": "left"}
    assert json.loads(df["ls_task_not_voted"].iloc[0])[0]["completed_by"] == 11
    table = load_comparisons(df)
    assert table.columns["annotator"] == "annotator" and table.columns["human"] == "human_winner"
    assert table.item_id[0] == table.item_id[1] != table.item_id[2]


def test_prediction_is_the_judge_when_the_task_has_none(tmp_path):
    tasks = [{"id": 1, "data": {"prompt": "q", "text1": "a", "text2": "b"},
              "annotations": [],
              "predictions": [{"model_version": "gpt-4o", "score": 0.8,
                               "result": [{"type": "pairwise", "from_name": "pw",
                                           "to_name": "text1,text2",
                                           "value": {"selected": "right"}}]}]}]
    df = load_input(_write(tmp_path, tasks))
    assert df["judge_winner"].tolist() == ["B"]
    assert df["p_B"].iloc[0] == pytest.approx(0.8) and df["p_A"].iloc[0] == pytest.approx(0.2)
    assert df["response_a"].tolist() == ["a"] and df["human_winner"].tolist() == [""]


def test_tasks_not_yet_annotated_read_without_votes(tmp_path):
    tasks = [{"data": {"prompt": "q", "response_a": "a", "response_b": "b", "judge": "A"}}]
    df = load_input(_write(tmp_path, tasks, "tasks.json"))
    assert df["human_winner"].tolist() == [""] and df["response_a"].tolist() == ["a"]


def test_told_from_content_not_extension(tmp_path):
    path = _write(tmp_path, _export(), "whatever.txt")
    assert detect(read_table(path)) is labelstudio
    plain = tmp_path / "table.json"
    plain.write_text(json.dumps([{"prompt": "p", "response_a": "a", "response_b": "b",
                                  "judge_winner": "A", "data": "x"}]))
    assert detect(read_table(plain)) is None


@pytest.mark.parametrize("change, field, where", [
    (lambda t: t[1].pop("annotations"), "'annotations'", "record 2 (task id 102)"),
    (lambda t: t[1]["annotations"][0]["result"][0]["value"].pop("selected"),
     "'value.selected'", "record 2 (task id 102), annotation 1, result 1"),
    (lambda t: t[0]["annotations"][0].pop("result"), "'result'", "record 1 (task id 101), "
     "annotation 1"),
    (lambda t: t[2].pop("data"), "'data'", "record 3 (task id 103)"),
])
def test_almost_the_export_names_the_field_and_record(tmp_path, change, field, where):
    tasks = _export()
    change(tasks)
    with pytest.raises(PUAuditError) as err:
        load_input(_write(tmp_path, tasks))
    msg = str(err.value)
    assert field in msg and where in msg and "Label Studio" in msg


def test_unknown_words_are_refused_with_the_word(tmp_path):
    tasks = _export()
    tasks[1]["annotations"][0]["result"] = [{"type": "pairwise", "value": {"selected": "up"}}]
    with pytest.raises(PUAuditError, match="'up'.*'left' or 'right'"):
        load_input(_write(tmp_path, tasks))
    tasks[1]["annotations"][0]["result"] = [{"type": "choices",
                                             "value": {"choices": ["Maybe"]}}]
    with pytest.raises(PUAuditError, match="'Maybe' names neither response"):
        load_input(_write(tmp_path, tasks))


def test_puaudit_audit_reads_the_export(tmp_path, capsys):
    import numpy as np

    from puaudit.cli.commands import main

    rng = np.random.default_rng(0)
    tasks = []
    for i in range(80):  # 50 tasks with two votes each, 30 nobody voted on: 130 rows
        anns = [{"id": 10 * i + u, "completed_by": u, "was_cancelled": False,
                 "result": _pairwise("left" if rng.random() < 0.7 else "right")}
                for u in (1, 2)] if i < 50 else []
        tasks.append({"id": i, "annotations": anns, "predictions": [],
                      "data": {"prompt": f"q{i}", "answer1": f"a{i}" * (i % 5 + 1),
                               "answer2": f"b{i}", "judge_winner": "AB"[int(rng.random() < 0.4)]}})
    emb = tmp_path / "emb.npz"
    np.savez(emb, e_a=rng.normal(size=(130, 8)), e_b=rng.normal(size=(130, 8)))
    out = tmp_path / "out.csv"
    assert main(["audit", str(_write(tmp_path, tasks, "export")), "-o", str(out),
                 "--embeddings", str(emb), "--scorer", "centroid", "--spread-seeds", "1",
                 "--json"]) == 0
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert summary["n_rows"] == 130 and summary["n_unlabelled"] == 30
    assert read_table(out)["annotator"].tolist()[:4] == ["1", "2", "1", "2"]
