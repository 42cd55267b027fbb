import pandas as pd
import pytest

from puaudit.data.io import read_table
from puaudit.data.writers import table_to_bytes
from puaudit.data.safety import formula_cells, is_formula, spreadsheet_safe


@pytest.mark.parametrize("value,expected", [
    ("=1+1", True), ("+SUM(A1:A2)", True), ("-2+3", True), ("@cmd", True),
    ("\t=HYPERLINK(\"http://x\")", True), ("\r=1", True), ("- bullet point", True), ("-", True),
    ("-3", False), ("-0.5", False), ("+7", False), ("-1e-3", False), ("-.5", False), ("-12%", False),
    ("a = b", False), ("", False), ("A", False), (" =1", False), (-3, False), (None, False),
])
def test_is_formula(value, expected):
    assert is_formula(value) is expected


def test_formula_cells_lists_row_column_value():
    df = pd.DataFrame({"prompt": ["hi", "=2*3", "-4"], "n": [-1, 2, 3],
                       "response_a": ["@x", "ok", "+1+1"]})
    found = formula_cells(df)
    assert list(found.columns) == ["row", "column", "value"]
    assert found.values.tolist() == [[1, "response_a", "@x"], [2, "prompt", "=2*3"],
                                     [3, "response_a", "+1+1"]]
    assert formula_cells(pd.DataFrame({"a": ["x", "-3"]})).empty


def test_spreadsheet_safe_prefixes_only_formulas_and_leaves_input_alone():
    df = pd.DataFrame({"prompt": ["hi", "=2*3", "-4"], "=evil": ["\t@x", "ok", None]})
    safe = spreadsheet_safe(df)
    assert list(safe.columns) == ["prompt", "'=evil"]
    assert safe["prompt"].tolist() == ["hi", "'=2*3", "-4"]
    assert safe["'=evil"].tolist()[:2] == ["'\t@x", "ok"] and pd.isna(safe["'=evil"].iloc[2])
    assert df["prompt"].tolist() == ["hi", "=2*3", "-4"]  # the original is untouched
    assert formula_cells(safe).empty


def test_default_export_stays_byte_faithful():
    raw = 'prompt,judge\n"=HYPERLINK(""http://x"")",A\n-3,B\n@SUM(1),A\n'
    df = read_table(raw.encode(), name="t.csv")
    assert table_to_bytes(df, "csv").decode() == raw
    assert formula_cells(df)["row"].tolist() == [1, 3]
    safe = read_table(table_to_bytes(spreadsheet_safe(df), "csv"), fmt="csv")
    assert safe.loc[0, "prompt"] == "'=HYPERLINK(\"http://x\")" and safe.loc[1, "prompt"] == "-3"
