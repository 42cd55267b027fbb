"""The one answer to "is this cell missing" and "what is this cell as an id"."""

import math

import numpy as np
import pandas as pd
import pytest

from puaudit.data.cells import id_text, is_missing
from puaudit.review.keys import key_of


@pytest.mark.parametrize("value", [None, pd.NA, math.nan, np.float32("nan"), "", "  \t"])
def test_missing_cells(value):
    assert is_missing(value) and id_text(value) == ""


@pytest.mark.parametrize("value", [0, 0.0, "0", "x", False, [], "nan"])
def test_present_cells(value):
    assert not is_missing(value)


@pytest.mark.parametrize("value, text", [
    (3, "3"), (3.0, "3"), (np.float64(3.0), "3"), (np.int64(7), "7"), (2.5, "2.5"),
    (" q1 ", "q1"), ("model_a", "model_a")])
def test_id_text(value, text):
    assert id_text(value) == text


def test_id_text_keeps_white_space_when_asked():
    assert id_text("  a  ", strip=False) == "  a  " and id_text(4.0, strip=False) == "4"


def test_review_keys_read_a_missing_cell_as_empty_text():
    """A pd.NA model name (an Arrow-backed read) keys like a NaN one, not as the text "<NA>"
    (the review keys' own text function wrote "<NA>" before it used id_text)."""
    texts = ("p", "a", "b")
    assert key_of(*texts, model_a=pd.NA) == key_of(*texts, model_a=math.nan)
    assert key_of(*texts, question_id=3.0) == key_of(*texts, question_id=3)
    assert key_of(" p", "a", "b") != key_of("p", "a", "b")  # texts are hashed as shown
