"""A dataset folder read as one table (the kind told from what it holds), and a zipped folder
unpacked to be read so; docs/data_formats.md ("Dataset folders") says what each kind holds.

Every file is measured from its metadata first (an Arrow stream's message headers, a Parquet
footer), so a folder over a limit is refused before any data is decoded; the limits count the
whole folder. A zip's stated names and sizes are checked before anything is written, and the
bytes unpacked are counted too (:class:`UnpackedZip`).
"""

from __future__ import annotations

import io
import json
import os
import re
import stat
import tempfile
import zipfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

import pandas as pd

from puaudit.data.limits import (DEFAULT_HINT, MAX_COLUMNS, MAX_UNCOMPRESSED_BYTES,
                                 DecodedBudget, check_columns, check_header, check_rows,
                                 not_regular, size_text, unreadable)
from puaudit.data.parquet import (arrow_frame_fixups, parquet_decoded_sizes, parquet_table,
                                  spend_batch)
from puaudit.errors import PUAuditError

__all__ = ["FolderRead", "SplitNotChosen", "choose_split", "inside", "check_same_columns",
           "frame_of_tables", "READ_NOTE", "SPLITS", "SPLIT", "ANOTHER_SPLIT",
           "is_dataset_dict", "is_dataset", "read_dataset_dict", "read_dataset", "has_parquet",
           "parquet_groups", "split_names", "read_parquet_shards", "FolderKind",
           "FOLDER_KINDS", "read_folder", "read_zip_folder", "UnpackedZip", "MAX_MEMBERS"]

#: Keys of ``DataFrame.attrs``: what a folder read chose (which split, how many files); the
#: split names the folder holds, each a value ``split=`` accepts (empty when it has none); the
#: split read (None when it has none).
READ_NOTE, SPLITS, SPLIT = "read_note", "splits", "split"
#: How the read note points to the other splits (the dashboard's picker replaces it).
ANOTHER_SPLIT = "another: --split NAME"

#: Split read when a dataset has several and none is named, in this order.
DEFAULT_SPLITS = ("train", "test")


class SplitNotChosen(PUAuditError):
    """A folder holds several splits, none of them the default, and no split was asked for;
    ``splits`` lists them (each a value ``split=`` accepts) for a caller that offers a choice."""

    def __init__(self, message: str, *, splits: Sequence[str]):
        super().__init__(message)
        self.splits = list(splits)


@dataclass
class FolderRead:
    """One folder read: where, which split, and the limits of the whole read.

    Parameters
    ----------
    name : str
        The folder as messages name it.
    split : str, optional
        The split asked for (None: the only one, else ``train``, else ``test``).
    max_bytes, max_rows, max_columns, limit_hint, size_hint
        As for :func:`puaudit.data.io.read_table`, counted over every file of the folder.
    """

    name: str
    split: str | None = None
    max_bytes: int | None = MAX_UNCOMPRESSED_BYTES
    max_rows: int | None = None
    max_columns: int = MAX_COLUMNS
    limit_hint: str = DEFAULT_HINT
    size_hint: str | None = None

    def budget(self) -> DecodedBudget:
        """The decoded bytes the whole folder may spend (one budget for all its files)."""
        return DecodedBudget(self.max_bytes, self.name, self.size_hint or self.limit_hint)

    def check_totals(self, budget: DecodedBudget, *, rows: int, nbytes: int, columns: int,
                     files: int, what: str) -> None:
        """Refuse, before any data is decoded, a folder whose metadata already pass a limit:
        ``rows`` and ``nbytes`` are the totals over its ``files`` files (``what`` names them)."""
        check_columns(columns, self.name, self.max_columns, self.limit_hint)
        if self.max_rows is not None and rows > self.max_rows:
            check_rows(rows, self.name, self.max_rows,
                       f"Its {files} {what} hold {rows:,} rows together. {self.limit_hint}")
        budget.check(nbytes, f"holds more than {budget.limit_text} of data once decoded (the "
                     f"limit here): its {files} {what} decode to about {size_text(nbytes)} "
                     "together; refused before reading")


