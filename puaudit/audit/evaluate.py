"""Repeated seeded audits: mean (sd) of consistency, a scorer × rule leaderboard, and sweeps."""

from __future__ import annotations

from typing import Iterable, Sequence

import numpy as np
import pandas as pd

from puaudit.embed.pairs import PairEmbeddings
from puaudit.audit.stages import human_labels
from puaudit.audit.splits import prepare_split
from puaudit.audit.relabel import relabel_split
from puaudit.audit.scorers.scoring import score_split
from puaudit.audit.config import SCORER_CHOICES, AuditConfig
from puaudit.errors import PUAuditError
from puaudit.data.jsonsafe import to_jsonable
from puaudit.audit.config import RULES
from puaudit.data.schema import ComparisonTable

__all__ = ["evaluate", "sweep", "delta_over_seeds", "default_spread_seeds", "spread_sentence",
           "verdict_with_spread",
           "leaderboard_from_runs", "auroc_judge_right"]

_METRICS = ("cons_orig", "cons_adj", "delta", "reversed_share", "reversal_precision")


def auroc_judge_right(prep, scored) -> float:
    """AUROC of P(judge right) for "the judge agrees with people" on validation rows.

    Validation rows are strict (judge and human both A or B), never seen by the scorer or its
    calibration; NaN when they hold only one outcome.
    """
    from sklearn.metrics import roc_auc_score

    from puaudit.audit.splits import SPLIT_VAL

    val = np.flatnonzero(prep.split == SPLIT_VAL)
    p = scored.p_judge_right[val]
    ok = np.isfinite(p)
    y = (prep.judge[val] == prep.human[val])[ok]
    if ok.sum() < 2 or y.all() or not y.any():
        return float("nan")
    return float(roc_auc_score(y, p[ok]))


def _runs(table: ComparisonTable, emb: PairEmbeddings, *, seeds: Sequence[int],
          scorers: Sequence[str], rules: Sequence[str], config: AuditConfig,
          human: np.ndarray | None = None, extra: dict | None = None, progress=None,
          stages=None) -> list[dict]:
    rows = []
    total = len(seeds) * len(scorers)
    done = 0
    for seed in seeds:
        if stages is None:
            prep = prepare_split(table, emb, config.replace(random_state=int(seed)), human=human)
        else:
            prep = stages.split(config.replace(random_state=int(seed)))
        for scorer in scorers:
            cfg = config.replace(scorer=scorer, random_state=int(seed))
            scored = score_split(prep, cfg) if stages is None else stages.scored(cfg)
            auroc = auroc_judge_right(prep, scored)
            for rule in rules:
                rel = relabel_split(prep, scored, config.replace(rule=rule), n_boot=0)
                base = {"seed": int(seed), "scorer": scorer, "rule": rule, "m": scored.m,
                        "scorer_used": scored.scorer, **(extra or {})}
                rows.append({**base, "question_type": "__all__", "auroc_judge_right": auroc,
                             **{k: rel["metrics"][k] for k in _METRICS}, "n": rel["metrics"]["n"],
                             "n_reversed": rel["metrics"]["n_reversed"]})
                for t, met in rel["per_type"].items():
                    rows.append({**base, "question_type": t, **{k: met[k] for k in _METRICS},
                                 "n": met["n"], "n_reversed": met["n_reversed"]})
            done += 1
            if progress is not None:
                progress(done, total)
    return rows


def leaderboard_from_runs(runs: pd.DataFrame) -> list[dict]:
    """Aggregate per-seed runs into leaderboard entries (one per scorer × rule).

    ``reversed_share`` and ``reversal_precision`` are pooled over seeds (total reversed / total
    validation rows; total correct reversals / total reversals), so seeds that reverse nothing do
    not count as precision 0 or 1.
    """
    out = []
    for (scorer, rule), g in runs.groupby(["scorer", "rule"], sort=False):
        def agg(frame: pd.DataFrame) -> dict:
            d = {}
            for k in ("cons_orig", "cons_adj", "delta"):
                d[f"{k}_mean"] = to_jsonable(frame[k].mean())
                d[f"{k}_sd"] = to_jsonable(frame[k].std(ddof=1)) if len(frame) > 1 else 0.0
            n_rev = frame["n_reversed"].sum()
            d["reversed_share"] = to_jsonable(n_rev / frame["n"].sum()) if frame["n"].sum() else None
            prec = (frame["reversal_precision"].fillna(0) * frame["n_reversed"]).sum()
            d["reversal_precision"] = to_jsonable(prec / n_rev) if n_rev else None
            d["n_reversed_total"] = int(n_rev)
            d["n_validation_mean"] = to_jsonable(frame["n"].mean())
            d["n_seeds"] = int(frame["seed"].nunique())
            if "auroc_judge_right" in frame and frame["auroc_judge_right"].notna().any():
                d["auroc_judge_right"] = to_jsonable(frame["auroc_judge_right"].mean())
            return d

        overall = g[g["question_type"] == "__all__"]
        entry = {"scorer": scorer, "rule": rule, "m_mean": to_jsonable(overall["m"].mean()), **agg(overall)}
        if "scorer_used" in overall:
            entry["chosen"] = {str(k): int(v) for k, v in
                               overall["scorer_used"].value_counts().items()}
        entry["per_type"] = {t: agg(gt) for t, gt in g[g["question_type"] != "__all__"].groupby(
            "question_type", sort=True)}
        out.append(entry)
    return out


