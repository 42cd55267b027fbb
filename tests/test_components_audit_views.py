"""What the Audit page draws from the scoring choice is built once per choice: an ``m`` step
reuses it (and it is what a fresh build at the new ``m`` gives), a ``p_ratio`` step builds it
again."""

from __future__ import annotations

import pandas as pd

from components import audit_runs, audit_views
from puaudit.audit.config import AuditConfig
from puaudit.data.demo import generate_demo
from puaudit.data.schema import load_comparisons
from puaudit.embed.hashing import HashingEncoder
from puaudit.embed.pairs import embed_table
from puaudit.report.figures.evidence import evidence_weights_frame
from puaudit.report.figures.metrics import auto_comparison_table


def _params(**changes) -> dict:
    return {**AuditConfig.defaults(), "encoder": "hashing", **changes}


def test_an_m_step_reuses_the_views_of_the_scoring_choice_and_a_p_ratio_step_does_not():
    table = load_comparisons(generate_demo(n_rows=400, random_state=3), name="views")
    emb = embed_table(table, HashingEncoder())
    cache = audit_runs.stage_cache(table, emb)
    built = []

    def view(params):
        result = cache.audit(AuditConfig(**{k: v for k, v in params.items() if k != "encoder"}))

        def build():
            built.append(params["m"])
            return evidence_weights_frame(result), auto_comparison_table(result)
        return result, audit_views.by_scores("test_views", table, emb, params, build)

    first, (weights, choice) = view(_params(m=0.8))
    stepped, (weights2, choice2) = view(_params(m=0.81))
    assert built == [0.8]  # the m step built nothing
    assert weights2 is weights and choice2 is choice
    # and what it kept is what the audit at the new m gives
    pd.testing.assert_frame_equal(evidence_weights_frame(stepped), weights)
    pd.testing.assert_frame_equal(auto_comparison_table(stepped), choice)
    assert (first.m, stepped.m) == (0.8, 0.81)

    view(_params(m=0.81, target_agreement=0.9))  # Certify reads no scoring field either
    assert built == [0.8]
    view(_params(m=0.81, p_ratio=0.35))  # a new split: new scores, new views
    assert built == [0.8, 0.81]
