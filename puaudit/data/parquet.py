"""Parquet under the decoded-size budget (:class:`~puaudit.data.limits.DecodedBudget`): sizes
from the footer before any page is read, then batch by batch with text read as dictionaries;
the pandas frame of an Arrow table; and Parquet in, Parquet out for large tables.

A Parquet file that is the audit's input *and* the export's source is never held whole:
:func:`read_comparisons_parquet` reads only the audit's columns, in batches, and
:func:`write_export_parquet` streams the source again, appending the ``puaudit_*`` columns
batch by batch; peak memory is the audit's per-row arrays plus one batch.
"""

from __future__ import annotations

import io
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from puaudit.data.limits import (DEFAULT_HINT, MAX_COLUMNS, MAX_UNCOMPRESSED_BYTES,
                                 DecodedBudget, check_columns, check_header, check_rows,
                                 size_text, unreadable)
from puaudit.data.schema import ComparisonTable, detect_columns, load_comparisons
from puaudit.data.writers import write_bytes_atomic
from puaudit.errors import PUAuditError

__all__ = ["parquet_decoded_sizes", "parquet_check_budget", "parquet_text_leaves",
           "decoded_nbytes", "spend_batch", "parquet_batches", "parquet_table",
           "arrow_frame_fixups", "read_parquet", "read_comparisons_parquet",
           "write_export_parquet", "is_parquet_path", "STREAMED_FROM", "BATCH_ROWS"]


# Bytes Arrow takes per stored value, by Parquet physical type (BYTE_ARRAY: its offset only).
_PARQUET_WIDTH = {"BOOLEAN": 1, "INT32": 4, "INT64": 8, "INT96": 8, "FLOAT": 4, "DOUBLE": 8,
                  "BYTE_ARRAY": 4}


def parquet_decoded_sizes(meta, columns: Iterable[str] | None = None) -> list[dict[str, int]]:
    """Decoded size of each top-level column in each row group, from the footer alone.

    A chunk's estimate is the larger of ``num_values * w`` (``w`` the Arrow width of its
    physical type, 16 for decimals) and its ``total_uncompressed_size``; only dictionary-encoded
    text decodes to more (:func:`decoded_nbytes` measures it while still a dictionary).

    Parameters
    ----------
    meta : pyarrow.parquet.FileMetaData
    columns : iterable of str, optional
        Top-level columns to count (default all).

    Returns
    -------
    list of dict
        One ``{column: bytes}`` per row group.
    """
    wanted = None if columns is None else set(columns)
    widths = []
    for c in range(meta.num_columns):
        col = meta.schema.column(c)
        if "Decimal" in str(col.logical_type):
            width = 16
        elif col.physical_type == "FIXED_LEN_BYTE_ARRAY":
            width = max(int(col.length or 0), 1)
        else:
            width = _PARQUET_WIDTH.get(col.physical_type, 8)
        widths.append(width)
    out = []
    for g in range(meta.num_row_groups):
        rg = meta.row_group(g)
        sizes: dict[str, int] = {}
        for c in range(rg.num_columns):
            chunk = rg.column(c)
            top = chunk.path_in_schema.split(".")[0]
            if wanted is None or top in wanted:
                est = max(chunk.total_uncompressed_size, chunk.num_values * widths[c])
                sizes[top] = sizes.get(top, 0) + est
        out.append(sizes)
    return out


def parquet_check_budget(meta, budget: DecodedBudget, *, file_bytes: int,
                         columns: Iterable[str] | None = None) -> list[int]:
    """Refuse, before any page is read, a Parquet file whose footer says it decodes past
    ``budget``; returns the estimated decoded bytes of each row group
    (:func:`parquet_decoded_sizes`)."""
    per_group = parquet_decoded_sizes(meta, columns)
    total = sum(sum(g.values()) for g in per_group)
    if budget.limit is not None and budget.used + total > budget.limit:
        by_column: dict[str, int] = {}
        for g in per_group:
            for col, n in g.items():
                by_column[col] = by_column.get(col, 0) + n
        col, n = max(by_column.items(), key=lambda kv: kv[1])
        raise budget.refuse(f"holds more than {budget.limit_text} of data once decoded (the "
                            f"limit here): its {meta.num_rows:,} rows decode to about "
                            f"{size_text(total)} from {size_text(file_bytes)} on disk, column "
                            f"'{col}' alone {size_text(n)}; refused before reading")
    return [sum(g.values()) for g in per_group]