def choose_split(splits: Sequence[str], wanted: str | None, *, name: str) -> tuple[str, str]:
    """The split to read and the sentence saying so.

    ``wanted`` when given (refused, with the list, when the dataset has no such split); else
    the only split, else the first of :data:`DEFAULT_SPLITS` the dataset has; else
    :class:`SplitNotChosen`, naming them all.
    """
    listed = ", ".join(splits)
    if wanted is not None:
        if wanted not in splits:
            raise PUAuditError(f"{name}: has no split '{wanted}'; its splits are {listed}. Pass "
                               "one of those (--split NAME, or split= in read_table).")
        chosen = wanted
    elif len(splits) == 1:
        chosen = splits[0]
    else:
        # a Hub config's splits are "<config>/<split>": the last part names the split
        found = [c for d in DEFAULT_SPLITS for c in splits if c.rsplit("/", 1)[-1] == d]
        if not found or (len(found) > 1 and found[0].rsplit("/", 1)[-1]
                         == found[1].rsplit("/", 1)[-1]):
            raise SplitNotChosen(f"{name}: holds several splits ({listed}) and none is called "
                                 "train or test, or several configs have one; say which to "
                                 "audit with --split NAME (or split= in read_table).",
                                 splits=splits)
        chosen = found[0]
    if len(splits) == 1:
        return chosen, f"read split '{chosen}' of {name}"
    return chosen, f"read split '{chosen}' of {name} (its splits: {listed}; {ANOTHER_SPLIT})"


def inside(root: Path, relative: str, *, name: str, what: str) -> Path:
    """``root / relative``, refused when the name leaves the folder (``..``, an absolute path,
    a link pointing elsewhere): metadata files are data, and must not make us read any file
    outside the folder the user gave."""
    if not isinstance(relative, str) or not relative or "\x00" in relative:
        raise PUAuditError(f"{name}: {what} names {str(relative)[:80]!r}, which is not a file "
                           "name. The folder's metadata are damaged; save the dataset again.")
    path = root / relative
    try:
        resolved, base = path.resolve(), root.resolve()
    except (OSError, RuntimeError):
        resolved, base = path, root
    if os.path.isabs(relative) or (resolved != base and base not in resolved.parents):
        raise PUAuditError(f"{name}: {what} names {relative[:120]!r}, outside the dataset "
                           "folder; only files inside it are read. Save the dataset again, or "
                           "fix the name.")
    return path


def check_same_columns(first, schema, *, first_name: str, name: str) -> None:
    """Refuse shard ``name`` when its columns differ from the first shard's (by name and type;
    the order may differ), naming the column."""
    theirs = {f.name: f.type for f in schema}
    ours = {f.name: f.type for f in first}
    for col, kind in [*ours.items(), *((n, None) for n in theirs if n not in ours)]:
        if kind is None:
            problem, what = f"has a column '{col}' that {first_name} lacks", "columns"
        elif col not in theirs:
            problem, what = f"has no column '{col}', which {first_name} has", "columns"
        elif theirs[col] != kind:
            problem = f"column '{col}' holds {theirs[col]}, but {kind} in {first_name}"
            what = "column types"
        else:
            continue
        raise PUAuditError(f"{name}: {problem}. The shards of one split must share their {what}: "
                           "re-export the split, or move this file out of the folder.", column=col)


def frame_of_tables(tables: list, *, name: str, note: str, splits: Sequence[str] = (),
                    split: str | None = None) -> pd.DataFrame:
    """One frame of the shards' Arrow ``tables`` (columns in the first's order), as
    :func:`puaudit.data.io.read_table` returns a table, with the attrs ``note``, ``splits`` and
    ``split``."""
    import pyarrow as pa

    first = tables[0].schema
    table = pa.concat_tables([t.select(first.names) for t in tables])
    del tables[:]  # the concatenation holds the same buffers; keep no second list of them
    check_header(table.schema.names, name)
    df = arrow_frame_fixups(table.to_pandas(), table, name)
    if len(df.columns) == 0:
        raise PUAuditError(f"{name}: no columns found in its data files.")
    if len(df) == 0:
        raise PUAuditError(f"{name}: its data files hold no rows. Save a dataset with at least "
                           "one comparison.")
    df.attrs.update({READ_NOTE: note, SPLITS: list(splits), SPLIT: split})
    return df


# --- Hugging Face save_to_disk folders -----------------------------------------------------------

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
        if size <= MAX_JSON_BYTES:
            return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise PUAuditError(f"{name}: {path.name} cannot be read ({type(exc).__name__}: "
                           f"{str(exc)[:120]}). {_RESAVE}") from None
    raise PUAuditError(f"{name}: {path.name} is {size_text(size)}, far more than such a "
                       "metadata file holds; save the dataset again.")


