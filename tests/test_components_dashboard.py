"""Pure dashboard builders (components/) and puaudit.embed.projection, against known answers."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from components.data_summary import judge_candidates, mapping_defaults
from puaudit.report.figures.data_summary import summary_metrics
from puaudit.report.figures.embedding_map import SPLIT_SYMBOLS, embedding_scatter, map_frame
from puaudit.report.figures.metrics import (
    audit_note,
    formula_cells,
    headline_metrics,
    per_type_table,
    spreadsheet_safe_copy,
)
from puaudit.report.figures.radar import consistency_radar, radar_frame
from puaudit.report.figures.scores import (
    nearest_threshold_rows,
    score_density,
    score_frame,
    sorted_scores_figure,
    threshold_lines,
)
from puaudit.audit.estimator import PUAudit
from puaudit.embed.pairs import embed_table
from puaudit.data.demo import generate_demo
from puaudit.data.schema import load_comparisons
from puaudit.embed.projection import oriented_differences, project_2d
from puaudit.embed.hashing import HashingEncoder


@pytest.fixture(scope="module")
def demo():
    df = generate_demo(n_rows=300, random_state=0)
    table = load_comparisons(df)
    emb = embed_table(table, HashingEncoder())
    return df, table, emb


@pytest.fixture(scope="module")
def paper_result(demo):
    _, table, emb = demo
    return PUAudit(m=0.6, scorer="centroid", rule="paper", random_state=0).fit(table, emb).result_


def test_mapping_defaults_and_judge_candidates(demo):
    df, _, _ = demo
    m = mapping_defaults(df)
    assert m["judge"] == "judge_winner" and m["human"] == "human_winner"
    assert m["question_type"] == "category" and m["annotator"] == "annotator"
    # the padded copy is a second judge; the hidden truth and the human column are not
    assert judge_candidates(df, m) == ["judge_winner", "judge_winner_padded"]
    bare = df.drop(columns=["judge_winner", "judge_winner_padded"])
    m2 = mapping_defaults(bare)  # a required role missing: no exception, role is None
    assert m2["judge"] is None and m2["prompt"] == "prompt"


def test_summary_metrics_text():
    s = {"n_rows": 1200, "n_question_types": 3, "n_annotated": 300, "annotated_share": 0.25,
         "n_judge_ties": 4, "n_human_ties": 2, "judge_human_agreement": 0.8125,
         "question_types": {}}
    assert dict(summary_metrics(s)) == {
        "Rows": "1,200", "Question types": "3", "Annotated (25%)": "300", "Judge ties": "4",
        "Human ties": "2", "Agreement": "81.2%"}


def test_headline_and_per_type_match_the_result(paper_result):
    r = paper_result
    cards = {c["label"]: c for c in headline_metrics(r)}
    assert cards["Cons_orig"]["value"] == f"{r.metrics['cons_orig']:.1%}"
    # the change as the two percents shown read (issue 39), not the unrounded difference
    shown = [float(cards[k]["value"].rstrip("%")) for k in ("Cons_orig", "Cons_adj")]
    assert cards["Cons_adj"]["delta"] == f"{shown[1] - shown[0]:+.1f} pts"
    assert cards["Reversed"]["value"] == f"{r.metrics['n_reversed']} of {r.metrics['n']}"
    pt = per_type_table(r)
    assert sorted(pt["question_type"]) == sorted(r.per_type)
    assert pt["n_validation"].sum() == r.metrics["n"]
    np.testing.assert_allclose(pt["delta_pts"], 100 * (pt["cons_adj"] - pt["cons_orig"]), atol=1e-9)


def test_audit_note_when_nothing_is_reversed(paper_result):
    import dataclasses

    none = dataclasses.replace(paper_result, group=np.where(paper_result.group == "negative",
                                                            "positive", paper_result.group))
    assert "reversed no verdicts" in audit_note(none)
    worse = dataclasses.replace(paper_result, metrics={**paper_result.metrics, "delta": -0.05})
    assert "lowered consistency by 5.0 points" in audit_note(worse)


def test_thresholds_and_nearest_rows(paper_result, demo):
    r, table = paper_result, demo[1]
    lines = threshold_lines(r)
    assert {ln["question_type"] for ln in lines} == {t for t, v in r.thresholds.items()
                                                    if math.isfinite(v)}
    near = nearest_threshold_rows(r, table, k=3)
    for line in lines:
        sel = near[near["threshold"] == f"lowest kept ({line['question_type']})"]
        assert 1 <= len(sel) <= 3
        np.testing.assert_allclose(sel["distance"], sel["score"] - line["score"])
        # nothing of that type is nearer than the rows listed
        sf = score_frame(r, table)
        sf = sf[(sf["split"] != "P") & (sf["question_type"] == line["question_type"])]
        assert np.abs(sel["distance"]).max() <= np.sort(np.abs(sf["score"] - line["score"]))[len(sel) - 1] + 1e-12
    row = near.iloc[0]
    assert row["response_a"] == table.response_a[row["row"] - 1]  # texts readable, aligned


def test_score_figures(paper_result, demo):
    r, table = paper_result, demo[1]
    dens = score_density(r, table)
    sf = score_frame(r, table)
    assert sum(len(t.x) for t in dens.data) == len(sf)
    fig = sorted_scores_figure(r, table, question_type="coding")
    ys = np.concatenate([np.asarray(t.y) for t in fig.data])
    assert len(ys) == ((sf["split"] != "P") & (sf["question_type"] == "coding")).sum()
    hlines = [s for s in fig.layout.shapes]
    assert len(hlines) == 1 and hlines[0].y0 == pytest.approx(r.thresholds["coding"])


def test_radar(paper_result):
    per = {"judge_winner": paper_result.per_type, "other": paper_result.per_type}
    fig = consistency_radar(per)
    assert len(fig.data) == 4  # orig + adj per judge
    first = fig.data[0]
    assert list(first.theta) == sorted(paper_result.per_type) + sorted(paper_result.per_type)[:1]
    long = radar_frame(per)
    assert len(long) == 2 * len(paper_result.per_type)


def test_embedding_map(paper_result, demo):
    _, table, emb = demo
    z = oriented_differences(emb.e_a, emb.e_b, table.judge)
    np.testing.assert_allclose(np.linalg.norm(z, axis=1)[np.linalg.norm(emb.e_a - emb.e_b, axis=1) > 1e-6], 1.0)
    b = np.flatnonzero(table.judge == "B")[0]
    d = emb.e_a[b] - emb.e_b[b]
    np.testing.assert_allclose(z[b], -d / np.linalg.norm(d), atol=1e-6)
    xy = project_2d(z, method="pca")
    assert xy.shape == (len(table), 2)
    var = xy.var(axis=0)
    assert var[0] >= var[1]  # first component explains the most
    fig = embedding_scatter(xy, paper_result, table)
    assert sum(len(t.x) for t in fig.data) == len(table)
    symbols = {t.marker.symbol for t in fig.data}
    assert {SPLIT_SYMBOLS["P"], SPLIT_SYMBOLS["validation"], SPLIT_SYMBOLS["unlabelled"]} <= symbols
    mf = map_frame(xy, paper_result, table)
    assert (mf["row"] == np.arange(1, len(table) + 1)).all()


def test_project_2d_edge_cases():
    assert project_2d(np.zeros((2, 5)), method="pca").shape == (2, 2)
    with pytest.raises(ValueError):
        project_2d(np.zeros((5, 3)), method="tsne")


def test_formula_cells_and_safe_copy():
    df = pd.DataFrame({"a": ["=1+1", "ok", "-3", "@x"], "b": [1, 2, 3, 4], "c": ["+x", "", "y", "z"]})
    assert formula_cells(df) == {"a": 2, "c": 1}  # "-3" is a number, not a formula
    safe = spreadsheet_safe_copy(df)
    assert safe["a"].tolist() == ["'=1+1", "ok", "-3", "'@x"] and safe["b"].tolist() == [1, 2, 3, 4]
    assert df["a"].tolist()[0] == "=1+1"  # the original is untouched
