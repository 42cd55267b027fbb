r"""The evidence-only audit: P(judge right) from the judge's own evidence, no text encoder.

``AuditConfig(texts=False)`` (``--no-texts``) runs every stage of the audit except the
embedding: no encoder is loaded and nothing is read from or written to the embedding cache.
The split is the full audit's (same seed, same items in P; rows whose two responses are the
same text are excluded as identical, exactly as in the full audit).
The scorer is the evidence scorer (:mod:`puaudit.audit.evidence_model`) on the label-free
verdict evidence (:mod:`puaudit.audit.evidence`: the judge's own Bradley–Terry model, lengths,
structure, position, both orders, probabilities, other judges) and the question type, without
the embedding scorers' probabilities among its features:

.. math:: P(\text{judge right} \mid x) = \sigma(\beta_0 + \beta^\top \tilde x_{\text{evidence}})

cross-fitted on P by the full audit's item folds and repetitions, calibrated like every scorer
(bagged isotonic map on every repetition's out-of-fold scores), and held to the same rules: its
cross-fitted log loss on P must beat P's base rate by a one-sided 5% test (items as clusters;
one candidate, so no multiplicity correction) or nothing is reversed; the guarded rule reverses
only where the calibrated probability and its upper bound are below 0.5; certification and the
export are unchanged.

It is the dashboard's first look while the texts are embedded (labelled :data:`PRELIMINARY`),
and the audit of a table too large to embed in the time at hand (:data:`EVIDENCE_ONLY`).
Measured next to the full audit in docs/encoders.md ("The first look").
"""

from __future__ import annotations

import time

import numpy as np
from scipy.stats import norm

from puaudit.audit.calibration import cross_fitted_probabilities, gain_over_base_rate, log_loss
from puaudit.audit.config import AuditConfig
from puaudit.audit.crossfit import (ScoredSplit, default_cv_repeats, fit_pooled, fold_sets_of,
                                    snap)
from puaudit.audit.evidence_model import EVIDENCE, EvidenceModel, _coef_summary, _one_hot
from puaudit.audit.splits import PreparedSplit
from puaudit.errors import PUAuditError

__all__ = ["PRELIMINARY", "EVIDENCE_ONLY", "score_evidence_only",
           "evidence_only_label"]

#: The dashboard's label of the evidence-only audit shown while the texts are embedded.
PRELIMINARY = "preliminary: judge evidence only; text scorers join when embedding finishes"
#: The label of an evidence-only audit asked for (``--no-texts``): no text scorer will join.
EVIDENCE_ONLY = "evidence only: judge evidence, no text scorers (texts not embedded)"
#: the one-sided level of the base-rate test (as in the automatic choice)
_ALPHA = 0.05


def evidence_only_label(params: dict) -> str | None:
    """:data:`EVIDENCE_ONLY` when ``params`` (an audit's ``AuditResult.params``) say the texts
    were not embedded, else None."""
    return EVIDENCE_ONLY if params.get("texts", True) is False else None