def read_dataset_dict(root: Path, opts: FolderRead) -> pd.DataFrame:
    """The split ``opts.split`` (see :func:`choose_split`) of a ``DatasetDict`` folder."""
    meta = _json(root / DICT, name=opts.name)
    splits = meta.get("splits") if isinstance(meta, dict) else None
    if not isinstance(splits, list) or not splits or not all(isinstance(s, str) for s in splits):
        raise PUAuditError(f"{opts.name}: {DICT} has no list of split names under 'splits'. "
                           + _RESAVE)
    split, note = choose_split(splits, opts.split, name=opts.name)
    folder = inside(root, split, name=opts.name, what=f"{DICT} split '{split}'")
    if not is_dataset(folder):
        raise PUAuditError(f"{opts.name}: split '{split}' has no folder with a {STATE} "
                           f"({folder}). {_RESAVE}")
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
                           + _RESAVE)
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
    """A ``Dataset`` folder: its Arrow data files in ``state.json``'s order as one table, each
    measured from its messages' metadata first (:func:`_scan`); a ClassLabel column is read as
    its names, as ``datasets`` shows them."""
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
    """ClassLabel integers as their names: -1 and missing values become ""; an index no name
    has stays its number."""
    def one(v):
        if v is None or v is pd.NA or v == -1:
            return ""
        return names[v] if 0 <= v < len(names) else str(v)
    return pd.Series([one(v) for v in values.tolist()], index=values.index, dtype=object)


def _read_stream(path: Path, offset: int, budget, *, name: str):
    """The Arrow table of one data file (read into memory: no mapping outlives the folder),
    each batch's expanded size counted against ``budget`` before the next is read: dictionary
    and view columns expand far past the buffer sizes :func:`_scan` sees."""
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


# --- Parquet shards ------------------------------------------------------------------------------

SUFFIXES = (".parquet", ".pq")
#: Folders below the top searched for shards (``<config>/<split>/`` is two).
MAX_DEPTH = 3
#: Shards looked at, at most (a folder of more is not one dataset split).
MAX_FILES = 10_000
_FIX = "Re-export it, or move it out of the folder."
_SHARD = re.compile(r"^(?P<split>.+?)-(?P<index>\d{5})-of-(?P<count>\d{5})\.(?:parquet|pq)$")


def _shard_files(root: Path) -> list[Path]:
    """Parquet files under ``root`` (hidden and ``_``-prefixed names skipped: Spark's
    ``_metadata`` summary repeats its shards), at most :data:`MAX_DEPTH` folders down."""
    out = []
    for folder, dirs, files in os.walk(root):
        depth = len(Path(folder).relative_to(root).parts)
        dirs[:] = (sorted(d for d in dirs if not d.startswith((".", "_")))
                   if depth < MAX_DEPTH else [])
        for f in files:
            if f.lower().endswith(SUFFIXES) and not f.startswith((".", "_")):
                path = Path(folder) / f
                # a FIFO named .parquet would make the footer read wait for a writer forever
                err = not_regular(_mode(path), f"{root}/{path.relative_to(root).as_posix()}")
                if err is not None:
                    raise err
                out.append(path)
        if len(out) > MAX_FILES:
            raise PUAuditError(f"{root}: holds more than {MAX_FILES:,} Parquet files; give the "
                               "folder of one split (e.g. data/ or default/train/).")
    return out


def _mode(path: Path) -> int:
    try:
        return path.stat().st_mode
    except OSError:  # a dangling link: refused as no regular file
        return 0


def has_parquet(root: Path) -> bool:
    return bool(_shard_files(root))


def parquet_groups(root: Path) -> dict[str, list[Path]]:
    """Shards by split, each in name order: ``train-00000-of-00003.parquet`` belongs to
    ``train`` (in ``data/`` or in a config folder, ``<config>/train``), a shard without that
    pattern to the folder holding it (``default/train``, or the top folder itself)."""
    groups: dict[str, list[Path]] = {}
    for path in _shard_files(root):
        parts = list(path.relative_to(root).parent.parts)
        m = _SHARD.match(path.name)
        if m:
            parts = [p for p in parts if p != "data"] + [m["split"]]
        groups.setdefault("/".join(parts), []).append(path)
    return {label: sorted(files, key=lambda p: p.relative_to(root).as_posix())
            for label, files in sorted(groups.items())}


