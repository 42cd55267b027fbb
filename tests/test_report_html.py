"""The HTML page of ``puaudit report`` (:mod:`puaudit.report.html`): the per-type table in one
unit under readable headers, figures drawn with plotly's own template wherever the page is built
(the Export page runs under Streamlit's, which leaves margins to Streamlit's frontend), and an
AlpacaEval file's response A named as the reference model it is, not a position. Embeddings come
from the hashing test encoder (no model runs)."""

from __future__ import annotations

import json
import re

import numpy as np
import plotly.io as pio
import pytest

from puaudit.audit.config import AuditConfig
from puaudit.audit.m_curve import audit_with_m_curve, m_grid
from puaudit.cli.commands import main
from puaudit.data.demo import generate_demo
from puaudit.data.load import load_input
from puaudit.data.schema import load_comparisons
from puaudit.embed.pairs import PairEmbeddings
from puaudit.report.card import build_card
from puaudit.report.figures.m_curve import m_curve_figure
from puaudit.report.figures.metrics import PER_TYPE_HEADERS, per_type_display
from puaudit.report.html import render_report
from puaudit.report.parts import FIRST_SHOWN, REFERENCE, assemble_report, judge_tendencies
from puaudit.embed.hashing import HashingEncoder

_FIGURE = re.compile(r'<div id="(fig-\d+)".*?<script>\(function\(\)\{var f=(.*?);Plotly\.newPlot',
                     re.DOTALL)


@pytest.fixture(scope="module")
def parts():
    """The report's parts of a demo audit with reversals at its m (probe scorer, m = 0.5)."""
    df = generate_demo(n_rows=300, random_state=0)
    enc = HashingEncoder()
    emb = PairEmbeddings(e_a=enc.encode(df["prompt"] + " " + df["response_a"]),
                         e_b=enc.encode(df["prompt"] + " " + df["response_b"]),
                         encoder="hashing-test")
    table = load_comparisons(df)
    cfg = AuditConfig(scorer="probe", m=0.5, random_state=1)
    result, curve = audit_with_m_curve(table, emb, cfg)
    return assemble_report(table, cfg, result, m_curve=curve, source={"name": "demo.csv"},
                    ranking_resamples=50)


def _figures(page: str) -> dict[str, dict]:
    """Each figure's plotly spec in the page, by its div id."""
    return {fid: json.loads(spec) for fid, spec in _FIGURE.findall(page)}


def _section(page: str, title: str) -> str:
    start = page.index(f"<h2>{title}")
    return page[start:page.index("<h2>", start + 4)]


def test_per_type_table_is_in_percent_under_readable_headers(parts):
    page = render_report(parts, build_card(parts))
    section = _section(page, "Per question type")
    for raw in ("cons_orig", "cons_adj", "delta_pts", "n_validation", "reversal_precision"):
        assert f"<th>{raw}</th>" not in section
    for header in PER_TYPE_HEADERS.values():
        assert f"<th>{header}</th>" in section
    assert re.search(r"<td>0\.\d{3}</td>", section) is None  # no fraction beside the points
    shown = per_type_display(parts.result)
    measured = shown.dropna(subset=[PER_TYPE_HEADERS["cons_orig"]])
    assert len(measured) >= 2
    for _, row in measured.iterrows():
        before, after = row[PER_TYPE_HEADERS["cons_orig"]], row[PER_TYPE_HEADERS["cons_adj"]]
        per_type = parts.result.per_type[row[PER_TYPE_HEADERS["question_type"]]]
        assert before == round(100 * per_type["cons_orig"], 1)
        # the change is the difference of the two numbers shown beside it
        assert row[PER_TYPE_HEADERS["delta_pts"]] == round(after - before, 1)
        assert f"<td>{before:.1f}</td>" in section and f"<td>{after:.1f}</td>" in section
        assert f"<td>{after - before:+.1f}</td>" in section


def test_figures_keep_plotlys_template_under_streamlits(parts, monkeypatch):
    import streamlit.elements.plotly_chart  # noqa: F401 - registers Streamlit's template

    monkeypatch.setattr(pio.templates, "default", "streamlit")
    assert m_curve_figure([{"m": 0.5, "n_reversed": 3}]).layout.template.layout.xaxis.automargin \
        is None  # what a figure gets in the Export page's process: no automargin
    page = render_report(parts, build_card(parts))
    figures = _figures(page)
    assert len(figures) >= 6
    for spec in figures.values():  # room for tick labels and titles, as the CLI's page has
        template = spec["layout"]["template"]["layout"]
        assert template["xaxis"]["automargin"] is True and template["yaxis"]["automargin"] is True
    (curve,) = [s for s in figures.values()
                if s["layout"].get("yaxis", {}).get("title", {}).get("text") == "rows reversed"]
    assert curve["layout"]["yaxis"]["automargin"] is True
    assert curve["layout"]["xaxis"]["automargin"] is True


def test_the_m_curve_makes_room_for_its_labels_on_any_template():
    curve = [{"m": m, "n_reversed": int(12_000 * (1 - m) ** 2)} for m in m_grid(0.62)]
    fig = m_curve_figure(curve, current_m=0.62)
    assert fig.layout.xaxis.automargin is True and fig.layout.yaxis.automargin is True


def _alpaca_annotations(path, n: int = 60) -> None:
    """AlpacaEval annotations without human verdicts: output_1 the reference model."""
    rng = np.random.default_rng(0)
    records = [{"instruction": f"question {i} about topic {i % 7}",
                "output_1": f"reference answer {i} " + "word " * int(rng.integers(5, 40)),
                "output_2": f"model answer {i} " + "word " * int(rng.integers(5, 40)),
                "generator_1": "gpt4_turbo", "generator_2": "my-model",
                "dataset": f"set{i % 3}", "annotator": "weighted_alpaca_eval_gpt4_turbo",
                "preference": float(rng.choice([1, 2]))} for i in range(n)]
    path.write_text(json.dumps(records), encoding="utf-8")


def test_alpaca_eval_response_a_is_the_reference_not_a_position(tmp_path, capsys):
    path = tmp_path / "annotations.json"
    _alpaca_annotations(path)
    table = load_comparisons(load_input(path))
    assert judge_tendencies(table)["response_a"] == REFERENCE
    assert main(["report", str(path), "-o", str(tmp_path / "r.html"), "--json"]) == 0
    card = json.loads(capsys.readouterr().out)  # stdout holds the card alone under --json
    assert card["data"]["judge_tendencies"]["response_a"] == REFERENCE
    page = (tmp_path / "r.html").read_text(encoding="utf-8")
    tendencies = _section(page, "The judge&#x27;s tendencies")
    assert "first shown" not in tendencies
    assert "Picks output_1, AlpacaEval&#x27;s reference model" in tendencies
    assert "compares the reference with the model, not the first position" in tendencies


def test_a_table_of_our_own_keeps_the_first_shown_wording(parts):
    assert parts.tendencies["response_a"] == FIRST_SHOWN
    page = render_report(parts, build_card(parts))
    tendencies = _section(page, "The judge&#x27;s tendencies")
    assert "Picks response A (first shown; 50% &#61; no preference)" in tendencies
    assert "AlpacaEval" not in tendencies
