"""puaudit/report/figures/rankings.py: tables and plotly figures of a ModelRankings, no browser."""

from __future__ import annotations

import numpy as np
import pytest

from puaudit.report.figures.rankings import (
    LABEL_CHARS,
    LABEL_FONT,
    interval_figure,
    rank_figure,
    rank_table,
    shown_note,
    style_rank_table,
    win_probability_caption,
    win_probability_figure,
)
from puaudit.rankings.estimate import model_rankings
from puaudit.rankings.simulate import simulate_comparisons


@pytest.fixture(scope="module")
def rankings():
    df, _ = simulate_comparisons(2500, n_models=6, label_share=0.3, length_bias=3.0,
                                 random_state=0)
    audited = np.where(df.human_winner.notna(), df.human_winner, df.judge_winner)
    return model_rankings(df.model_a, df.model_b, df.judge_winner, df.human_winner, audited,
                          length_a=df.length_a, length_b=df.length_b, length_control=True,
                          n_resamples=80)


@pytest.fixture(scope="module")
def judge_only():
    df, _ = simulate_comparisons(600, n_models=4, random_state=1)
    return model_rankings(df.model_a, df.model_b, df.judge_winner, n_resamples=60)


def test_rank_table_side_by_side(rankings):
    f = rankings.frame
    t = rank_table(rankings)
    assert t["Model"].tolist() == f["model"].tolist()
    for s in ("Judge", "Audited", "Human", "PPI"):
        assert f"{s} rank" in t.columns and f"{s} 95% CI" in t.columns
    np.testing.assert_array_equal(t["PPI vs judge"].to_numpy(int),
                                  (f["rank_judge"] - f["rank_ppi"]).to_numpy(int))
    # A judge with a strong length bias: some model moves, and the flags match disagreements().
    assert (t["PPI vs judge"] != 0).any()
    dis = rankings.disagreements()
    assert len(dis) >= 1
    flagged = t.loc[t["Judge vs people"] != "", "Model"].tolist()
    assert sorted(flagged) == sorted(dis["model"].tolist())
    assert set(dis["direction"]) <= {"judge higher", "judge lower"}
    row = t.iloc[0]
    lo, hi = f.loc[0, "winrate_ppi_lo"], f.loc[0, "winrate_ppi_hi"]
    assert row["PPI 95% CI"] == f"[{lo:.3f}, {hi:.3f}]"
    lc = rank_table(rankings, statistic="lc_winrate")
    assert "PPI lc_winrate" in lc.columns


def test_rank_table_without_people_or_audit(judge_only):
    t = rank_table(judge_only)
    assert "Judge rank" in t.columns
    assert not any(c.startswith(("Audited", "Human ", "PPI")) for c in t.columns
                   if c != "Human votes")
    assert (t["Judge vs people"] == "").all()


def test_style_highlights_shifts(rankings):
    html = style_rank_table(rank_table(rankings)).to_html()
    assert "background-color: #d9f0d3" in html or "background-color: #f8d7da" in html


def test_interval_figure(rankings):
    f = rankings.frame
    fig = interval_figure(rankings, statistic="winrate")
    assert [tr.name for tr in fig.data] == ["Judge (all rows)", "Audited verdicts",
                                            "Human votes only",
                                            "Prediction-powered (judge + humans)"]
    ppi = fig.data[3]
    np.testing.assert_allclose(ppi.x, f["winrate_ppi"])
    np.testing.assert_allclose(np.asarray(ppi.x) - np.asarray(ppi.error_x.arrayminus),
                               f["winrate_ppi_lo"])
    np.testing.assert_allclose(np.asarray(ppi.x) + np.asarray(ppi.error_x.array),
                               f["winrate_ppi_hi"])
    assert list(fig.layout.yaxis.ticktext) == f["model"].tolist()
    # The strongest model is drawn on top.
    assert fig.layout.yaxis.tickvals[0] == max(fig.layout.yaxis.tickvals)
    assert len(interval_figure(rankings, statistic="bt", sources=["judge", "ppi"]).data) == 2


def test_rank_figure_marks_moves(rankings):
    f = rankings.frame
    fig = rank_figure(rankings)
    assert len(fig.data) == len(f)
    assert list(fig.data[0].x) == ["Judge", "Audited", "Human", "PPI"]
    moved = {tr.name for tr in fig.data if tr.line.width > 2}
    expected = {m for m, a, b, c, d in zip(f["model"], f["rank_judge"], f["rank_audited"],
                                           f["rank_human"], f["rank_ppi"])
                if len({a, b, c, d}) > 1}
    assert moved == expected


def test_win_probability_heatmap(rankings):
    fig = win_probability_figure(rankings, source="human")
    z = np.array(fig.data[0].z, dtype=float)
    assert np.isnan(np.diag(z)).all()
    off = ~np.eye(len(z), dtype=bool)
    np.testing.assert_allclose((z + z.T)[off], 1.0)
    assert list(fig.data[0].x) == rankings.frame["model"].tolist()
    small = win_probability_figure(rankings, source="ppi", max_models=3)
    assert np.array(small.data[0].z).shape == (3, 3)


