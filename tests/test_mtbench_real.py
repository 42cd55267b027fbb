"""The audit on real data: MT-Bench human vs GPT-4, default encoder (slow: embeds 947 texts once,
then the disk cache serves every later run)."""

import pytest

from puaudit.audit import embed_table
from puaudit.evaluate import evaluate
from puaudit.io import read_table
from puaudit.schema import apply_judge_rule, load_comparisons

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def mt(mtbench_path):
    table = load_comparisons(read_table(mtbench_path))
    return table, embed_table(table)


@pytest.fixture(scope="module")
def boards(mt):
    table, emb = mt
    out = {}
    for judge in ("gpt4", "longer"):
        t = table if judge == "gpt4" else apply_judge_rule(table, "longer")
        res = evaluate(t, emb, seeds=10, scorers=("pot", "full-ot", "centroid", "probe", "knn"),
                       rules=("guarded", "paper"), p_ratio=0.3)
        out[judge] = {(e["scorer"], e["rule"]): e for e in res["leaderboard"]}
    return out


def test_judge_agreement_on_validation_matches_the_data(boards):
    assert boards["gpt4"][("pot", "guarded")]["cons_orig_mean"] == pytest.approx(0.857, abs=0.01)
    assert boards["longer"][("pot", "guarded")]["cons_orig_mean"] == pytest.approx(0.69, abs=0.01)


@pytest.mark.parametrize("judge", ["gpt4", "longer"])
def test_guarded_never_lowers_consistency(boards, judge):
    for scorer in ("pot", "full-ot", "centroid", "probe", "knn"):
        assert boards[judge][(scorer, "guarded")]["delta_mean"] >= -0.005, scorer


def test_guarded_helps_a_length_biased_judge(boards):
    best = max(boards["longer"][(s, "guarded")]["delta_mean"]
               for s in ("pot", "full-ot", "centroid", "probe", "knn"))
    assert best >= 0.02


def test_paper_rule_hurts_gpt4_as_reported(boards):
    e = boards["gpt4"][("pot", "paper")]
    assert e["cons_adj_mean"] == pytest.approx(0.77, abs=0.02)
    assert e["reversal_precision"] < 0.3
