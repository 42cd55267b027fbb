"""The default audit on llmfao (crowd workers vs GPT-4, CC BY 4.0): a weak judge gains (slow)."""

import pytest

from puaudit.embed.pairs import embed_table
from puaudit.audit.evaluate import evaluate
from puaudit.data.io import read_table
from puaudit.data.schema import load_comparisons
from tests.conftest import SHARED

pytestmark = pytest.mark.slow
LLMFAO = SHARED / "data" / "llmfao" / "llmfao_crowd_vs_gpt4.csv"


@pytest.fixture(scope="module")
def board():
    if not LLMFAO.exists():
        pytest.skip("../shared/data is not present")
    table = load_comparisons(read_table(LLMFAO))
    res = evaluate(table, embed_table(table), seeds=3, scorers=("auto", "prior-ot"),
                   rules=("guarded",), p_ratio=0.3)
    return {e["scorer"]: e for e in res["leaderboard"]}


def test_default_and_graded_transport_gain_on_gpt4_vs_crowd_votes(board):
    assert board["auto"]["cons_orig_mean"] == pytest.approx(0.66, abs=0.01)
    assert board["auto"]["delta_mean"] >= 0.035
    assert board["prior-ot"]["delta_mean"] >= 0.035
    assert board["auto"]["reversal_precision"] > 0.6
