"""Parquet read under the decoded-size budget: sizes from the footer before any page is read,
then batch by batch with text read as dictionaries; and the pandas frame of an Arrow table."""

from __future__ import annotations

import io
from collections.abc import Iterable, Sequence

import numpy as np
import pandas as pd

from puaudit.data.read_limits import (_DEFAULT_HINT, MAX_COLUMNS, _check_columns, _check_header,
                                      _check_rows, DecodedBudget, _mb)
from puaudit.errors import PUAuditError

__all__ = ["parquet_decoded_sizes", "parquet_check_budget", "parquet_text_leaves", "decoded_nbytes",
           "spend_batch", "parquet_batches", "parquet_table", "arrow_frame_fixups"]


# Bytes Arrow takes per stored value, by Parquet physical type (BYTE_ARRAY: its offset only).
_PARQUET_WIDTH = {"BOOLEAN": 1, "INT32": 4, "INT64": 8, "INT96": 8, "FLOAT": 4, "DOUBLE": 8,
                  "BYTE_ARRAY": 4}


def parquet_decoded_sizes(meta, columns: Iterable[str] | None = None) -> list[dict[str, int]]:
    """Decoded size of each top-level column in each row group, from the footer alone.

    A column chunk decodes to at least ``num_values * w`` bytes, ``w`` the Arrow width of its
    physical type (8 for INT64 and DOUBLE, 16 for decimals, the declared length for fixed-size
    binary), however few bytes its run-length or dictionary-encoded pages take; its
    ``total_uncompressed_size`` (data and dictionary pages) bounds what plain pages decode to.
    The estimate of a chunk is the larger of the two; only dictionary-encoded text can decode
    to more (see :func:`decoded_nbytes`, which measures it while it is still a dictionary).

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
                            f"{_mb(total)} from {_mb(file_bytes)} on disk, column '{col}' alone "
                            f"{_mb(n)}; refused before reading")
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
                        f"here; passed {where}): column '{col}' expands to {_mb(n)} there, "
                        f"from {_mb(sum(a.nbytes for _, a in columns))} of buffers for all "
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


def _read_parquet(data: bytes, name: str, *, budget: DecodedBudget,
                  max_rows: int | None = None, max_columns: int = MAX_COLUMNS,
                  hint: str = _DEFAULT_HINT) -> pd.DataFrame:
    """Read Parquet row group by row group within ``budget`` (see :class:`DecodedBudget`).

    The footer's sizes (:func:`parquet_check_budget`) refuse a file before any page is read;
    text columns, nested ones included, are read as dictionaries, so that a value repeated
    millions of times (a few bytes on disk) is measured before it is expanded.
    """
    import pyarrow.parquet as pq

    try:
        first = pq.ParquetFile(io.BytesIO(data))
        meta = first.metadata
        _check_columns(meta.num_columns, name, max_columns, hint)
        _check_rows(meta.num_rows, name, max_rows, hint)
        schema = first.schema_arrow
        _check_header(schema.names, name)
        group_bytes = parquet_check_budget(meta, budget, file_bytes=len(data))
        table = parquet_table(io.BytesIO(data), meta, schema, budget, group_bytes)
        df = table.to_pandas()
    except PUAuditError:
        raise
    except Exception as exc:  # pyarrow raises many types for corrupt files
        raise PUAuditError(f"{name}: not a readable Parquet file ({type(exc).__name__}: {exc}). "
                           "Re-export it, or upload CSV / JSONL.") from None
    return arrow_frame_fixups(df, table, name)


def parquet_table(source, meta, schema, budget: DecodedBudget, group_bytes: Sequence[int]):
    """The Arrow table of the Parquet file ``source`` (its footer ``meta``, its Arrow
    ``schema``), read batch by batch within ``budget`` (:func:`parquet_batches`, text as
    dictionaries to measure it), then cast back to the stored types."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    pf = pq.ParquetFile(source, read_dictionary=parquet_text_leaves(meta))
    batches = list(parquet_batches(pf, budget, group_bytes, use_pandas_metadata=True))
    table = pa.Table.from_batches(batches, schema=batches[0].schema) if batches else None
    del batches
    if table is None:
        table = pf.schema_arrow.empty_table()
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
    _check_header([str(c) for c in df.columns], name)
    df.columns = [str(c) for c in df.columns]
    # pandas brings back the attrs a writer stored in the file (a read note, a row limit): the
    # file's data, not what this read noted
    df.attrs = {}
    return df
