"""What every dataset-folder reader shares: the read's options and limits, which split to read,
file names that must stay inside the folder, shards that must agree on their columns, and the
one frame built from the shards' Arrow tables.

The folder readers (:mod:`puaudit.data.hf_disk`, :mod:`puaudit.data.parquet_shards`, and any
that :mod:`puaudit.data.folders` dispatches to) measure every file first (rows and decoded
bytes from metadata) and refuse a folder over a limit before any data is decoded; the limits
count the whole folder, not each file.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from puaudit.data.read_limits import (_DEFAULT_HINT, MAX_COLUMNS, MAX_UNCOMPRESSED_BYTES,
                                      DecodedBudget, _check_columns, _check_header, _check_rows,
                                      _mb)
from puaudit.data.parquet_read import arrow_frame_fixups
from puaudit.errors import PUAuditError

__all__ = ["FolderRead", "SplitNotChosen", "choose_split", "inside", "check_same_columns", "frame_of_tables",
           "unreadable", "READ_NOTE", "SPLITS", "SPLIT", "ANOTHER_SPLIT"]

#: Key of ``DataFrame.attrs`` saying what a folder read chose (which split, how many files).
READ_NOTE = "read_note"
#: Key of ``DataFrame.attrs`` listing the split names the folder holds, each one a value that
#: ``split=`` accepts (empty when the folder has no named split: a Dataset saved without one,
#: a flat folder of shards), so that a caller can offer the others without reading the folder
#: again.
SPLITS = "splits"
#: Key of ``DataFrame.attrs`` naming the split that was read (None when the folder has none).
SPLIT = "split"
#: How the read note points to the other splits; the dashboard, which offers them in a picker,
#: replaces this part of the note.
ANOTHER_SPLIT = "another: --split NAME"

#: Split read when a dataset has several and none is named, in this order.
DEFAULT_SPLITS = ("train", "test")


class SplitNotChosen(PUAuditError):
    """A folder holds several splits and no default one (none is ``train`` or ``test``, or
    several configs have one), and no split was asked for.

    The message asks for ``--split NAME``, as the command line must; ``splits`` lists the
    folder's split names in its own order, each a value ``split=`` accepts, so that a caller
    that can offer the others (the dashboard's Split picker) may read ``splits[0]`` instead.
    """

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
    read_file : callable, optional
        Reads one file within the same limits (:func:`puaudit.data.io.read_table`); given to a
        reader that meets a plain table file inside a folder (JSON, CSV), so that it need not
        import the table reader.
    """

    name: str
    split: str | None = None
    max_bytes: int | None = MAX_UNCOMPRESSED_BYTES
    max_rows: int | None = None
    max_columns: int = MAX_COLUMNS
    limit_hint: str = _DEFAULT_HINT
    size_hint: str | None = None
    read_file: Callable[..., pd.DataFrame] | None = field(default=None, repr=False)

    def budget(self) -> DecodedBudget:
        """The decoded bytes the whole folder may spend (one budget for all its files)."""
        return DecodedBudget(self.max_bytes, self.name, self.size_hint or self.limit_hint)

    def check_totals(self, budget: DecodedBudget, *, rows: int, nbytes: int, columns: int,
                     files: int, what: str) -> None:
        """Refuse, before any data is decoded, a folder whose metadata already pass a limit:
        ``rows`` and ``nbytes`` are the totals over its ``files`` files (``what`` names them)."""
        _check_columns(columns, self.name, self.max_columns, self.limit_hint)
        if self.max_rows is not None and rows > self.max_rows:
            _check_rows(rows, self.name, self.max_rows,
                        f"Its {files} {what} hold {rows:,} rows together. {self.limit_hint}")
        budget.check(nbytes, f"holds more than {budget.limit_text} of data once decoded (the "
                     f"limit here): its {files} {what} decode to about {_mb(nbytes)} together; "
                     "refused before reading")


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


@contextmanager
def unreadable(name: str, what: str, fix: str) -> Iterator[None]:
    """One message for a damaged file, whichever of its many exception types pyarrow raises."""
    try:
        yield
    except PUAuditError:
        raise
    except Exception as exc:  # noqa: BLE001 - pyarrow raises many types for damaged files
        raise PUAuditError(f"{name}: not a readable {what} ({type(exc).__name__}: "
                           f"{str(exc)[:160]}). {fix}") from None


def check_same_columns(first, schema, *, first_name: str, name: str) -> None:
    """Refuse shard ``name`` when its columns differ from the first shard's (by name and type;
    the order may differ), naming the column."""
    theirs = {f.name: f.type for f in schema}
    for f in first:
        if f.name not in theirs:
            raise PUAuditError(f"{name}: has no column '{f.name}', which {first_name} has. The "
                               "shards of one split must share their columns: re-export the "
                               "split, or move this file out of the folder.", column=f.name)
        if theirs[f.name] != f.type:
            raise PUAuditError(f"{name}: column '{f.name}' holds {theirs[f.name]}, but {f.type} "
                               f"in {first_name}. The shards of one split must share their "
                               "column types: re-export the split, or move this file out of the "
                               "folder.", column=f.name)
    extra = [n for n in theirs if first.get_field_index(n) < 0]
    if extra:
        raise PUAuditError(f"{name}: has a column '{extra[0]}' that {first_name} lacks. The "
                           "shards of one split must share their columns: re-export the split, "
                           "or move this file out of the folder.", column=extra[0])


def frame_of_tables(tables: list, *, name: str, note: str, splits: Sequence[str] = (),
                    split: str | None = None) -> pd.DataFrame:
    """One frame of the shards' Arrow ``tables`` in order (their columns in the first's order),
    as :func:`puaudit.data.io.read_table` returns a table, with ``attrs[READ_NOTE] = note``,
    ``attrs[SPLITS] = list(splits)`` (the folder's split names) and ``attrs[SPLIT] = split``
    (the one read)."""
    import pyarrow as pa

    first = tables[0].schema
    table = pa.concat_tables([t.select(first.names) for t in tables])
    del tables[:]  # the concatenation holds the same buffers; keep no second list of them
    _check_header(table.schema.names, name)
    df = arrow_frame_fixups(table.to_pandas(), table, name)
    if len(df.columns) == 0:
        raise PUAuditError(f"{name}: no columns found in its data files.")
    if len(df) == 0:
        raise PUAuditError(f"{name}: its data files hold no rows. Save a dataset with at least "
                           "one comparison.")
    df.attrs[READ_NOTE] = note
    df.attrs[SPLITS] = list(splits)
    df.attrs[SPLIT] = split
    return df