def parquet_text_leaves(meta, columns: Iterable[str] | None = None) -> list[str]:
    """Paths of the text (BYTE_ARRAY) leaf columns, nested ones included: read as dictionaries
    (``read_dictionary``), a value repeated a million times is measured before it is expanded."""
    wanted = None if columns is None else set(columns)
    out = []
    for c in range(meta.num_columns):
        col = meta.schema.column(c)
        if col.physical_type == "BYTE_ARRAY" and (wanted is None
                                                  or col.path.split(".")[0] in wanted):
            out.append(col.path)
    return out


def _expands(t) -> bool:
    """Whether an array of type ``t`` holds values that take more memory once expanded than
    its buffers do: dictionaries (an index per value) and views (16 bytes a value, pointing
    into shared data), at any depth."""
    import pyarrow as pa

    if pa.types.is_dictionary(t) or pa.types.is_string_view(t) or pa.types.is_binary_view(t):
        return True
    return any(_expands(t.field(i).type) for i in range(t.num_fields))


def _view_lengths(array) -> np.ndarray:
    """Lengths of a ``string_view`` / ``binary_view`` array's values (0 for nulls), read from
    its views (16 bytes each, the length first) without touching the data they point at."""
    n, off = len(array), array.offset
    buf = array.buffers()[1]
    if n == 0 or buf is None:
        return np.zeros(n, np.int64)
    views = np.frombuffer(buf, dtype=np.int32, count=4 * (off + n))[4 * off:]
    lengths = views[::4].astype(np.int64)
    if array.null_count:
        lengths[~np.asarray(array.is_valid().to_numpy(zero_copy_only=False))] = 0
    return np.maximum(lengths, 0)


