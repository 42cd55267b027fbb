"""The lean BERT runtime of ``fast`` mode (puaudit.embed.bert_runtime) against transformers itself.

Token ids must be identical to transformers' tokenizer and float32 hidden states equal to
``BertModel``'s (to rounding), on a tiny random BERT and on the shipped all-MiniLM-L6-v2 with real
MT-Bench texts; folders it cannot run exactly are refused by ``unsupported_reason``.
"""

from __future__ import annotations

import json
import random
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

# torch, transformers and the bundled model are requirements: a missing one fails these tests
import torch
import transformers

from puaudit.embed.bert_runtime import LeanTokenizer, load_lean_bert, unsupported_reason
from puaudit.embed.model_folder import default_model_path
from puaudit.embed.text import format_text

ROOT = Path(__file__).resolve().parents[1]
MTBENCH = ROOT.parent / "shared" / "data" / "mtbench" / "mtbench_human_vs_gpt4.csv"
WORDS = "the a cat dog sat ran on mat why how what is judge human answer question".split()


@pytest.fixture(scope="module")
def tiny_bert(tmp_path_factory) -> Path:
    from transformers import BertConfig, BertModel, BertTokenizerFast

    path = tmp_path_factory.mktemp("tiny-bert-lean")
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", ":", "?", ".", *sorted(set(WORDS))]
    (path / "vocab.txt").write_text("\n".join(vocab) + "\n")
    BertTokenizerFast(vocab_file=str(path / "vocab.txt"), model_max_length=64).save_pretrained(path)
    torch.manual_seed(0)
    cfg = BertConfig(vocab_size=len(vocab), hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                     intermediate_size=64, max_position_embeddings=64)
    BertModel(cfg).eval().save_pretrained(path)
    return path


@pytest.fixture(scope="module")
def minilm() -> Path:
    return Path(default_model_path())


def _config(path: Path) -> dict:
    return json.loads((path / "config.json").read_text())


def _texts(n: int) -> list[str]:
    if MTBENCH.exists():
        import pandas as pd

        df = pd.read_csv(MTBENCH, dtype=str, keep_default_na=False)
        texts = sorted({format_text(p, r) for s in ("response_a", "response_b")
                        for p, r in zip(df["prompt"], df[s])})
        random.Random(0).shuffle(texts)
        texts = texts[:n]
    else:
        texts = []
    # plus edge cases: accents, CJK, control characters, empty, very long, only spaces
    return texts + ["", "   ", "Café naïve résumé ÀÉÎ", "中文字符 and 日本語", "tab\there\x00nul\u200bzw",
                    "Question: x\nAnswer: " + "word " * 2000, "UPPER lower MiXeD 123 4.5e6 !!!"]


def _hf_ids(path: Path, texts, **kw):
    tok = transformers.AutoTokenizer.from_pretrained(str(path), local_files_only=True)
    return tok(texts, padding=False, **kw)["input_ids"]


@pytest.mark.parametrize("which", ["tiny", "minilm"])
def test_token_ids_equal_transformers(which, tiny_bert, request):
    path = tiny_bert if which == "tiny" else request.getfixturevalue("minilm")
    texts = _texts(300 if which == "minilm" else 0) + [" ".join(WORDS * 9), "why is the cat on the mat?"]
    lean = LeanTokenizer(path)
    for kw in ({"add_special_tokens": True, "truncation": True, "max_length": 64},
               {"add_special_tokens": True, "truncation": True, "max_length": 512},
               {"add_special_tokens": False, "truncation": True, "max_length": 80},
               {"add_special_tokens": True}):
        assert lean(texts, **kw)["input_ids"] == _hf_ids(path, texts, **kw), kw
    ref = transformers.AutoTokenizer.from_pretrained(str(path), local_files_only=True)
    assert (lean.pad_token_id, lean.unk_token_id) == (ref.pad_token_id, ref.unk_token_id)


def _batch(ids: list[list[int]]):
    width = max(map(len, ids))
    inp = torch.zeros((len(ids), width), dtype=torch.long)
    mask = torch.zeros_like(inp)
    for r, x in enumerate(ids):
        inp[r, : len(x)] = torch.tensor(x)
        mask[r, : len(x)] = 1
    return inp, mask


