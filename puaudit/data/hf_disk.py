"""Hugging Face ``datasets`` folders written by ``save_to_disk``, read with pyarrow alone.

A ``Dataset`` folder holds ``state.json`` (``_data_files``: the ``data-0000K-of-0000N.arrow``
files, in order), ``dataset_info.json`` (``features``: the column types, ClassLabel names
among them) and the data files, Arrow IPC *streams*. A ``DatasetDict`` folder holds
``dataset_dict.json`` (``{"splits": [...]}``) and one ``Dataset`` folder per split.

Before any column is decoded, every data file is measured from its messages' metadata alone:
the rows of each record batch and the bytes each buffer decodes to (a compressed buffer
states its decompressed length in its first 8 bytes), so a folder over the row or size limit
(:class:`puaudit.data.folder_tables.FolderRead`) is refused however its files are compressed.

A ClassLabel column (integers that ``features`` names) is read as its names, as ``datasets``
shows them (``-1``, no label, becomes empty), so that a verdict stored as 0/1/2 is recognised.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from puaudit.data.folder_tables import (READ_NOTE, SPLIT, SPLITS, FolderRead, check_same_columns,
                                        choose_split, frame_of_tables, inside, unreadable)
from puaudit.data.read_limits import _mb, not_regular
from puaudit.data.parquet_read import spend_batch
from puaudit.errors import PUAuditError

__all__ = ["is_dataset_dict", "is_dataset", "read_dataset_dict", "read_dataset"]

STATE, INFO, DICT = "state.json", "dataset_info.json", "dataset_dict.json"
#: Largest metadata file read (a real one is a few KB; a hostile one must not fill memory).
MAX_JSON_BYTES = 16 * 2**20
_ARROW_FILE_MAGIC = b"ARROW1"
_RESAVE = "Save the dataset again with save_to_disk."


def is_dataset_dict(root: Path) -> bool:
    return (root / DICT).is_file()


def is_dataset(root: Path) -> bool:
    return (root / STATE).is_file()


def _json(path: Path, *, name: str):
    try:
        size = path.stat().st_size
        if size > MAX_JSON_BYTES:
            raise PUAuditError(f"{name}: {path.name} is {_mb(size)}, far more than such a "
                               "metadata file holds; save the dataset again.")
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError, RecursionError) as exc:
        if isinstance(exc, PUAuditError):
            raise
        raise PUAuditError(f"{name}: {path.name} cannot be read ({type(exc).__name__}: "
                           f"{str(exc)[:120]}). Save the dataset again with save_to_disk."
                           ) from None


def read_dataset_dict(root: Path, opts: FolderRead) -> pd.DataFrame:
    """The split ``opts.split`` (see :func:`choose_split`) of a ``DatasetDict`` folder."""
    meta = _json(root / DICT, name=opts.name)
    splits = meta.get("splits") if isinstance(meta, dict) else None
    if not isinstance(splits, list) or not splits or not all(isinstance(s, str) for s in splits):
        raise PUAuditError(f"{opts.name}: {DICT} has no list of split names under 'splits'. "
                           "Save the dataset again with save_to_disk.")
    split, note = choose_split(splits, opts.split, name=opts.name)
    folder = inside(root, split, name=opts.name, what=f"{DICT} split '{split}'")
    if not is_dataset(folder):
        raise PUAuditError(f"{opts.name}: split '{split}' has no folder with a {STATE} "
                           f"({folder}). Save the dataset again with save_to_disk.")
    sub = FolderRead(**{**vars(opts), "name": f"{opts.name}/{split}", "split": None})
    df = read_dataset(folder, sub)
    df.attrs[READ_NOTE] = note + "; " + df.attrs[READ_NOTE].split("; ", 1)[-1]
    df.attrs[SPLITS], df.attrs[SPLIT] = list(splits), split
    return df


def _data_files(root: Path, opts: FolderRead) -> tuple[list[Path], str | None]:
    """The data files ``state.json`` lists, and the split it names (``_split``)."""
    state = _json(root / STATE, name=opts.name)
    entries = state.get("_data_files") if isinstance(state, dict) else None
    own = state.get("_split") if isinstance(state, dict) else None
    if opts.split is not None and opts.split != own:
        raise PUAuditError(f"{opts.name}: is one Hugging Face Dataset (split {own or 'unnamed'}), "
                           f"not a DatasetDict of splits; it has no split '{opts.split}'. Leave "
                           "out --split (split= in read_table).")
    if not isinstance(entries, list) or not entries:
        raise PUAuditError(f"{opts.name}: {STATE} lists no data files under '_data_files'. "
                           "Save the dataset again with save_to_disk.")
    files = []
    for entry in entries:
        fname = entry.get("filename") if isinstance(entry, dict) else None
        path = inside(root, fname, name=opts.name, what=f"{STATE}")
        if path.exists() and not path.is_file() and not path.is_dir():
            raise not_regular(path.stat().st_mode, f"{opts.name}/{fname}")
        if not path.is_file():
            raise PUAuditError(f"{opts.name}: {STATE} lists {fname}, which is not in the folder. "
                               "Copy the whole folder, or save the dataset again.")
        files.append(path)
    return files, own if isinstance(own, str) else None


def read_dataset(root: Path, opts: FolderRead) -> pd.DataFrame:
    """A ``Dataset`` folder: its data files in ``state.json``'s order, as one table."""
    files, own = _data_files(root, opts)
    scans = [_scan(path, name=f"{opts.name}/{path.name}") for path in files]
    first = scans[0]["schema"]
    for path, scan in zip(files[1:], scans[1:]):
        check_same_columns(first, scan["schema"], first_name=files[0].name, name=f"{opts.name}/"
                           f"{path.name}")
    rows = sum(s["rows"] for s in scans)
    budget = opts.budget()
    opts.check_totals(budget, rows=rows, nbytes=sum(s["bytes"] for s in scans),
                      columns=len(first), files=len(files), what="data files")
    tables = [_read_stream(path, scan["offset"], budget, name=f"{opts.name}/{path.name}")
              for path, scan in zip(files, scans)]
    labels = _class_labels(root / INFO, opts.name)
    count = f"{len(files)} data file{'s' if len(files) > 1 else ''}, {rows:,} rows"
    # a lone Dataset's own split is the one value split= accepts for it
    df = frame_of_tables(tables, name=opts.name, note=f"read {opts.name}; {count}",
                         splits=[own] if own else [], split=own)
    for col, names in labels.items():
        if col in df.columns and pd.api.types.is_integer_dtype(df[col].dtype):
            df[col] = _label_names(df[col], names)
    return df


