"""Hostile inputs, third round: small files that decode to gigabytes (the decoded-size budget).

A 34 KB Parquet file whose 64 rows each carry a list of 10 million zeros decodes to 5 GB, and a
5 MB gzip of a CSV or JSONL holding the same lists as text expands to 5 GB. Every reader counts
decoded bytes against one budget (:class:`puaudit.data.read_limits.DecodedBudget`): the CLI's
``--max-decoded-mb`` (default 2,048 MB) and the dashboard's ``PUAUDIT_MAX_UPLOAD_MB``. Each file
is generated here; peak memory is the child's VmHWM, as in tests/test_cli_input_limits.py.
"""

from __future__ import annotations

import argparse
import gzip
import io
import json
import struct

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from puaudit.cli.input_limits import DEFAULT_MAX_DECODED_MB, max_decoded_bytes_from
from puaudit.data.io import read_table
from puaudit.data.parquet_stream import read_comparisons_parquet
from puaudit.errors import PUAuditError
from tests.child_support import run_measured
from tests.conftest import ROOT

ROWS = 64
ZEROS = 10_000_000  # per row: 64 x 10M int64 = 5.12 GB decoded
SCHEMA = pa.schema([("prompt", pa.string()), ("response_a", pa.string()),
                    ("response_b", pa.string()), ("judge_winner", pa.string()),
                    ("human_winner", pa.string()), ("extra", pa.list_(pa.int64()))])


def _row(i: int, extra) -> dict:
    return {"prompt": [f"question {i}"], "response_a": [f"answer a{i}"],
            "response_b": [f"answer b{i}"], "judge_winner": ["model_a" if i % 2 else "model_b"],
            "human_winner": ["model_a" if i % 3 else ""], "extra": extra}


def parquet_bomb(path, *, rows: int = ROWS, zeros: int = ZEROS) -> None:
    """``rows`` row groups of one row each whose ``extra`` list holds ``zeros`` zeros.

    The zeros are written once (pyarrow's dictionary and run-length encoding make them a few
    hundred bytes) and every row group's footer entry points at those pages, so the file is
    written in a second, not in the minute that encoding 640 million values would take.
    """
    extra = pa.ListArray.from_arrays(pa.array([0, zeros], pa.int32()),
                                     pa.array(np.zeros(zeros, np.int64)))
    buf = io.BytesIO()
    pq.write_table(pa.table(_row(0, extra), schema=SCHEMA), buf)
    raw = buf.getvalue()
    footer_len = struct.unpack("<i", raw[-8:-4])[0]
    meta = pq.read_metadata(io.BytesIO(raw))
    one = pq.read_metadata(io.BytesIO(raw))
    for _ in range(rows - 1):
        meta.append_row_groups(one)
    sink = io.BytesIO()
    meta.write_metadata_file(sink)  # "PAR1" + footer + length + "PAR1"
    path.write_bytes(raw[:-8 - footer_len] + sink.getvalue()[4:])


def gzip_bomb(path, *, jsonl: bool, rows: int = ROWS, blocks: int = 3) -> int:
    """A gzip of ``rows`` comparisons whose ``extra`` cell is ``[0, 0, ...]`` (27 MB of text per
    block), as CSV or JSONL; gzip members are concatenated, one 27 MB block compressed once.
    Returns the decompressed size."""
    block_text = b"0, " * 9_000_000
    block = gzip.compress(block_text, 9)
    parts, size = [], 0

    def add(text: bytes) -> None:
        nonlocal size
        parts.append(gzip.compress(text, 9))
        size += len(text)

    if not jsonl:
        add(b"prompt,response_a,response_b,judge_winner,human_winner,extra\n")
    for i in range(rows):
        cells = {k: v[0] for k, v in _row(i, None).items() if k != "extra"}
        if jsonl:
            add(json.dumps(cells)[:-1].encode() + b', "extra": [')
        else:
            add(",".join(cells.values()).encode() + b',"[')
        parts.extend([block] * blocks)
        size += blocks * len(block_text)
        add(b"0]}\n" if jsonl else b'0]"\n')
    path.write_bytes(b"".join(parts))
    return size