def _value_lengths(values) -> np.ndarray:
    """Length of each value of a dictionary's ``values`` once expanded (text and binary their
    length, fixed-width values their width)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    vt = values.type
    if pa.types.is_string_view(vt) or pa.types.is_binary_view(vt):
        return _view_lengths(values)
    if (pa.types.is_string(vt) or pa.types.is_large_string(vt) or pa.types.is_binary(vt)
            or pa.types.is_large_binary(vt)):
        return pc.binary_length(values).fill_null(0).to_numpy(zero_copy_only=False
                                                               ).astype(np.int64)
    if len(values) and not _expands(vt):
        return np.full(len(values), values.nbytes // len(values), np.int64)
    return np.array([decoded_nbytes(values.slice(i, 1)) for i in range(len(values))],
                    np.int64)


def decoded_nbytes(array) -> int:
    """Bytes ``array`` takes once every dictionary and view in it is expanded, computed
    without expanding.

    A dictionary-encoded text of ``n`` values takes :math:`\\sum_i |d_{k_i}| + 8n` (the lengths
    of the values its indices point at, plus one offset each); a ``string_view`` of ``n``
    values :math:`\\sum_i \\ell_i + 8n`, :math:`\\ell_i` the length its view states (all views
    may point at one shared buffer); other arrays their ``nbytes``. Lists, maps and structs add
    their own buffers to their children's decoded size.
    """
    import pyarrow as pa

    t = array.type
    if not _expands(t):
        return array.nbytes
    if pa.types.is_string_view(t) or pa.types.is_binary_view(t):
        return int(_view_lengths(array).sum()) + 8 * len(array)
    if pa.types.is_dictionary(t):
        values = array.dictionary
        if len(array) == 0 or len(values) == 0:
            return array.nbytes
        indices = array.indices.drop_null().to_numpy(zero_copy_only=False)
        if len(indices) and (indices.min() < 0 or indices.max() >= len(values)):
            raise ValueError("dictionary index out of range")
        taken = _value_lengths(values)[indices].sum()
        return int(taken) + 8 * len(array)
    if isinstance(array, pa.StructArray):
        children = [array.field(i) for i in range(t.num_fields)]
    else:  # list, large list, fixed-size list, map: one child, the values
        children = [array.values]
    return (array.nbytes - sum(ch.nbytes for ch in children)
            + sum(decoded_nbytes(ch) for ch in children))


def spend_batch(budget: DecodedBudget, columns: Sequence[tuple[str, object]], where: str) -> None:
    """Count what the arrays ``columns`` (``(name, array)`` pairs) expand to against
    ``budget`` (:func:`decoded_nbytes`, measured before anything is expanded), refusing past
    its limit with a message naming the column that expands most and ``where`` it was."""
    sizes = [(name, decoded_nbytes(arr)) for name, arr in columns]
    total = sum(n for _, n in sizes)
    if budget.limit is None or budget.used + total <= budget.limit:
        budget.used += total
        return
    col, n = max(sizes, key=lambda kv: kv[1])
    budget.used += total
    raise budget.refuse(f"holds more than {budget.limit_text} of data once decoded (the limit "
                        f"here; passed {where}): column '{col}' expands to {size_text(n)} there, "
                        f"from {size_text(sum(a.nbytes for _, a in columns))} of buffers for all "
                        "columns; refused before expanding")


def parquet_batches(pf, budget: DecodedBudget, group_bytes: Sequence[int], *,
                    columns: list[str] | None = None, batch_bytes: int = 32 * 2**20,
                    batch_rows: int = 65_536, use_pandas_metadata: bool = False):
    """Record batches of ``pf``, row group by row group, each counted against ``budget``.

    Batches hold about ``batch_bytes`` by the footer's estimate (``group_bytes``, one per row
    group), at most ``batch_rows`` rows and at least one; pyarrow decodes a batch's pages only,
    so a refused file costs one batch, whatever its row groups hold.
    """
    meta = pf.metadata
    for g in range(meta.num_row_groups):
        rows = meta.row_group(g).num_rows
        if rows == 0:
            continue
        per_row = max(group_bytes[g] / rows, 1.0)
        size = int(max(1, min(rows, batch_rows, batch_bytes // per_row)))
        for batch in pf.iter_batches(batch_size=size, row_groups=[g], columns=columns,
                                     use_threads=False, use_pandas_metadata=use_pandas_metadata):
            spend_batch(budget, list(zip(batch.schema.names, batch.columns)),
                        f"in row group {g + 1} of {meta.num_row_groups}")
            yield batch


_NULLABLE_INTS = {"int8": "Int8", "int16": "Int16", "int32": "Int32", "int64": "Int64",
                  "uint8": "UInt8", "uint16": "UInt16", "uint32": "UInt32", "uint64": "UInt64"}


def read_parquet(data: bytes, name: str, *, budget: DecodedBudget,
                 max_rows: int | None = None, max_columns: int = MAX_COLUMNS,
                 hint: str = DEFAULT_HINT) -> pd.DataFrame:
    """Read Parquet row group by row group within ``budget`` (see :class:`DecodedBudget`).

    The footer's sizes (:func:`parquet_check_budget`) refuse a file before any page is read;
    text columns, nested ones included, are read as dictionaries, so that a value repeated
    millions of times (a few bytes on disk) is measured before it is expanded.
    """
    import pyarrow.parquet as pq

    with unreadable(name, "Parquet file", "Re-export it, or upload CSV / JSONL."):
        first = pq.ParquetFile(io.BytesIO(data))
        meta = first.metadata
        check_columns(meta.num_columns, name, max_columns, hint)
        check_rows(meta.num_rows, name, max_rows, hint)
        schema = first.schema_arrow
        check_header(schema.names, name)
        group_bytes = parquet_check_budget(meta, budget, file_bytes=len(data))
        table = parquet_table(io.BytesIO(data), meta, schema, budget, group_bytes)
        df = table.to_pandas()
    return arrow_frame_fixups(df, table, name)


def parquet_table(source, meta, schema, budget: DecodedBudget, group_bytes: Sequence[int]):
    """The Arrow table of the Parquet file ``source`` (its footer ``meta``, its Arrow
    ``schema``), read batch by batch within ``budget`` (:func:`parquet_batches`, text as
    dictionaries to measure it), then cast back to the stored types."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    pf = pq.ParquetFile(source, read_dictionary=parquet_text_leaves(meta))
    batches = list(parquet_batches(pf, budget, group_bytes, use_pandas_metadata=True))
    table = (pa.Table.from_batches(batches, schema=batches[0].schema) if batches
             else pf.schema_arrow.empty_table())
    del batches
    # back to the stored types (dictionaries were only for measuring)
    return table.cast(schema)


