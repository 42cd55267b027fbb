"""Latent-truth annotator models on real data (slow): MT-Bench (65 people, GPT-4) and LLMFAO
(124 crowd workers, CC BY 4.0), read from ../shared/data.

Where the numbers come from: the row, worker and vote counts are the data's
(../shared/data/README.md: 3,355 MT-Bench votes, 124 LLMFAO workers); Fleiss' kappa (0.524,
0.292), GPT-4's skill (0.87), the counts of relabelled items and which workers are flagged are
regression pins: what puaudit's own models gave when these tests were written (commit
79a994b, 2026-12-02), not a published reference. A change means the vote collection or a
model's fit changed: check why before pinning new values.
"""

from __future__ import annotations

import numpy as np
import pytest

from puaudit.annotators.consensus import consensus_labels
from puaudit.annotators import (
    annotator_model_report,
    collect_votes,
    fit_truth_model,
)
from puaudit.data.io import read_table
from puaudit.data.schema import load_comparisons
from tests.conftest import MTBENCH, SHARED

pytestmark = pytest.mark.slow
LLMFAO = SHARED / "data" / "llmfao" / "llmfao_crowd_vs_gpt4.csv"


def _load(path):
    if not path.exists():
        pytest.skip("../shared/data is not present")
    table = load_comparisons(read_table(path))
    return table, collect_votes(table)


@pytest.fixture(scope="module")
def mtbench():
    table, votes = _load(MTBENCH)
    return table, votes, annotator_model_report(table, n_boot=50, votes=votes)


@pytest.fixture(scope="module")
def llmfao():
    table, votes = _load(LLMFAO)
    return table, votes, annotator_model_report(table, n_boot=50, votes=votes)


def test_mtbench_votes_and_agreement(mtbench):
    table, votes, rep = mtbench
    ov = rep.overall
    # 3,355 votes less one second vote of a person on an item; 842 of the votes (people and
    # GPT-4) are on rows showing the pair the other way round from the item's first row
    assert votes.n_duplicates == 1 and ov["n_votes"] == 3354 and ov["n_annotators"] == 65
    assert ov["n_items"] == 1814 and ov["n_items_fit"] == 960
    assert int(votes.flip.sum()) == 842
    assert ov["fleiss_votes_per_item"] == 2 and ov["fleiss_items"] == 560
    assert ov["fleiss_kappa"] == pytest.approx(0.524, abs=0.002)
    # the model moves a tenth of the labels, and agrees with GPT-4 as often as majority vote
    assert 120 <= ov["n_consensus_differs_majority"] <= 230
    assert abs(ov["consensus_agree_judge_common"] - ov["majority_agree_judge_common"]) < 0.02
    mv = fit_truth_model(votes, model="mv")
    assert [("A", "B", "tie")[c] for c in mv.consensus] == \
        consensus_labels(table)[votes.item_row].tolist()


def test_mtbench_people_and_gpt4(mtbench):
    _, _, rep = mtbench
    a = rep.annotators.set_index("annotator")
    elig = a[a["flag_eligible"] & ~a["is_judge"]]
    assert len(elig) == 53
    # ~40 votes each, half on items with a second vote: wide intervals, no flag is warranted
    assert (elig["skill_hi"] - elig["skill_lo"]).median() > 0.2
    assert rep.overall["n_model_flagged"] == 0
    # the two people the raw audit singles out are the least skilled under the model
    assert set(elig.sort_values("skill").index[:2]) == {"expert_12", "expert_8"}
    gpt4 = a.loc["LLM judge"]
    assert gpt4["skill"] == pytest.approx(0.87, abs=0.03)
    assert gpt4["position_bias_lo"] < 0.5 < gpt4["position_bias_hi"]  # both orders asked
    assert gpt4["length_bias_lo"] > 0.55                              # prefers the longer


def test_llmfao_flags_the_careless_workers(llmfao):
    _, votes, rep = llmfao
    ov = rep.overall
    assert ov["n_annotators"] == 124 and ov["fleiss_votes_per_item"] == 5
    assert ov["fleiss_items"] == 998 and ov["fleiss_kappa"] == pytest.approx(0.292, abs=0.002)
    assert not votes.flip.any()  # one order per pair
    a = rep.annotators.set_index("annotator")
    assert a.loc["worker_15", "flag_spammer"] and a.loc["worker_15", "flag_length"]
    assert a.loc["worker_15", "skill_hi"] < 0.6 and a.loc["worker_15", "length_bias_lo"] > 0.7
    assert a.loc["worker_20", "flag_position"] and a.loc["worker_20", "position_bias_lo"] > 0.6
    assert a.loc["worker_70", "flag_length"]
    careful = a[a["flag_eligible"] & ~a["is_judge"] & (a["skill_lo"] > 0.85)]
    assert len(careful) >= 10 and not careful["model_flags"].map(bool).any()
    assert 300 <= ov["n_consensus_differs_majority"] <= 400


def test_llmfao_mace_agrees_on_the_worst(llmfao):
    table, votes, _ = llmfao
    rep = annotator_model_report(table, model="mace", n_boot=0, votes=votes)
    a = rep.annotators.set_index("annotator")
    assert a.loc["worker_15", "competence"] < 0.2
    elig = a[a["flag_eligible"] & ~a["is_judge"]]
    worst = set(elig.sort_values("skill").index[:4])
    assert {"worker_15", "worker_121"} <= worst
    assert np.isfinite(a["cohen_kappa"]).sum() >= 100
