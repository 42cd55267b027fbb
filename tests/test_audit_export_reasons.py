"""`puaudit_reason` says why each row was reversed, kept, flagged or left out, with the numbers
the decision used."""

import re

import numpy as np
import pytest

from puaudit.audit.config import AuditConfig
from puaudit.embed.pairs import PairEmbeddings
from puaudit.audit.stages import audit_table
from puaudit.data.schema import load_comparisons


@pytest.fixture(scope="module")
def audited(planted):
    df, e_a, e_b, _ = planted
    df = df.copy()
    df.loc[:4, "judge_winner"] = "tie"  # five excluded rows
    table = load_comparisons(df)
    return table, PairEmbeddings(e_a, e_b)


def test_every_row_has_a_reason_matching_its_numbers(audited):
    table, emb = audited
    res = audit_table(table, emb, AuditConfig(scorer="probe", margin=0.05))
    reasons = res.to_frame(table)["puaudit_reason"].to_numpy()
    assert all(isinstance(r, str) and r for r in reasons)
    neg = np.flatnonzero(res.group == "negative")
    assert len(neg) > 0
    for i in neg:
        m = re.match(r"reversed: P\(judge right\) (\d\.\d\d) < 0\.45 \(guarded rule", reasons[i])
        assert m, reasons[i]
        assert float(m.group(1)) == pytest.approx(res.p_judge_right[i], abs=0.005)
        assert res.p_judge_right[i] < 0.45
    for i in np.flatnonzero(res.group == "positive"):
        assert reasons[i].startswith("kept: P(judge right)") and res.p_judge_right[i] > 0.55
    for i in np.flatnonzero(res.group == "uncertain"):
        assert reasons[i].startswith("kept, for review:")
    assert (reasons[res.split == "P"] == "verified (P): the human verdict is used").all()
    assert set(reasons[:5]) == {"judge tie"}


def test_paper_rule_and_certification_are_named(audited):
    table, emb = audited
    res = audit_table(table, emb, AuditConfig(scorer="centroid", rule="paper", m=0.7,
                                              target_agreement=0.8))
    reasons = res.columns()["puaudit_reason"]
    neg = res.group == "negative"
    assert neg.any() and all("(paper rule, m 0.70)" in r for r in reasons[neg])
    audited_rows = (res.split == "unlabelled") | (res.split == "validation")
    trusted = np.asarray(res.certification.trusted)
    for i in np.flatnonzero(audited_rows):
        assert reasons[i].endswith("; trusted (certified)" if trusted[i]
                                   else "; escalated to a person (below the certified threshold)")
