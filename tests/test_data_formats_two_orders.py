"""The release's rule that makes one verdict of a judge's two answer orders (FastChat's pairwise
judgments and arena-hard-auto's games both use it)."""

import pytest

from puaudit.data.formats.mtbench import two_order_verdict

# order 1 shows model_a first (A = model_a), order 2 shows model_b first (A = model_b). By hand.
EXPECTED = {
    ("A", "B"): "model_a", ("B", "A"): "model_b", ("tie", "tie"): "tie",
    ("A", "A"): "tie (inconsistent)", ("B", "B"): "tie (inconsistent)",
    ("A", "tie"): "tie (inconsistent)", ("tie", "A"): "tie (inconsistent)",
    ("B", "tie"): "tie (inconsistent)", ("tie", "B"): "tie (inconsistent)",
    ("A", None): "", (None, "B"): "", (None, None): "", ("tie", None): "",
}


@pytest.mark.parametrize("v1, v2", list(EXPECTED))
def test_two_order_verdict(v1, v2):
    assert two_order_verdict(v1, v2) == EXPECTED[(v1, v2)]
