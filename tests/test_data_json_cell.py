"""A list or object in a table cell is written as JSON text through the one JSON sanitiser."""

import json
import math

import numpy as np
import pytest

from puaudit.data.formats.tool_votes import set_aside
from puaudit.data.jsonsafe import json_cell


@pytest.mark.parametrize("value, text", [
    ([math.nan, 1.5], "[null, 1.5]"),
    (np.array([np.nan, np.inf]), "[null, null]"),
    ({"p": np.float32("nan"), "n": np.int64(2)}, '{"p": null, "n": 2}'),
    (("é", None), '["é", null]'),
])
def test_containers_become_valid_json(value, text):
    out = json_cell(value)
    assert out == text
    json.loads(out, parse_constant=lambda c: pytest.fail(f"{c} is not JSON"))


@pytest.mark.parametrize("value", ["text", 3, 2.5, None])
def test_scalars_stay_as_they_are(value):
    assert json_cell(value) == value


def test_numpy_scalars_become_python_numbers():
    out = json_cell(np.float64(0.25))
    assert out == 0.25 and type(out) is float


def test_a_tool_task_field_holding_nan_is_written_as_json():
    """Label Studio / Argilla task fields went through ``json.dumps``, which writes ``[NaN]``
    (not JSON) for a list holding NaN."""
    out = set_aside({"scores": [math.nan, 0.5]}, prefix="ls_")
    assert out == {"scores": "[null, 0.5]"}
