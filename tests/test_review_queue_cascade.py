"""The review queue after a cascade of judges (issue 42 item 4): the rows the cascade left for
people without a human verdict come first, tier "cascade: no judge trusted", each part in the
queue's own order; ``puaudit review export --table CASCADE_EXPORT --to ...`` sends them."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from puaudit.audit.config import AuditConfig
from puaudit.audit.stages import audit_table
from puaudit.embed.pairs import PairEmbeddings
from puaudit.cli.commands import main
from puaudit.data.schema import load_comparisons
from puaudit.errors import PUAuditError
from puaudit.review.keys import row_keys
from puaudit.review.queue import (CASCADE_TIER, STAGE_COLUMN, cascade_people, review_order,
                                  review_queue)


def test_first_rows_lead_and_each_part_keeps_the_value_order():
    p = np.array([0.9, 0.48, 0.2, 0.55, 0.3, np.nan, 0.7, 0.52])
    group = np.array(["positive", "uncertain", "negative", "uncertain", "negative", "positive",
                      "positive", "uncertain"], dtype=object)
    cand = np.arange(8)
    assert review_order(p, group, cand).tolist() == [1, 7, 3, 4, 2, 6, 0, 5]
    first = np.zeros(8, dtype=bool)
    first[[6, 2, 5]] = True
    # first rows in the value order among themselves (reversal 2, then other 6, then nan 5)
    assert review_order(p, group, cand, first=first).tolist() == [2, 6, 5, 1, 7, 3, 4, 0]
    # with a certified threshold: escalated (below > 0) farthest first, then trusted; first
    # rows still ahead of both
    below = np.array([-0.1, 0.3, 0.1, -0.05, 0.2, np.nan, 0.05, -0.2])
    assert review_order(p, group, cand, below=below).tolist() == [1, 4, 2, 6, 3, 0, 7, 5]
    assert review_order(p, group, cand, below=below, first=first).tolist() == [
        2, 6, 5, 1, 4, 3, 0, 7]
    assert review_order(p, group, cand, first=np.zeros(8, bool)).tolist() == [
        1, 7, 3, 4, 2, 6, 0, 5]


@pytest.fixture(scope="module")
def cascaded(planted):
    """The planted table with a cascade export's stage column: ``people`` on 40 unlabelled
    rows, on 20 rows with a human verdict, and on 3 rows where the audited judge said tie (the
    audit leaves them out); a judge's name elsewhere."""
    df, e_a, e_b, _ = planted
    df = df.copy()
    df.loc[[0, 1, 2], "judge_winner"] = "tie"
    df.loc[[0, 1, 2], "human_winner"] = ""
    rng = np.random.default_rng(1)
    unlabelled = np.flatnonzero((df["human_winner"] == "").to_numpy())
    labelled = np.flatnonzero((df["human_winner"] != "").to_numpy())
    people = np.r_[[0, 1, 2], rng.choice(unlabelled[unlabelled > 2], 40, replace=False),
                   rng.choice(labelled, 20, replace=False)]
    stage = np.full(len(df), "judge_winner_gpt35", dtype=object)
    stage[people] = "people"
    plain = load_comparisons(df)
    res = audit_table(plain, PairEmbeddings(e_a, e_b, encoder="planted"), AuditConfig())
    with_col = load_comparisons(df.assign(**{STAGE_COLUMN: stage}))
    want = np.zeros(len(df), dtype=bool)
    want[people] = True
    want &= (df["human_winner"] == "").to_numpy()
    return plain, with_col, res, stage, want


def test_the_cascade_rows_for_people_come_first_then_the_queue_as_before(cascaded):
    plain, with_col, res, stage, want = cascaded
    before = review_queue(plain, res)
    q = review_queue(with_col, res)
    n = int(want.sum())
    assert n == 43
    assert set(q["row"][:n]) == set(np.flatnonzero(want))
    assert (q["tier"][:n] == CASCADE_TIER).all() and (q["tier"][n:] != CASCADE_TIER).all()
    # the tie rows the audit left out join the queue; people rows with a human verdict do not
    assert {0, 1, 2} <= set(q["row"][:n])
    assert set(q["row"]) == set(before["row"]) | {0, 1, 2}
    # the rest keeps the queue's order; the cascade rows are in that order among themselves
    assert q["row"][n:].tolist() == [r for r in before["row"] if not want[r]]
    assert [r for r in q["row"][:n] if r > 2] == [r for r in before["row"] if want[r]]
    assert q["rank"].tolist() == list(range(1, len(q) + 1))
    # the stages given as an array (a cascade run in this session) queue the same rows
    given = review_queue(plain, res, cascade_stage=stage)
    pd.testing.assert_frame_equal(given, q)
    # filters apply to the cascade rows too
    only = review_queue(with_col, res, question_types=["type1"])
    assert set(only["question_type"]) == {"type1"}
    assert (only["tier"] == CASCADE_TIER).sum() == (
        want & (np.asarray(plain.question_type) == "type1")).sum()


def test_no_cascade_changes_nothing_and_a_wrong_length_is_refused(cascaded):
    plain, with_col, res, stage, _ = cascaded
    assert cascade_people(plain) is None
    assert cascade_people(with_col).sum() == 43
    with pytest.raises(PUAuditError, match="run the cascade again"):
        review_queue(plain, res, cascade_stage=stage[:-1])


def test_review_export_to_a_tool_takes_the_cascade_export(tmp_path):
    """A cascade export (no audit columns) sent to Label Studio: its tasks are the rows left
    for people without a human verdict, once each."""
    df = pd.DataFrame({
        "prompt": [f"question {i}" for i in range(6)],
        "response_a": [f"first answer {i}" for i in range(6)],
        "response_b": [f"second answer {i}" for i in range(6)],
        "judge_winner": ["A", "B", "A", "B", "A", "B"],
        "human_winner": ["", "", "A", "", "", "B"],
        "puaudit_cascade_split": ["unlabelled", "unlabelled", "P", "unlabelled", "excluded",
                                  "validation"],
        "puaudit_cascade_stage": ["people", "judge_winner", "people", "people", "people",
                                  "judge_winner"],
        "puaudit_cascade_verdict": [None, "B", "A", None, None, "B"],
    })
    path = tmp_path / "cascade.csv"
    df.to_csv(path, index=False)
    out = tmp_path / "tasks.json"
    assert main(["review", "export", "--table", str(path), "--to", "label-studio",
                 "-o", str(out)]) == 0
    tasks = json.loads(out.read_text())
    keys = row_keys(load_comparisons(pd.read_csv(path)))
    assert [t["data"]["puaudit_row_key"] for t in tasks] == [keys[0], keys[3], keys[4]]
    assert [t["data"]["prompt"] for t in tasks] == ["question 0", "question 3", "question 4"]