def split_names(groups: dict[str, list[Path]]) -> list[str]:
    """The split labels as ``split=`` takes them: the top folder's own shards are ``.``; a
    flat folder of unnamed shards has none."""
    return [] if list(groups) == [""] else [lb or "." for lb in groups]


def _pick(groups: dict[str, list[Path]], wanted: str | None, name: str) -> tuple[str, str]:
    """The split label to read, and the sentence saying so; a bare split name also picks
    ``<config>/<split>`` when one config has it."""
    labels = list(groups)
    if wanted is not None and wanted not in groups:
        ends = [lb for lb in labels if lb.rsplit("/", 1)[-1] == wanted]
        wanted = ends[0] if len(ends) == 1 else wanted
    if len(labels) == 1 and labels[0] == "" and wanted is None:
        n = len(groups[""])
        return "", f"read {n} Parquet file{'s' if n > 1 else ''} of {name}"
    shown = [lb or "." for lb in labels]
    label, note = choose_split(shown, None if wanted is None else (wanted or "."), name=name)
    return ("" if label == "." else label), note


def _check_complete(files: list[Path], name: str, label: str) -> None:
    """A split whose shard names say ``-of-0000N`` must have N shards."""
    found = [_SHARD.match(p.name) for p in files]
    counts = {int(m["count"]) for m in found if m}
    if len(counts) != 1 or not all(found):
        return
    count = counts.pop()
    have = {int(m["index"]) for m in found}
    missing = [i for i in range(count) if i not in have]
    if missing:
        stem = found[0]["split"]
        raise PUAuditError(f"{name}: split '{label}' has {len(have)} of its {count} shards; "
                           f"{stem}-{missing[0]:05d}-of-{count:05d}.parquet is missing"
                           f"{f' (and {len(missing) - 1} more)' if len(missing) > 1 else ''}. "
                           "Copy every shard, or give the path of one shard file.")


def _footer(path: Path, name: str):
    import pyarrow.parquet as pq

    with unreadable(name, "Parquet file", _FIX):
        pf = pq.ParquetFile(str(path))
        return pf.metadata, pf.schema_arrow


def read_parquet_shards(root: Path, opts: FolderRead) -> pd.DataFrame:
    """One split's shards (``opts.split``) as one table, in name order (``-of-00003``: all
    three). Every footer is read first: columns and types must agree, and all shards' rows and
    decoded bytes are checked against the limits before any page is read."""
    groups = parquet_groups(root)
    label, note = _pick(groups, opts.split, opts.name)
    files = groups[label]
    _check_complete(files, opts.name, label)
    names = [f"{opts.name}/{p.relative_to(root).as_posix()}" for p in files]
    footers = [_footer(p, n) for p, n in zip(files, names)]
    first_meta, first = footers[0]
    check_columns(first_meta.num_columns, names[0], opts.max_columns, opts.limit_hint)
    check_header(first.names, names[0])
    for (meta, schema), shard in zip(footers[1:], names[1:]):
        check_same_columns(first, schema, first_name=names[0], name=shard)
    sizes = [[sum(g.values()) for g in parquet_decoded_sizes(meta)] for meta, _ in footers]
    budget = opts.budget()
    rows = sum(meta.num_rows for meta, _ in footers)
    opts.check_totals(budget, rows=rows, nbytes=sum(map(sum, sizes)), columns=len(first),
                      files=len(files), what="Parquet shards")
    tables = []
    for path, shard, (meta, schema), group_bytes in zip(files, names, footers, sizes):
        budget.name = shard  # a batch past the limit is named with its shard
        with unreadable(shard, "Parquet file", _FIX):
            tables.append(parquet_table(str(path), meta, schema, budget, group_bytes))
    if len(files) > 1 or label:
        note += f"; {len(files)} shard{'s' if len(files) > 1 else ''}, {rows:,} rows"
    splits = split_names(groups)
    return frame_of_tables(tables, name=opts.name, note=note, splits=splits,
                           split=(label or ".") if splits else None)


# --- the folder kinds ----------------------------------------------------------------------------

@dataclass(frozen=True)
class FolderKind:
    """One kind of dataset folder: its ``name`` and the files it ``holds`` (for messages),
    ``matches(path)`` (cheap: file names only) and ``read(path, FolderRead)``."""

    name: str
    holds: str
    matches: Callable[[Path], bool]
    read: Callable[[Path, FolderRead], pd.DataFrame]


