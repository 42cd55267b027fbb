"""Property-based tests (hypothesis): the loader never fails with anything but PUAuditError, and
exporting then re-reading gives back every row, column name and value (docs/safety.md)."""

import csv
import io
import json

import numpy as np
import pandas as pd
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from puaudit.embed.pairs import PairEmbeddings
from puaudit.audit.estimator import PUAudit
from puaudit.data.io import read_table
from puaudit.data.writers import table_to_bytes
from puaudit.errors import PUAuditError

SETTINGS = settings(max_examples=60, deadline=None, database=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

# Any character but control characters (a file with many of them is refused as binary, by
# design); tab, CR and LF are kept, and so are quotes, commas, U+2028 and every other letter.
_chars = st.characters(exclude_categories=("Cs", "Cc"), include_characters="\t\r\n\",;'")
cell = st.one_of(st.just(""), st.text(_chars, max_size=12),
                 st.sampled_from(["a,b", '"q"', "x\r\ny", " pad ", "NaN", "007", "-3", "=1+1"]))
name = st.text(_chars, min_size=1, max_size=8).filter(
    lambda s: s.strip() != "" and not s.startswith("\ufeff"))


@st.composite
def tables(draw, *, unique: bool = True):
    cols = draw(st.lists(name, min_size=1, max_size=5, unique=unique))
    n = draw(st.integers(1, 6))
    return pd.DataFrame({c: pd.array(draw(st.lists(cell, min_size=n, max_size=n)), dtype="str")
                         for c in cols}, columns=cols)


@st.composite
def serialised(draw):
    """Bytes of a table with possibly duplicate / odd names, ragged rows, or random bytes."""
    kind = draw(st.sampled_from(["csv", "jsonl", "parquet", "bytes", "ragged"]))
    if kind == "bytes":
        return draw(st.binary(max_size=300)), draw(st.sampled_from(["x.csv", "x.jsonl", "x.parquet",
                                                                    "x.txt", "upload"]))
    cols = draw(st.lists(st.text(max_size=6), min_size=1, max_size=4))
    rows = draw(st.lists(st.lists(st.text(max_size=8), min_size=len(cols), max_size=len(cols)),
                         max_size=5))
    if kind == "ragged":
        buf = io.StringIO()
        csv.writer(buf).writerows([cols] + [r[: draw(st.integers(0, len(r)))] + ["x"] * draw(
            st.integers(0, 2)) for r in rows])
        return buf.getvalue().encode("utf-8", "surrogatepass"), "x.csv"
    if kind == "csv":
        buf = io.StringIO()
        csv.writer(buf).writerows([cols] + rows)
        return buf.getvalue().encode("utf-8", "surrogatepass"), "x.csv"
    if kind == "jsonl":  # written by hand: repeated keys are legal JSON text
        lines = ["{" + ", ".join(f"{json.dumps(k)}: {json.dumps(v)}" for k, v in zip(cols, r)) + "}"
                 for r in rows]
        return "\n".join(lines).encode("utf-8", "surrogatepass"), "x.jsonl"
    df = pd.DataFrame(rows, columns=pd.Index(cols)) if rows else pd.DataFrame(columns=cols)
    buf = io.BytesIO()
    try:
        df.to_parquet(buf)
    except Exception:  # pyarrow refuses duplicate names: serialise as CSV instead
        return b",".join(c.encode("utf-8", "surrogatepass") for c in cols), "x.csv"
    return buf.getvalue(), "x.parquet"


@SETTINGS
@given(serialised())
def test_loader_loads_or_raises_our_error(blob):
    data, fname = blob
    try:
        df = read_table(data, name=fname)
    except PUAuditError as exc:
        assert str(exc)
        return
    assert isinstance(df, pd.DataFrame) and len(df) > 0 and len(df.columns) > 0


@SETTINGS
@given(tables(), st.sampled_from(["csv", "tsv", "parquet", "jsonl"]))
def test_round_trip_is_lossless(df, fmt):
    back = read_table(table_to_bytes(df, fmt), fmt=fmt)
    assert list(back.columns) == list(df.columns)
    assert len(back) == len(df)
    for c in df.columns:
        assert back[c].tolist() == df[c].tolist()


@settings(max_examples=25, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
@given(extra=tables(), fmt=st.sampled_from(["csv", "parquet", "jsonl"]), seed=st.integers(0, 10))
def test_audit_export_keeps_every_input_row_and_column(extra, fmt, seed):
    n = 40
    rng = np.random.default_rng(seed)
    core = pd.DataFrame({
        "prompt": [f"p{i}" for i in range(n)], "response_a": [f"a{i}" for i in range(n)],
        "response_b": [f"b{i}" for i in range(n)],
        "judge_winner": rng.choice(["A", "B", "tie"], n).tolist(),
        "human_winner": rng.choice(["A", "B", ""], n).tolist()}, dtype="str")
    # extra user columns (odd names, any text) repeated down the table; names never clash
    extra = extra.rename(columns=lambda c: f"x:{c}")
    reps = pd.concat([extra] * (n // len(extra) + 1), ignore_index=True).iloc[:n]
    df = pd.concat([core, reps.reset_index(drop=True)], axis=1)
    src = read_table(table_to_bytes(df, fmt), fmt=fmt)
    emb = PairEmbeddings(rng.normal(size=(n, 4)).astype(np.float32),
                         rng.normal(size=(n, 4)).astype(np.float32))
    try:
        est = PUAudit(scorer="centroid", random_state=seed).fit(src, emb)
    except PUAuditError:  # too few annotated rows drawn: nothing to export
        return
    out = est.to_frame()
    back = read_table(table_to_bytes(out, fmt), fmt=fmt)
    assert len(back) == n
    assert list(back.columns[: df.shape[1]]) == list(df.columns)
    for c in df.columns:
        assert back[c].tolist() == df[c].tolist(), c
    assert back["puaudit_split"].tolist() == out["puaudit_split"].tolist()
    if fmt != "csv":  # floats written to the last digit
        assert np.allclose(back["puaudit_score"].astype(float), out["puaudit_score"].astype(float),
                           rtol=0, atol=0, equal_nan=True)
