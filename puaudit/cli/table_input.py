"""What a command reads: its ``INPUT`` through :func:`puaudit.data.load.load_input` within the
run's limits, with ``--split``, ``--human`` and ``--answers``, and the embeddings it audits with
(a precomputed ``.npz`` or the chosen encoder's).

A Parquet table of our own audited to a Parquet export is streamed instead (:func:`streams`);
every other input is read once by :func:`read_frame`, as the dashboard's upload is. The limits
(``--max-rows`` / ``$PUAUDIT_MAX_ROWS``, ``--max-decoded-mb`` / ``$PUAUDIT_MAX_DECODED_MB``;
``0``: no limit) keep one run within a few GB; see docs/hostile_inputs.md.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import pandas as pd

from puaudit.data.limits import ReadLimits
from puaudit.data.load import load_input
from puaudit.errors import PUAuditError
from puaudit.progress import stderr_progress

__all__ = ["DEFAULT_MAX_ROWS", "DEFAULT_MAX_DECODED_MB", "BYTES_PER_ROW", "add_max_rows_argument",
           "add_input_arguments", "max_rows_from", "max_decoded_bytes_from", "limits_from",
           "add_split_argument", "read_frame", "load_table", "load_labelled", "streams",
           "check_split", "embeddings", "preload_scorers"]

DEFAULT_MAX_ROWS = 1_000_000
DEFAULT_MAX_DECODED_MB = 2048
BYTES_PER_ROW = 1_100  # measured audit memory per row beyond the table (bench/scaling.py)
ENV = "PUAUDIT_MAX_ROWS"
ENV_DECODED = "PUAUDIT_MAX_DECODED_MB"


def _limit(flag_value, flag: str, env: str, default: int, unit: str = "rows") -> int:
    """``flag``'s value, else ``$env``, else ``default``: a whole number, 0 for no limit."""
    if flag_value is None and os.environ.get(env, "").strip():
        flag_value, flag = os.environ[env].strip(), f"${env}"
    if flag_value is None:
        return default
    try:
        n = int(str(flag_value).replace("_", "").replace(",", ""))
    except ValueError:
        raise PUAuditError(f"{flag} must be a whole number of {unit} (0 = no limit); got "
                           f"{flag_value!r}.") from None
    if n < 0:
        raise PUAuditError(f"{flag} must be 0 (no limit) or a positive number of {unit}; "
                           f"got {n}.")
    return n


def add_max_rows_argument(p: argparse.ArgumentParser) -> None:
    """Add the input limits ``--max-rows N`` and ``--max-decoded-mb N``."""
    p.add_argument("--max-rows", default=None, metavar="N",
                   help=f"read at most N data rows (default {DEFAULT_MAX_ROWS:,} or ${ENV}, "
                        f"which keeps a run under about 3 GB; 0 = no limit: the audit needs "
                        f"about {BYTES_PER_ROW / 1000:.1f} KB per row)")
    p.add_argument("--max-decoded-mb", default=None, metavar="N",
                   help=f"refuse an input that decompresses or decodes to more than N MB "
                        f"(default {DEFAULT_MAX_DECODED_MB:,} or ${ENV_DECODED}; 0 = no limit): "
                        "gzip, Parquet pages and JSON values, checked before they are kept")


def add_input_arguments(p: argparse.ArgumentParser, *,
                        help: str = "CSV / TSV / Parquet / JSONL comparison table") -> None:
    """The ``INPUT`` table of a command and its row limit (:func:`add_max_rows_argument`)."""
    p.add_argument("input", metavar="INPUT", help=help)
    add_max_rows_argument(p)
    add_split_argument(p)


def max_rows_from(args) -> int | None:
    """The row limit of a run: ``--max-rows``, else ``$PUAUDIT_MAX_ROWS``, else the default;
    ``None`` for no limit."""
    n = _limit(getattr(args, "max_rows", None), "--max-rows", ENV, DEFAULT_MAX_ROWS)
    return None if n == 0 else n


def max_decoded_bytes_from(args) -> int | None:
    """The decoded-size limit of a run in bytes: ``--max-decoded-mb``, else
    ``$PUAUDIT_MAX_DECODED_MB``, else the default; ``None`` for no limit."""
    n = _limit(getattr(args, "max_decoded_mb", None), "--max-decoded-mb", ENV_DECODED,
               DEFAULT_MAX_DECODED_MB, "MB")
    return None if n == 0 else n * 2**20


def limits_from(args) -> ReadLimits:
    """The run's limits (``max_rows``, ``max_bytes``) and the messages that say how to raise
    them, for :func:`puaudit.data.load.load_input` (``.kwargs()`` for
    :func:`puaudit.data.parquet.read_comparisons_parquet`)."""
    out = {"max_rows": max_rows_from(args), "max_bytes": max_decoded_bytes_from(args),
           "size_hint": (f"On a machine with the memory (a run takes a few times the decoded "
                         f"size), pass --max-decoded-mb N (0 = no limit) or set ${ENV_DECODED}; "
                         f"the default is {DEFAULT_MAX_DECODED_MB:,} MB.")}
    limit = out["max_rows"]
    if limit is not None:
        gb = limit * BYTES_PER_ROW / 1e9
        out["limit_hint"] = (
            f"Rows: the audit needs about {BYTES_PER_ROW / 1000:.1f} KB of memory per row "
            f"({gb:.1f} GB at {limit:,} rows, before the table itself). On a machine with the "
            f"memory, pass --max-rows N (0 = no limit) or set ${ENV}; or split the file (e.g. "
            f"one question type at a time).")
    return ReadLimits(**out)