def evaluate(table: ComparisonTable, embeddings: PairEmbeddings, *, seeds: int | Iterable[int] = 10,
             scorers: Sequence[str] | None = None, rules: Sequence[str] | None = None,
             config: AuditConfig | None = None, human: np.ndarray | None = None,
             progress=None, stages=None, **params) -> dict:
    """Audit over repeated seeded splits and aggregate.

    ``config`` (default :class:`AuditConfig`) with ``params`` applied gives every parameter;
    ``scorers`` and ``rules`` (default: the config's one scorer and rule) span the leaderboard.
    ``stages``: a :class:`~puaudit.audit.stages.StageCache` of ``table`` that splits and scores
    (each seed's human labels from its own configuration; the dashboard's comparison keeps its
    fits there, so a comparison stopped for a slider answer resumes where it was).

    Returns
    -------
    dict with ``runs`` (DataFrame, one row per seed × scorer × rule × type, ``__all__`` = overall)
    and ``leaderboard`` (list of dicts with ``scorer``, ``rule``, ``cons_orig_mean``,
    ``cons_orig_sd``, ``cons_adj_mean``, ``cons_adj_sd``, ``delta_mean``, ``delta_sd``,
    ``reversed_share``, ``reversal_precision``, ``chosen`` (what ``auto`` picked, per seed)
    and ``per_type``).
    """
    config = (config or AuditConfig()).replace(**params) if params else (config or AuditConfig())
    seeds = list(range(seeds)) if isinstance(seeds, int) else list(seeds)
    if not seeds:
        raise PUAuditError("evaluate needs at least one seed.")
    scorers = [config.scorer] if scorers is None else list(scorers)
    rules = [config.rule] if rules is None else list(rules)
    bad = [s for s in scorers if s not in SCORER_CHOICES]
    if bad:
        raise PUAuditError(f"Unknown scorer(s) {bad}: choose from {list(SCORER_CHOICES)} or 'all'.")
    bad = [r for r in rules if r not in RULES]
    if bad:
        raise PUAuditError(f"Unknown rule(s) {bad}: choose from {list(RULES)} or 'all'.")
    if config.p_ratio >= 1:
        raise PUAuditError("evaluate measures on validation rows: p_ratio must be below 1.")
    if human is None and stages is None:
        human = human_labels(table, config, embeddings)
    rows = _runs(table, embeddings, seeds=seeds, scorers=scorers, rules=rules, config=config,
                 human=human, progress=progress, stages=stages)
    runs = pd.DataFrame(rows)
    return {"runs": runs, "leaderboard": leaderboard_from_runs(runs)}


def sweep(table: ComparisonTable, embeddings: PairEmbeddings, *, param: str, values: Sequence[float],
          seeds: int | Iterable[int] = 5, config: AuditConfig | None = None,
          human: np.ndarray | None = None, **params) -> pd.DataFrame:
    """Cons_adj (mean, sd over seeds) over a grid of ``m`` or ``p_ratio`` (paper Tables 6–7)."""
    if param not in ("m", "p_ratio"):
        raise PUAuditError(f"--param must be 'm' or 'p_ratio', got '{param}'.")
    config = (config or AuditConfig()).replace(**params) if params else (config or AuditConfig())
    seeds = list(range(seeds)) if isinstance(seeds, int) else list(seeds)
    out = []
    for v in values:
        v = float(v)
        if not (0 < v <= 1) or (param == "p_ratio" and v >= 1):
            raise PUAuditError(f"{param} values must be in (0, 1){']' if param == 'm' else ')'}; got {v}.")
        res = evaluate(table, embeddings, seeds=seeds, config=config.replace(**{param: v}),
                       human=human)
        e = res["leaderboard"][0]
        out.append({"param": param, "value": v, "cons_orig_mean": e["cons_orig_mean"],
                    "cons_adj_mean": e["cons_adj_mean"], "cons_adj_sd": e["cons_adj_sd"],
                    "delta_mean": e["delta_mean"], "delta_sd": e["delta_sd"],
                    "reversed_share": e["reversed_share"]})
    return pd.DataFrame(out)