#: The folder kinds, tried in order (the Parquet shards match any folder holding a .parquet).
FOLDER_KINDS: list[FolderKind] = [
    FolderKind("a Hugging Face DatasetDict (save_to_disk)",
               "dataset_dict.json and one folder per split", is_dataset_dict, read_dataset_dict),
    FolderKind("a Hugging Face Dataset (save_to_disk)",
               "state.json, dataset_info.json and data-0000K-of-0000N.arrow files",
               is_dataset, read_dataset),
    FolderKind("Parquet shards", "*.parquet files (e.g. data/train-00000-of-00003.parquet)",
               has_parquet, read_parquet_shards),
]


def read_folder(path: str | os.PathLike, *, split: str | None = None, name: str | None = None,
                **limits) -> pd.DataFrame:
    """Read a dataset folder as one table.

    Parameters
    ----------
    path : path
        The folder.
    split : str, optional
        The split to read (default: the only one, else ``train``, else ``test``).
    name : str, optional
        How messages name the folder (default the path).
    **limits
        ``max_bytes``, ``max_rows``, ``max_columns``, ``limit_hint``, ``size_hint``: see
        :class:`FolderRead`; rows and bytes count over the whole folder.

    Returns
    -------
    pandas.DataFrame
        With ``attrs`` ``read_note`` (what was read), ``splits`` and ``split`` (the one read).
    """
    root = Path(path)
    opts = FolderRead(name=name or str(path), split=split, **limits)
    try:
        for kind in FOLDER_KINDS:
            if kind.matches(root):
                return kind.read(root, opts)
    except PermissionError as exc:
        raise PUAuditError(f"{opts.name}: cannot read {exc.filename or 'a file'} "
                           f"({exc.strerror}). Check that the folder is readable.") from None
    try:
        held = sorted(p.name + ("/" if p.is_dir() else "") for p in root.iterdir())
    except OSError:
        held = []
    shown = ", ".join(held[:8]) + (f" and {len(held) - 8} more" if len(held) > 8 else "")
    kinds = "; ".join(f"{k.name}: {k.holds}" for k in FOLDER_KINDS)
    raise PUAuditError(f"{opts.name}: not a dataset folder puaudit reads "
                       f"({kinds}). It holds: {shown or 'nothing'}. Give the path of a table "
                       "file (CSV, TSV, Parquet, JSONL, JSON) instead.")


# --- a zipped folder -----------------------------------------------------------------------------

#: Files an archive may hold (a dataset folder holds a handful to a few hundred).
MAX_MEMBERS = 10_000


def _members(zf: zipfile.ZipFile, name: str, max_bytes: int | None) -> list[zipfile.ZipInfo]:
    infos = zf.infolist()
    if len(infos) > MAX_MEMBERS:
        raise PUAuditError(f"{name}: holds {len(infos):,} files, more than the {MAX_MEMBERS:,} a "
                           "dataset folder needs. Zip one dataset folder only.")
    total = 0
    for info in infos:
        parts = PurePosixPath(info.filename.replace("\\", "/")).parts
        if (info.filename.startswith(("/", "\\")) or ".." in parts or "\x00" in info.filename
                or (parts and ":" in parts[0])):
            raise PUAuditError(f"{name}: holds {info.filename[:120]!r}, a name outside the "
                               "folder; zip the dataset folder itself.")
        if stat.S_ISLNK(info.external_attr >> 16):
            raise PUAuditError(f"{name}: holds a link ({info.filename[:120]}); zip the dataset "
                               "folder with its files, not links.")
        if info.flag_bits & 0x1:
            raise PUAuditError(f"{name}: {info.filename[:120]} is encrypted; zip the folder "
                               "without a password.")
        total += info.file_size
    if max_bytes is not None and total > max_bytes:
        raise PUAuditError(f"{name}: unpacks to {size_text(total)}, over the "
                           f"{size_text(max_bytes)} limit here; refused before unpacking. Audit "
                           "the folder with the command line (puaudit audit FOLDER), which has "
                           "higher limits.")
    return [i for i in infos if not i.is_dir()]


def _unpack(zf: zipfile.ZipFile, infos: list[zipfile.ZipInfo], root: Path, name: str,
            max_bytes: int | None) -> None:
    written = 0
    for info in infos:
        target = root.joinpath(*PurePosixPath(info.filename.replace("\\", "/")).parts)
        target.parent.mkdir(parents=True, exist_ok=True)
        with zf.open(info) as src, open(target, "wb") as dst:
            while chunk := src.read(1 << 20):
                written += len(chunk)
                if max_bytes is not None and written > max_bytes:
                    raise PUAuditError(f"{name}: unpacks to more than {size_text(max_bytes)}, the "
                                       "limit here (more than its headers say).")
                dst.write(chunk)