def _nulls_among_ints(array) -> bool:
    """Whether a nested ``array`` (list, struct, map) holds integers beside a missing value at
    the same level, which ``to_pandas`` turns into a float array."""
    import pyarrow as pa

    t = array.type
    if pa.types.is_dictionary(t):
        return _nulls_among_ints(array.dictionary)
    if isinstance(array, pa.StructArray):
        return any(_nulls_among_ints(array.field(k)) for k in range(t.num_fields))
    if isinstance(array, pa.MapArray):
        return _nulls_among_ints(array.keys) or _nulls_among_ints(array.items)
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
        values = array.flatten()
        if pa.types.is_integer(values.type):
            return values.null_count > 0
        return _nulls_among_ints(values)
    return False


def arrow_frame_fixups(df: pd.DataFrame, table, name: str) -> pd.DataFrame:
    """``table.to_pandas()`` (``df``) as :func:`read_table` returns it: integer columns with
    missing values as nullable integers (not floats, which round beyond 2**53), nested ones
    as Python values, names as text."""
    import pyarrow as pa

    for col in list(df.columns):
        i = table.schema.get_field_index(str(col))
        if (i >= 0 and pa.types.is_integer(table.schema.field(i).type)
                and table.column(i).null_count):
            mapped = _NULLABLE_INTS[str(table.schema.field(i).type)]
            df[col] = pd.array(table.column(i).to_pandas(
                types_mapper=lambda t, m=mapped: pd.api.types.pandas_dtype(m)).array)
        elif i >= 0 and any(_nulls_among_ints(chunk) for chunk in table.column(i).chunks):
            # pandas makes a nested integer array with a missing value float (2**53 + 1 would
            # become 2**53): such a column holds Python lists / dicts of exact ints instead
            df[col] = pd.Series(table.column(i).to_pylist(), index=df.index, dtype=object)
    check_header([str(c) for c in df.columns], name)
    df.columns = [str(c) for c in df.columns]
    # pandas brings back the attrs a writer stored in the file (a read note, a row limit): the
    # file's data, not what this read noted
    df.attrs = {}
    return df


# --- the audit's columns in, the export out, batch by batch --------------------------------

#: Rows per batch read or written (fewer when rows are wide: see :func:`_batch_rows`).
BATCH_ROWS = 65_536
#: Decoded bytes a batch may hold.
BATCH_BYTES = 32 * 2**20
#: Key in :attr:`ComparisonTable.extra` naming the Parquet file a frameless table was read from.
STREAMED_FROM = "streamed_from"
_REDO = "Re-export it, or use CSV / JSONL."


def is_parquet_path(path) -> bool:
    return Path(str(path)).suffix.lower() in (".parquet", ".pq")


def _open(path, name: str):
    import pyarrow.parquet as pq

    try:
        return pq.ParquetFile(path, memory_map=True)
    except FileNotFoundError:
        raise PUAuditError(f"Cannot read {path}: no such file.") from None
    except Exception as exc:  # noqa: BLE001 - pyarrow raises many types for corrupt files
        if isinstance(exc, OSError) and os.path.isdir(path):
            raise PUAuditError(f"{path} is a folder; give a Parquet file.") from None
        raise PUAuditError(f"{name}: not a readable Parquet file ({type(exc).__name__}: {exc}). "
                           f"{_REDO}") from None


