"""``puaudit report``: the JSON card's numbers are ``puaudit audit --json``'s, the HTML page is
self-contained (plotly inlined, no link out, data shown as text), the agreement gate exits 0 or
1, a table without human labels still gets what needs none, the Export page offers the
report, and the card and page carry the Audit page's reversals-vs-m curve of the same audit.
Embeddings come from the hashing test encoder, written to an .npz (no model runs)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

from puaudit.cli.commands import main
from puaudit.data.demo import generate_demo
from puaudit.report.card import gate
from tests.conftest import ROOT
from puaudit.embed.hashing import HashingEncoder
from tests.make_hostile_files import PLANTED_HOST, markup_frame
from tests.test_page_app import downloads  # noqa: F401 - the fixture recording download bytes

LINK_OUT = re.compile(r"""(src|href)\s*=\s*["']?https?:""", re.IGNORECASE)
# the same audit for both commands: a light scorer and two seeded splits keep the test short
AUDIT = ["--scorer", "centroid", "--spread-seeds", "2", "--seed", "3"]


def _embed(df, path) -> None:
    enc = HashingEncoder()
    np.savez(path, e_a=enc.encode(df["prompt"] + " " + df["response_a"]),
             e_b=enc.encode(df["prompt"] + " " + df["response_b"]))


def _stdout_json(out: str) -> dict:
    """The ``--json`` object: stdout holds it alone (``| jq`` reads it)."""
    return json.loads(out)


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    d = tmp_path_factory.mktemp("report")
    df = generate_demo(n_rows=300, random_state=0)
    df.to_csv(d / "demo.csv", index=False)
    _embed(df, d / "emb.npz")
    return d


