"""Does a cheaper encoder change the audit's decisions? Each arm against full precision, seed by
seed (docs/encoders.md, "CPUs without native bfloat16").

    python -m bench.fast_mode_quality [--seeds 10] [--arms fast int8-t128 ...] [--noise 0.009 ...]

Every distinct text is embedded in mode ``full`` (float32, the reference) and by each arm, then
the default audit (``AuditConfig(random_state=seed)``) runs on both for seeds ``0..S-1`` on
MT-Bench with its GPT-4 judge, MT-Bench with the "longer answer wins" judge (where the guarded
rule does reverse verdicts) and llmfao. Arms: ``fast`` (``HFEncoder(mode="fast")``, bfloat16);
``int8``, ``tN``, ``int8-tN`` (computed on transformers' ``BertModel``: int8 linear layers
(:func:`int8_linears`), at most N tokens (:func:`head_tail`); kept in
``<cache>/fast_mode_quality/``); ``--noise EPS``, a control: the full vectors moved by random
noise of L2 size ``EPS`` per text (0.009 is as large as bfloat16's change).

Criterion, per data set and arm, against full:

* mean gain (``delta = Cons_adj - Cons_orig`` averaged over seeds) within 0.003;
* the same rows reversed: ``sum_s |R_arm,s ∩ R_full,s| / sum_s |R_arm,s ∪ R_full,s| >= 0.97``
  (1 when neither reverses anything);
* AUROC of P(judge right) on the validation rows (:func:`puaudit.audit.evaluate.auroc_judge_right`),
  averaged over seeds, within 0.005.

The last line is ``ratio=<worst reversed-row agreement of the first arm over the data sets>``
(target >= 0.97); the line before says whether every check of that arm held.
"""

from __future__ import annotations

import hashlib
import re
import sys
import time
from pathlib import Path

import numpy as np

from bench._support import LLMFAO, MTBENCH, load_set, parser
from puaudit.embed.encoder_cache import DEFAULT, default_cache_dir
from puaudit.embed.hf_encoder import HFEncoder
from puaudit.embed.model_folder import default_model_path

GAIN_TOL, SAME_MIN, AUROC_TOL = 0.003, 0.97, 0.005
_ARM = re.compile(r"^(?:(int8)(?:-t(\d+))?|t(\d+))$")


def head_tail(ids: list[int], budget: int) -> list[int]:
    """``[CLS] t_1..t_n [SEP]`` cut to ``budget`` ids: the first ceil(k/2) and last floor(k/2)
    text tokens, ``k = budget - 2``."""
    if len(ids) <= budget:
        return ids
    body, keep = ids[1:-1], budget - 2
    n_head = (keep + 1) // 2
    return [ids[0], *body[:n_head], *body[len(body) - (keep - n_head):], ids[-1]]


def int8_linears(model) -> None:
    """Every linear layer of the encoder's blocks as dynamic int8, in place: per-output-channel
    weight scales ``max|w_j|/127``, activations quantised per batch with 7-bit range."""
    import torch

    class Int8Linear(torch.nn.Module):
        def __init__(self, lin: torch.nn.Linear):
            super().__init__()
            w = lin.weight.float()
            s = (w.abs().amax(dim=1).clamp(min=1e-8) / 127).double()
            qw = torch.quantize_per_channel(w, s, torch.zeros(len(s), dtype=torch.long), 0,
                                            torch.qint8)
            self.packed = torch.ops.quantized.linear_prepack(qw, lin.bias.float())

        def forward(self, x):
            return torch.ops.quantized.linear_dynamic(x, self.packed, True)

    for block in model.encoder.layer:
        for parent in (block.attention.self, block.attention.output, block.intermediate,
                       block.output):
            for name, child in list(parent.named_children()):
                if isinstance(child, torch.nn.Linear):
                    setattr(parent, name, Int8Linear(child))