def add_split_argument(p: argparse.ArgumentParser) -> None:
    """``--split NAME``: the split of a dataset folder to read (see docs/data_formats.md)."""
    p.add_argument("--split", default=None, metavar="NAME",
                   help="the split to read when INPUT is a dataset folder (Hugging Face "
                        "save_to_disk, Parquet shards) or a zip of one; default: its only "
                        "split, else train, else test")


def read_frame(args, path=None) -> pd.DataFrame:
    """:func:`~puaudit.data.load.load_input` of ``INPUT`` (or ``path``, read alone: no
    ``--human`` / ``--answers``) with the run's limits and ``--split``; what a dataset folder's
    read chose (which split, how many files) goes to stderr."""
    joins = {} if path is not None else {"human": getattr(args, "human", None),
                                         "answers": getattr(args, "answers", None)}
    df = load_input(args.input if path is None else path, split=getattr(args, "split", None),
                    limits=limits_from(args), **joins)
    if df.attrs.get("read_note"):
        print(df.attrs["read_note"], file=sys.stderr)
    return df


def streams(args) -> bool:
    """Parquet in and Parquet out of a comparison table of our own (not a tool's file, nor one
    joined with ``--human`` / ``--answers``): read only the audit's columns, stream the export."""
    from puaudit.data.parquet import is_parquet_path

    if not (is_parquet_path(args.input) and Path(args.input).is_file()
            and getattr(args, "export_format", "table") == "table"
            and is_parquet_path(getattr(args, "output", None) or "")):
        return False
    if getattr(args, "human", None) or getattr(args, "answers", None):
        return False
    import pyarrow.parquet as pq

    from puaudit.data.formats import detect

    try:
        names = pq.read_schema(args.input).names
    except Exception:  # unreadable: the reader that follows says why, with its own message
        return False
    return detect(pd.DataFrame(columns=names)) is None


def check_split(args) -> None:
    """``--split`` names a split of a dataset folder (or a zip of one), not of a table file."""
    import zipfile

    path = Path(args.input)
    if args.split is not None and path.is_file() and not zipfile.is_zipfile(path):
        raise PUAuditError(f"--split picks a split of a dataset folder; {path.name} is a table "
                           "file. Leave out --split, or give the dataset's folder as INPUT.")


def load_table(args):
    """The :class:`~puaudit.data.schema.ComparisonTable` of ``INPUT`` and the ``--*-col`` /
    ``--judge-rule`` options."""
    from puaudit.data.schema import apply_judge_rule, load_comparisons

    check_split(args)
    cols = {k[4:]: v for k, v in vars(args).items() if k.startswith("col_") and v}
    if streams(args):
        from puaudit.data.parquet import read_comparisons_parquet

        table = read_comparisons_parquet(args.input, columns=cols, **limits_from(args).kwargs(),
                                         progress=stderr_progress("read", min_total=500_000))
    else:
        table = load_comparisons(read_frame(args), columns=cols, name=Path(args.input).name)
    if getattr(args, "judge_rule", None):
        table = apply_judge_rule(table, args.judge_rule)
    return table


def load_labelled(args):
    """:func:`load_table`, refusing a table with too few human verdicts (none, in a judge file
    such as AlpacaEval annotations) now, in a second, not after the embedding pass."""
    from puaudit.audit.splits import check_labels

    table = load_table(args)
    check_labels(table)
    return table


def embeddings(args, table):
    """The table's embeddings: ``--embeddings NPZ``, else the encoder's (cached), on Ray with
    ``--ray``; how long it takes and took goes to stderr."""
    from puaudit.embed.pairs import PairEmbeddings, embed_table

    if args.embeddings:
        from puaudit.data.embeddings_npz import read_embeddings_npz

        # member headers are checked (shape, dtype, size) before anything is loaded
        arrays = read_embeddings_npz(args.embeddings, n_rows=len(table))
        return PairEmbeddings(**arrays, encoder=f"file:{Path(args.embeddings).name}")
    from puaudit.embed.encoders import get_encoder

    kwargs = {"device": args.device, "mode": getattr(args, "encoder_mode", None)}
    if args.no_cache:
        kwargs["cache_dir"] = None
    elif args.cache_dir:
        kwargs["cache_dir"] = args.cache_dir
    encoder = get_encoder(args.encoder, **kwargs)
    from puaudit.embed.ready_time import estimate_ready

    print(estimate_ready(table, encoder).text() + " (--no-texts: the first numbers alone)",
          file=sys.stderr, flush=True)
    t0 = time.perf_counter()
    if getattr(args, "ray", None):
        from puaudit.scale.ray_embed import embed_table_ray

        emb = embed_table_ray(table, encoder, show_progress=True)
    else:
        emb = embed_table(table, encoder, show_progress=True)
    print(f"embedded {len(table)} rows with {emb.encoder} in {time.perf_counter() - t0:.1f}s",
          file=sys.stderr)
    return emb


def preload_scorers() -> None:
    """Import the scorers' libraries (POT, scikit-learn: about a second) in a background thread
    while the texts are embedded, which waits in native code most of the time."""
    import threading

    def load():
        try:
            import ot  # noqa: F401
            import sklearn.isotonic  # noqa: F401
            import sklearn.linear_model  # noqa: F401
            import sklearn.neighbors  # noqa: F401
        except Exception:  # noqa: BLE001 - the audit imports them again and reports any error
            pass

    threading.Thread(target=load, name="puaudit-preload", daemon=True).start()
