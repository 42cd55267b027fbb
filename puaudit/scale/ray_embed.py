"""Embedding distinct texts with Ray Data: an actor pool, one encoder per actor (docs/ray.md).

The distinct texts of :func:`puaudit.embed.pairs.embed_table`, minus those already in the
embedding cache, become a Ray dataset of blocks of ``batch_size`` texts, each handed by
``map_batches`` to one :class:`EmbedActor` (one encoder loaded for the actor's life; one GPU
each on a GPU cluster). Every finished batch is written to the cache as one shard *before* it is
returned, so a dead worker loses only unfinished blocks (Ray retries them) and a failed run
resumes when run again; the driver also keeps the returned vectors (workers that do not share
the cache folder). The result is laid out as the local path's: the same :class:`PairEmbeddings`.
"""

from __future__ import annotations

import hashlib
import os
import pickle
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from puaudit.embed.cache import EmbeddingCache
from puaudit.embed.encoder_cache import DEFAULT, slug
from puaudit.embed.hf_encoder import HFEncoder
from puaudit.embed.text import distinct_pairs, embedding_key, from_prompt_length, prompt_length
from puaudit.progress import stderr_progress
from puaudit.errors import PUAuditError
from puaudit.scale.ray_backend import cluster_cpus, cluster_gpus, connect

__all__ = ["embed_table_ray", "embed_texts_ray", "store_folder", "EmbedActor", "worker_encoder",
           "BATCH_SIZE"]

#: texts per Ray block and per ``map_batches`` call; also the cache shard written per batch
BATCH_SIZE = 512


def store_folder(encoder, cache_dir: Any = DEFAULT) -> Path | None:
    """The embedding-cache folder of ``encoder`` under ``cache_dir`` (None: no cache).

    ``DEFAULT`` uses the encoder's own setting (``HFEncoder(cache_dir=...)``, the CLI's
    ``--cache-dir`` / ``--no-cache``), else ``$PUAUDIT_CACHE_DIR`` or ``~/.cache/puaudit``. An
    :class:`HFEncoder` gets the very folder its local ``encode`` uses, so local and Ray runs
    share their vectors; any other encoder gets a folder named by its class, name and dimension.
    """
    if isinstance(cache_dir, type(DEFAULT)):
        cache_dir = getattr(encoder, "cache_dir", DEFAULT) if isinstance(encoder, HFEncoder) \
            else DEFAULT
    if cache_dir is None:
        return None
    if isinstance(cache_dir, type(DEFAULT)):
        from puaudit.embed.encoder_cache import default_cache_dir

        root = default_cache_dir()
    else:
        root = Path(os.fspath(cache_dir)).expanduser()
    name = str(getattr(encoder, "name", type(encoder).__name__))
    if isinstance(encoder, HFEncoder):
        ident = encoder.cache_key
    else:
        cls = f"{type(encoder).__module__}.{type(encoder).__qualname__}"
        ident = hashlib.sha256(f"{cls}|{name}|{int(encoder.dim)}".encode()).hexdigest()
    return root / "embeddings" / f"{slug(name)}-{ident[:16]}"


def worker_encoder(encoder, *, gpu: bool, threads: int | None):
    """A fresh, picklable copy of ``encoder`` for one actor.

    An :class:`HFEncoder` is rebuilt from its parameters, unloaded, without its own cache (the
    actor writes the store itself, one shard per batch) and with the precision mode resolved
    here on the driver, so every worker computes the vectors the driver's cache key names.
    Any other encoder is sent as it is and must pickle.
    """
    if isinstance(encoder, HFEncoder):
        encoder._resolve()
        device = encoder.device
        if device == "auto":
            device = "cuda" if gpu else "cpu"
        return HFEncoder(encoder.model_path, pooling=encoder.pooling,
                         max_length=encoder.max_length, batch_size=encoder.batch_size,
                         device=device, cache_dir=None,
                         trust_remote_code=encoder.trust_remote_code,
                         num_threads=encoder.num_threads if gpu or threads is None else threads,
                         normalize=encoder.normalize, mode=encoder.mode_)
    try:
        from ray import cloudpickle as pickler  # what Ray ships objects with
    except ImportError:
        pickler = pickle
    try:
        pickler.dumps(encoder)
    except Exception as exc:
        raise PUAuditError(
            f"The encoder {type(encoder).__name__} cannot be sent to Ray workers ({exc}): use a "
            "model name or folder (an HFEncoder), or an encoder object that pickles.") from None
    return encoder


