"""The dashboard says one thing (issue 39): one per-type rule on the Audit page, the Question
types page and the report; no "None" cells; a radar of many types draws the top ones with a
selector; a change equals the difference of the two rounded numbers beside it; the certify text
says where the escalated rows go, as the Review page queues them."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pytest
from streamlit.testing.v1 import AppTest

from puaudit.report.figures.certify import certification_text
from puaudit.audit.metrics import MIN_TYPE_ROWS, TOP_TYPES, TYPE_RULE
from puaudit.report.figures.metrics import headline_metrics, type_table, type_text
from puaudit.data.demo import generate_demo
from puaudit.data.schema import load_comparisons
from puaudit.percents import percent, points_between, shown_change
from tests.conftest import ROOT
from tests.page_support import open_page

pytestmark = pytest.mark.usefixtures("app_env")


def _page(page: str, frame: pd.DataFrame | None = None, **audit) -> AppTest:
    return open_page(page, frame, **audit)


def _many_types(n_types: int = 50, n_rows: int = 3000) -> pd.DataFrame:
    """The demo's rows over ``n_types`` question types: 20 large (about 60 validation rows
    each), the rest small (about 6)."""
    df = generate_demo(n_rows=n_rows, random_state=3)
    rng = np.random.default_rng(0)
    weights = np.r_[np.full(20, 10.0), np.ones(n_types - 20)]
    df["category"] = [f"type{k:02d}" for k in rng.choice(n_types, len(df), p=weights / weights.sum())]
    return df


def _no_none(df: pd.DataFrame) -> None:
    cells = df.astype(object).to_numpy().ravel()
    assert not any(c is None or (isinstance(c, float) and np.isnan(c)) or c == "None"
                   for c in cells), df


def _changes_add_up(df: pd.DataFrame) -> None:
    """Every shown change is the difference of the two percents shown beside it."""
    for a, b, d in zip(df["Cons_orig"], df["Cons_adj"], df["change"]):
        if a == "":
            assert d == ""
            continue
        diff = float(b.rstrip("%")) - float(a.rstrip("%"))
        assert float(d.split()[0]) == pytest.approx(diff, abs=1e-9), (a, b, d)


def test_shown_change_is_the_difference_of_the_shown_numbers():
    # 74.25% -> 74.58%: the percents read 74.2% and 74.6%, so +0.4 (the raw difference is +0.33)
    assert percent(0.7425) == "74.2%" and percent(0.7458) == "74.6%"
    assert points_between(0.7425, 0.7458) == "+0.4 pts"
    # 79.24% -> 84.04%: 79.2% and 84.0%, +4.8 (the raw difference rounds to +4.9)
    assert points_between(0.7924, 0.8404) == "+4.8 pts"
    assert f"{0.7424:.3f}" == "0.742" and f"{0.7458:.3f}" == "0.746"
    assert shown_change(0.7424, 0.7458, digits=3, scale=1.0) == pytest.approx(0.004)
    assert percent(float("nan")) == "n/a" and percent(None) == "n/a"  # never "nan%"
    assert points_between(0.5, float("nan")) is None


def test_headline_change_matches_its_two_percents():
    class R:
        metrics = {"cons_orig": 0.7425, "cons_adj": 0.7458, "delta": 0.0033,
                   "cons_orig_ci": (0.7, 0.8), "cons_adj_ci": (0.7, 0.8), "n_reversed": 3,
                   "n": 300, "reversal_precision": 0.6}

    cards = {c["label"]: c for c in headline_metrics(R())}
    assert (cards["Cons_orig"]["value"], cards["Cons_adj"]["value"]) == ("74.2%", "74.6%")
    assert cards["Cons_adj"]["delta"] == "+0.4 pts"


def test_type_table_text_has_no_none_and_blanks_small_types():
    per_type = {"big": {"n": 40, "cons_orig": 0.7924, "cons_adj": 0.8404, "delta": 0.048,
                        "n_reversed": 0, "reversal_precision": None},
                "small": {"n": MIN_TYPE_ROWS - 6, "cons_orig": 0.857, "cons_adj": 0.643,
                          "delta": -0.214, "n_reversed": 3, "reversal_precision": 0.0}}
    shown = type_text(type_table(per_type))
    assert list(shown["question type"]) == ["big", "small"]
    assert shown.loc[0, "change"] == "+4.8 pts" and shown.loc[0, "reversal precision"] == ""
    assert (shown.loc[1, ["Cons_orig", "Cons_adj", "change"]] == "").all()
    assert "too few validation rows" in shown.loc[1, "note"]
    assert not shown.isna().any().any()


def test_audit_page_per_type_table_has_no_none_and_states_the_rule():
    at = _page("pages/audit.py")
    table = next(d.value for d in at.dataframe if "note" in d.value.columns
                 and "question type" in d.value.columns)
    _no_none(table)
    _changes_add_up(table)
    assert any(TYPE_RULE in c.value for c in at.caption)
    headline = {m.label: m for m in at.metric}
    a, b = (float(headline[k].value.rstrip("%")) for k in ("Cons_orig", "Cons_adj"))
    d = headline["Cons_adj"].delta
    assert d is None or float(d.split()[0]) == pytest.approx(b - a, abs=1e-9)


def test_question_types_page_uses_the_audit_pages_rule_and_a_top_types_radar():
    """50 types: small types show no percentage (they did: n=14, 85.7% -> 64.3%), the radar draws
    the TOP_TYPES largest and a selector changes how many."""
    at = _page("pages/question_types.py", _many_types())
    assert not at.error, [e.value for e in at.error]
    assert any(TYPE_RULE in c.value for c in at.caption)
    table = at.dataframe[0].value
    assert set(table["judge column"]) == {"judge_winner", "judge_winner_padded"}
    small = table["validation rows"] < MIN_TYPE_ROWS
    assert small.any() and (~small).any()
    assert (table.loc[small, ["Cons_orig", "Cons_adj", "change"]] == "").all().all()
    assert (table.loc[~small, "Cons_orig"] != "").all()
    _changes_add_up(table)

    def radar_types():
        import json

        spec = json.loads(at.get("plotly_chart")[0].proto.spec)
        return {t for tr in spec["data"] for t in tr.get("theta", [])}

    drawn = radar_types()
    assert len(drawn) == TOP_TYPES
    big = table[table["judge column"] == "judge_winner"].nlargest(TOP_TYPES, "validation rows")
    assert drawn <= set(table.loc[~small, "question type"])
    assert set(big["question type"]) == drawn or len(set(big["validation rows"])) < TOP_TYPES
    selector = next(n for n in at.number_input if n.label == "Types on the radar")
    selector.set_value(5).run()
    assert len(radar_types()) == 5


def test_certify_text_says_where_escalated_rows_go():
    base = {"message": None, "realised": 0.9, "realised_ci": (0.8, 0.95), "n_validation_trusted": 50,
            "threshold_audited": 0.8, "threshold": 0.8, "n_trusted": 49, "n_escalated": 151,
            "coverage": 0.245, "certified_share": 0.3, "n_certified_items": 40,
            "certified_lower": 0.86, "target": 0.85, "risk": 0.1}
    # a fully annotated file: every escalated row is a validation row; Review has none to queue
    text = certification_text({**base, "n_escalated_unlabelled": 0})
    assert "The other 151 are escalated" in text and "Review page has none to queue" in text
    assert "escalated to people (Review page)" not in text
    text = certification_text({**base, "n_escalated_unlabelled": 100})
    assert "queues the 100 without a human verdict" in text and "other 51 are validation" in text


def test_certify_summary_counts_escalated_rows_without_a_human_verdict():
    from puaudit.audit.estimator import PUAudit
    from puaudit.embed.pairs import embed_table
    from puaudit.embed.hashing import HashingEncoder

    full = generate_demo(n_rows=300, random_state=0)
    table = load_comparisons(full)
    emb = embed_table(table, HashingEncoder())
    res = PUAudit(scorer="centroid", target_agreement=0.6, random_state=0).fit(table, emb).result_
    cert = res.summary()["certification"]
    trusted = np.asarray(res.certification.trusted, dtype=object)
    escalated_open = (trusted == False) & (np.asarray(res.split) == "unlabelled")  # noqa: E712
    assert cert["n_escalated_unlabelled"] == int(escalated_open.sum())
    assert cert["n_escalated_unlabelled"] <= cert["n_escalated"]
    assert re.search(r"are escalated: ", certification_text(cert)) or cert["message"]


def test_consistency_page_says_why_each_metric_is_na():
    """One pair per question and no probabilities or scores: four n/a metrics, each explained
    with the input that would fill it, and no empty chart."""
    rows = "\n".join(f"q{i},m{i % 3},m{(i + 1) % 3},{'AB'[i % 2]},{'BA'[i % 3 == 0]}"
                     for i in range(12))
    data = ("question_id,candidate_i,candidate_j,verdict_1,verdict_2\n" + rows + "\n").encode()
    at = AppTest.from_file(str(ROOT / "pages" / "consistency.py"), default_timeout=120)
    at.run()
    at.file_uploader[0].set_value(("one_pair.csv", data, "text/csv")).run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    assert {m.label: m.value for m in at.metric} == {
        "Conflict Ratio": "n/a", "NTR_3": "n/a", "NTR_4": "n/a", "NTR_5": "n/a"}
    note = " ".join(i.value for i in at.info)
    assert "**Conflict Ratio**: n/a because there are no single scores" in note
    assert "Single scores" in note  # where to upload them
    for k in (3, 4, 5):
        assert f"**NTR_{k}**: n/a because no question has {k} candidates" in note
        assert f"in all {k * (k - 1) // 2} pairs" in note
    assert "here at most 2 per question" in note
    assert len(at.get("plotly_chart")) == 1  # the cycle inspector; no empty metric charts
    assert any("nothing to chart" in c.value for c in at.caption)


def test_export_page_names_every_added_column():
    """The caption named 6 of the export's puaudit_* columns; it names each one now, and where
    they are described."""
    at = _page("pages/export.py", target_agreement=0.6)
    added = next(c.value for c in at.caption if c.value.startswith("Added here: "))
    names = added.removeprefix("Added here: ").rstrip(".").replace("\\_", "_").split(", ")
    assert names[:6] == ["puaudit_split", "puaudit_score", "puaudit_p_judge_right",
                         "puaudit_group", "puaudit_adjusted", "puaudit_reason"]
    assert "puaudit_trusted" in names and any(n.startswith("puaudit_evidence_") for n in names)
    assert any("docs/audit.md" in c.value for c in at.caption)


def test_data_page_metric_labels_fit_their_column():
    """Six metrics share a row: "Judge–human agreement" was cut to "Judge–human agree…"."""
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=300)
    at.run()
    assert not at.exception
    labels = [m.label for m in at.metric]
    assert "Agreement" in labels and all(len(label) <= 16 for label in labels), labels
    agreement = next(m for m in at.metric if m.label == "Agreement")
    assert "Judge–human agreement" in agreement.help


def test_report_states_the_per_type_rule_and_draws_only_measured_types(tmp_path, capsys):
    """The report's radar drew every type (n=1 included) while its table blanked them."""
    from puaudit.cli.commands import main
    from puaudit.embed.hashing import HashingEncoder

    df = _many_types(n_rows=1500)
    df.to_csv(tmp_path / "t.csv", index=False)
    enc = HashingEncoder()
    np.savez(tmp_path / "e.npz", e_a=enc.encode(df["prompt"] + " " + df["response_a"]),
             e_b=enc.encode(df["prompt"] + " " + df["response_b"]))
    assert main(["report", str(tmp_path / "t.csv"), "-o", str(tmp_path / "r.html"),
                 "--embeddings", str(tmp_path / "e.npz"), "--scorer", "centroid",
                 "--spread-seeds", "1"]) == 0, capsys.readouterr().err
    page = (tmp_path / "r.html").read_text(encoding="utf-8")
    assert TYPE_RULE.split(":")[0] in page
    section = page[page.index("<h2>Per question type</h2>"):]
    section = section[:section.index("<h2>", 4)]
    # the radar's angular labels: the drawn types (the polygon repeats the first)
    thetas = set(re.search(r'"theta":\[([^\]]*)\]', section).group(1).replace('"', "").split(","))
    assert all(t.startswith("type") for t in thetas)
    assert len(thetas) == TOP_TYPES  # 20 measured types, the 12 with the most rows drawn


def test_audit_page_spread_note_restates_the_verdict_within_noise():
    from puaudit.report.figures.metrics import spread_text

    verdict = "Reversals help on validation (+2.0 points of agreement with people on 90 rows)."
    noisy = spread_text({"n": 5, "min": -0.01, "max": 0.03, "mean": 0.01}, verdict)
    assert "The range includes zero" in noisy
    assert noisy.endswith("So: Reversals help on validation only within noise (+2.0 points of "
                          "agreement with people on 90 rows; over 5 seeded splits the change "
                          "ranges from -1.0 to +3.0 points).")
    clear = {"n": 5, "min": 0.01, "max": 0.03, "mean": 0.02}
    assert "So:" not in spread_text(clear, verdict)
