"""The embeddings a command audits with: a precomputed ``.npz`` or the chosen encoder's."""

from __future__ import annotations

import sys
import time
from pathlib import Path

__all__ = ["embeddings", "preload_scorers"]


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