def _write_batch(folder: str, dim: int, keys: list[bytes], vecs: np.ndarray) -> None:
    """One cache shard for one finished batch (a short-lived cache object: nothing is kept)."""
    cache = EmbeddingCache(folder, dim=dim, flush_every=len(keys) + 1)
    cache.put(keys, vecs)
    cache.flush()


class EmbedActor:
    """A Ray Data actor: one encoder, loaded once; each call embeds one batch of texts.

    Parameters
    ----------
    encoder : TextEncoder
        From :func:`worker_encoder`.
    folder : str or None
        The cache folder each finished batch is written to before it is returned.
    dim : int
    """

    def __init__(self, encoder, folder: str | None, dim: int):
        self.encoder = encoder
        self.folder = folder
        self.dim = int(dim)
        if hasattr(encoder, "load"):
            encoder.load()

    def __call__(self, batch: dict) -> dict:
        # a pair's text travels with its prompt's length, so the worker shares the window as
        # the local encoder does (puaudit.embed.text, "The window of a pair")
        texts = [from_prompt_length(str(t), int(n))
                 for t, n in zip(batch["text"], batch["prompt_len"])]
        vecs = np.asarray(self.encoder.encode(texts), dtype=np.float32)
        if vecs.shape != (len(texts), self.dim):
            raise PUAuditError(f"The encoder returned an array of shape {vecs.shape} for "
                               f"{len(texts)} texts; expected ({len(texts)}, {self.dim}).")
        if self.folder is not None:
            _write_batch(self.folder, self.dim, [embedding_key(t) for t in texts], vecs)
        return {"slot": np.asarray(batch["slot"], dtype=np.int64), "vec": vecs}