#: below this many rows the CLI and the dashboard measure the change over several splits
SPREAD_ROW_LIMIT = 100_000


def default_spread_seeds(n_rows: int) -> int:
    """Seeded splits the headline change is reported over by default: 5 below
    :data:`SPREAD_ROW_LIMIT` rows, 1 (no spread) from there on, where one audit is long."""
    return 5 if n_rows < SPREAD_ROW_LIMIT else 1


def delta_over_seeds(table: ComparisonTable, embeddings: PairEmbeddings, config: AuditConfig, *,
                     n_seeds: int, first_delta: float | None = None,
                     human: np.ndarray | None = None, progress=None,
                     run_seed=None) -> dict | None:
    """The audit's change in consistency over ``n_seeds`` seeded splits.

    Seeds ``s, s + 1, …, s + n_seeds - 1`` with ``s = config.random_state``, so the first is
    the audit itself: pass its change as ``first_delta`` and it is not run again.
    ``run_seed(config)``: the change of one seed's audit, when the caller has a faster way to
    it (the dashboard's stage cache); default one :func:`evaluate` run.

    Returns
    -------
    dict or None
        ``{"mean", "min", "max", "n", "seeds", "deltas"}`` of the change
        Δ = Cons_adj − Cons_orig over the seeds with validation
        rows (``n`` counts them); None when ``n_seeds`` < 2.
    """
    if n_seeds < 2:
        return None
    start = 0 if config.random_state is None else int(config.random_state)
    seeds = list(range(start, start + int(n_seeds)))
    deltas: dict[int, float] = {}
    todo = seeds
    if first_delta is not None:
        deltas[start] = float(first_delta)
        todo = seeds[1:]
    for i, seed in enumerate(todo):
        try:  # one split the audit cannot run on (a tiny P) leaves that seed out, not the rest
            if run_seed is not None:
                deltas[int(seed)] = float(run_seed(config.replace(random_state=int(seed))))
                continue
            runs = evaluate(table, embeddings, seeds=[seed], config=config, human=human)["runs"]
        except PUAuditError:
            continue
        finally:
            if progress is not None:
                progress(i + 1, len(todo))
        overall = runs[runs["question_type"] == "__all__"]
        deltas[int(seed)] = float(overall["delta"].iloc[0])
    vals = np.array([deltas[s] for s in seeds if s in deltas and np.isfinite(deltas[s])])
    if len(vals) == 0:
        return {"mean": None, "min": None, "max": None, "n": 0, "seeds": seeds, "deltas": []}
    return {"mean": float(vals.mean()), "min": float(vals.min()), "max": float(vals.max()),
            "n": int(len(vals)), "seeds": seeds,
            "deltas": [to_jsonable(deltas.get(s)) for s in seeds]}


def verdict_with_spread(verdict: str | None, spread: dict | None) -> str | None:
    """The verdict line, saying "within noise" when its reversals help (or hurt) on this split
    but the change over seeded splits ranges across zero: the line must not claim more than the
    spread sentence beside it allows."""
    if not verdict or not spread or not spread.get("n"):
        return verdict
    lo, hi = 100 * spread["min"], 100 * spread["max"]
    if not (lo <= 0 <= hi and lo < hi):
        return verdict
    for word in ("help", "hurt"):
        head = f"Reversals {word} on validation"
        if verdict.startswith(head):
            body = verdict[len(head):].rstrip(".")
            tail = (f"; over {spread['n']} seeded splits the change ranges from {lo:+.1f} to "
                    f"{hi:+.1f} points)")
            body = body[:-1] + tail if body.endswith(")") else body + f" ({tail[2:]}"
            return f"Reversals {word} on validation only within noise{body}."
    return verdict


def spread_sentence(spread: dict | None) -> str | None:
    """The change over seeds in words, saying so when its range reaches zero or below
    (the gain is then within the noise of which items land in P)."""
    if not spread or not spread.get("n"):
        return None
    lo, hi, mean = (100 * spread[k] for k in ("min", "max", "mean"))
    text = (f"Change over {spread['n']} seeded splits: mean {mean:+.1f} pts "
            f"(range {lo:+.1f} to {hi:+.1f}).")
    if lo <= 0 < hi:
        text += " The range includes zero: the gain is within the noise of one split."
    elif hi <= 0 and lo < 0:
        text += " No split gains: keep the judge's verdicts."
    return text
