"""Model names are read from their cells as every other id is (puaudit.data.cells.id_text)."""

import math

import numpy as np
import pandas as pd

from puaudit.rankings.estimate import model_rankings


def test_missing_names_are_left_out_and_float_ids_lose_their_point_zero():
    """A model column read as floats because one cell was empty names the model ``3``, not
    ``3.0`` (the leaderboard's own name reader kept the ``.0`` before it used id_text)."""
    model_a = [3.0, 3.0, 4.0, math.nan, pd.NA, " 3 "]
    model_b = [4.0, 4.0, 3.0, 4.0, 3.0, None]
    verdict = ["A", "tie", "B", "A", "A", "A"]
    res = model_rankings(model_a, model_b, verdict, n_resamples=50)
    assert sorted(res.frame["model"]) == ["3", "4"]
    f = res.frame.set_index("model")
    # 3 beats 4 twice (rows 1 and 3) and ties once: (2 + 0.5) / 3
    np.testing.assert_allclose(f.loc["3", "winrate_judge"], 2.5 / 3)