def score_evidence_only(prep: PreparedSplit, config: AuditConfig, *, m_used: float
                        ) -> ScoredSplit:
    """Cross-fit the evidence scorer on P without text scorers; the audited rows' scores and
    the calibrated P(judge right) (before any prior shift).

    Features: the verdict evidence of :attr:`PreparedSplit.evidence` and, with several question
    types in P, the type (one-hot). Folds: :func:`puaudit.audit.crossfit.fold_sets_of`, the
    ones every scorer of the full audit uses (``n_folds``, ``cv_repeats``, ``random_state``).
    ``diagnostics["auto"]`` holds the base-rate test the guarded rule reads
    (:func:`puaudit.audit.relabel.beats_base_rate`), in the automatic choice's form.
    """
    t0 = time.perf_counter()
    ev = prep.evidence
    if ev is None or not ev.values:
        raise PUAuditError("The evidence-only audit (texts=False, --no-texts) has nothing to "
                           "learn from: this table carries no verdict evidence that varies "
                           "(lengths, position, the judge's favourite models, probabilities, "
                           "other judges). Embed the texts (leave out --no-texts).")
    p_rows, u = prep.p_rows, prep.u_rows
    k = min(config.n_folds, len(set(prep.item_id[p_rows].tolist())))
    if k < 2:
        raise PUAuditError("The evidence-only audit needs at least two annotated items in P to "
                           "cross-fit; add human labels or raise p_ratio.")
    repeats = default_cv_repeats(len(p_rows)) if config.cv_repeats is None else config.cv_repeats
    fold_sets = fold_sets_of(prep, k, repeats, config.random_state)
    levels = sorted(set(prep.question_type[p_rows].tolist()))
    names = ev.names + ([f"type={t}" for t in levels] if len(levels) > 1 else [])

    def features(rows: np.ndarray) -> np.ndarray:
        parts = [ev.matrix(rows)]
        if len(levels) > 1:
            parts.append(_one_hot(prep.question_type[rows], levels))
        return np.hstack(parts)

    y = (prep.judge[p_rows] == prep.human[p_rows]).astype(int)
    x_p = features(p_rows)
    cv_all = np.full((repeats, len(p_rows)), np.nan)
    coefs = []
    for r in range(repeats):
        for f in range(k):
            held = fold_sets[r] == f
            if held.all() or not held.any():
                continue
            model = EvidenceModel(feature_names=names).fit(x_p[~held], y[~held])
            cv_all[r, held] = model.predict_proba(x_p[held])[:, 1]
            coefs.append(model.coef_)
    cv_all = snap(cv_all)
    full = EvidenceModel(feature_names=names).fit(x_p, y)
    n = len(prep.split)
    score = np.full(n, np.nan)
    score[u] = snap(full.predict_proba(features(u))[:, 1])
    ok = np.isfinite(cv_all[0])
    cv_rows, cv_scores, cv_folds = p_rows[ok], cv_all[0][ok], fold_sets[0][ok]
    cv_correct = y[ok].astype(bool)
    score[cv_rows] = cv_scores
    cal = fit_pooled(prep, cv_all, config.calibration, bags=config.calibration_bags,
                     random_state=config.random_state)
    p_right = np.full(n, np.nan)
    p_right[u] = cal.predict(score[u])
    p_right[cv_rows] = cal.predict(cv_scores)
    in_p = np.zeros(n, bool)
    in_p[p_rows] = True  # fitted on every P row: no denoising without embeddings
    ev_info = {"signals": ev.names, "sources": ev.sources, "messages": list(ev.messages),
               "coef": _coef_summary(full.coef_, coefs), "n_fits": len(coefs)}
    info = _base_rate_test(prep, cv_scores, cv_correct, cv_folds, cv_rows, config.calibration)
    info["evidence"] = ev_info
    seconds = time.perf_counter() - t0
    diagnostics = {"n_p": int(len(p_rows)), "n_p_prime": int(len(p_rows)), "denoised": False,
                   "n_audited": int(len(u)), "n_folds": int(k), "cv_repeats": int(repeats),
                   "calibration_bags": int(config.calibration_bags), "score_seconds": seconds,
                   "total_seconds": seconds, "texts": False, "evidence": ev_info, "auto": info}
    return ScoredSplit(score=score, p_judge_right=p_right, in_p_prime=in_p, m=m_used,
                       scorer=EVIDENCE, calibrator=cal, cv_scores=cv_scores,
                       cv_correct=cv_correct, cv_rows=cv_rows, cv_folds=cv_folds,
                       diagnostics=diagnostics, cv_repeat_scores=cv_all,
                       cv_repeat_folds=np.asarray(fold_sets))


def _base_rate_test(prep: PreparedSplit, cv_scores: np.ndarray, y: np.ndarray,
                    folds: np.ndarray, cv_rows: np.ndarray, method: str) -> dict:
    """The automatic choice's test, for its one candidate: the evidence scorer's cross-fitted
    log loss on P against P's base rate, and the one-sided z test of the gain over items."""
    yf = y.astype(float)
    groups = prep.item_id[cv_rows]
    q = cross_fitted_probabilities(cv_scores, yf, folds, groups, method)
    loss = log_loss(q, yf)
    base_loss = log_loss(np.full(len(yf), yf.mean()), yf)
    z = gain_over_base_rate(q, yf, groups)
    z_needed = float(norm.ppf(1 - _ALPHA))
    beats = bool(loss < base_loss and z > z_needed)
    reason = (f"evidence only (the texts are not embedded): cross-fitted log loss on {len(yf)} "
              f"P rows {loss:.4f}; base rate alone {base_loss:.4f}")
    if not beats:
        reason += (f"; its gain over the base rate is within noise (z = {z:.2f}, needs "
                   f"{z_needed:.2f}), so nothing is reversed")
    return {"chosen": EVIDENCE, "candidates": [EVIDENCE], "log_loss": {EVIDENCE: loss},
            "brier": {EVIDENCE: float(np.mean((q - yf) ** 2))}, "base_rate_log_loss": base_loss,
            "n_p_rows": int(len(yf)), "reason": reason, "gain_z": z, "gain_z_needed": z_needed,
            "beats_base_rate": beats}
