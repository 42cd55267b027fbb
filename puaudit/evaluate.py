"""Repeated seeded audits: mean (sd) of consistency, a scorer × rule leaderboard, and sweeps."""

from __future__ import annotations

import math
from typing import Iterable, Sequence

import numpy as np
import pandas as pd

from puaudit.audit import PairEmbeddings, prepare_split, relabel_split, score_split
from puaudit.errors import PUAuditError
from puaudit.relabel import RULES
from puaudit.schema import ComparisonTable
from puaudit.scorers import SCORERS

__all__ = ["evaluate", "sweep", "leaderboard_from_runs"]

_METRICS = ("cons_orig", "cons_adj", "delta", "reversed_share", "reversal_precision")


def _runs(table: ComparisonTable, emb: PairEmbeddings, *, seeds: Sequence[int],
          scorers: Sequence[str], rules: Sequence[str], p_ratio: float, m: float | None,
          alpha1: float, alpha2: float, margin: float, per_type: bool, ot_method: str,
          n_folds: int, calibration: str, human: np.ndarray | None = None,
          extra: dict | None = None, progress=None) -> list[dict]:
    rows = []
    total = len(seeds) * len(scorers)
    done = 0
    for seed in seeds:
        prep = prepare_split(table, emb, p_ratio=p_ratio, random_state=int(seed), human=human)
        for scorer in scorers:
            scored = score_split(prep, scorer=scorer, m=m, alpha1=alpha1, alpha2=alpha2,
                                 per_type=per_type, ot_method=ot_method, n_folds=n_folds,
                                 calibration=calibration, random_state=int(seed))
            for rule in rules:
                rel = relabel_split(prep, scored, rule=rule, margin=margin, per_type=per_type,
                                    n_boot=0)
                base = {"seed": int(seed), "scorer": scorer, "rule": rule, "m": scored.m,
                        **(extra or {})}
                rows.append({**base, "question_type": "__all__",
                             **{k: rel["metrics"][k] for k in _METRICS}, "n": rel["metrics"]["n"],
                             "n_reversed": rel["metrics"]["n_reversed"]})
                for t, met in rel["per_type"].items():
                    rows.append({**base, "question_type": t, **{k: met[k] for k in _METRICS},
                                 "n": met["n"], "n_reversed": met["n_reversed"]})
            done += 1
            if progress is not None:
                progress(done, total)
    return rows


def _clean(x):
    if isinstance(x, (float, np.floating)):
        return None if not math.isfinite(float(x)) else float(x)
    if isinstance(x, (np.integer,)):
        return int(x)
    return x


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
                d[f"{k}_mean"] = _clean(frame[k].mean())
                d[f"{k}_sd"] = _clean(frame[k].std(ddof=1)) if len(frame) > 1 else 0.0
            n_rev = frame["n_reversed"].sum()
            d["reversed_share"] = _clean(n_rev / frame["n"].sum()) if frame["n"].sum() else None
            prec = (frame["reversal_precision"].fillna(0) * frame["n_reversed"]).sum()
            d["reversal_precision"] = _clean(prec / n_rev) if n_rev else None
            d["n_reversed_total"] = int(n_rev)
            d["n_validation_mean"] = _clean(frame["n"].mean())
            d["n_seeds"] = int(frame["seed"].nunique())
            return d

        overall = g[g["question_type"] == "__all__"]
        entry = {"scorer": scorer, "rule": rule, "m_mean": _clean(overall["m"].mean()), **agg(overall)}
        entry["per_type"] = {t: agg(gt) for t, gt in g[g["question_type"] != "__all__"].groupby(
            "question_type", sort=True)}
        out.append(entry)
    return out


def evaluate(table: ComparisonTable, embeddings: PairEmbeddings, *, seeds: int | Iterable[int] = 10,
             scorers: Sequence[str] = ("pot",), rules: Sequence[str] = ("guarded",),
             p_ratio: float = 0.3, m: float | None = None, alpha1: float = 0.7, alpha2: float = 0.7,
             margin: float = 0.05, per_type: bool = True, ot_method: str = "auto",
             n_folds: int = 5, calibration: str = "isotonic", human: np.ndarray | None = None,
             progress=None) -> dict:
    """Audit over repeated seeded splits and aggregate.

    Returns
    -------
    dict with ``runs`` (DataFrame, one row per seed × scorer × rule × type, ``__all__`` = overall)
    and ``leaderboard`` (list of dicts with ``scorer``, ``rule``, ``cons_orig_mean``,
    ``cons_orig_sd``, ``cons_adj_mean``, ``cons_adj_sd``, ``delta_mean``, ``delta_sd``,
    ``reversed_share``, ``reversal_precision`` and ``per_type``).
    """
    seeds = list(range(seeds)) if isinstance(seeds, int) else list(seeds)
    if not seeds:
        raise PUAuditError("evaluate needs at least one seed.")
    bad = [s for s in scorers if s not in SCORERS]
    if bad:
        raise PUAuditError(f"Unknown scorer(s) {bad}: choose from {list(SCORERS)} or 'all'.")
    bad = [r for r in rules if r not in RULES]
    if bad:
        raise PUAuditError(f"Unknown rule(s) {bad}: choose from {list(RULES)} or 'all'.")
    if p_ratio >= 1:
        raise PUAuditError("evaluate measures on validation rows: p_ratio must be below 1.")
    rows = _runs(table, embeddings, seeds=seeds, scorers=scorers, rules=rules, p_ratio=p_ratio,
                 m=m, alpha1=alpha1, alpha2=alpha2, margin=margin, per_type=per_type,
                 ot_method=ot_method, n_folds=n_folds, calibration=calibration, human=human,
                 progress=progress)
    runs = pd.DataFrame(rows)
    return {"runs": runs, "leaderboard": leaderboard_from_runs(runs)}


def sweep(table: ComparisonTable, embeddings: PairEmbeddings, *, param: str, values: Sequence[float],
          seeds: int | Iterable[int] = 5, scorer: str = "pot", rule: str = "paper",
          p_ratio: float = 0.3, m: float | None = None, **kwargs) -> pd.DataFrame:
    """Cons_adj (mean, sd over seeds) over a grid of ``m`` or ``p_ratio`` (paper Tables 6–7)."""
    if param not in ("m", "p_ratio"):
        raise PUAuditError(f"--param must be 'm' or 'p_ratio', got '{param}'.")
    seeds = list(range(seeds)) if isinstance(seeds, int) else list(seeds)
    out = []
    for v in values:
        v = float(v)
        if not (0 < v <= 1) or (param == "p_ratio" and v >= 1):
            raise PUAuditError(f"{param} values must be in (0, 1){']' if param == 'm' else ')'}; got {v}.")
        kw = {"p_ratio": p_ratio, "m": m, **kwargs}
        kw[param] = v
        res = evaluate(table, embeddings, seeds=seeds, scorers=(scorer,), rules=(rule,), **kw)
        e = res["leaderboard"][0]
        out.append({"param": param, "value": v, "cons_orig_mean": e["cons_orig_mean"],
                    "cons_adj_mean": e["cons_adj_mean"], "cons_adj_sd": e["cons_adj_sd"],
                    "delta_mean": e["delta_mean"], "delta_sd": e["delta_sd"],
                    "reversed_share": e["reversed_share"]})
    return pd.DataFrame(out)
