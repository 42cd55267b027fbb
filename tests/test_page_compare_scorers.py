"""The Audit page's scorer comparison: the table equals a direct evaluate() on the same data."""


import pytest
from streamlit.testing.v1 import AppTest

from puaudit.report.figures.metrics import leaderboard_table
from puaudit.audit.evaluate import evaluate
from tests.conftest import ROOT

pytestmark = pytest.mark.usefixtures("app_env")


def test_leaderboard_table_sorts_and_converts_to_points():
    lb = [{"scorer": "pot", "rule": "guarded", "cons_orig_mean": 0.7, "cons_adj_mean": 0.7,
           "delta_mean": 0.0, "delta_sd": 0.0, "reversed_share": 0.0, "reversal_precision": None},
          {"scorer": "probe", "rule": "guarded", "cons_orig_mean": 0.7, "cons_adj_mean": 0.75,
           "delta_mean": 0.05, "delta_sd": 0.01, "reversed_share": 0.1, "reversal_precision": 0.8}]
    df = leaderboard_table(lb)
    assert df["scorer"].tolist() == ["probe", "pot"]
    assert df.loc[0, "delta_pts"] == pytest.approx(5.0) and df.loc[0, "delta_sd_pts"] == pytest.approx(1.0)


def test_audit_page_compares_every_scorer_and_rule():
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=300)
    at.run()
    at.switch_page("pages/audit.py").run()
    box = next(c for c in at.checkbox if c.label.startswith("Compare every scorer"))
    box.check().run()
    # the comparison is a background job (a slider answer goes first): the page shows its
    # progress, then the table
    import time

    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and any("Comparing scorers" in c.value
                                              and "in the background" in c.value
                                              for c in at.caption):
        time.sleep(2.0)  # slower than the pause each page run gives its answer
        at.run()
    assert not at.exception, at.exception
    shown = at.dataframe[-1].value
    from puaudit.audit.config import SCORER_CHOICES

    # every scorer (auto included) x both rules
    assert len(shown) == 2 * len(SCORER_CHOICES) and set(shown["rule"]) == {"guarded", "paper"}
    assert set(shown["scorer"]) == set(SCORER_CHOICES)
    from puaudit.embed.hashing import HashingEncoder

    table = at.session_state["table"]
    emb = HashingEncoder()
    from puaudit.embed.pairs import embed_table

    direct = evaluate(table, embed_table(table, emb), seeds=3, scorers=("centroid",),
                      rules=("paper",), p_ratio=0.3)["leaderboard"][0]
    row = shown[(shown["scorer"] == "centroid") & (shown["rule"] == "paper")].iloc[0]
    assert row["cons_adj"] == pytest.approx(100 * direct["cons_adj_mean"])  # shown in percent
    assert row["delta_pts"] == pytest.approx(100 * direct["delta_mean"])