@pytest.fixture(scope="module")
def bombs(tmp_path_factory):
    d = tmp_path_factory.mktemp("bombs")
    parquet_bomb(d / "bomb.parquet")
    sizes = {"bomb.parquet": ROWS * ZEROS * 8,
             "bomb.csv.gz": gzip_bomb(d / "bomb.csv.gz", jsonl=False),
             "bomb.jsonl.gz": gzip_bomb(d / "bomb.jsonl.gz", jsonl=True)}
    return d, sizes


def test_the_generated_bombs_are_small_files_that_decode_to_5_gb(bombs):
    d, sizes = bombs
    for name, decoded in sizes.items():
        assert (d / name).stat().st_size <= 5.5 * 2**20 and decoded >= 5e9, name
    meta = pq.read_metadata(d / "bomb.parquet")
    assert meta.num_rows == ROWS and meta.num_row_groups == ROWS
    # the pages say almost nothing: only the value count shows what the column decodes to
    chunks = [meta.row_group(g).column(5) for g in range(ROWS)]
    assert sum(c.total_uncompressed_size for c in chunks) < 2**20
    assert sum(c.num_values for c in chunks) == ROWS * ZEROS
    # and the file is real Parquet: any row group reads back as one row of 10M zeros
    group = pq.ParquetFile(d / "bomb.parquet").read_row_group(7, columns=["prompt", "extra"])
    assert group.num_rows == 1 and len(group.column("extra")[0]) == ZEROS


@pytest.mark.parametrize("name,output,env,limit", [
    ("bomb.parquet", "out.csv", {}, DEFAULT_MAX_DECODED_MB),
    ("bomb.parquet", "out.parquet", {}, DEFAULT_MAX_DECODED_MB),  # streamed export path
    # a gzip is counted before anything is kept, so the peak does not depend on the limit;
    # a smaller one only makes the count stop sooner (bench/hostile_memory.py runs the default)
    ("bomb.csv.gz", "out.csv", {"PUAUDIT_MAX_DECODED_MB": "256"}, 256),
    ("bomb.jsonl.gz", "out.jsonl", {"PUAUDIT_MAX_DECODED_MB": "256"}, 256),
])
def test_the_cli_refuses_a_bomb_before_embedding_within_1_gb(bombs, name, output, env, limit):
    d, _ = bombs
    code = ("import sys\n"
            "from puaudit.cli.commands import main\n"
            f"RC = main(['audit', {str(d / name)!r}, '-o', {str(d / output)!r}])\n"
            "loaded = [m for m in ('torch', 'transformers', 'puaudit.embed.encoders') "
            "if m in sys.modules]\n"
            "print('LOADED', loaded, file=sys.stderr)\n")
    rc, err, peak_mb, _ = run_measured(code, cwd=d, env_extra=env)
    assert rc == 2, err[-2000:]
    assert "Traceback" not in err
    assert name in err and f"more than {limit:,} MB" in err and "the limit here" in err
    assert "--max-decoded-mb" in err and "PUAUDIT_MAX_DECODED_MB" in err
    assert "LOADED []" in err  # refused before the encoder (or torch) was imported
    assert not (d / output).exists()
    print(f"{name} -> {output}: peak {peak_mb:.0f} MB")
    assert peak_mb < 1024, peak_mb


@pytest.mark.parametrize("name", ["bomb.parquet", "bomb.csv.gz", "bomb.jsonl.gz"])
def test_the_dashboard_upload_refuses_a_bomb_within_1_gb(bombs, name):
    d, _ = bombs
    code = ("from components.uploads import read_upload\n"
            "from puaudit.errors import PUAuditError\n"
            f"data = open({str(d / name)!r}, 'rb').read()\n"
            "RC = 0\n"
            "try:\n"
            f"    read_upload(data, {name!r}, max_upload_mb=200)\n"
            "except PUAuditError as exc:\n"
            "    import sys; print('REFUSED', exc, file=sys.stderr); RC = 2\n")
    rc, err, peak_mb, _ = run_measured(code, cwd=ROOT)
    assert rc == 2, err[-2000:]
    message = err.split("REFUSED", 1)[1]
    assert name in message and "more than 200 MB" in message and "the limit here" in message
    assert "PUAUDIT_MAX_UPLOAD_MB" in message
    print(f"upload {name}: peak {peak_mb:.0f} MB")
    assert peak_mb < 1024, peak_mb


