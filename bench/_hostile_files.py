"""The hostile files bench/hostile_memory.py measures, built from code (never stored blobs);
tests/test_data_hostile_round3.py and round4.py build theirs with them too.

Round 3: a Parquet file and gzips of 64 rows that decode to 5 GB. Round 4 (issue 41): columns
that hold far more than their buffers (a dictionary, a ``string_view``) in a ``save_to_disk``
folder or its zip, a Label Studio export whose first task holds a million votes, Argilla
records with thousands of responses on one record.
"""

from __future__ import annotations

import gzip
import io
import json
import struct
import zipfile
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.ipc as ipc
import pyarrow.parquet as pq

__all__ = ["ROWS", "ZEROS", "parquet_bomb", "gzip_bomb", "big_text_column", "comparison_columns",
           "hf_bomb", "zip_folder", "labelstudio_bomb", "argilla_record"]

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


def big_text_column(kind: str, rows: int, size: int) -> pa.Array:
    """``rows`` values that are all one ``size``-byte string: a dictionary (one value, ``rows``
    indices) or a ``string_view`` (``rows`` views of one shared buffer). A few bytes a row as
    stored, ``size`` bytes a row once expanded."""
    text = "x" * size
    if kind == "dictionary":
        return pa.DictionaryArray.from_arrays(pa.array(np.zeros(rows, np.int32)),
                                              pa.array([text]))
    views = np.zeros((rows, 4), np.int32)  # length, 4-byte prefix, buffer index, offset
    views[:, 0] = size
    views[:, 1] = int.from_bytes(b"xxxx", "little", signed=True)
    return pa.Array.from_buffers(pa.string_view(), rows,
                                 [None, pa.py_buffer(views.tobytes()), pa.py_buffer(text.encode())])


def comparison_columns(prompt: pa.Array) -> pa.Table:
    n = len(prompt)
    return pa.table({"prompt": prompt,
                     "response_a": pa.array([f"answer a{i}" for i in range(n)]),
                     "response_b": pa.array([f"answer b{i}" for i in range(n)]),
                     "judge_winner": pa.array(["A" if i % 2 else "B" for i in range(n)]),
                     "human_winner": pa.array(["A" if i % 3 == 0 else "" for i in range(n)])})


def hf_bomb(root: Path, kind: str, *, rows: int = 100_000, size: int = 2**20) -> Path:
    """A Hugging Face ``save_to_disk`` folder whose ``prompt`` column is ``big_text_column``:
    with the defaults, 100,000 rows of one 1 MB string (100 GB expanded) in 4 MB."""
    root.mkdir(parents=True, exist_ok=True)
    table = comparison_columns(big_text_column(kind, rows, size))
    with ipc.new_stream(str(root / "data-00000-of-00001.arrow"), table.schema) as w:
        w.write_table(table)
    (root / "state.json").write_text(json.dumps(
        {"_data_files": [{"filename": "data-00000-of-00001.arrow"}], "_split": None}))
    (root / "dataset_info.json").write_text(json.dumps({"features": {}}))
    return root


def zip_folder(folder: Path, path: Path) -> Path:
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        for f in sorted(folder.iterdir()):
            zf.write(f, f"ds/{f.name}")
    return path


def labelstudio_bomb(path: Path, *, annotations: int = 1_000_000, tasks: int = 40) -> Path:
    """Label Studio's JSON export: task 1 with ``annotations`` votes, ``tasks - 1`` more with one
    each (with the defaults 1,000,039 rows in 166 MB), written in blocks."""
    ann = ('{"id": %d, "completed_by": %d, "result": [{"type": "pairwise", "from_name": "cmp", '
           '"to_name": "answer1,answer2", "value": {"selected": "%s"}}], "was_cancelled": false}')
    with open(path, "w") as fh:
        fh.write("[")
        for t in range(tasks):
            n = annotations if t == 0 else 1
            fh.write(("," if t else "") + '{"id": %d, "data": {"prompt": "question %d", '
                     '"answer1": "a%d", "answer2": "b%d"}, "annotations": [' % (t, t, t, t))
            for k in range(0, n, 10_000):
                fh.write(",".join(ann % (k + j, (k + j) % 50, "left" if (k + j) % 2 else "right")
                                  for j in range(min(10_000, n - k))))
                fh.write("," if k + 10_000 < n else "")
            fh.write("]}")
        fh.write("]")
    return path


def argilla_record(path: Path, *, responses: int = 5_000) -> Path:
    """Argilla records (``records.to_json``): one record whose ``preference`` question has
    ``responses`` submitted answers, a comment by each of the first ten people, and a judge's
    suggestion."""
    rec = {"id": "r1", "fields": {"prompt": "p", "response1": "a", "response2": "b"},
           "metadata": {}, "vectors": {},
           "suggestions": {"preference": {"value": "response1", "score": 0.8, "agent": "judge"}},
           "responses": {"preference": [{"value": "response1" if i % 2 else "response2",
                                         "user_id": f"u{i}", "status": "submitted"}
                                        for i in range(responses)],
                         "comment": [{"value": f"note {i}", "user_id": f"u{i}",
                                      "status": "submitted"} for i in range(10)]}}
    path.write_text(json.dumps([rec]))
    return path