def candidate_vectors(texts: list[str], *, int8: bool, budget: int | None) -> np.ndarray:
    """Mean-pooled, normalised all-MiniLM-L6-v2 vectors of ``texts`` under one candidate."""
    import warnings

    import torch
    import torch.nn.functional as F
    from transformers import AutoModel, AutoTokenizer

    path = str(default_model_path())
    tok = AutoTokenizer.from_pretrained(path, local_files_only=True)
    model = AutoModel.from_pretrained(path, local_files_only=True).eval()
    limit = min(512, budget or 512)
    ids = [head_tail(x, budget) if budget else x for x in tok(texts)["input_ids"]]
    ids = [x if len(x) <= 512 else x[:511] + x[-1:] for x in ids]  # the model's own limit: the head
    assert max(len(x) for x in ids) <= limit
    if int8:
        with warnings.catch_warnings():  # torch flags quantized tensors as deprecated
            warnings.simplefilter("ignore")
            int8_linears(model)

    def forward(inp, mask):
        x = model(input_ids=inp, attention_mask=mask).last_hidden_state
        m = mask.unsqueeze(-1).float()
        return F.normalize((x * m).sum(1) / m.sum(1), dim=1)

    out = np.zeros((len(texts), model.config.hidden_size), dtype=np.float32)
    order = np.argsort([-len(x) for x in ids], kind="stable")
    with torch.inference_mode():
        for s in range(0, len(order), 32):
            sel = order[s:s + 32]
            width = max(len(ids[j]) for j in sel)
            inp = torch.zeros(len(sel), width, dtype=torch.long)
            mask = torch.zeros(len(sel), width, dtype=torch.long)
            for r, j in enumerate(sel):
                inp[r, :len(ids[j])] = torch.tensor(ids[j])
                mask[r, :len(ids[j])] = 1
            out[sel] = forward(inp, mask).numpy()
    return out


def candidate_embeddings(table, arm: str, cache: Path):
    """``PairEmbeddings`` of ``table`` under candidate ``arm`` (kept in ``cache``)."""
    from puaudit.embed.text import format_text
    from puaudit.embed.pairs import PairEmbeddings

    int8, budget_a, budget_b = _ARM.match(arm).groups()
    budget = int(budget_a or budget_b or 0) or None
    first: dict[str, int] = {}
    idx = [np.array([first.setdefault(format_text(p, r), len(first)) for p, r in zip(table.prompt, side)])
           for side in (table.response_a, table.response_b)]
    texts = list(first)
    digest = hashlib.sha256("\0".join(texts).encode("utf-8", "surrogatepass")).hexdigest()[:16]
    f = cache / f"{arm}-{digest}.npy"
    if f.exists():
        vecs = np.load(f)
    else:
        vecs = candidate_vectors(texts, int8=bool(int8), budget=budget)
        cache.mkdir(parents=True, exist_ok=True)
        np.save(f, vecs)
    return PairEmbeddings(vectors=vecs, idx_a=idx[0], idx_b=idx[1], encoder=f"candidate {arm}")


def audits(table, emb, seeds: int) -> list[dict]:
    """Default audit per seed: reversed rows, gain and AUROC of P(judge right)."""
    from puaudit.audit.config import AuditConfig
    from puaudit.audit.stages import audit_table, human_labels
    from puaudit.audit.splits import prepare_split
    from puaudit.audit.evaluate import auroc_judge_right
    from puaudit.audit.relabel import GROUP_NEG

    out = []
    for seed in range(seeds):
        cfg = AuditConfig(random_state=seed)
        prep = prepare_split(table, emb, cfg, human=human_labels(table, cfg, emb))
        res = audit_table(table, emb, cfg, prep=prep)
        out.append({"reversed": set(np.flatnonzero(np.asarray(res.group) == GROUP_NEG).tolist()),
                    "gain": float(res.metrics["delta"]), "auroc": auroc_judge_right(prep, res),
                    "scorer": res.params.get("scorer_used")})
    return out


def compare(arm: list[dict], full: list[dict]) -> dict:
    both = sum(len(a["reversed"] & b["reversed"]) for a, b in zip(arm, full))
    either = sum(len(a["reversed"] | b["reversed"]) for a, b in zip(arm, full))
    same = both / either if either else 1.0
    d_gain = abs(np.mean([r["gain"] for r in arm]) - np.mean([r["gain"] for r in full]))
    d_auc = abs(np.nanmean([r["auroc"] for r in arm]) - np.nanmean([r["auroc"] for r in full]))
    return {"both": both, "either": either, "same": same, "d_gain": float(d_gain), "d_auc": float(d_auc),
            "ok": bool(d_gain <= GAIN_TOL and same >= SAME_MIN and d_auc <= AUROC_TOL)}