def _class_labels(path: Path, name: str) -> dict[str, list[str]]:
    """Top-level ClassLabel columns of ``dataset_info.json`` and their names."""
    if not path.is_file():
        return {}
    info = _json(path, name=name)
    features = info.get("features") if isinstance(info, dict) else None
    out = {}
    for col, feat in (features.items() if isinstance(features, dict) else ()):
        if (isinstance(feat, dict) and feat.get("_type") == "ClassLabel"
                and isinstance(feat.get("names"), list)):
            out[str(col)] = [str(n) for n in feat["names"]]
    return out


def _label_names(values: pd.Series, names: list[str]) -> pd.Series:
    """ClassLabel integers as their names: -1 (no label) and missing values become ""; an index
    no name has stays as its number, so that nothing is lost."""
    def one(v):
        if v is None or v is pd.NA or v == -1:
            return ""
        return names[v] if 0 <= v < len(names) else str(v)
    return pd.Series([one(v) for v in values.tolist()], index=values.index, dtype=object)


def _read_stream(path: Path, offset: int, budget, *, name: str):
    """The Arrow table of one data file (read into memory: no mapping outlives the folder),
    batch by batch, each batch's expanded size counted against ``budget`` before the next is
    read: a dictionary column (one 1 MB string, 100,000 indices) or a ``string_view`` one
    (100,000 views of one 1 MB buffer) takes a few MB as stored and 100 GB once expanded, which
    the messages' buffer sizes (:func:`_scan`) do not show."""
    import pyarrow as pa
    import pyarrow.ipc as ipc

    batches = []
    with unreadable(name, "Arrow data file", _RESAVE), pa.OSFile(str(path), "rb") as fh:
        fh.seek(offset)
        reader = ipc.open_stream(fh)
        for k, batch in enumerate(reader, start=1):
            spend_batch(budget, list(zip(batch.schema.names, batch.columns)),
                        f"in record batch {k} of {path.name}")
            batches.append(batch)
        return pa.Table.from_batches(batches, schema=reader.schema)


