"""A lean runtime for BERT-architecture encoders (all-MiniLM-L6-v2 and its kind), for ``fast`` mode.

It computes exactly what transformers' ``BertModel`` computes (``last_hidden_state``), from the
same ``model.safetensors`` and the same ``tokenizer.json``, without importing transformers: on
two CPU cores that import and its model loading cost 5-7 s of a cold audit, while torch alone and
these weights load in about 3 s. Fewer moving parts also help speed a little: query, key and
value are one matrix product, and attention runs through
``torch.nn.functional.scaled_dot_product_attention`` with a key-padding mask (none at all when a
batch has no padding).

Per layer ``l`` (post-LayerNorm BERT, ``gelu`` = the exact erf GELU)::

    q, k, v = split(x W_qkv + b_qkv)                              (heads of size H / n_heads)
    x = LN(x + SDPA(q, k, v, mask) W_o + b_o)
    x = LN(x + gelu(x W_i + b_i) W_out + b_out)

with ``x_0 = LN(E_word[ids] + E_pos[0..L-1] + E_type[0])``. Only folders this describes are
accepted (:func:`unsupported_reason` says why not): ``model_type`` ``bert``, absolute positions,
``gelu``, an encoder (not a decoder), weights in ``model.safetensors`` and a ``tokenizer.json``
whose normaliser agrees with ``tokenizer_config.json`` (transformers would rebuild it otherwise).
Anything else runs through transformers as before. ``tests/test_embed_bert_runtime.py`` checks the
token ids and the hidden states against transformers.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["LeanTokenizer", "load_lean_bert", "unsupported_reason"]

_ARCHITECTURES = {"BertModel"}


def _read(path: Path) -> dict:
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def unsupported_reason(model_dir: Path, config: dict) -> str | None:
    """Why the folder cannot run on :class:`LeanBert` / :class:`LeanTokenizer`; None if it can."""
    if config.get("model_type") != "bert":
        return f"model_type {config.get('model_type')!r} is not 'bert'"
    archs = set(config.get("architectures") or ["BertModel"])
    if not archs <= _ARCHITECTURES:
        return f"architectures {sorted(archs)} are not {sorted(_ARCHITECTURES)}"
    if config.get("position_embedding_type", "absolute") != "absolute":
        return "position embeddings are not absolute"
    if config.get("hidden_act", "gelu") != "gelu":
        return f"hidden_act {config.get('hidden_act')!r} is not 'gelu'"
    if config.get("is_decoder") or config.get("add_cross_attention"):
        return "it is a decoder"
    for k in ("hidden_size", "num_attention_heads", "num_hidden_layers", "intermediate_size"):
        if not isinstance(config.get(k), int) or config[k] <= 0:
            return f"config.json has no valid {k}"
    if config["hidden_size"] % config["num_attention_heads"]:
        return "hidden_size is not a multiple of num_attention_heads"
    if not (model_dir / "model.safetensors").is_file():
        return "there is no model.safetensors"
    tok = _read(model_dir / "tokenizer.json")
    if not tok:
        return "there is no readable tokenizer.json"
    tok_cfg = _read(model_dir / "tokenizer_config.json")
    if tok_cfg.get("truncation_side", "right") != "right":
        return "the tokenizer truncates on the left"
    norm = tok.get("normalizer") or {}
    if norm.get("type") != "BertNormalizer":
        return "the tokenizer's normaliser is not BertNormalizer"
    # transformers' BertTokenizerFast rebuilds the normaliser when tokenizer_config.json disagrees
    # with it; the lean tokenizer uses tokenizer.json as it is, so they must agree.
    want = {"lowercase": tok_cfg.get("do_lower_case", True),
            "strip_accents": tok_cfg.get("strip_accents"),
            "handle_chinese_chars": tok_cfg.get("tokenize_chinese_chars", True)}
    for k, v in want.items():
        if norm.get(k) != v:
            return f"tokenizer.json's {k}={norm.get(k)!r} disagrees with tokenizer_config.json"
    return None


class LeanTokenizer:
    """``tokenizers.Tokenizer`` from ``tokenizer.json`` behind the part of transformers' tokenizer
    call that :class:`puaudit.embed.hf_encoder.HFEncoder` uses: ``tok(texts, padding=False,
    add_special_tokens=..., truncation=True, max_length=N)["input_ids"]``."""

    def __init__(self, model_dir: Path):
        from tokenizers import Tokenizer

        self._tok = Tokenizer.from_file(str(Path(model_dir) / "tokenizer.json"))
        self._tok.no_padding()
        self._tok.no_truncation()
        self._truncation: int | None = None
        cfg = _read(Path(model_dir) / "tokenizer_config.json")
        special = _read(Path(model_dir) / "special_tokens_map.json")

        def token_id(name: str) -> int | None:
            tok = cfg.get(name) or special.get(name)
            if isinstance(tok, dict):
                tok = tok.get("content")
            return self._tok.token_to_id(tok) if isinstance(tok, str) else None

        self.pad_token_id = token_id("pad_token")
        self.eos_token_id = token_id("eos_token")
        self.unk_token_id = token_id("unk_token")

    def __call__(self, texts, *, padding: bool = False, add_special_tokens: bool = True,
                 truncation: bool = False, max_length: int | None = None) -> dict[str, list[list[int]]]:
        if padding:
            raise ValueError("LeanTokenizer does not pad")
        limit = max_length if truncation and max_length is not None else None
        if limit != self._truncation:
            if limit is None:
                self._tok.no_truncation()
            else:
                # counts the special tokens the post-processor adds, as transformers does
                self._tok.enable_truncation(max_length=int(limit))
            self._truncation = limit
        enc = self._tok.encode_batch(list(texts), add_special_tokens=add_special_tokens)
        return {"input_ids": [e.ids for e in enc]}


@dataclass
class _Output:
    last_hidden_state: Any


@functools.lru_cache(maxsize=1)
def _lean_bert_class():
    """The module class, built on first use so that importing this file does not import torch."""
    import torch
    import torch.nn.functional as F
    from safetensors.torch import load_file

    def frozen(t):
        return torch.nn.Parameter(t, requires_grad=False)

    class LeanBert(torch.nn.Module):
        """A BERT encoder (see the module notes) held in ``dtype``; ``model(input_ids=...,
        attention_mask=...).last_hidden_state`` as with transformers."""

        def __init__(self, model_dir: Path, config: dict, dtype=torch.float32):
            super().__init__()
            raw = load_file(str(Path(model_dir) / "model.safetensors"))
            prefix = "bert." if any(k.startswith("bert.") for k in raw) else ""
            sd = {k[len(prefix):]: v for k, v in raw.items() if k.startswith(prefix)}

            def get(name: str):
                if name not in sd:
                    raise KeyError(f"model.safetensors has no tensor {prefix}{name}")
                return sd[name].to(dtype)

            self.config = config
            self.hidden = int(config["hidden_size"])
            self.heads = int(config["num_attention_heads"])
            self.eps = float(config.get("layer_norm_eps", 1e-12))
            e = "embeddings."
            self.word = frozen(get(e + "word_embeddings.weight"))
            self.position = frozen(get(e + "position_embeddings.weight"))
            self.token_type0 = frozen(get(e + "token_type_embeddings.weight")[0].clone())
            self.ln_w, self.ln_b = frozen(get(e + "LayerNorm.weight")), frozen(get(e + "LayerNorm.bias"))
            self.layers = torch.nn.ModuleList()
            for i in range(int(config["num_hidden_layers"])):
                p, a = f"encoder.layer.{i}.", f"encoder.layer.{i}.attention.self."
                layer = torch.nn.Module()
                layer.w_qkv = frozen(torch.cat([get(a + f"{n}.weight") for n in ("query", "key", "value")]))
                layer.b_qkv = frozen(torch.cat([get(a + f"{n}.bias") for n in ("query", "key", "value")]))
                for ours, theirs in (("w_o", "attention.output.dense.weight"),
                                     ("b_o", "attention.output.dense.bias"),
                                     ("ln1_w", "attention.output.LayerNorm.weight"),
                                     ("ln1_b", "attention.output.LayerNorm.bias"),
                                     ("w_i", "intermediate.dense.weight"), ("b_i", "intermediate.dense.bias"),
                                     ("w_out", "output.dense.weight"), ("b_out", "output.dense.bias"),
                                     ("ln2_w", "output.LayerNorm.weight"), ("ln2_b", "output.LayerNorm.bias")):
                    setattr(layer, ours, frozen(get(p + theirs)))
                self.layers.append(layer)
            self.eval()

        def forward(self, input_ids, attention_mask=None) -> _Output:
            b, n = input_ids.shape
            h, heads, eps = self.hidden, self.heads, self.eps
            x = self.word[input_ids] + self.position[:n] + self.token_type0
            x = F.layer_norm(x, (h,), self.ln_w, self.ln_b, eps)
            mask = None
            if attention_mask is not None and not bool(attention_mask.all()):
                mask = attention_mask.bool()[:, None, None, :]  # padded keys are never attended to
            for ly in self.layers:
                qkv = F.linear(x, ly.w_qkv, ly.b_qkv).view(b, n, 3, heads, h // heads)
                q, k, v = qkv.permute(2, 0, 3, 1, 4).unbind(0)
                att = F.scaled_dot_product_attention(q, k, v, attn_mask=mask).transpose(1, 2).reshape(b, n, h)
                x = F.layer_norm(F.linear(att, ly.w_o, ly.b_o) + x, (h,), ly.ln1_w, ly.ln1_b, eps)
                mid = F.gelu(F.linear(x, ly.w_i, ly.b_i))
                x = F.layer_norm(F.linear(mid, ly.w_out, ly.b_out) + x, (h,), ly.ln2_w, ly.ln2_b, eps)
            return _Output(x)

    return LeanBert


def load_lean_bert(model_dir: Path, config: dict, dtype=None):
    """The folder's BERT as a :class:`LeanBert` module in ``dtype`` (default float32), in eval mode.

    Call :func:`unsupported_reason` first; a folder it rejects may fail here or compute
    something else than transformers would.
    """
    import torch

    return _lean_bert_class()(Path(model_dir), config, dtype or torch.float32)
