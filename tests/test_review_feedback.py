"""Content keys, the review queue, and decisions flowing back as human labels."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from puaudit.audit.config import AuditConfig
from puaudit.embed.pairs import PairEmbeddings
from puaudit.audit.stages import audit_table
from puaudit.data.schema import load_comparisons
from puaudit.review.feedback import (latest_votes, merge_decisions, review_columns,
                                     review_summary, with_review_columns)
from puaudit.review.keys import row_keys
from puaudit.review.queue import review_order, review_queue


def _decisions(rows):
    d = pd.DataFrame(rows, columns=["row_key", "verdict", "reviewer", "note", "created_at"])
    d["created_at"] = pd.to_datetime(d["created_at"], utc=True)
    return d


def test_keys_follow_content_not_position(planted):
    df = planted[0].head(50)
    t = load_comparisons(df)
    shuffled = load_comparisons(df.sample(frac=1.0, random_state=1))
    more = load_comparisons(pd.concat([df, planted[0].iloc[50:60]], ignore_index=True))
    k = dict(zip(df["question_id"], row_keys(t)))
    assert dict(zip(shuffled.frame["question_id"], row_keys(shuffled))) == k
    assert list(row_keys(more)[:50]) == list(row_keys(t))  # rows added: old keys unchanged
    assert len(set(row_keys(t))) == 50
    swapped = df.rename(columns={"response_a": "response_b", "response_b": "response_a"})
    assert set(row_keys(load_comparisons(swapped))).isdisjoint(k.values())  # A/B swap: new key


def test_queue_orders_uncertain_then_reversals_then_closeness():
    p = np.array([0.9, 0.48, 0.2, 0.55, 0.3, np.nan, 0.7, 0.52])
    group = np.array(["positive", "uncertain", "negative", "uncertain", "negative", "positive",
                      "positive", "uncertain"], dtype=object)
    cand = np.arange(8)
    order = review_order(p, group, cand).tolist()
    assert order == [1, 7, 3, 4, 2, 6, 0, 5]
    rnd = review_order(p, group, cand, order="random", random_state=3)
    assert sorted(rnd.tolist()) == list(range(8))
    assert rnd.tolist() == review_order(p, group, cand, order="random", random_state=3).tolist()


@pytest.fixture(scope="module")
def audited(planted):
    df, e_a, e_b, _ = planted
    t = load_comparisons(df)
    emb = PairEmbeddings(e_a, e_b, encoder="planted")
    return t, emb, audit_table(t, emb, AuditConfig())


def test_review_queue_holds_unlabelled_rows_in_value_order(audited):
    t, _, res = audited
    q = review_queue(t, res)
    assert set(q["row"]) == set(np.flatnonzero(res.split == "unlabelled"))
    tiers = q["tier"].map({"uncertain": 0, "reversal candidate": 1, "other": 2}).to_numpy()
    assert (np.diff(tiers) >= 0).all()
    for _, g in q.groupby("tier"):
        d = np.abs(g["p_judge_right"].to_numpy() - 0.5)
        assert (np.diff(d[~np.isnan(d)]) >= -1e-12).all()
    only = review_queue(t, res, question_types=["type1"])
    assert set(only["question_type"]) == {"type1"} and 0 < len(only) < len(q)


def test_latest_vote_per_reviewer_and_skip_withdraws():
    d = _decisions([("k", "A", "ann", "", "2026-01-01"), ("k", "B", "ann", "", "2026-01-02"),
                    ("k", "A", "bob", "", "2026-01-01"), ("j", "A", "bob", "", "2026-01-01"),
                    ("j", "skip", "bob", "", "2026-01-03")])
    v = latest_votes(d)
    assert sorted(zip(v["row_key"], v["reviewer"], v["verdict"])) == [("k", "ann", "B"),
                                                                       ("k", "bob", "A")]
    s = review_summary(d).set_index("row_key")
    assert bool(s.loc["k", "disagreement"]) and s.loc["k", "verdict"] == ""
    assert s.loc["k", "votes"] == "bob: A; ann: B"


def test_merge_fills_unlabelled_rows_and_adds_second_votes(audited):
    t, emb, res = audited
    keys = row_keys(t)
    u = np.flatnonzero(res.split == "unlabelled")[:3]
    labelled = np.flatnonzero(res.split == "P")[0]
    d = _decisions([(keys[u[0]], "A", "ann", "", "2026-01-01"),
                    (keys[u[0]], "B", "bob", "not sure", "2026-01-02"),
                    (keys[u[1]], "B", "ann", "", "2026-01-01"),
                    (keys[u[2]], "skip", "ann", "", "2026-01-01"),
                    (keys[labelled], "A", "ann", "", "2026-01-01"),
                    ("not-in-this-table", "A", "ann", "", "2026-01-01")])
    m = merge_decisions(t, d)
    n = len(t)
    assert len(m) == n + 2  # bob's second vote on u0 and ann's vote on an already labelled row
    assert m.human[u[0]] == "A" and m.annotator[u[0]] == "ann"
    assert m.human[u[1]] == "B" and m.annotator[u[1]] == "ann"
    assert m.human[u[2]] is None  # skip gives no label
    # added rows in time order: ann's vote on the labelled row, then bob's second vote on u0
    assert list(m.human[n:]) == ["A", "B"] and list(m.annotator[n:]) == ["ann", "bob"]
    assert m.item_id[n + 1] == t.item_id[u[0]]  # same item: never straddles P and validation
    assert list(m.extra["review_source"][n:]) == [labelled, u[0]]
    assert m.n_annotated == t.n_annotated + 4
    untouched = np.setdiff1d(np.arange(n), u[:2])
    assert all(m.human[i] == t.human[i] for i in untouched)
    # the audit reruns on the larger labelled set
    emb2 = PairEmbeddings(np.concatenate([emb.e_a, emb.e_a[[labelled, u[0]]]]),
                          np.concatenate([emb.e_b, emb.e_b[[labelled, u[0]]]]), encoder="x")
    res2 = audit_table(m, emb2, AuditConfig())
    labelled_before = int(np.isin(res.split, ["P", "validation"]).sum())
    assert int(np.isin(res2.split, ["P", "validation"]).sum()) > labelled_before
    # the export keeps every input row and column, plus the review columns
    frame = with_review_columns(res2.to_frame(m) if _takes_table(res2) else res2.to_frame(), m, d)
    assert len(frame) == n
    assert list(frame.columns[:len(t.frame.columns)]) == list(t.frame.columns)
    pd.testing.assert_frame_equal(frame[t.frame.columns].reset_index(drop=True),
                                  t.frame.reset_index(drop=True))
    assert frame.loc[u[0], "puaudit_review_votes"] == "ann: A; bob: B"
    assert bool(frame.loc[u[0], "puaudit_review_disagreement"])
    assert frame.loc[u[1], "puaudit_review_verdict"] == "B"
    assert frame["puaudit_review_n_votes"].sum() == 4


def _takes_table(result) -> bool:
    import inspect

    return len(inspect.signature(result.to_frame).parameters) >= 1


def test_review_columns_on_reupload_with_rows_added(planted):
    df = planted[0]
    t_small = load_comparisons(df.head(100))
    k = row_keys(t_small)
    d = _decisions([(k[5], "A", "ann", "", "2026-01-01"), (k[7], "tie", "bob", "", "2026-01-01")])
    bigger = load_comparisons(pd.concat([df.iloc[100:150], df.head(100)], ignore_index=True))
    cols = review_columns(bigger, d)
    assert cols.loc[55, "puaudit_review_verdict"] == "A"  # row 5 now sits at 50 + 5
    assert cols.loc[57, "puaudit_review_verdict"] == "tie"
    assert cols["puaudit_review_n_votes"].sum() == 2
