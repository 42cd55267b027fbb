"""The Audit page's numbers agree with each other and say how shaky they are: the m curve spans
the slider and its marked point is the audit shown; "predicted" is kept apart from "measured";
the change over seeded splits appears after the first result; a table where nothing beats the
base rate is said to reverse nothing; each long step reports what it is doing."""

from __future__ import annotations

import dataclasses
import json
import re
import time

import numpy as np
import pandas as pd
import pytest
from streamlit.testing.v1 import AppTest

from puaudit.audit.m_curve import M_RANGE, m_grid
from puaudit.report.figures.m_curve import m_curve_figure
from puaudit.audit.m_curve import with_current_point
from puaudit.report.figures.metrics import expected_text, per_type_table
from puaudit.audit.config import AuditConfig
from puaudit.audit.estimator import PUAudit
from puaudit.embed.pairs import embed_table
from puaudit.audit.evaluate import delta_over_seeds
from puaudit.data.demo import generate_demo
from puaudit.data.schema import load_comparisons
from tests.page_support import open_page
from puaudit.embed.hashing import HashingEncoder

pytestmark = pytest.mark.usefixtures("app_env")


def _audit_page(frame: pd.DataFrame | None = None, **audit) -> AppTest:
    return open_page("pages/audit.py", frame, wait_background=True, **audit)


def _curve(at: AppTest) -> dict:
    return json.loads(next(c for c in at.get("plotly_chart")
                           if "rows reversed" in c.proto.spec).proto.spec)


def _reversed_in_all(at: AppTest) -> int:
    cap = next(c.value for c in at.caption if "audited rows reversed in all" in c.value)
    return int(re.search(r"([\d,]+) audited rows reversed in all", cap).group(1).replace(",", ""))


@pytest.mark.parametrize("m", [None, 0.3])
def test_m_curve_spans_the_slider_and_its_point_is_the_audit(m):
    at = _audit_page(m=m)
    slider = next(s for s in at.slider if s.label.startswith("m —"))
    fig = _curve(at)
    assert fig["layout"]["xaxis"]["range"] == [slider.min, slider.max] == list(M_RANGE)
    current = fig["data"][1]  # the marked point
    m_used = current["x"][0]
    assert m_used in fig["data"][0]["x"]
    assert slider.min <= m_used <= slider.max
    if m is not None:
        assert m_used == pytest.approx(m)
    assert current["y"][0] == _reversed_in_all(at)
    # the line passes through the same point, and reverses less as m grows
    ys = dict(zip(fig["data"][0]["x"], fig["data"][0]["y"]))
    assert ys[m_used] == current["y"][0] and ys[1.0] <= ys[0.05]
    # the per-type table shows shares as percents (one format, "74.2%"), like the headline
    per_type = next(d.value for d in at.dataframe if "note" in d.value.columns)
    shown = per_type.loc[per_type["Cons_orig"] != "", "Cons_orig"]
    assert len(shown) and shown.str.fullmatch(r"\d{1,3}\.\d%").all()
    values = shown.str.rstrip("%").astype(float)
    assert values.between(0, 100).all() and values.max() > 1


def test_m_grid_covers_the_slider_and_the_current_m():
    grid = m_grid(0.473)
    assert grid[0] == M_RANGE[0] and grid[-1] == M_RANGE[1] and 0.473 in grid
    assert list(grid) == sorted(set(grid))
    curve = [{"m": v, "n_reversed": 10} for v in grid]
    moved = with_current_point(curve, 0.473, 123)
    assert [c["n_reversed"] for c in moved if c["m"] == 0.473] == [123] and len(moved) == len(grid)
    fig = m_curve_figure(moved, current_m=0.473)
    assert list(fig.layout.xaxis.range) == list(M_RANGE)


@pytest.fixture(scope="module")
def demo_result():
    table = load_comparisons(generate_demo(n_rows=300, random_state=0))
    emb = embed_table(table, HashingEncoder())
    return PUAudit(scorer="centroid", random_state=0).fit(table, emb).result_


def test_predicted_agreement_only_for_rows_without_human_labels(demo_result):
    r = demo_result
    rows = r.split == "unlabelled"
    text = expected_text(r)
    assert text.startswith("Predicted, not measured")
    assert f"on the {int(rows.sum()):,} rows without human labels" in text
    p = r.p_judge_right[rows]
    rev = r.group[rows] == "negative"
    assert f"{p.mean():.1%} → {np.mean(np.where(rev, 1 - p, p)):.1%}" in text
    full = dataclasses.replace(r, split=np.where(rows, "validation", r.split))
    assert expected_text(full).startswith("Every audited row has a human label")
    assert "%" not in expected_text(full)


