"""Precomputed embeddings from an ``.npz`` file, per row or per distinct text, checked from the
archive's member headers before any array is loaded."""

from __future__ import annotations

import os
import zipfile
from pathlib import Path

import numpy as np

from puaudit.data.limits import MAX_EMBEDDING_DIM, MAX_UNCOMPRESSED_BYTES, size_text
from puaudit.errors import PUAuditError

__all__ = ["read_embeddings_npz"]


def _npz_headers(path: Path, keys: tuple[str, ...], fix: str) -> dict:
    """Shape and dtype of each named member of an ``.npz`` archive, read from the member headers
    only (a few bytes each), so nothing is decompressed before it is checked."""
    with open(path, "rb") as fh:
        magic = fh.read(6)
    if magic == b"\x93NUMPY":
        raise PUAuditError(f"{path} is a single .npy array, not an .npz archive; {fix}.")
    if magic[:4] != b"PK\x03\x04":
        raise PUAuditError(f"{path} is not an .npz archive; {fix}.")
    out = {}
    try:
        with zipfile.ZipFile(path) as zf:
            names = {n.removesuffix(".npy") for n in zf.namelist()}
            for key in keys:
                if key not in names:
                    raise PUAuditError(f"{path} has no array '{key}' (it holds "
                                       f"{sorted(names)[:10]}); {fix}.")
                info = zf.getinfo(key + ".npy")
                with zf.open(info) as member:
                    version = np.lib.format.read_magic(member)
                    if version == (1, 0):
                        shape, _, dtype = np.lib.format.read_array_header_1_0(member)
                    elif version == (2, 0):
                        shape, _, dtype = np.lib.format.read_array_header_2_0(member)
                    else:
                        raise PUAuditError(f"{path}: array '{key}' uses .npy format version "
                                           f"{version}; {fix}.")
                if dtype.hasobject or dtype.kind not in "fiu":
                    pickled = (" (objects would need pickle to load, which is never done)"
                               if dtype.hasobject else "")
                    raise PUAuditError(f"Could not read embeddings from {path}: array '{key}' "
                                       f"holds {dtype} values, not numbers{pickled}; {fix}.")
                declared = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
                if info.file_size < declared:
                    raise PUAuditError(f"{path}: array '{key}' is truncated ({info.file_size:,} "
                                       f"bytes for a declared {declared:,}); {fix}.")
                out[key] = (tuple(shape), dtype, declared)
    except PUAuditError:
        raise
    except (OSError, ValueError, zipfile.BadZipFile, EOFError) as exc:
        raise PUAuditError(f"Could not read embeddings from {path} ({type(exc).__name__}: "
                           f"{str(exc)[:200]}); {fix}.") from None
    return out


def _npz_layout(path: Path) -> str:
    try:
        with zipfile.ZipFile(path) as zf:
            return "indexed" if "vectors.npy" in zf.namelist() else "rows"
    except (OSError, zipfile.BadZipFile):
        return "rows"  # _npz_headers says what is wrong


def read_embeddings_npz(path: str | os.PathLike, *, n_rows: int, max_dim: int = MAX_EMBEDDING_DIM,
                        max_bytes: int = MAX_UNCOMPRESSED_BYTES) -> dict:
    """Load precomputed embeddings from an ``.npz`` file, safely, in either of two layouts.

    * **per row**: ``np.savez(path, e_a=..., e_b=...)``, two ``(n_rows, dim)`` arrays;
    * **per distinct text** (what the encoder computes; far smaller for large tables):
      ``np.savez(path, vectors=..., idx_a=..., idx_b=...)`` with ``vectors`` ``(n_texts, dim)``
      and ``idx_a`` / ``idx_b`` ``(n_rows,)`` integer indices into it.

    The member headers (shape and dtype) are checked before any array is loaded.

    Parameters
    ----------
    path : path
    n_rows : int
        Rows of the table the embeddings belong to.
    max_dim : int
        Largest embedding width accepted.
    max_bytes : int
        Largest total size of the arrays once loaded (as declared by their headers).

    Returns
    -------
    dict with ``vectors`` (float32, (k, dim)), ``idx_a`` and ``idx_b`` (int, (n_rows,)); for
    the per-row layout ``vectors`` stacks ``e_a`` over ``e_b``.
    """
    path = Path(path)
    fix = ("it must be an .npz archive made by np.savez(path, e_a=..., e_b=...) with two float "
           f"arrays of shape ({n_rows}, dim), one row per table row, or by np.savez(path, "
           f"vectors=..., idx_a=..., idx_b=...) with one vector per distinct text and two integer "
           f"arrays of length {n_rows}")
    if not path.is_file():
        raise PUAuditError(f"Embeddings file {path} not found (or not a file); {fix}.")
    indexed = _npz_layout(path) == "indexed"
    keys = ("vectors", "idx_a", "idx_b") if indexed else ("e_a", "e_b")
    heads = _npz_headers(path, keys, fix)
    _check_npz_headers(path, heads, n_rows=n_rows, max_dim=max_dim, max_bytes=max_bytes,
                       indexed=indexed, fix=fix)
    try:
        with np.load(path, allow_pickle=False) as z:
            arrays = {k: np.asarray(z[k]) for k in keys}
    except (OSError, KeyError, ValueError, zipfile.BadZipFile, EOFError) as exc:
        raise PUAuditError(f"Could not read embeddings from {path} ({type(exc).__name__}: "
                           f"{str(exc)[:200]}); {fix}.") from None
    vectors, idx_a, idx_b = _npz_rows(path, arrays, n_rows=n_rows, indexed=indexed, fix=fix)
    _check_npz_values(path, vectors, idx_a, idx_b, indexed=indexed)
    return {"vectors": vectors, "idx_a": idx_a, "idx_b": idx_b}