def _scan(path: Path, *, name: str) -> dict:
    """Schema, rows and decoded bytes of one Arrow stream, from its messages' metadata alone
    (the bodies are mapped, never decoded)."""
    import pyarrow as pa
    import pyarrow.ipc as ipc

    rows = nbytes = 0
    with unreadable(name, "Arrow data file", _RESAVE), pa.memory_map(str(path), "r") as source:
        offset = 8 if source.read(6) == _ARROW_FILE_MAGIC else 0  # IPC file: skip magic
        source.seek(offset)
        reader = ipc.MessageReader.open_stream(source)
        schema = ipc.read_schema(reader.read_next_message())
        while True:
            try:
                msg = reader.read_next_message()
            except StopIteration:
                break
            body = None if msg.body is None else memoryview(msg.body)
            n_rows, n_bytes = _message_size(msg.metadata.to_pybytes(), body)
            rows, nbytes = rows + n_rows, nbytes + n_bytes
    return {"schema": schema, "rows": rows, "bytes": nbytes, "offset": offset}


# --- the few Arrow message fields measured, read from their flatbuffer -----------------------
# Message: 1 header_type (2 dictionary batch, 3 record batch), 2 header. RecordBatch: 0 length
# (rows), 2 buffers (structs of offset, length: int64 each), 3 compression. DictionaryBatch:
# 1 data (a RecordBatch). See format/Message.fbs of the Arrow specification.

def _u(buf: bytes, pos: int, size: int, *, signed: bool = False) -> int:
    if pos < 0 or pos + size > len(buf):
        raise ValueError("message metadata point outside themselves")
    return int.from_bytes(buf[pos:pos + size], "little", signed=signed)


def _field(buf: bytes, table: int, i: int) -> int | None:
    """Position of field ``i`` of the flatbuffer table at ``table``, None when absent."""
    vtable = table - _u(buf, table, 4, signed=True)
    if 4 + 2 * i >= _u(buf, vtable, 2):
        return None
    off = _u(buf, vtable + 4 + 2 * i, 2)
    return table + off if off else None


def _ref(buf: bytes, pos: int) -> int:
    return pos + _u(buf, pos, 4)


def _message_size(meta: bytes, body) -> tuple[int, int]:
    """(rows, decoded bytes) of one record or dictionary batch message."""
    root = _u(meta, 0, 4)
    kind_at, header_at = _field(meta, root, 1), _field(meta, root, 2)
    kind = _u(meta, kind_at, 1) if kind_at is not None else 0
    if kind not in (2, 3) or header_at is None:
        return 0, 0
    batch = _ref(meta, header_at)
    if kind == 2:  # a dictionary's values: bytes, no rows
        data_at = _field(meta, batch, 1)
        if data_at is None:
            return 0, 0
        batch = _ref(meta, data_at)
    length_at, buffers_at = _field(meta, batch, 0), _field(meta, batch, 2)
    rows = _u(meta, length_at, 8, signed=True) if length_at is not None else 0
    compressed = _field(meta, batch, 3) is not None
    nbytes = 0
    if buffers_at is not None:
        vec = _ref(meta, buffers_at)
        for k in range(_u(meta, vec, 4)):
            offset = _u(meta, vec + 4 + 16 * k, 8, signed=True)
            length = _u(meta, vec + 12 + 16 * k, 8, signed=True)
            if compressed and length >= 8:
                stated = _u(body, offset, 8, signed=True) if body is not None else -1
                length = length - 8 if stated == -1 else stated
            if length < 0 or rows < 0:
                raise ValueError("negative length in the message metadata")
            nbytes += length
    return (rows if kind == 3 else 0), nbytes
