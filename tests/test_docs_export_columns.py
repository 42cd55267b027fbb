"""Every ``puaudit_*`` column an export can hold is named in docs/audit.md, "Export columns"
(issue 39: 13 were exported, the docs named 7 and the ``puaudit_evidence_*`` ones nowhere).

Exports of real data (MT-Bench: models, the raw both-orders verdict; llmfao: a second judge)
and of the demo (judge probabilities), certified, with the review and AlpacaEval columns."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pytest

from puaudit.audit.estimator import PUAudit
from puaudit.embed.pairs import embed_table
from puaudit.data.demo import generate_demo
from puaudit.data.formats.alpaca_eval_export import JUDGE_PREFERENCE
from puaudit.data.schema import load_comparisons
from puaudit.review.feedback import REVIEW_COLUMNS, review_columns
from tests.conftest import ROOT
from puaudit.embed.hashing import HashingEncoder

DATA = ROOT.parent / "shared" / "data"
DOC = ROOT / "docs" / "audit.md"


def documented() -> list[re.Pattern]:
    """The column names in the first cell of the Export columns section's table rows, a
    ``<placeholder>`` standing for any name."""
    text = DOC.read_text(encoding="utf-8")
    section = text[text.index("### Export columns"):text.index("### CLI")]
    names = re.findall(r"^\| `(puaudit_[^`]+)` \|", section, flags=re.M)
    return [re.compile(re.sub(r"<[^>]+>", ".+", re.escape(n).replace(r"\<", "<")
                              .replace(r"\>", ">")) + "$") for n in names]


def _export_columns(frame: pd.DataFrame, n: int | None = None) -> list[str]:
    frame = frame.head(n) if n else frame
    table = load_comparisons(frame)
    res = PUAudit(scorer="centroid", target_agreement=0.6, random_state=0).fit(
        table, embed_table(table, HashingEncoder())).result_
    return [c for c in res.to_frame(table).columns if c.startswith("puaudit_")]


def _undocumented(columns) -> list[str]:
    patterns = documented()
    return [c for c in columns if not any(p.match(c) for p in patterns)]


def test_the_docs_table_is_read():
    names = documented()
    assert len(names) >= 20
    assert any(p.match("puaudit_evidence_agrees_gpt35") for p in names)
    assert not any(p.match("puaudit_nonexistent") for p in names)


@pytest.mark.skipif(not (DATA / "mtbench").exists(), reason="../shared/data not available")
def test_every_column_of_real_exports_is_documented():
    mtbench = pd.read_csv(DATA / "mtbench" / "mtbench_human_vs_gpt4.csv", keep_default_na=False)
    llmfao = pd.read_csv(DATA / "llmfao" / "llmfao_crowd_vs_gpt4.csv", keep_default_na=False)
    columns = set(_export_columns(mtbench)) | set(_export_columns(llmfao, 3000))
    # what the issue found: the evidence columns (models' strengths; llmfao's second judge),
    # the certified rows' column, the core six
    assert {"puaudit_trusted", "puaudit_evidence_bt_gap", "puaudit_evidence_agrees_gpt35",
            "puaudit_reason"} <= columns and len(columns) >= 15
    assert _undocumented(columns) == []


def test_every_column_of_demo_review_and_alpaca_eval_exports_is_documented():
    demo = generate_demo(n_rows=300, random_state=0)
    # the judge's own probabilities, perplexity and a swapped-order verdict (judges that give
    # them: puaudit judge, TrustJudge tables)
    rng = np.random.default_rng(0)
    p_a = np.where(demo["judge_winner"] == "A", 0.8, 0.2) + rng.uniform(-0.1, 0.1, len(demo))
    flipped = demo["judge_winner"].map({"A": "B", "B": "A"}).fillna("tie")
    kept = rng.random(len(demo)) < 0.8  # the same verdict with the answers swapped, mostly
    demo = demo.assign(p_A=p_a, p_B=1 - p_a, ppl=rng.uniform(1, 3, len(demo)),
                       judge_winner_swapped=np.where(kept, flipped, demo["judge_winner"]))
    columns = set(_export_columns(demo))
    assert {"puaudit_evidence_p_chosen", "puaudit_evidence_p_entropy",
            "puaudit_evidence_log_perplexity", "puaudit_evidence_order_consistent"} <= columns
    table = load_comparisons(generate_demo(n_rows=20, random_state=0))
    decisions = pd.DataFrame({"row_key": ["x"], "reviewer": ["ann"], "verdict": ["A"],
                              "note": [""], "created_at": [pd.Timestamp("2026-01-01")]})
    review = list(review_columns(table, decisions).columns)
    assert review == REVIEW_COLUMNS
    assert _undocumented(sorted(columns) + review + [JUDGE_PREFERENCE]) == []