def main(argv: list[str] | None = None) -> None:
    ap = parser(__doc__)
    ap.add_argument("--seeds", type=int, default=10)
    ap.add_argument("--arms", nargs="+", default=["fast"],
                    help="fast, int8, int8-tN or tN (default: fast); the first one decides the ratio")
    ap.add_argument("--noise", type=float, nargs="*", default=[],
                    help="control arms: full vectors plus random noise of these L2 sizes")
    ap.add_argument("--cache-dir", default=None, help="embedding cache (default: PUAudit's default cache)")
    args = ap.parse_args(argv)
    for arm in args.arms:
        if arm != "fast" and not _ARM.match(arm):
            ap.error(f"unknown arm {arm!r}: use fast, int8, int8-tN or tN")
    for f in (MTBENCH, LLMFAO):
        if not f.exists():
            sys.exit(f"{f} not found (the data lives in ../shared/data).")
    from puaudit.data.schema import apply_judge_rule
    from puaudit.embed.pairs import PairEmbeddings, embed_table

    cache = args.cache_dir or DEFAULT
    cand_cache = (default_cache_dir() if cache is DEFAULT else Path(cache)) / "fast_mode_quality"
    tables = {"MT-Bench": load_set(MTBENCH), "llmfao": load_set(LLMFAO)}
    cases = (("MT-Bench, GPT-4 judge", "MT-Bench", tables["MT-Bench"]),
             ("MT-Bench, 'longer' judge", "MT-Bench", apply_judge_rule(tables["MT-Bench"], "longer")),
             ("llmfao", "llmfao", tables["llmfao"]))
    arms = list(args.arms) + [f"noise {eps:g}" for eps in args.noise]
    print(f"arms {', '.join(arms)} against mode full; {args.seeds} seeds of the default audit", flush=True)
    emb = {}
    rng = np.random.default_rng(0)
    for key, tab in tables.items():
        for arm in ["full", *args.arms]:
            t = time.perf_counter()
            if arm in ("full", "fast"):
                emb[key, arm] = embed_table(tab, HFEncoder(None, mode=arm, cache_dir=cache))
            else:
                emb[key, arm] = candidate_embeddings(tab, arm, cand_cache)
            a, b = emb[key, arm].vectors, emb[key, "full"].vectors
            cos = np.sum(a * b, axis=1)
            print(f"  {key}, {arm}: {len(a)} distinct texts embedded in {time.perf_counter() - t:.1f} s; "
                  f"cosine to full min {cos.min():.4f} mean {cos.mean():.4f}, L2 change mean "
                  f"{np.linalg.norm(a - b, axis=1).mean():.4f}", flush=True)
        full = emb[key, "full"]
        for eps in args.noise:
            noise = rng.normal(size=full.vectors.shape)
            v = full.vectors + eps * noise / np.linalg.norm(noise, axis=1, keepdims=True)
            v /= np.linalg.norm(v, axis=1, keepdims=True)
            emb[key, f"noise {eps:g}"] = PairEmbeddings(vectors=v.astype(np.float32), idx_a=full.idx_a,
                                                        idx_b=full.idx_b, encoder="float32 + noise")
    worst, ok_first = 1.0, True
    for label, key, tab in cases:
        runs = {arm: audits(tab, emb[key, arm], args.seeds) for arm in ["full", *arms]}
        gain_full = np.mean([r["gain"] for r in runs["full"]])
        auc_full = np.nanmean([r["auroc"] for r in runs["full"]])
        n_full = sum(len(r["reversed"]) for r in runs["full"])
        print(f"{label}: full mean gain {gain_full:+.4f}, AUROC {auc_full:.4f}, {n_full} reversed row-seeds; "
              f"auto chose {' '.join(str(r['scorer']) for r in runs['full'])}", flush=True)
        for i, arm in enumerate(arms):
            c = compare(runs[arm], runs["full"])
            if i == 0:
                worst, ok_first = min(worst, c["same"]), ok_first and c["ok"]
            print(f"  {arm:12s} gain diff {c['d_gain']:.4f} (<= {GAIN_TOL}); same reversed rows "
                  f"{c['both']}/{c['either']} = {c['same']:.3f} (>= {SAME_MIN}); AUROC diff {c['d_auc']:.4f} "
                  f"(<= {AUROC_TOL}): {'holds' if c['ok'] else 'FAILS'}; auto chose "
                  f"{' '.join(str(r['scorer']) for r in runs[arm])}", flush=True)
    print(f"criterion for {arms[0]}: {'holds' if ok_first else 'FAILS'} ({args.seeds} seeds)")
    print(f"ratio={worst:.3f}")


if __name__ == "__main__":
    main()
