"""puaudit.report.figures.annotator_models: tables and figures of a latent-truth model report."""

from __future__ import annotations

import numpy as np
import pytest

from puaudit.report.figures.annotator_models import (
    STAT_LABELS,
    confusion_figure,
    consensus_changes,
    consensus_summary,
    model_table,
    skill_figure,
)
from puaudit.annotators import annotator_model_report, simulate_votes
from puaudit.data.schema import load_comparisons


@pytest.fixture(scope="module")
def data():
    df, info = simulate_votes(200, random_state=8)
    table = load_comparisons(df)
    return table, annotator_model_report(table, model="mace", n_boot=30, engine="numpy")


def test_model_table_keeps_numbers_sortable(data):
    _, rep = data
    t = model_table(rep)
    a = rep.annotators
    assert t["Annotator"].tolist() == a["annotator"].tolist()
    assert t["Role"].tolist()[-1] == "judge" and set(t["Role"][:-1]) == {"person"}
    assert t["Skill"].dtype.kind == "f"
    np.testing.assert_allclose(t["Skill"], a["skill"].round(3))
    r = a.iloc[0]
    assert t["Skill 95% CI"].iloc[0] == f"[{r['skill_lo']:.2f}, {r['skill_hi']:.2f}]"
    assert "Competence" in t.columns and "Weight" not in t.columns
    assert t["Model flags"].iloc[0] == "; ".join(r["model_flags"])


def test_skill_figure_sorted_with_judge_and_flagged(data):
    _, rep = data
    fig = skill_figure(rep)
    names = [tr.name for tr in fig.data]
    assert "LLM judge" in names and "flagged" in names
    order = list(fig.layout.yaxis.categoryarray)
    a = rep.annotators.set_index("annotator").loc[order]
    assert (np.diff(a["skill"].to_numpy()) >= 0).all()
    judge = [tr for tr in fig.data if tr.name == "LLM judge"][0]
    assert judge.marker.symbol == "diamond"
    xs = [s.x0 for s in fig.layout.shapes]
    assert 0.5 in xs and rep.params["skill_bar"] in xs
    for stat in STAT_LABELS:
        assert skill_figure(rep, stat=stat).data
    with pytest.raises(ValueError):
        skill_figure(rep, stat="nope")
    few = skill_figure(rep, min_n=10_000)
    assert [tr.name for tr in few.data] == ["LLM judge"]


def test_confusion_figure_cells_carry_intervals(data):
    _, rep = data
    fig = confusion_figure(rep, "good_02")
    j = rep.annotators["annotator"].tolist().index("good_02")
    z = np.array(fig.data[0].z)
    np.testing.assert_allclose(z, np.nan_to_num(rep.confusion[j]))
    assert fig.data[0].text[0][0] == (f"{rep.confusion[j][0, 0]:.2f}<br>"
                                      f"[{rep.confusion_lo[j][0, 0]:.2f}, "
                                      f"{rep.confusion_hi[j][0, 0]:.2f}]")
    assert list(fig.data[0].x) == ["says A", "says B", "says tie"]
    assert fig.data[0].y[0].startswith("truth A")
    with pytest.raises(ValueError):
        confusion_figure(rep, "nobody")


def test_consensus_tables(data):
    table, rep = data
    ch = consensus_changes(rep, table)
    c = rep.consensus
    assert len(ch) == int(c["differs"].sum())
    assert (ch["majority"] != ch["model"]).all()
    assert (np.diff(ch["confidence"].to_numpy()) <= 0).all()
    first = c[c["differs"]].sort_values("confidence", ascending=False).iloc[0]
    assert ch["row"].iloc[0] == first["row"] + 1
    assert ch["prompt"].iloc[0] == table.prompt[first["row"]]
    s = consensus_summary(rep)
    assert s["consensus"].tolist() == ["majority vote", "MACE"]
    assert s["ties"].iloc[0] == int((c["majority"] == "tie").sum())
    assert s["n_common"].nunique() == 1