def _check_npz_headers(path: Path, heads: dict, *, n_rows: int, max_dim: int, max_bytes: int,
                       indexed: bool, fix: str) -> None:
    """Total size, shapes and index types as the member headers declare them."""
    total = sum(h[2] for h in heads.values())
    if total > max_bytes:
        raise PUAuditError(f"{path}: the arrays would take {size_text(total)} once loaded (the "
                           f"file is {size_text(path.stat().st_size)}), over the "
                           f"{size_text(max_bytes)} limit; {fix}.")
    vec_keys = ("vectors",) if indexed else ("e_a", "e_b")
    for key in vec_keys:
        shape = heads[key][0]
        if (len(shape) != 2 or not (1 <= shape[1] <= max_dim)
                or (not indexed and shape[0] != n_rows)):
            raise PUAuditError(f"{path}: array '{key}' has shape {shape} but the table has "
                               f"{n_rows} rows (at most {max_dim} dimensions are accepted); "
                               f"{fix}.")
    if indexed:
        for key in ("idx_a", "idx_b"):
            shape, dtype, _ = heads[key]
            if shape != (n_rows,) or dtype.kind not in "iu":
                raise PUAuditError(f"{path}: array '{key}' must hold {n_rows} integers (one per "
                                   f"table row); it has shape {shape} and type {dtype}; {fix}.")
    elif heads["e_a"][0] != heads["e_b"][0]:
        raise PUAuditError(f"{path}: e_a has shape {heads['e_a'][0]} but e_b "
                           f"{heads['e_b'][0]}; {fix}.")


def _npz_rows(path: Path, arrays: dict, *, n_rows: int, indexed: bool,
              fix: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``vectors`` (float32) and each table row's indices into them, checked in range; the
    per-row layout stacks ``e_a`` over ``e_b``."""
    if indexed:
        vectors = arrays["vectors"].astype(np.float32, copy=False)
        idx_a, idx_b = arrays["idx_a"], arrays["idx_b"]
        for key, idx in (("idx_a", idx_a), ("idx_b", idx_b)):
            bad = (idx < 0) | (idx >= len(vectors))
            if bad.any():
                row = int(np.flatnonzero(bad)[0])
                raise PUAuditError(f"{path}: '{key}' of table row {row + 1} is {int(idx[row])}, "
                                   f"outside the {len(vectors)} vectors; {fix}.", row=row + 1)
    else:
        n = n_rows
        vectors = np.concatenate([arrays["e_a"], arrays["e_b"]]).astype(np.float32, copy=False)
        idx_a, idx_b = np.arange(n), np.arange(n, 2 * n)
    return vectors, idx_a, idx_b


def _check_npz_values(path: Path, vectors: np.ndarray, idx_a: np.ndarray, idx_b: np.ndarray, *,
                      indexed: bool) -> None:
    """Refuse NaN or infinite vectors, all zeros, and A and B identical on every row."""
    bad_vec = ~np.isfinite(vectors).all(axis=1)
    if bad_vec.any():
        rows_a = np.flatnonzero(bad_vec[idx_a])
        rows_b = np.flatnonzero(bad_vec[idx_b])
        key, rows = ("e_a" if not indexed else "vectors", rows_a) if len(rows_a) else (
            "e_b" if not indexed else "vectors", rows_b)
        if len(rows):
            row = int(rows[0])
            raise PUAuditError(f"{path}: array '{key}' row {row + 1} (table row {row + 1}) holds "
                               f"NaN or infinite values ({len(np.union1d(rows_a, rows_b))} such "
                               "rows). Re-compute the embeddings of those rows.", row=row + 1)
    if not vectors.any():
        raise PUAuditError(f"{path}: every embedding is zero, so no two responses can be told "
                           "apart. Re-compute the embeddings (an encoder that failed silently "
                           "often writes zeros).")
    identical = all(np.array_equal(vectors[idx_a[i:i + 65536]], vectors[idx_b[i:i + 65536]])
                    for i in range(0, len(idx_a), 65536))
    if identical:
        raise PUAuditError(f"{path}: e_a and e_b are identical on every row, so the audit cannot "
                           "tell the two responses apart. Check that e_b holds the embeddings of "
                           "response B.")
