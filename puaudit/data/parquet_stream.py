"""Parquet in, Parquet out for large tables, without a whole extra copy of the table in memory.

:func:`read_table` builds the whole table (every column) in pandas, and the export
(:meth:`AuditResult.to_frame`) copies it once more before writing. For a Parquet file that is
the audit's input *and* the export's source, neither copy is needed:

* :func:`read_comparisons_parquet` reads only the columns the audit uses (prompt, responses,
  verdicts, type, ids, annotator), in row batches, and keeps no frame: the
  :class:`ComparisonTable` it returns holds the per-row arrays and an empty frame of the right
  length. Columns the audit does not read (long metadata, embeddings, ...) are never loaded.
* :func:`write_export_parquet` streams the source again, one row batch at a time, appends the
  audit's ``puaudit_*`` columns to each batch and writes it, through a temporary file that is
  renamed over the destination at the end (:func:`write_bytes_atomic`). Every input row and
  column is written with its stored Arrow type, in order; only one batch is in memory.

Peak memory is then the audit's per-row arrays plus one batch, whatever the width of the file.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Callable, Mapping

import pandas as pd

from puaudit.data.read_limits import (_DEFAULT_HINT, MAX_COLUMNS, MAX_UNCOMPRESSED_BYTES,
                                      DecodedBudget, _check_columns, _check_header, _check_rows)
from puaudit.data.parquet_read import (arrow_frame_fixups, parquet_batches, parquet_check_budget,
                                       parquet_decoded_sizes, parquet_text_leaves)
from puaudit.data.writers import write_bytes_atomic
from puaudit.data.schema import ComparisonTable, detect_columns, load_comparisons
from puaudit.errors import PUAuditError

__all__ = ["read_comparisons_parquet", "write_export_parquet", "is_parquet_path",
           "STREAMED_FROM", "BATCH_ROWS"]

#: Rows per batch read or written (fewer when rows are wide: see :func:`_batch_rows`).
BATCH_ROWS = 65_536
#: Decoded bytes a batch may hold.
BATCH_BYTES = 32 * 2**20
#: Key in :attr:`ComparisonTable.extra` naming the Parquet file a frameless table was read from.
STREAMED_FROM = "streamed_from"


def is_parquet_path(path) -> bool:
    return Path(str(path)).suffix.lower() in (".parquet", ".pq")


def _open(path, name: str):
    import pyarrow.parquet as pq

    try:
        return pq.ParquetFile(path, memory_map=True)
    except FileNotFoundError:
        raise PUAuditError(f"Cannot read {path}: no such file.") from None
    except OSError as exc:
        if os.path.isdir(path):
            raise PUAuditError(f"{path} is a folder; give a Parquet file.") from None
        raise PUAuditError(f"{name}: not a readable Parquet file ({exc}). Re-export it, or use "
                           "CSV / JSONL.") from None
    except Exception as exc:  # pyarrow raises many types for corrupt files
        raise PUAuditError(f"{name}: not a readable Parquet file ({type(exc).__name__}: {exc}). "
                           "Re-export it, or use CSV / JSONL.") from None


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
                             max_columns: int = MAX_COLUMNS, limit_hint: str = _DEFAULT_HINT,
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
    _check_columns(meta.num_columns, name, max_columns, limit_hint)
    _check_rows(meta.num_rows, name, max_rows, limit_hint)
    names = [str(n) for n in pf.schema_arrow.names]
    _check_header(names, name)
    if meta.num_rows == 0:
        raise PUAuditError(f"{name}: no data rows.")
    return names


def _measured_columns(meta, names: list[str], wanted: list[str], budget: DecodedBudget) -> list:
    """The columns to read: the audit's and (when limited) text the footer cannot size; the
    decoded size of the others is charged to ``budget`` from the footer."""
    # The footer's estimate of the others is exact enough (fixed widths, plain pages).
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
    try:
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
    except PUAuditError:
        raise
    except Exception as exc:
        raise PUAuditError(f"{name}: not a readable Parquet file ({type(exc).__name__}: {exc}). "
                           "Re-export it, or use CSV / JSONL.") from None


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
