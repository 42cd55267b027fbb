"""A folder of Parquet shards read as one table: a Hugging Face Hub dataset's
``data/<split>-0000K-of-0000N.parquet``, the Hub's converted ``<config>/<split>/0000.parquet``,
or any folder of ``*.parquet`` files (Spark, Dask, pyarrow datasets).

Shards are grouped into splits by their names: ``train-00000-of-00003.parquet`` belongs to
``train`` (in ``data/`` or in a config folder, ``<config>/train``), a shard without that
pattern to the folder holding it (``default/train``, or the top folder itself). One split is
read (:func:`puaudit.data.folder_tables.choose_split`), its shards in name order, and a split
whose names say ``-of-00003`` must have all three.

Every shard's footer is read first: columns and types must agree (a differing shard is
named, with the column), and the rows and decoded bytes of all shards together are checked
against the limits before any page is read; pages are then read batch by batch within the
same budget (:func:`puaudit.data.parquet_read.parquet_table`).
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pandas as pd

from puaudit.data.folder_tables import (FolderRead, check_same_columns, choose_split,
                                        frame_of_tables, unreadable)
from puaudit.data.read_limits import _check_columns, _check_header, not_regular
from puaudit.data.parquet_read import parquet_decoded_sizes, parquet_table
from puaudit.errors import PUAuditError

__all__ = ["has_parquet", "parquet_groups", "split_names", "read_parquet_shards"]

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
        dirs[:] = sorted(d for d in dirs if not d.startswith((".", "_"))) if depth < MAX_DEPTH else []
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
    """Shards by split (see the module docstring), each in name order."""
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
    """One split's shards (``opts.split``) as one table; see the module docstring."""
    groups = parquet_groups(root)
    label, note = _pick(groups, opts.split, opts.name)
    files = groups[label]
    _check_complete(files, opts.name, label)
    names = [f"{opts.name}/{p.relative_to(root).as_posix()}" for p in files]
    footers = [_footer(p, n) for p, n in zip(files, names)]
    first_meta, first = footers[0]
    _check_columns(first_meta.num_columns, names[0], opts.max_columns, opts.limit_hint)
    _check_header(first.names, names[0])
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