def _folder_root(root: Path) -> Path:
    """The dataset folder inside the unpacked tree: the one top folder when the archive holds
    only that (``zip -r ds.zip ds``), else the tree itself."""
    entries = [p for p in root.iterdir() if p.name != "__MACOSX"]
    return entries[0] if len(entries) == 1 and entries[0].is_dir() else root


def _opened(data: bytes, name: str) -> zipfile.ZipFile:
    """The archive, refused when damaged or an Excel workbook."""
    try:
        zf = zipfile.ZipFile(io.BytesIO(data))
    except (zipfile.BadZipFile, OSError, ValueError) as exc:
        raise PUAuditError(f"{name}: a damaged zip archive ({exc}). Zip the folder "
                           "again.") from None
    if "[Content_Types].xml" in zf.namelist():
        zf.close()
        raise PUAuditError(f"{name}: is a zip archive (an Excel .xlsx workbook is one). Save "
                           "the sheet as CSV (UTF-8), or unzip the file, and upload that.")
    return zf


def _unpack_checked(zf: zipfile.ZipFile, infos: list[zipfile.ZipInfo], root: Path, name: str,
                    max_bytes: int | None) -> None:
    try:
        _unpack(zf, infos, root, name, max_bytes)
    except (zipfile.BadZipFile, OSError, EOFError, NotImplementedError) as exc:
        raise PUAuditError(f"{name}: cannot be unpacked ({type(exc).__name__}: "
                           f"{str(exc)[:120]}). Zip the folder again.") from None


class UnpackedZip:
    """A zipped dataset folder, checked and unpacked once into a temporary folder that any of
    its splits can be read from; ``max_bytes`` limits the unpacking and every read.

    The folder is removed by :meth:`close` (or leaving a ``with`` block), else when the object
    is garbage-collected (a cache may drop it while a reader still holds it). ``root`` is the
    dataset folder (the archive's one top folder when it holds only that); ``label`` names it
    in messages (``name``, or ``name:top-folder``).
    """

    def __init__(self, data: bytes, name: str, *, max_bytes: int | None = None):
        self.max_bytes = max_bytes
        with _opened(data, name) as zf:
            infos = _members(zf, name, max_bytes)
            self._tmp = tempfile.TemporaryDirectory(prefix="puaudit-zip-")
            try:
                _unpack_checked(zf, infos, Path(self._tmp.name), name, max_bytes)
            except BaseException:
                self._tmp.cleanup()
                raise
        self.root = _folder_root(Path(self._tmp.name))
        inner = self.root.relative_to(self._tmp.name).as_posix()
        self.label = name if inner == "." else f"{name}:{inner}"

    def read(self, *, split: str | None = None, **limits) -> pd.DataFrame:
        """One split of the folder (:func:`read_folder`, within ``max_bytes`` and ``limits``:
        ``max_rows``, ``max_columns``, the hints)."""
        return read_folder(self.root, split=split, max_bytes=self.max_bytes, name=self.label,
                           **limits)

    def close(self) -> None:
        """Remove the unpacked folder."""
        self._tmp.cleanup()

    def __enter__(self) -> UnpackedZip:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def read_zip_folder(data: bytes, name: str, *, split: str | None = None,
                    max_bytes: int | None = None, unpack: Callable[..., UnpackedZip] | None = None,
                    **limits) -> pd.DataFrame:
    """Read the dataset folder zipped in ``data``.

    Parameters
    ----------
    data : bytes
        The archive.
    name : str
        Its name, for messages.
    split : str, optional
        As for :func:`read_folder`.
    max_bytes : int or None
        Largest unpacked size, and the folder's decoded-size limit.
    unpack : callable(data, name, max_bytes) -> UnpackedZip, optional
        Where the unpacked archive comes from (default: a new :class:`UnpackedZip`, removed
        after this read); a cache of them unpacks an archive once for several splits.
    **limits
        The other limits of :func:`read_folder`.
    """
    if unpack is not None:
        return unpack(data, name, max_bytes).read(split=split, **limits)
    with UnpackedZip(data, name, max_bytes=max_bytes) as folder:
        return folder.read(split=split, **limits)
