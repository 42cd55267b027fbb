"""Pinned numbers on the PRD Vicuna80 data (MIT, PRD project): 4 judges x 80 questions x 5
candidates, both answer orders, baseline relation.

Where the numbers come from:

- independent of puaudit: the row counts and gpt4's relation counts (207 ``>``, 291 ``<``,
  302 ``=``) are those of ../shared/data/README.md; ``NTR_3 x 800 = tie cycles + equivalence
  contradictions`` and "no strict cycle" are invariants of the baseline relation's ties;
- regression pins: NTR_k, the triple counts, the 902 violations and the roleplay NTR_3 are
  what puaudit's own analysis printed when it was written (commit 01e6bc4, 2026-12-02), not a
  published reference. A change means the relations, the triple classification or the NTR
  counting changed: check why (a hand count on one question) before pinning new values.
"""

from pathlib import Path

import pytest

from puaudit.trustjudge import analyse, pair_relations, read_pairwise

PRD = Path(__file__).resolve().parents[1] / ".." / "shared" / "data" / "prd_vicuna80" / "prd_vicuna80_pairwise.csv"
pytestmark = pytest.mark.skipif(not PRD.exists(), reason="shared PRD data not available")

# judge: (NTR_3, NTR_4, NTR_5, cycles through a tie, equivalence contradictions)
PINNED = {
    "bard": (0.4075, 0.7525, 0.9125, 25, 301),
    "claude": (0.3225, 0.6675, 0.8875, 32, 226),
    "gpt35": (0.20625, 0.46, 0.6875, 20, 145),
    "gpt4": (0.19125, 0.425, 0.625, 8, 145),
}


@pytest.fixture(scope="module")
def report():
    return analyse(PRD)


def test_loads_without_mapping():
    df = read_pairwise(PRD)
    assert len(df) == 3200
    assert sorted(df["judge"].unique()) == ["bard", "claude", "gpt35", "gpt4"]
    assert df.groupby(["judge", "question_id"]).size().eq(10).all()
    assert df["verdict_2"].notna().all() and not df.attrs["has_probabilities"]
    assert df["rationale_1"].str.len().gt(0).mean() > 0.9


def test_gpt4_baseline_relation_counts_match_data_readme():
    rel = pair_relations(read_pairwise(PRD))
    counts = rel[rel["judge"] == "gpt4"]["relation"].value_counts().to_dict()
    assert counts == {">": 207, "<": 291, "=": 302}


@pytest.mark.parametrize("judge", sorted(PINNED))
def test_ntr_per_judge(report, judge):
    ntr3, ntr4, ntr5, tie_cycles, equiv = PINNED[judge]
    d = report.per_judge[judge]
    assert d["ntr"] == {3: pytest.approx(ntr3), 4: pytest.approx(ntr4), 5: pytest.approx(ntr5)}
    assert d["triples"] == {"strict_cycle": 0, "tie_cycle": tie_cycles,
                            "equivalence_contradiction": equiv}
    # 80 questions x C(5, 3) = 800 triples per judge
    assert d["ntr"][3] * 800 == pytest.approx(tie_cycles + equiv)


def test_overall(report):
    assert report.ntr == {3: pytest.approx(0.281875), 4: pytest.approx(0.57625),
                          5: pytest.approx(0.778125)}
    assert all(report.ntr_exact.values())
    assert report.triples == {"strict_cycle": 0, "tie_cycle": 85, "equivalence_contradiction": 817}
    assert len(report.violations) == 902
    assert report.cr is None
    assert set(report.per_type) == {"coding", "common-sense", "counterfactual", "fermi", "generic",
                                    "knowledge", "math", "roleplay", "writing"}
    assert report.per_type["roleplay"]["ntr"][3] == pytest.approx(0.3575)
    # every judge x question ranks all five candidates
    assert report.rankings.groupby(["judge", "question_id"]).size().eq(5).all()