def test_the_operators_upload_limit_is_the_budget(bombs, monkeypatch):
    from components.uploads import read_upload

    d, _ = bombs
    data = (d / "bomb.csv.gz").read_bytes()
    monkeypatch.setenv("PUAUDIT_MAX_UPLOAD_MB", "64")
    with pytest.raises(PUAuditError, match="more than 64 MB when decompressed"):
        read_upload(data, "bomb.csv.gz")


def _dictionary_bomb(path, *, nested: bool, rows: int = 600, text_mb: int = 10) -> None:
    """One ``text_mb`` MB string, repeated on every row through a dictionary page: a few KB on
    disk, ``rows * text_mb`` MB decoded (6 GB). Nested: the same as a one-item list per row."""
    text = "x" * (text_mb * 2**20)
    col = pa.DictionaryArray.from_arrays(pa.array(np.zeros(rows, np.int32)), pa.array([text]))
    if nested:
        col = pa.ListArray.from_arrays(pa.array(np.arange(rows + 1, dtype=np.int32)), col)
    table = pa.table({"prompt": [f"q{i}" for i in range(rows)],
                      "response_a": ["a"] * rows, "response_b": ["b"] * rows,
                      "judge_winner": ["model_a"] * rows, "notes": col})
    pq.write_table(table, path, compression="zstd")


@pytest.mark.parametrize("nested", [False, True])
def test_repeated_text_is_measured_before_it_is_expanded(tmp_path, nested):
    # The footer cannot size a dictionary's repeats: the reader measures them while they are
    # still a dictionary, in the dashboard's reader and in the streamed audit's.
    path = tmp_path / "dict.parquet"
    _dictionary_bomb(path, nested=nested)
    assert path.stat().st_size < 2**20
    code = ("from puaudit.data.io import read_table\n"
            "from puaudit.data.parquet_stream import read_comparisons_parquet\n"
            "from puaudit.errors import PUAuditError\n"
            "import sys\nRC = 0\n"
            "for read in (lambda: read_table(P, max_bytes=200 * 2**20),\n"
            "             lambda: read_comparisons_parquet(P, max_bytes=200 * 2**20)):\n"
            "    try:\n"
            "        read()\n"
            "    except PUAuditError as exc:\n"
            "        print('REFUSED', exc, file=sys.stderr); RC += 1\n")
    rc, err, peak_mb, _ = run_measured(f"P = {str(path)!r}\n" + code, cwd=ROOT)
    assert rc == 2, err[-2000:]  # both readers refused
    assert err.count("more than 200 MB of data once decoded (the limit here; passed in row "
                     "group 1 of 1)") == 2, err
    print(f"dictionary bomb (nested={nested}): peak {peak_mb:.0f} MB")
    assert peak_mb < 1024, peak_mb


def _list_table(rows: int, per_row: int) -> pa.Table:
    extra = pa.ListArray.from_arrays(
        pa.array(np.arange(0, (rows + 1) * per_row, per_row), pa.int32()),
        pa.array(np.arange(rows * per_row, dtype=np.int64)))
    return pa.table({"prompt": [f"q{i}" for i in range(rows)],
                     "response_a": ["a"] * rows, "response_b": ["b"] * rows,
                     "judge_winner": ["model_a"] * rows,
                     "human_winner": ["model_a" if i % 2 else "" for i in range(rows)],
                     "extra": extra})


def test_a_parquet_file_just_under_the_budget_reads_and_just_over_is_refused(tmp_path):
    path = tmp_path / "lists.parquet"
    table = _list_table(64, 40_000)  # 20.5 MB of int64 values decoded
    pq.write_table(table, path, row_group_size=16)
    decoded = table.nbytes
    df = read_table(path, max_bytes=int(decoded * 1.1))
    assert len(df) == 64 and len(df["extra"].iloc[63]) == 40_000
    assert int(df["extra"].iloc[63][-1]) == 64 * 40_000 - 1  # the values, in order
    frame = read_comparisons_parquet(path, max_bytes=int(decoded * 1.1))
    assert len(frame) == 64
    for read in (read_table, read_comparisons_parquet):
        with pytest.raises(PUAuditError, match="once decoded .*refused before reading") as exc:
            read(path, max_bytes=int(decoded * 0.9))
        assert "column 'extra'" in str(exc.value) and "lists.parquet" in str(exc.value)