@pytest.fixture(scope="module")
def hostile_report(tmp_path_factory):
    """The HTML report of a table whose types, models, annotators, texts and column names are
    planted markup (plus an unquoted ``src=http:``), its card, and its build time."""
    d = tmp_path_factory.mktemp("hostile")
    df = markup_frame()
    df.loc[df["model_a"] == "model-c", "model_a"] = f"m src=http://{PLANTED_HOST}/u"
    df.to_csv(d / "bad.csv", index=False)
    _embed(df, d / "emb.npz")
    t0 = time.perf_counter()
    out = subprocess.run(
        [sys.executable, "-m", "puaudit", "report", str(d / "bad.csv"), "-o", str(d / "r.html"),
         "--embeddings", str(d / "emb.npz"), "--json", *AUDIT],
        cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr
    return (d / "r.html").read_text(encoding="utf-8"), _stdout_json(out.stdout), \
        time.perf_counter() - t0


def test_json_card_numbers_are_the_audit_json(demo, capsys):
    d = demo
    assert main(["audit", str(d / "demo.csv"), "-o", str(d / "out.csv"), "--embeddings",
                 str(d / "emb.npz"), "--json", *AUDIT]) == 0
    audit = _stdout_json(capsys.readouterr().out)
    assert main(["report", str(d / "demo.csv"), "-o", str(d / "card.json"), "--embeddings",
                 str(d / "emb.npz"), *AUDIT]) == 0
    card = json.loads((d / "card.json").read_text())
    assert card["audit"] == audit  # every number, the verdict and delta_over_seeds
    assert audit["delta_over_seeds"]["n"] == 2 and card["seeds"] == {"random_state": 3,
                                                                       "spread": [3, 4]}
    assert card["agreement"]["judge"]["lo"] == audit["cons_orig_ci"][0]
    assert card["agreement"]["audited"]["value"] == audit["cons_adj"]
    assert card["config"]["random_state"] == 3 and card["config"]["scorer"] == "centroid"
    assert card["input"]["n_rows"] == 300 and len(card["input"]["sha256"]) == 64
    assert "--seed 3" in card["reproduce"]["audit"] and "--seed 3" in card["reproduce"]["report"]
    assert set(card["rankings"]["available"]) == {"judge", "audited", "human", "ppi"}
    assert card["annotators"]["overall"]["n_annotators"] >= 2
    assert card["trustjudge"]["after"]["ntr"]["3"] is not None
    assert card["data"]["judge_tendencies"]["position"]["n"] > 0


def test_html_is_self_contained_and_shows_the_numbers(hostile_report):
    page, card, seconds = hostile_report
    assert len(page.encode("utf-8")) > 1_000_000  # plotly.js inlined
    assert LINK_OUT.search(page) is None
    assert "<script src" not in page and "cdn.plot.ly/plotly" not in page
    assert "Content-Security-Policy" in page and "default-src 'none'" in page
    assert page.count("Plotly.newPlot(") >= 6
    audit = card["audit"]
    assert f"{audit['cons_orig']:.1%}" in page and f"{audit['cons_adj']:.1%}" in page
    lo, hi = audit["cons_orig_ci"]
    assert f"95% CI {lo:.1%}–{hi:.1%}" in page
    assert audit["verdict"].replace("'", "&#x27;").replace("=", "&#61;") in page
    assert card["input"]["content_hash"] in page and card["input"]["sha256"] in page
    assert "puaudit report" in page and "--seed 3" in page
    print(f"report of {card['input']['n_rows']} rows: {len(page) / 1e6:.2f} MB in {seconds:.1f}s")


def test_html_shows_data_as_text_never_markup(hostile_report):
    page = hostile_report[0]
    body = page.split("</head>", 1)[1]  # the page itself, after the inlined plotly.js
    assert "<img" not in body and "<a " not in body
    # planted markup is there, escaped: as text in tables, as \u escapes in figure data
    assert "&lt;img src&#61;&quot;http://127.0.0.1:9/puaudit-planted-ann.gif&quot;&gt;" in page
    assert "m src&#61;http://127.0.0.1:9/u" in page
    assert "&lt;img src\\u003d" in page  # plotly's labels: entities, and = as \u003d


def test_gate_exit_codes(demo, capsys):
    d = demo
    common = [str(d / "demo.csv"), "-o", str(d / "gate.json"), "--embeddings",
              str(d / "emb.npz"), "--scorer", "centroid", "--spread-seeds", "1"]
    assert main(["report", *common, "--fail-under-agreement", "0.05"]) == 0
    assert capsys.readouterr().out.strip().splitlines()[-1].startswith("PASS: ")
    assert main(["report", *common, "--fail-under-agreement", "0.99"]) == 1
    line = capsys.readouterr().out.strip().splitlines()[-1]
    assert line.startswith("FAIL: ") and "below 0.99" in line
    assert main(["report", *common, "--fail-under-agreement", "1.5"]) == 2
    assert "--fail-under-agreement" in capsys.readouterr().err
    # with --json stdout holds the card alone; the report's lines and the gate's go to stderr
    assert main(["report", *common, "--fail-under-agreement", "0.99", "--json"]) == 1
    cap = capsys.readouterr()
    assert _stdout_json(cap.out) == json.loads((d / "gate.json").read_text())
    assert "wrote the audit card (json" in cap.err
    assert cap.err.strip().splitlines()[-1] == line


def test_gate_reads_the_lower_bound():
    card = {"agreement": {"judge": {"value": 0.8, "lo": 0.7, "hi": 0.9}, "n_validation": 50}}
    assert gate(card, 0.7)[0] and not gate(card, 0.71)[0]
    passed, why = gate({"agreement": None, "notes": {"audit": "no labels"}}, 0.5)
    assert not passed and "no labels" in why


def test_table_without_human_labels(tmp_path, capsys):
    df = generate_demo(n_rows=200, random_state=1).drop(columns=["human_winner", "annotator"])
    df.to_csv(tmp_path / "judge_only.csv", index=False)
    assert main(["report", str(tmp_path / "judge_only.csv"), "-o",
                 str(tmp_path / "card.json"), "--fail-under-agreement", "0.5"]) == 1
    assert "cannot be measured" in capsys.readouterr().out
    card = json.loads((tmp_path / "card.json").read_text())
    assert card["audit"] is None and card["agreement"] is None
    assert "no human verdicts" in card["notes"]["audit"]
    assert card["rankings"]["available"] == ["judge"]
    assert card["trustjudge"]["after"]["ntr"]["3"] is not None
    assert card["data"]["n_annotated"] == 0
    assert card["data"]["judge_tendencies"]["longer"]["n"] > 100
    # the page says so and still draws what needs no label
    assert main(["report", str(tmp_path / "judge_only.csv"), "-o",
                 str(tmp_path / "r.html")]) == 0
    page = (tmp_path / "r.html").read_text(encoding="utf-8")
    assert "no human verdicts" in page and "The judge&#x27;s tendencies" in page
    assert page.count("Plotly.newPlot(") >= 3 and LINK_OUT.search(page) is None


def test_bad_input_is_one_message(demo, tmp_path, capsys):
    assert main(["report", str(tmp_path / "missing.csv"), "-o", str(tmp_path / "r.html")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "Traceback" not in err
    assert main(["report", str(demo / "demo.csv"), "-o", str(demo / "demo.csv")]) == 2
    assert "same file" in capsys.readouterr().err


def test_the_command_line_never_imports_streamlit():
    code = ("import sys, puaudit.cli.report, puaudit.cli.commands, puaudit.report.html; "
            "sys.exit('streamlit' in sys.modules)")
    assert subprocess.run([sys.executable, "-c", code], cwd=ROOT).returncode == 0


@pytest.mark.usefixtures("app_env")
def test_export_page_offers_the_report(downloads):  # noqa: F811 - the imported fixture
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=300)
    at.run()
    at.switch_page("pages/export.py").run()
    assert not at.exception, at.exception
    assert not [b for b in at.get("download_button") if "report" in str(b.proto.label)]
    at.button(key="build_report").click().run()
    assert not at.exception, at.exception
    page = downloads["demo_puaudit_report.html"].decode("utf-8")
    assert len(page) > 1_000_000 and LINK_OUT.search(page) is None
    cons = at.session_state["_report_html"]  # the page built it for this audit
    assert cons[1].decode("utf-8") == page
    assert "PUAudit audit card" in page and "Plotly.newPlot(" in page
    assert "How many verdicts are reversed as m varies" in page  # the m curve, built on the click


def test_certification_is_in_the_card_when_configured(demo):
    d = demo
    assert main(["report", str(d / "demo.csv"), "-o", str(d / "cert.json"), "--embeddings",
                 str(d / "emb.npz"), "--scorer", "centroid", "--spread-seeds", "1",
                 "--target-agreement", "0.8"]) == 0
    card = json.loads((d / "cert.json").read_text())
    assert card["config"]["target_agreement"] == 0.8
    assert card["audit"]["certification"]["target"] == 0.8
    assert "--target-agreement 0.8" in card["reproduce"]["report"]



# an audit with reversals at its m (probe ignores m when fitting: the curve reuses its scores)
M_AUDIT = ["--scorer", "probe", "--m", "0.5", "--seed", "1", "--spread-seeds", "1"]


@pytest.fixture(scope="module")
def m_card(demo):
    d = demo
    assert main(["report", str(d / "demo.csv"), "-o", str(d / "m.json"), "--embeddings",
                 str(d / "emb.npz"), *M_AUDIT]) == 0
    return json.loads((d / "m.json").read_text())


@pytest.fixture(scope="module")
def demo_inputs(demo):
    """The demo table and its embeddings, loaded in this process."""
    import pandas as pd

    from puaudit.data.schema import load_comparisons
    from puaudit.embed.pairs import PairEmbeddings

    arrays = np.load(demo / "emb.npz")
    return (load_comparisons(pd.read_csv(demo / "demo.csv")),
            PairEmbeddings(e_a=arrays["e_a"], e_b=arrays["e_b"], encoder="file:emb.npz"))


@pytest.fixture(scope="module")
def m_parts(demo_inputs):
    """The report's parts of the same audit as :func:`m_card`."""
    from puaudit.audit.config import AuditConfig
    from puaudit.audit.m_curve import audit_with_m_curve
    from puaudit.report.parts import assemble_report

    table, emb = demo_inputs
    cfg = AuditConfig(scorer="probe", m=0.5, random_state=1)
    result, curve = audit_with_m_curve(table, emb, cfg)
    return assemble_report(table, cfg, result, m_curve=curve, source={"name": "demo.csv"})


def test_card_carries_the_audit_pages_m_curve(m_card):
    from puaudit.audit.m_curve import M_RANGE, m_grid  # what the Audit page draws with

    curve, audit = m_card["m_curve"], m_card["audit"]
    assert curve["current_m"] == audit["m"] == 0.5
    assert curve["m"] == list(m_grid(0.5)) and curve["range"] == list(M_RANGE)
    assert curve["m"][0] == M_RANGE[0] and curve["m"][-1] == M_RANGE[1]
    n = dict(zip(curve["m"], curve["n_reversed"]))
    # the point at the audit's m is the audit; the computed points on either side of it keep
    # the curve's order below, which another split or other scores would not be held to
    assert n[0.5] == audit["groups"]["negative"] > 0
    groups = audit["groups"]
    assert curve["n_audited"] == sum(groups.values()) - groups["verified"] - groups["excluded"]
    # scores reused across m (probe), so reversals never increase as m rises; none at m = 1
    assert all(a >= b for a, b in zip(curve["n_reversed"], curve["n_reversed"][1:]))
    assert n[M_RANGE[0]] > n[0.5] and n[1.0] == 0
    assert curve["rule"] == "guarded" and "m_curve" not in m_card["notes"]


def test_html_draws_the_m_curve_under_the_reversals(m_parts):
    from puaudit.report.html import render_report
    from puaudit.report.card import build_card
    from puaudit.report.parts import assemble_report

    card = build_card(m_parts)
    page = render_report(m_parts, card)
    # the same audit reported without its curve (as before the curve joined the report)
    without = assemble_report(m_parts.table, m_parts.config, m_parts.result, source=m_parts.source,
                       ranking_resamples=50)
    before = render_report(without, build_card(without))
    assert page.count("Plotly.newPlot(") == before.count("Plotly.newPlot(") + 1
    assert "m_curve" in without.notes  # said missing, not dropped in silence
    # in the headline section, where the reversals are described, before the per-type results
    head = page[page.index("Reversed share of audited rows"):page.index("<h2>Per question type")]
    assert "How many verdicts are reversed as m varies" in head and "rows reversed" in head
    assert "the marked point is this report&#x27;s m &#61; 0.500" in head
    assert card["m_curve"]["n_reversed"] == [c["n_reversed"] for c in m_parts.m_curve]
    assert LINK_OUT.search(page) is None


def test_paper_rule_curve_moves_with_m(demo_inputs):
    from puaudit.audit.config import AuditConfig
    from puaudit.audit.m_curve import audit_with_m_curve

    cfg = AuditConfig(scorer="centroid", rule="paper", m=0.6, random_state=3)
    result, curve = audit_with_m_curve(*demo_inputs, cfg)
    n = [c["n_reversed"] for c in curve]
    # the paper rule keeps the top m share of each type: fewer reversals as m rises, none at 1
    assert all(a >= b for a, b in zip(n, n[1:])) and n[0] > n[-1] == 0
    here = next(c for c in curve if c["m"] == 0.6)
    assert here["n_reversed"] == int((result.group == "negative").sum()) > 0