def test_model_names_are_escaped_in_figures():
    df, _ = simulate_comparisons(400, n_models=3, random_state=3)
    hostile = {"model-00": "<a href='http://x'>m0</a>", "model-01": "a&b", "model-02": "<b>m2"}
    df = df.replace({"model_a": hostile, "model_b": hostile})
    res = model_rankings(df.model_a, df.model_b, df.judge_winner, df.human_winner,
                         n_resamples=50)
    fig = interval_figure(res)
    assert all("<" not in t and ">" not in t for t in fig.layout.yaxis.ticktext)
    assert "a&amp;b" in fig.layout.yaxis.ticktext
    assert all("<" not in tr.name for tr in rank_figure(res).data)
    assert all("<" not in x for x in win_probability_figure(res, source="judge").data[0].x)
    assert rank_table(res)["Model"].tolist() == res.frame["model"].tolist()  # tables keep data


# A leaderboard too long for a legend: 60 models, a third of the rows with human votes.
MANY = 60


@pytest.fixture(scope="module")
def many():
    df, _ = simulate_comparisons(6000, n_models=MANY, label_share=0.3, length_bias=3.0,
                                 random_state=4)
    df["model_a"] = df["model_a"].str.replace("model-", "a-rather-long-model-name-number-")
    df["model_b"] = df["model_b"].str.replace("model-", "a-rather-long-model-name-number-")
    return model_rankings(df.model_a, df.model_b, df.judge_winner, df.human_winner,
                          n_resamples=50)


def test_rank_figure_names_every_line_at_60_models(many):
    f = many.frame
    assert len(f) == MANY
    fig = rank_figure(many, top=MANY)
    assert [tr.name for tr in fig.data] == f["model"].tolist()
    assert fig.layout.showlegend is False  # the names are on the lines, not in a legend
    for tr, (_, row) in zip(fig.data, f.iterrows()):
        cut = row["model"][:LABEL_CHARS - 1] + "…"
        # Named at the judge's column (left) with its rank, and at the last column (right).
        assert tr.text[0] == f"{cut} ({row['rank_judge']:.0f})"
        assert tr.textposition[0] == "middle left"
        assert tr.text[-1] == f"({row['rank_ppi']:.0f}) {cut}"
        assert tr.textposition[-1] == "middle right"
        assert all(t == "" for t in tr.text[1:-1])
    # Labels at neighbouring ranks do not overlap: each rank has more height than a line of type.
    plot_height = fig.layout.height - fig.layout.margin.t - fig.layout.margin.b
    assert plot_height / MANY >= 1.5 * fig.data[0].textfont.size
    # Both sides leave room for the longest label.
    assert fig.layout.margin.l >= 0.55 * LABEL_FONT * LABEL_CHARS
    assert fig.layout.margin.r == fig.layout.margin.l
    assert fig.layout.title.text == "Ranks of all 60 models (1 = strongest, on top)"
    assert all(tr.cliponaxis is False for tr in fig.data)  # labels drawn in the margins
    lo, hi = fig.layout.yaxis.range
    assert lo > MANY > 1 > hi  # every rank in view, rank 1 on top


def test_rank_figure_top_n_says_what_it_leaves_out(many):
    fig = rank_figure(many, top=20)
    assert [tr.name for tr in fig.data] == many.frame["model"].head(20).tolist()
    assert fig.layout.title.text == ("Ranks of the top 20 of 60 models by the "
                                     "Prediction-powered (judge + humans) ranking "
                                     "(1 = strongest, on top)")


def test_heatmap_at_60_models_says_what_it_shows(many):
    names = many.frame["model"].tolist()
    for n in (7, 30, MANY):
        fig = win_probability_figure(many, source="human", max_models=n)
        assert np.array(fig.data[0].z).shape == (n, n)
        assert list(fig.data[0].y) == names[:n]
        # Every row named (with its place past 15 models); no tick left to Plotly to thin out.
        assert fig.layout.yaxis.tickmode == "array" and len(fig.layout.yaxis.ticktext) == n
        cut = [m[:LABEL_CHARS - 1] + "…" for m in names[:n]]
        if n <= 15:
            assert list(fig.layout.yaxis.ticktext) == cut
            assert list(fig.layout.xaxis.ticktext) == cut
        else:
            assert list(fig.layout.yaxis.ticktext) == [f"{k}. {m}" for k, m in
                                                       enumerate(cut, 1)]
            assert list(fig.layout.xaxis.ticktext) == [str(k) for k in range(1, n + 1)]
    cut = win_probability_figure(many, source="human", max_models=30)
    assert cut.layout.title.text == ("Human votes only: P(row beats column), the top 30 of 60 "
                                     "models by the Prediction-powered (judge + humans) ranking")
    full = win_probability_figure(many, source="judge", max_models=MANY)
    assert full.layout.title.text == "Judge (all rows): P(row beats column), all 60 models"


def test_heatmap_caption_names_models_share_and_cell(many):
    text = win_probability_caption(many, source="ppi", max_models=30)
    assert text.startswith("Showing the top 30 of 60 models by the Prediction-powered "
                           "(judge + humans) ranking, strongest first.")
    assert "probability that the row's model beats the column's model" in text
    assert "prediction-powered (judge + humans)" in text
    assert "0.5 = an even match" in text
    assert "numbered by leaderboard place" in text
    assert "Change 'Models in the heatmap'" in text
    whole = win_probability_caption(many, source="judge", max_models=MANY)
    assert whole.startswith("Showing all 60 models, strongest first.")
    assert "Change 'Models in the heatmap'" not in whole
    assert shown_note(many, 500) == "all 60 models"