def _batch_rows(pf, rows: int, columns: list[str] | None = None) -> int:
    """``rows``, or fewer so that one batch of ``columns`` (all when None) decodes to about
    :data:`BATCH_BYTES` (from the footer's decoded sizes, :func:`parquet_decoded_sizes`)."""
    meta = pf.metadata
    if meta.num_rows == 0:
        return rows
    size = sum(sum(g.values()) for g in parquet_decoded_sizes(meta, columns))
    per_row = max(size / meta.num_rows, 1.0)
    # a batch that straddles row groups makes the reader hold and join both: align with them
    group_rows = max(meta.row_group(g).num_rows for g in range(meta.num_row_groups))
    return int(max(1, min(rows, BATCH_BYTES // per_row, group_rows)))


def read_comparisons_parquet(path, *, columns: Mapping[str, str] | None = None,
                             judge_column: str | None = None, max_rows: int | None = None,
                             max_columns: int = MAX_COLUMNS, limit_hint: str = DEFAULT_HINT,
                             max_bytes: int | None = MAX_UNCOMPRESSED_BYTES,
                             size_hint: str | None = None, batch_rows: int = BATCH_ROWS,
                             progress: Callable[[int, int], None] | None = None
                             ) -> ComparisonTable:
    """A :class:`ComparisonTable` of the Parquet file ``path``, reading only the audit's columns.

    Parameters
    ----------
    path : path
    columns, judge_column
        As for :func:`puaudit.data.schema.load_comparisons`.
    max_rows, max_columns, limit_hint
        Limits checked on the file's metadata before anything is read.
    max_bytes, size_hint
        Largest decoded size of the *whole* file (the export decodes every column), as for
        :func:`puaudit.data.io.read_table`: refused from the footer before any page is read
        when it says so; text columns the audit does not use are then read as dictionaries,
        one batch at a time, to measure what they expand to, so that a refusal comes before
        the texts are embedded and the export never meets a batch past the limit.
    batch_rows : int
        Rows per read batch at most (fewer for wide rows).
    progress : callable(rows_read, n_rows), optional

    Returns
    -------
    ComparisonTable
        With an empty ``frame`` of the file's length (no column is kept twice) and
        ``extra["streamed_from"]`` set to ``path``: export it with :func:`write_export_parquet`.
    """
    name = Path(str(path)).name
    pf = _open(path, name)
    names = _checked_names(pf.metadata, pf, name, max_rows=max_rows, max_columns=max_columns,
                           limit_hint=limit_hint)
    chosen = dict(columns or {})
    if judge_column:
        chosen["judge"] = judge_column
    # roles are matched on names only: an empty frame with the file's header is enough
    mapping = detect_columns(pd.DataFrame(columns=names), chosen)
    wanted = list(dict.fromkeys(mapping.values()))
    budget = DecodedBudget(max_bytes, name, size_hint or limit_hint)
    parquet_check_budget(pf.metadata, budget, file_bytes=os.path.getsize(path))
    measured = _measured_columns(pf.metadata, names, wanted, budget)
    frame = _read_columns(path, pf, name, wanted, measured, budget, batch_rows=batch_rows,
                          progress=progress)
    table = load_comparisons(frame, columns=mapping, name=name)
    # the per-row arrays hold what the audit reads; the frame would be a second copy of it
    table.frame = pd.DataFrame(index=pd.RangeIndex(len(frame)))
    table.extra[STREAMED_FROM] = str(path)
    return table


def _checked_names(meta, pf, name: str, *, max_rows: int | None, max_columns: int,
                   limit_hint: str) -> list[str]:
    """The file's column names, after its size limits and header are checked on the footer."""
    check_columns(meta.num_columns, name, max_columns, limit_hint)
    check_rows(meta.num_rows, name, max_rows, limit_hint)
    names = [str(n) for n in pf.schema_arrow.names]
    check_header(names, name)
    if meta.num_rows == 0:
        raise PUAuditError(f"{name}: no data rows.")
    return names


def _measured_columns(meta, names: list[str], wanted: list[str], budget: DecodedBudget) -> list:
    """The columns to read: the audit's and (when limited) text the footer cannot size; the
    others' decoded size (fixed widths, plain pages) is charged to ``budget`` from the footer."""
    texts = {leaf.split(".")[0] for leaf in parquet_text_leaves(meta)}
    measured = wanted + ([c for c in names if c in texts and c not in wanted]
                         if budget.limit is not None else [])
    rest = [c for c in names if c not in measured]
    budget.spend(sum(sum(g.values()) for g in parquet_decoded_sizes(meta, rest)),
                 lambda: f"holds more than {budget.limit_text} of data once decoded (the limit "
                 "here)")
    return measured


def _read_columns(path, pf, name: str, wanted: list, measured: list, budget: DecodedBudget, *,
                  batch_rows: int, progress) -> pd.DataFrame:
    """Read ``measured`` batch by batch under ``budget`` and keep ``wanted``, as stored."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    meta = pf.metadata
    group_bytes = [sum(g.values()) for g in parquet_decoded_sizes(meta, measured)]
    batches, done = [], 0
    with unreadable(name, "Parquet file", _REDO):
        reader = pq.ParquetFile(path, memory_map=True,
                                read_dictionary=parquet_text_leaves(meta, measured))
        for batch in parquet_batches(reader, budget, group_bytes, columns=measured,
                                     batch_bytes=BATCH_BYTES, batch_rows=batch_rows):
            batches.append(batch.select(wanted))
            done += batch.num_rows
            if progress is not None:
                progress(done, meta.num_rows)
        arrow = pa.Table.from_batches(batches, schema=batches[0].schema)
        del batches
        # back to the stored types (dictionaries were only for measuring)
        arrow = arrow.cast(pa.schema([pf.schema_arrow.field(c) for c in wanted]))
        return arrow_frame_fixups(arrow.to_pandas(), arrow, name)


class _Pieces:
    """A write-only file object whose bytes are collected and handed out piece by piece."""

    def __init__(self):
        self.parts: list[bytes] = []
        self.closed = False
        self.pos = 0

    def write(self, data) -> int:
        b = bytes(data)
        self.parts.append(b)
        self.pos += len(b)
        return len(b)

    def tell(self) -> int:
        return self.pos

    def flush(self) -> None:
        pass

    def close(self) -> None:
        self.closed = True

    def take(self) -> bytes:
        out, self.parts = b"".join(self.parts), []
        return out


def _export_arrays(result, start: int, stop: int) -> dict:
    import pyarrow as pa

    out = {}
    for name, values in result.columns().items():
        v = values[start:stop]
        if v.dtype.kind == "f":
            out[name] = pa.array(v, type=pa.float64())
        else:
            out[name] = pa.array([None if x is None else str(x) for x in v], type=pa.string())
    return out


def write_export_parquet(result, source, path, *, batch_rows: int = BATCH_ROWS,
                         progress: Callable[[int, int], None] | None = None) -> Path:
    """Write the Parquet file ``source`` with the audit's columns appended to ``path``.

    The same rows and columns as :meth:`AuditResult.to_frame` (a ``puaudit_*`` name already in
    the source gets the suffix ``_new``), each input column with its stored type; written one
    batch at a time and renamed into place when complete.

    Parameters
    ----------
    result : AuditResult
        The audit of ``source`` (its row count is checked).
    source, path : path
    batch_rows : int
        Rows per batch at most (fewer for wide rows). A row group of the source is decoded
        whole, so a file written as one huge row group costs that row group in memory.
    progress : callable(rows_written, n_rows), optional
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    name = Path(str(source)).name
    pf = _open(source, name)
    n = pf.metadata.num_rows
    if n != result.input.n_rows:
        raise PUAuditError(f"{name} has {n} rows; the audit was run on {result.input.n_rows}. "
                           "Pass the file that was audited.")
    schema = pf.schema_arrow
    # the pandas metadata describes the source's columns only; a reader would misread ours
    meta = {k: v for k, v in (schema.metadata or {}).items() if k != b"pandas"}
    present = set(schema.names)
    fields = list(schema)
    renamed = {}
    for col in result.columns():
        new = col
        while new in present:
            new += "_new"
        present.add(new)
        renamed[col] = new
    probe = _export_arrays(result, 0, 0)
    for col, new in renamed.items():
        fields.append(pa.field(new, probe[col].type))
    out_schema = pa.schema(fields, metadata=meta or None)

    def pieces():
        sink = _Pieces()
        writer = pq.ParquetWriter(sink, out_schema)
        start = 0
        try:
            for batch in pf.iter_batches(batch_size=_batch_rows(pf, batch_rows),
                                         use_threads=False, use_pandas_metadata=False):
                stop = start + batch.num_rows
                extra = _export_arrays(result, start, stop)
                arrays = list(batch.columns) + [extra[c] for c in renamed]
                writer.write_batch(pa.RecordBatch.from_arrays(arrays, schema=out_schema))
                start = stop
                if progress is not None:
                    progress(stop, n)
                yield sink.take()
        finally:
            writer.close()
        yield sink.take()

    return write_bytes_atomic(path, pieces())