def _pool(encoder, num_workers: int | None, cpus_per_worker: float) -> tuple[int, float, float]:
    """(actors, CPUs per actor, GPUs per actor): one GPU each on a GPU cluster (for an
    :class:`HFEncoder` not pinned to the CPU), else ``cpus_per_worker`` CPUs each."""
    gpus = cluster_gpus()
    use_gpu = gpus >= 1 and isinstance(encoder, HFEncoder) and encoder.device in ("auto", "cuda")
    if use_gpu:
        n = int(gpus) if num_workers is None else int(num_workers)
        return max(1, n), 1.0, 1.0
    n = int(cluster_cpus() // cpus_per_worker) if num_workers is None else int(num_workers)
    return max(1, n), float(cpus_per_worker), 0.0


def embed_texts_ray(texts: Sequence[str], encoder, *, cache_dir: Any = DEFAULT,
                    num_workers: int | None = None, cpus_per_worker: float = 1.0,
                    batch_size: int = BATCH_SIZE, max_restarts: int = -1,
                    progress: Callable[[int, int], Any] | None = None) -> np.ndarray:
    """Embed distinct ``texts`` on the connected Ray cluster; (len(texts), dim) float32.

    Parameters
    ----------
    texts : sequence of str
        Distinct texts (duplicates are embedded twice; :func:`embed_table_ray` deduplicates).
    encoder : TextEncoder
    cache_dir : str, None or DEFAULT
        The embedding store (see :func:`store_folder`); on a multi-machine cluster name a
        folder every worker and the driver share, or workers write to their own disks.
    num_workers : int, optional
        Actors in the pool. Default: one per GPU on a GPU cluster, else CPUs / ``cpus_per_worker``.
    cpus_per_worker : float
        CPUs (torch threads) per CPU actor.
    batch_size : int
        Texts per block, per actor call and per cache shard.
    max_restarts : int
        How often Ray restarts a dead actor (``-1``: always, the Ray Data default; its
        unfinished blocks are retried). ``0`` fails the run when a worker dies.
    progress : callable(done, total), optional
        Counts of texts (cache hits count as done).

    Raises
    ------
    PUAuditError
        Ray missing, the encoder cannot be shipped, or a worker failed (the message says how
        many finished embeddings are kept in the store).
    """
    ray = connect()
    texts = list(texts)
    dim = int(encoder.dim)
    total = len(texts)
    out = np.zeros((total, dim), dtype=np.float32)
    if not total:
        return out
    folder = store_folder(encoder, cache_dir)
    keys = [embedding_key(t) for t in texts]
    cache = _open_store(folder, name=str(encoder.name), dim=dim)
    found = _read_store(cache, keys, out)
    missing = np.flatnonzero(~found)
    done = total - len(missing)
    if progress is not None:
        progress(done, total)
    if not len(missing):
        return out
    ds = _embed_dataset(ray, encoder, texts, missing, dim=dim, folder=folder,
                        num_workers=num_workers, cpus_per_worker=cpus_per_worker,
                        batch_size=batch_size, max_restarts=max_restarts)
    try:
        got = _collect(ds, out, found, done=done, progress=progress)
    except ray.exceptions.RayError as exc:
        raise PUAuditError(f"A Ray worker failed while embedding ({_root_cause(exc)})"
                           f"{_kept_note(cache, keys, missing, folder)}.") from None
    if not got.all():
        raise PUAuditError(f"Ray returned embeddings for {int(got.sum())} of {total} texts; "
                           "run it again (finished texts are reused).")
    if cache is not None:  # workers that do not share the store: the driver keeps their vectors
        _, seen = cache.get([keys[i] for i in missing])
        if not seen.all():
            lost = missing[~seen]
            cache.put([keys[i] for i in lost], out[lost])
            cache.flush()
    return out


def _open_store(folder: Path | None, *, name: str, dim: int) -> EmbeddingCache | None:
    """The embedding store in ``folder`` (None without one), with a clear message when it
    cannot be used."""
    if folder is None:
        return None
    try:
        return EmbeddingCache(folder, dim=dim, meta={"name": name, "dim": dim})
    except OSError as exc:
        raise PUAuditError(f"Cannot use the embedding store {str(folder)!r}: {exc}. Name a "
                           "writable folder (--cache-dir) or disable it (--no-cache).") from None


def _read_store(cache: EmbeddingCache | None, keys: list, out: np.ndarray) -> np.ndarray:
    """Copy the stored vectors into ``out``; which texts were found."""
    if cache is None:
        return np.zeros(len(keys), dtype=bool)
    vecs, found = cache.get(keys)
    out[found] = vecs[found]
    return found


def _embed_dataset(ray, encoder, texts: list, missing: np.ndarray, *, dim: int,
                   folder: Path | None, num_workers: int | None, cpus_per_worker: float,
                   batch_size: int, max_restarts: int):
    """A Ray dataset of the ``missing`` texts in blocks of ``batch_size``, mapped by a pool of
    :class:`EmbedActor` s to batches of ``slot`` (position in ``texts``) and ``vec``."""
    import pyarrow as pa

    n_workers, cpus, gpus = _pool(encoder, num_workers, cpus_per_worker)
    spec = worker_encoder(encoder, gpu=gpus > 0, threads=max(1, int(cpus)))
    bs = max(1, int(batch_size))
    blocks = [pa.table({"slot": missing[s:s + bs],
                        "text": [str(texts[i]) for i in missing[s:s + bs]],
                        "prompt_len": [prompt_length(texts[i]) for i in missing[s:s + bs]]})
              for s in range(0, len(missing), bs)]
    extra = {} if int(max_restarts) == -1 else {"max_restarts": int(max_restarts)}
    with warnings.catch_warnings():  # Ray >= 2.60 flags max_restarts (no named parameter yet)
        warnings.simplefilter("ignore", DeprecationWarning)
        return ray.data.from_arrow(blocks).map_batches(
            EmbedActor, fn_constructor_kwargs={"encoder": spec, "dim": dim,
                                               "folder": None if folder is None else str(folder)},
            batch_size=bs, batch_format="numpy",
            compute=ray.data.ActorPoolStrategy(size=n_workers), num_cpus=cpus,
            num_gpus=gpus or None, **extra)


def _collect(ds, out: np.ndarray, found: np.ndarray, *, done: int,
             progress: Callable[[int, int], Any] | None) -> np.ndarray:
    """Write the dataset's vectors into ``out``, reporting progress; which rows are filled."""
    total = len(out)
    got = np.zeros(total, dtype=bool)
    got[found] = True
    for batch in ds.iter_batches(batch_format="numpy", batch_size=None):
        slot = np.asarray(batch["slot"], dtype=np.int64)
        out[slot] = batch["vec"]
        got[slot] = True
        done += len(slot)
        if progress is not None:
            progress(done, total)
    return got


def _kept_note(cache: EmbeddingCache | None, keys: list, missing: np.ndarray,
               folder: Path | None) -> str:
    """What a failed run leaves in the store, for its error message ("" without a store)."""
    if cache is None:
        return ""
    _, now = cache.get([keys[i] for i in missing])
    if not now.any():
        return "; no text was finished"
    return (f"; {int(now.sum())} of the {len(missing)} texts it had to embed are finished and "
            f"kept in {folder}: run it again to resume")


def _root_cause(exc: BaseException) -> str:
    """``Type: message`` of the error under Ray's wrappers (the encoder's own, which Ray only
    keeps as text in the traceback it carries), on one line without terminal colours."""
    import re

    text = re.sub(r"\x1b\[[0-9;]*m", "", str(exc))
    for line in text.splitlines():
        m = re.match(r"(?!ray\.)([A-Za-z_][\w.]*(?:Error|Exception|Exit)): (.+)$", line.strip())
        if m:
            return f"{m.group(1).rsplit('.', 1)[-1]}: {m.group(2)[:300]}"
    first = next((x.strip() for x in text.splitlines() if x.strip()), "")
    return f"{type(exc).__name__}: {first[:300]}" if first else type(exc).__name__


def embed_table_ray(table, encoder=None, *, cache_dir: Any = DEFAULT,
                    num_workers: int | None = None, cpus_per_worker: float = 1.0,
                    batch_size: int = BATCH_SIZE, max_restarts: int = -1,
                    progress: Callable[[int, int], Any] | None = None,
                    show_progress: bool = False):
    """:func:`puaudit.embed.pairs.embed_table` on Ray: same texts, same layout, same vectors.

    ``encoder``: a :class:`TextEncoder`, a model name / local folder, or None for the default.
    The other options are :func:`embed_texts_ray`'s. ``show_progress`` prints a line per 10%
    on stderr (Ray Data draws its own bars too).
    """
    from puaudit.embed.pairs import PairEmbeddings
    from puaudit.embed.encoders import get_encoder

    if encoder is None or isinstance(encoder, str):
        encoder = get_encoder(encoder)
    n = len(table)
    texts, inverse = distinct_pairs(np.concatenate([table.prompt, table.prompt]),
                                    np.concatenate([table.response_a, table.response_b]))
    if show_progress and progress is None:
        progress = stderr_progress("embedding on Ray", unit="distinct texts")
    vectors = embed_texts_ray(texts, encoder, cache_dir=cache_dir, num_workers=num_workers,
                              cpus_per_worker=cpus_per_worker, batch_size=batch_size,
                              max_restarts=max_restarts, progress=progress)
    return PairEmbeddings(vectors=vectors, idx_a=inverse[:n], idx_b=inverse[n:],
                          encoder=str(getattr(encoder, "name", encoder)))