def test_small_types_show_their_n_and_no_percentage(demo_result):
    table = per_type_table(demo_result, min_rows=10**6)
    assert table["cons_orig"].isna().all() and table["delta_pts"].isna().all()
    assert (table["n_validation"] > 0).all()
    assert table["note"].str.startswith("too few validation rows").all()
    hurt = dataclasses.replace(demo_result, per_type={
        t: {**v, "cons_adj": v["cons_orig"] - 0.05, "delta": -0.05}
        for t, v in demo_result.per_type.items()})
    notes = per_type_table(hurt, min_rows=1)["note"]
    assert notes.str.startswith("reversals lowered agreement here; rows of this type are still "
                                "reversed, as validation rows only measure the audit").all()
    fine = per_type_table(demo_result, min_rows=1)
    assert (fine.loc[fine["delta_pts"] >= 0, "note"] == "").all()  # only where it hurt


def test_page_shows_the_change_over_seeded_splits():
    at = _audit_page()
    deadline = time.monotonic() + 240
    shown = None
    while shown is None and time.monotonic() < deadline:
        boxes = [b.value for b in list(at.warning) + list(at.success)]
        shown = next((b for b in boxes if b.startswith("Change over 5 seeded splits")), None)
        if shown is None:
            time.sleep(1)
            at.run()
    assert shown is not None, [c.value for c in at.caption]
    table = at.session_state["table"]
    emb = embed_table(table, HashingEncoder())
    spread = delta_over_seeds(table, emb, AuditConfig(), n_seeds=5)
    assert (f"mean {100 * spread['mean']:+.1f} pts (range {100 * spread['min']:+.1f} to "
            f"{100 * spread['max']:+.1f})") in shown
    assert ("within the noise" in shown) == (spread["min"] <= 0 < spread["max"])


def _no_signal_frame(n=600, seed=0) -> pd.DataFrame:
    """Texts of random words (the hashing encoder finds no direction in them); the judge and
    the people are independent coin flips."""
    rng = np.random.default_rng(seed)
    words = np.array([f"w{i}" for i in range(400)])

    def text():
        return " ".join(rng.choice(words, 12))
    return pd.DataFrame({"prompt": [text() for _ in range(n)],
                         "response_a": [text() for _ in range(n)],
                         "response_b": [text() for _ in range(n)],
                         "category": rng.choice(["x", "y"], n),
                         "judge_winner": rng.choice(["A", "B"], n),
                         "human_winner": rng.choice(["A", "B"], n)})


def test_no_signal_reverses_nothing_and_the_page_says_so():
    at = _audit_page(_no_signal_frame())
    assert _reversed_in_all(at) == 0
    verdict = next(m.value for m in at.markdown if m.value.startswith("**Verdict:**"))
    assert "No scorer beats the base rate on P" in verdict and "nothing is reversed" in verdict


def test_compare_scorers_reports_each_scorer_and_split():
    from components import audit_jobs
    from puaudit.audit.config import SCORER_CHOICES

    table = load_comparisons(generate_demo(n_rows=200, random_state=1))
    emb = embed_table(table, HashingEncoder())
    seen = []
    audit_jobs._compare("progress-test", "hashing-test", AuditConfig(), 2, table, emb,
                   lambda d, t, text=None: seen.append((d, t, text)))
    assert [d for d, *_ in seen] == list(range(2 * len(SCORER_CHOICES)))
    assert {t for _, t, _ in seen} == {2 * len(SCORER_CHOICES)}
    for scorer in SCORER_CHOICES:
        for split in (1, 2):
            assert f"Comparing scorers: {scorer}, split {split} of 2" in [x for *_, x in seen]


def test_audit_reports_its_stages():
    from components import audit_runs

    table = load_comparisons(generate_demo(n_rows=200, random_state=2))
    emb = embed_table(table, HashingEncoder())
    seen = []
    res = audit_runs._audit("stage-test", "hashing-test", AuditConfig(scorer="centroid"), table,
                          emb, lambda d, t, text=None: seen.append((d, t, text)))
    assert [(d, t) for d, t, _ in seen] == [(0, 2), (1, 2)]
    assert seen[0][2].startswith("Splitting") and seen[1][2].startswith("Scoring with centroid")
    direct = PUAudit(scorer="centroid").fit(table, emb).result_
    np.testing.assert_equal(res.metrics, direct.metrics)  # NaN precision equal to NaN
    assert (res.group == direct.group).all()
