"""One call from tables to every TrustJudge number: :func:`analyse`."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np
import pandas as pd

from puaudit.data.jsonsafe import to_jsonable
from puaudit.errors import PUAuditError
from puaudit.trustjudge.conflict import attach_scores, conflict_ratio
from puaudit.trustjudge.io import read_pairwise, read_scores
from puaudit.trustjudge.candidate_ranking import rank_candidates
from puaudit.trustjudge.relations import pair_relations
from puaudit.trustjudge.scores import SCORE_METHODS, score_table
from puaudit.trustjudge.transitivity import (KINDS, bad_triple_tensor, count_nontransitive,
                                             pool_counts, relation_matrix, violation_arrays)

__all__ = ["TrustJudgeReport", "analyse"]

VIOLATION_COLUMNS = ["judge", "question_id", "category", "cand_1", "cand_2", "cand_3", "rel_12",
                     "rel_23", "rel_31", "kind", "weakest_edge", "weakest_margin", "candidates",
                     "relations"]


@dataclass
class TrustJudgeReport:
    """Result of :func:`analyse`.

    Attributes
    ----------
    cr : float or None
        Conflict Ratio over all judges (None without scores or without scored pairs).
    ntr : dict {k: float or None}
        NTR_k over all judges and questions (None when no k-subset has all its relations).
    ntr_ci : dict {k: (low, high) or None}
        95% interval; a point when the count is exact.
    ntr_exact : dict {k: bool}
    per_type, per_judge : dict {name: {"cr", "ntr", "ntr_ci", "n_pairs", "n_conflicts",
        "triples"}}
        The same numbers per question type / judge; ``triples`` counts violating triples by kind.
    triples : dict {kind: int}
        Violating triples by kind over everything.
    relations : DataFrame
        Every pair with its relation, probabilities, margin and (with scores) scores and conflict.
    violations : DataFrame
        One row per violating triple (see ``VIOLATION_COLUMNS``).
    rankings : DataFrame
        Bradley–Terry ranking per judge and question.
    per_question : DataFrame
        Counts per judge and question.
    """

    method: str
    delta: float
    k: tuple[int, ...]
    score_method: str | None
    cr: float | None
    ntr: dict[int, float | None]
    ntr_ci: dict[int, tuple[float, float] | None]
    ntr_exact: dict[int, bool]
    per_type: dict[str, dict]
    per_judge: dict[str, dict]
    triples: dict[str, int]
    relations: pd.DataFrame
    violations: pd.DataFrame
    rankings: pd.DataFrame
    per_question: pd.DataFrame
    log: dict = field(default_factory=dict)

    def to_dict(self, *, violations: bool = True) -> dict:
        """JSON-ready summary (:func:`puaudit.data.jsonsafe.to_jsonable`): k keys become
        strings, intervals lists, NaN None."""
        def block(d: dict) -> dict:
            return {"cr": d["cr"], "ntr": d["ntr"],
                    "ntr_ci": {k: (v if v else None) for k, v in d["ntr_ci"].items()},
                    "n_pairs": d["n_pairs"], "n_conflicts": d["n_conflicts"],
                    "triples": d["triples"]}

        out = {
            "method": self.method, "delta": self.delta, "k": list(self.k),
            "score_method": self.score_method, "gamma": self.log.get("gamma"),
            "rescale_to": self.log.get("rescale_to"), "cr": self.cr, "ntr": self.ntr,
            "ntr_ci": {k: (v if v else None) for k, v in self.ntr_ci.items()},
            "ntr_exact": self.ntr_exact,
            "triples": self.triples,
            "per_type": {t: block(d) for t, d in self.per_type.items()},
            "per_judge": {j: block(d) for j, d in self.per_judge.items()},
        }
        if violations:
            out["violations"] = [
                {"judge": r.judge, "question_id": r.question_id, "category": r.category,
                 "candidates": [r.cand_1, r.cand_2, r.cand_3],
                 "relations": [f"{r.cand_1} {r.rel_12} {r.cand_2}", f"{r.cand_2} {r.rel_23} {r.cand_3}",
                               f"{r.cand_3} {r.rel_31} {r.cand_1}"],
                 "kind": r.kind, "weakest_edge": r.weakest_edge,
                 "weakest_margin": r.weakest_margin}
                for r in self.violations.itertuples(index=False)]
        return to_jsonable(out)


def analyse(pairwise_df: Any, scores_df: Any = None, *, method: str = "baseline",
            delta: float = 0.0, k: Sequence[int] = (3, 4, 5), random_state: int | None = 0,
            max_exact_subsets: int = 200_000, n_samples: int = 20_000,
            score_method: str | None = None, tol: float = 0.0, prior: float = 0.1,
            gamma: float = 1.0, rescale_to: tuple[float, float] | None = None,
            score_scale: tuple[float, float] | None = None) -> TrustJudgeReport:
    """Conflict Ratio, NTR_k, violating triples and rankings of a pairwise table.

    Parameters
    ----------
    pairwise_df : DataFrame, path or bytes
        Pairwise verdicts (see :func:`puaudit.trustjudge.io.read_pairwise`).
    scores_df : DataFrame, path or bytes, optional
        Single scores (see :func:`puaudit.trustjudge.io.read_scores`); without it CR is None.
    method : {"baseline", "bidirectional", "ppl", "weighted"}
        Pair relation (see :mod:`puaudit.trustjudge.relations`).
    delta : float, default 0
        Tie tolerance δ of the likelihood-aware methods.
    k : sequence of int, default (3, 4, 5)
        Subset sizes for NTR_k.
    random_state : int or None, default 0
        Seed of the Monte-Carlo estimate (used only where a question has more than
        ``max_exact_subsets`` k-subsets).
    max_exact_subsets : int, default 200 000
        Enumerate a question's k-subsets exactly up to this many; above it, sample
        ``n_samples`` of them. NTR_3 is always exact (computed from the triple tensor).
    score_method : {"baseline", "geval", "distribution"}, optional
        Default: ``baseline`` with ``method="baseline"``; otherwise ``distribution`` when the
        scores table has distributions (TrustJudge pairs both), else ``baseline``.
    tol : float, default 0
        Score tolerance of the Conflict Ratio.
    prior : float, default 0.1
        Bradley–Terry pseudo-wins per compared pair (see
        :func:`puaudit.trustjudge.candidate_ranking.rank_candidates`).
    gamma : float, default 1
        γ of the confidence weights ``exp(−γ·PPL)`` of ``method="weighted"``.
    rescale_to : (low, high), optional
        With ``score_method="distribution"``: map the fine score scale linearly onto this range
        (``tol`` is then in the rescaled units).
    score_scale : (a, b), optional
        The fine scale's ends for the rescaling; default the smallest and largest score token of
        the scores table.
    """
    ks = tuple(int(x) for x in k)
    if not ks or min(ks) < 3:
        raise PUAuditError(f"k must be a list of subset sizes of at least 3 (got {list(k)}).")
    pairs = read_pairwise(pairwise_df)
    rel, rel_log = pair_relations(pairs, method=method, delta=delta, gamma=gamma, log=True)
    if scores_df is not None:
        rel, score_method = _with_scores(rel, read_scores(scores_df), method=method,
                                         score_method=score_method, tol=tol,
                                         rescale_to=rescale_to, score_scale=score_scale)
    else:
        score_method = None
        rescale_to = None
        rel["scored"] = False
        rel["conflict"] = False
    per_question, counts, violations = _per_question(
        rel, ks, random_state=random_state, max_exact_subsets=max_exact_subsets,
        n_samples=n_samples)

    def summarise(mask_col: str | None, value: Any) -> dict:
        return _summarise(per_question, counts, ks, mask_col, value,
                          has_scores=scores_df is not None)

    overall = summarise(None, None)
    per_type = {t: summarise("category", t) for t in sorted(per_question["category"].unique())}
    per_judge = {j: summarise("judge", j) for j in sorted(per_question["judge"].unique())}
    return TrustJudgeReport(
        method=method, delta=float(delta), k=ks, score_method=score_method, cr=overall["cr"],
        ntr=overall["ntr"], ntr_ci=overall["ntr_ci"], ntr_exact=overall["ntr_exact"],
        per_type=per_type, per_judge=per_judge, triples=overall["triples"], relations=rel,
        violations=violations, rankings=rank_candidates(rel, prior=prior),
        per_question=per_question,
        log={**rel_log, "n_units": len(per_question),
             "rescale_to": list(rescale_to) if rescale_to is not None else None,
             "ppl_from_logprobs": list(pairs.attrs.get("ppl_from_logprobs", []))})


def _with_scores(rel: pd.DataFrame, scores: pd.DataFrame, *, method: str,
                 score_method: str | None, tol: float, rescale_to, score_scale
                 ) -> tuple[pd.DataFrame, str]:
    """The relations with both candidates' scores, ``scored`` and ``conflict``; the score
    method used (``distribution`` by default for the likelihood-aware relations when the
    scores have distributions)."""
    if score_method is None:
        score_method = ("distribution" if method != "baseline" and scores.attrs["has_distribution"]
                        else "baseline")
    if score_method not in SCORE_METHODS:
        raise PUAuditError(f"Unknown score method '{score_method}'. Use one of: "
                           f"{', '.join(SCORE_METHODS)}.")
    rel = attach_scores(rel, scores, score_table(scores, method=score_method,
                                                 rescale_to=rescale_to, scale=score_scale))
    _, cr_log = conflict_ratio(rel["relation"].to_numpy(), rel["score_i"].to_numpy(),
                               rel["score_j"].to_numpy(), tol=tol, log=True)
    rel["scored"] = rel["score_i"].notna() & rel["score_j"].notna()
    rel["conflict"] = cr_log["conflict"]
    return rel, score_method


def _ntr_counts(bad: np.ndarray, known: np.ndarray, kk: int, n_names: int, *, seed,
                max_exact_subsets: int, n_samples: int) -> dict:
    """Non-transitive and eligible k-subsets of one question (k = 3 from the triple tensor)."""
    if kk == 3:
        complete = known[:, :, None] & known[None, :, :] & known[:, None, :]
        return {"nontransitive": float(bad.sum() // 6), "eligible": float(complete.sum() // 6),
                "exact": True, "total": math.comb(n_names, 3)}
    return count_nontransitive(bad, known, kk, max_exact_subsets=max_exact_subsets,
                               n_samples=n_samples, random_state=np.random.default_rng(seed))


def _per_question(rel: pd.DataFrame, ks: tuple[int, ...], *, random_state: int | None,
                  max_exact_subsets: int, n_samples: int
                  ) -> tuple[pd.DataFrame, dict, pd.DataFrame]:
    """Counts per judge and question, the NTR counts per k, and the violating triples."""
    ci = rel["candidate_i"].to_numpy(dtype=object)
    cj = rel["candidate_j"].to_numpy(dtype=object)
    relation = rel["relation"].to_numpy(dtype=object)
    pair_margin = rel["margin"].to_numpy(dtype=float)
    cat = rel["category"].to_numpy(dtype=object)
    scored = rel["scored"].to_numpy(dtype=bool)
    conflict = rel["conflict"].to_numpy(dtype=bool)
    unit_rows, counts = [], {kk: [] for kk in ks}
    viol: dict[str, list] = {}
    groups = sorted(rel.groupby(["judge", "question_id"]).indices.items(), key=lambda t: t[0])
    for u, ((judge, qid), idx) in enumerate(groups):
        category = cat[idx[0]]
        names, R, known = relation_matrix(ci[idx], cj[idx], relation[idx])
        pos = {c: i for i, c in enumerate(names)}
        margin = np.full((len(names), len(names)), np.inf)
        a = np.array([pos[c] for c in ci[idx]])
        b = np.array([pos[c] for c in cj[idx]])
        margin[a, b] = margin[b, a] = pair_margin[idx]
        kinds = bad_triple_tensor(R, known, kinds=True)
        bad = kinds > 0
        row = {"judge": judge, "question_id": qid, "category": category,
               "n_candidates": len(names), "n_pairs": int(scored[idx].sum()),
               "n_conflicts": int(conflict[idx].sum())}
        for i, kind in enumerate(KINDS):
            # the tensor holds each triple in its 6 orderings
            row[kind] = int((kinds == i + 1).sum() // 6)
        for kk in ks:
            c = _ntr_counts(bad, known, kk, len(names),
                            seed=None if random_state is None else [int(random_state), u, kk],
                            max_exact_subsets=max_exact_subsets, n_samples=n_samples)
            c.update(judge=judge, category=category)
            counts[kk].append(c)
            row[f"nontransitive_{kk}"] = c["nontransitive"]
            row[f"eligible_{kk}"] = c["eligible"]
            row[f"exact_{kk}"] = c["exact"]
        unit_rows.append(row)
        if bad.any():
            arrays = violation_arrays(names, R, known, margin, kinds=kinds)
            m = len(arrays["kind"])
            for key, val in (("judge", [judge] * m), ("question_id", [qid] * m),
                             ("category", [category] * m), *arrays.items()):
                viol.setdefault(key, []).extend(val)
    return pd.DataFrame(unit_rows), counts, _violations_frame(viol)


def _violations_frame(viol: dict) -> pd.DataFrame:
    violations = pd.DataFrame({c: viol.get(c, []) for c in VIOLATION_COLUMNS[:-2]})
    violations["candidates"] = [", ".join(t) for t in zip(violations["cand_1"], violations["cand_2"],
                                                           violations["cand_3"])]
    violations["relations"] = [f"{x} {r1} {y} {r2} {z} {r3} {x}" for x, y, z, r1, r2, r3 in zip(
        violations["cand_1"], violations["cand_2"], violations["cand_3"], violations["rel_12"],
        violations["rel_23"], violations["rel_31"])]
    return violations


def _summarise(per_question: pd.DataFrame, counts: dict, ks: tuple[int, ...],
               mask_col: str | None, value: Any, *, has_scores: bool) -> dict:
    """CR, NTR_k and triple counts over the questions where ``mask_col == value`` (all: None)."""
    sel = per_question if mask_col is None else per_question[per_question[mask_col] == value]
    n_pairs = int(sel["n_pairs"].sum())
    n_conf = int(sel["n_conflicts"].sum())
    pooled = {kk: pool_counts([c for c in counts[kk]
                               if mask_col is None or c[mask_col] == value]) for kk in ks}
    return {"cr": (n_conf / n_pairs if n_pairs else None) if has_scores else None,
            "ntr": {kk: pooled[kk]["ntr"] for kk in ks},
            "ntr_ci": {kk: pooled[kk]["ci"] for kk in ks},
            "ntr_exact": {kk: pooled[kk]["exact"] for kk in ks},
            "n_pairs": n_pairs, "n_conflicts": n_conf,
            "triples": {kind: int(sel[kind].sum()) for kind in KINDS}}