@pytest.mark.parametrize("which", ["tiny", "minilm"])
def test_hidden_states_equal_transformers_in_float32(which, tiny_bert, request):
    path = tiny_bert if which == "tiny" else request.getfixturevalue("minilm")
    texts = _texts(24 if which == "minilm" else 0) + [" ".join(WORDS * 3), "the cat", "why"]
    ids = LeanTokenizer(path)(texts, truncation=True, max_length=512 if which == "minilm" else 64)["input_ids"]
    ref_model = transformers.AutoModel.from_pretrained(str(path), local_files_only=True).eval()
    lean = load_lean_bert(path, _config(path))
    for lo in range(0, len(ids), 8):  # padded batches: compare the real (unpadded) positions
        inp, mask = _batch(ids[lo : lo + 8])
        with torch.inference_mode():
            want = ref_model(input_ids=inp, attention_mask=mask).last_hidden_state
            got = lean(input_ids=inp, attention_mask=mask).last_hidden_state
        m = mask.bool()
        np.testing.assert_allclose(got[m].numpy(), want[m].numpy(), atol=2e-4, rtol=1e-4)
    # no padding at all: the attention runs without a mask
    inp, mask = _batch([ids[0]])
    with torch.inference_mode():
        np.testing.assert_allclose(lean(input_ids=inp, attention_mask=mask).last_hidden_state.numpy(),
                                   ref_model(input_ids=inp, attention_mask=mask).last_hidden_state.numpy(),
                                   atol=2e-4, rtol=1e-4)


def test_bfloat16_weights_are_bfloat16(tiny_bert):
    lean = load_lean_bert(tiny_bert, _config(tiny_bert), torch.bfloat16)
    assert {p.dtype for p in lean.parameters()} == {torch.bfloat16}
    inp, mask = _batch([[2, 9, 10, 3], [2, 9, 3]])
    with torch.inference_mode():
        assert lean(input_ids=inp, attention_mask=mask).last_hidden_state.dtype == torch.bfloat16


def test_folders_it_cannot_run_exactly_are_refused(tiny_bert, tmp_path):
    assert unsupported_reason(tiny_bert, _config(tiny_bert)) is None

    def variant(name: str, config_change=None, tok_change=None, drop=None) -> str | None:
        d = tmp_path / name
        shutil.copytree(tiny_bert, d)
        cfg = _config(d)
        if config_change:
            cfg.update(config_change)
            (d / "config.json").write_text(json.dumps(cfg))
        if tok_change:
            p = d / "tokenizer_config.json"
            tc = json.loads(p.read_text())
            tc.update(tok_change)
            p.write_text(json.dumps(tc))
        if drop:
            (d / drop).unlink()
        return unsupported_reason(d, cfg)

    assert "model_type" in variant("gpt2", {"model_type": "gpt2"})
    assert "architectures" in variant("mlm", {"architectures": ["BertForMaskedLM"]})
    assert "absolute" in variant("rel", {"position_embedding_type": "relative_key"})
    assert "gelu" in variant("act", {"hidden_act": "relu"})
    assert "decoder" in variant("dec", {"is_decoder": True})
    assert "model.safetensors" in variant("bin", drop="model.safetensors")
    assert "tokenizer.json" in variant("notok", drop="tokenizer.json")
    assert "left" in variant("left", tok_change={"truncation_side": "left"})
    # transformers would rebuild the normaliser from tokenizer_config.json; the lean one would not
    assert "lowercase" in variant("case", tok_change={"do_lower_case": False})


def test_fast_mode_does_not_import_transformers(tiny_bert):
    """The point of the runtime: a cold fast-mode encode never imports transformers."""
    code = (
        "import sys\n"
        "from puaudit.embed.hf_encoder import HFEncoder\n"
        f"enc = HFEncoder({str(tiny_bert)!r}, mode='fast', cache_dir=None, device='cpu')\n"
        "v = enc.encode(['the cat sat', 'a dog ran'])\n"
        "assert enc.runtime_ == 'lean' and v.shape == (2, 32), (enc.runtime_, v.shape)\n"
        "print('transformers' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                         check=True, timeout=300)
    assert out.stdout.strip().splitlines()[-1] == "False", out.stdout + out.stderr