def test_a_gzip_is_counted_exactly_and_a_file_at_the_budget_reads(tmp_path):
    raw = b"prompt,response_a,response_b,judge_winner\n" + b"q,a,b,model_a\n" * 50_000
    # two members and zero padding after the last, as gzip allows
    data = gzip.compress(raw[:1000]) + gzip.compress(raw[1000:]) + b"\x00" * 16
    df = read_table(data, name="t.csv.gz", max_bytes=len(raw))
    assert df.shape == (50_000, 4) and df["response_b"].eq("b").all()
    with pytest.raises(PUAuditError, match="refused before anything was kept"):
        read_table(data, name="t.csv.gz", max_bytes=len(raw) - 1)
    # a damaged gzip is still reported as such, not as a size
    with pytest.raises(PUAuditError, match="could not be decompressed"):
        read_table(data[:len(data) // 2], name="cut.csv.gz", max_bytes=len(raw))


def test_jsonl_values_are_counted_once_parsed(tmp_path):
    # each record: 3 strings (8 + len each, keys too), a list of 100,000 numbers (8 each)
    rec = {"prompt": "q", "response_a": "a", "response_b": "b", "extra": list(range(100_000))}
    line = json.dumps(rec)
    per_record = 8 + sum(len(k) + 8 for k in rec) + 3 * 9 + 8 + 8 * 100_000
    text = ("\n".join([line] * 10) + "\n").encode()
    assert len(text) < 10 * per_record - 1  # the text is within every limit below
    df = read_table(text, name="t.jsonl", max_bytes=10 * per_record)
    assert len(df) == 10 and list(df["extra"].iloc[9][-2:]) == [99_998, 99_999]
    with pytest.raises(PUAuditError, match=r"of values once parsed \(the limit here; passed at "
                       r"record 10\)"):
        read_table(text, name="t.jsonl", max_bytes=10 * per_record - 1)


def test_cli_decoded_limit_from_flag_environment_and_default(monkeypatch):
    monkeypatch.delenv("PUAUDIT_MAX_DECODED_MB", raising=False)
    args = argparse.Namespace
    assert max_decoded_bytes_from(args(max_decoded_mb=None)) == DEFAULT_MAX_DECODED_MB * 2**20
    assert max_decoded_bytes_from(args(max_decoded_mb="8_192")) == 8192 * 2**20
    assert max_decoded_bytes_from(args(max_decoded_mb="0")) is None  # 0 = no limit
    monkeypatch.setenv("PUAUDIT_MAX_DECODED_MB", "300")
    assert max_decoded_bytes_from(args(max_decoded_mb=None)) == 300 * 2**20
    assert max_decoded_bytes_from(args(max_decoded_mb="20")) == 20 * 2**20  # the flag wins


@pytest.mark.parametrize("bad, message", [
    ("-1", r"--max-decoded-mb must be 0 \(no limit\) or a positive number of MB; got -1"),
    ("lots", r"--max-decoded-mb must be a whole number of MB \(0 = no limit\); got 'lots'"),
    ("1.5", r"--max-decoded-mb must be a whole number of MB \(0 = no limit\); got '1.5'"),
])
def test_a_bad_decoded_limit_is_refused(bad, message):
    with pytest.raises(PUAuditError, match=message):
        max_decoded_bytes_from(argparse.Namespace(max_decoded_mb=bad))


def test_raising_the_limit_on_the_command_line_reads_the_file(tmp_path, capsys):
    from puaudit.cli.commands import main

    path = tmp_path / "lists.parquet"
    pq.write_table(_list_table(64, 40_000), path)
    assert path.stat().st_size < 15 * 2**20  # values decode to 20.5 MB
    rc = main(["audit", str(path), "-o", str(tmp_path / "o.csv"), "--max-decoded-mb", "15"])
    err = capsys.readouterr().err
    assert rc == 2 and "more than 15 MB of data once decoded" in err and "lists.parquet" in err
    # with a higher limit the file is read: what stops the run now is the next input
    rc = main(["audit", str(path), "-o", str(tmp_path / "o.csv"), "--max-decoded-mb", "64",
               "--embeddings", str(tmp_path / "missing.npz")])
    err = capsys.readouterr().err
    assert rc == 2 and "limit here" not in err and "missing.npz not found" in err
