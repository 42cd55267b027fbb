import gzip
import io

import numpy as np
import pandas as pd
import pytest

from puaudit.data.io import decode_text
from puaudit.data.io import read_table
from puaudit.data.writers import table_to_bytes, write_table
from puaudit.errors import PUAuditError

CSV = 'prompt,response_a,response_b,judge\n"Hi, there","a\nb",B-side,A\nq2,x,y,tie\n'


def test_csv_cells_are_text_exactly_as_written():
    df = read_table(CSV.encode(), name="t.csv")
    assert list(df.columns) == ["prompt", "response_a", "response_b", "judge"]
    assert df.shape == (2, 4)
    assert df.loc[0, "prompt"] == "Hi, there"
    assert df.loc[0, "response_a"] == "a\nb"  # quoted newline kept


def test_numbers_and_empty_cells_round_trip_as_text():
    raw = "a,b\n007,\n1.50,NA\n"
    df = read_table(raw.encode(), name="t.csv")
    assert df["a"].tolist() == ["007", "1.50"]
    assert df["b"].tolist() == ["", "NA"]
    assert table_to_bytes(df, "csv").decode() == raw


@pytest.mark.parametrize("encoding", ["latin-1", "utf-16", "utf-8-sig", "cp1252"])
def test_encodings_are_decoded(encoding):
    text = "prompt,response_a,response_b,judge\ncafé,naïve,crème,A\n"
    df = read_table(text.encode(encoding), name="t.csv")
    assert df.loc[0, "prompt"] == "café"
    assert df.columns[0] == "prompt"  # BOM stripped


def test_utf16_without_bom():
    text = "prompt,judge\nhello,A\n"
    df = read_table(text.encode("utf-16-le"), name="t.csv")
    assert df.loc[0, "prompt"] == "hello"


def test_gzip_with_csv_name():
    df = read_table(gzip.compress(CSV.encode()), name="t.csv")
    assert len(df) == 2


def test_binary_garbage_is_rejected_with_message():
    rng = np.random.default_rng(0)
    blob = bytes(rng.integers(0, 32, 5000, dtype=np.uint8).tolist())
    with pytest.raises(PUAuditError, match="not text|binary"):
        read_table(blob, name="x.csv")


@pytest.mark.parametrize("data,match", [(b"", "empty"), (b"  \n\n", "empty"),
                                        (b"prompt,judge\n", "no data rows")])
def test_empty_and_header_only(data, match):
    with pytest.raises(PUAuditError, match=match):
        read_table(data, name="x.csv")


def test_duplicate_columns_named():
    with pytest.raises(PUAuditError, match="'judge' appears twice") as ei:
        read_table(b"prompt,judge,judge\na,A,B\n", name="x.csv")
    assert ei.value.column == "judge"


def test_jsonl_and_parquet_and_json_array(tmp_path):
    df = pd.DataFrame({"prompt": ["p", "q"], "n": [1, 2]})
    for ext in ("jsonl", "parquet"):
        path = write_table(df, tmp_path / f"t.{ext}")
        back = read_table(path)
        assert back["prompt"].tolist() == ["p", "q"]
        assert back["n"].tolist() == [1, 2]
    arr = b'[{"prompt": "p", "n": 1}]'
    assert read_table(arr, name="t.json")["n"].tolist() == [1]


def test_bad_jsonl_line_named():
    with pytest.raises(PUAuditError, match="line 2"):
        read_table(b'{"a": 1}\n{oops\n', name="t.jsonl")


def test_latin1_heuristic_keeps_text():
    assert decode_text("Zoë".encode("latin-1")) == "Zoë"


def test_file_like_upload():
    buf = io.BytesIO(CSV.encode())
    buf.name = "upload.csv"
    assert len(read_table(buf)) == 2


def test_missing_file_message(tmp_path):
    with pytest.raises(PUAuditError, match="File not found"):
        read_table(tmp_path / "nope.csv")
