r"""Each annotator's skill, biases, tie habit and confusion matrix under a fitted latent-truth
model, and the kappas.

Per-annotator statistics
------------------------
For annotator :math:`w` with votes :math:`r` on items :math:`i(r)`, the soft confusion counts in
the shown orientation are :math:`C^w_{tv} = \sum_r b_{i(r)}\, q_{i(r)}(t)\, [v_r = v]` with
:math:`q_i` the model's posterior of item :math:`i`'s truth (in that row's orientation) and
:math:`b_i` the item's bootstrap multiplicity (1 for the point estimate). This is the M-step of
Dawid–Skene in the shown orientation; on data whose rows all share one orientation it equals
crowd-kit's ``errors_`` of the fitted model. With :math:`a_{t v} = C_{tv} / (C_{tA} + C_{tB})`
(the share of strict votes for :math:`v` given the truth :math:`t`):

* ``skill`` :math:`= \tfrac12 (a_{AA} + a_{BB})`: how often a strict vote names the true winner,
  balanced over the two winners (chance 0.5, whatever the annotator's habits);
* ``position_bias`` :math:`= \tfrac12 (a_{AA} + a_{BA})`: share of strict votes for the
  first-shown response, balanced over the truth (0.5 = none, 1 = always A);
* ``p_a_given_b`` :math:`= a_{BA}` and ``p_b_given_a`` :math:`= a_{AB}`;
* ``tie_given_strict`` :math:`= (C_{A,tie} + C_{B,tie}) / (C_{A\cdot} + C_{B\cdot})` and
  ``tie_given_tie`` :math:`= C_{tie,tie} / C_{tie\cdot}`: the tie habit;
* ``length_bias`` :math:`= \tfrac12 (a_{LL} + a_{SL})` with the truth written as "the longer
  (L) / the shorter (S) response won" and votes on rows of equal lengths left out: share of
  strict votes for the longer response, balanced over which one is truly better (0.5 = none);
* ``confusion``: :math:`\pi_{tv} = C_{tv} / \sum_{v'} C_{tv'}` (rows A, B, tie truths).

CROWDLAB's statistics count against its consensus label (:math:`q_i` one-hot); only the items
with two or more votes in the model count (:attr:`TruthFit.fit_items`). Intervals (the wider of
the bootstrap with the model refitted and the Jeffreys interval of the soft counts), Cohen's
kappa against the consensus *of the others* and Fleiss' kappa: docs/annotator_models.md.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from puaudit.annotators.latent_truth import (MODEL_NAMES, MODELS, TruthFit, consensus_of,
                                             fit_truth_model, item_pred_probs)
from puaudit.annotators.votes import LABELS, SWAP, VoteData, collect_votes
from puaudit.data.jsonsafe import to_jsonable
from puaudit.data.schema import ComparisonTable
from puaudit.errors import PUAuditError
from puaudit.stats.bootstrap import cluster_bootstrap_weights

__all__ = ["STAT_COLUMNS", "ModelReport", "annotator_model_report", "annotator_stats",
           "fleiss_kappa_items", "flag_reasons"]

STAT_COLUMNS = ("skill", "position_bias", "length_bias", "p_a_given_b", "p_b_given_a",
                "tie_given_strict", "tie_given_tie")


def _div(a, b):
    a = np.asarray(a, dtype=float)
    b = np.asarray(b, dtype=float)
    return np.divide(a, b, out=np.full(np.broadcast(a, b).shape, np.nan), where=b > 0)


def annotator_stats(votes: VoteData, posterior: np.ndarray, *,
                    weights: np.ndarray | None = None) -> dict:
    """Skill, biases, tie habit and confusion matrix of every annotator (see the module notes).

    Parameters
    ----------
    votes : VoteData
    posterior : ndarray (n_items, 3)
        P(truth = A / B / tie) per item in its reference orientation.
    weights : ndarray (n_items,), optional
        Item multiplicities (bootstrap).

    Returns
    -------
    dict of arrays, one value per annotator: the :data:`STAT_COLUMNS`, ``confusion``
    (n_workers, 3 truth, 3 vote; rows sum to 1) and ``counts`` (the soft counts :math:`C`).
    """
    W = votes.n_workers
    w = np.ones(len(votes.item)) if weights is None else np.asarray(weights, float)[votes.item]
    q = posterior[votes.item]
    q_shown = np.where(votes.flip[:, None], q[:, SWAP], q)
    ct = np.zeros((W, 3, 3))                                 # (worker, vote, truth)
    np.add.at(ct, (votes.worker, votes.shown), w[:, None] * q_shown)
    C = ct.transpose(0, 2, 1)                                # (worker, truth, vote)
    strict = C[:, :2, :2]
    a = _div(strict, strict.sum(2, keepdims=True))           # share of strict votes given truth
    # length orientation: truth and vote as "the longer (0) / the shorter (1) won"
    has_len = votes.longer >= 0
    b_long = votes.longer[has_len] == 1
    q_len = np.where(b_long[:, None], q_shown[has_len][:, SWAP], q_shown[has_len])
    v_len = np.where(b_long & (votes.shown[has_len] < 2), 1 - votes.shown[has_len],
                     votes.shown[has_len])
    lt = np.zeros((W, 3, 3))
    np.add.at(lt, (votes.worker[has_len], v_len), w[has_len, None] * q_len)
    L = lt.transpose(0, 2, 1)[:, :2, :2]
    aL = _div(L, L.sum(2, keepdims=True))
    return {
        "skill": (a[:, 0, 0] + a[:, 1, 1]) / 2,
        "position_bias": (a[:, 0, 0] + a[:, 1, 0]) / 2,
        "length_bias": (aL[:, 0, 0] + aL[:, 1, 0]) / 2,
        "p_a_given_b": a[:, 1, 0],
        "p_b_given_a": a[:, 0, 1],
        "tie_given_strict": _div(C[:, 0, 2] + C[:, 1, 2], C[:, :2, :].sum((1, 2))),
        "tie_given_tie": _div(C[:, 2, 2], C[:, 2, :].sum(1)),
        "confusion": _div(C, C.sum(2, keepdims=True)),
        "counts": C,
        "length_counts": L,
    }


def _count_intervals(point: dict, confidence: float, rng: np.random.Generator,
                     n_draws: int = 4000) -> dict:
    r"""Jeffreys intervals of every statistic given the soft counts of the point fit.

    Each share :math:`a = x / n` gets the Beta(:math:`x + \tfrac12, n - x + \tfrac12`)
    posterior; averages of two shares (``skill``, ``position_bias``, ``length_bias``) the
    percentiles of the average of independent draws (why: docs/annotator_models.md).
    """
    from statsmodels.stats.proportion import proportion_confint

    C, L = point["counts"], point["length_counts"]
    out = {}

    def share(x, n):
        x = np.asarray(x, float)
        n = np.asarray(n, float)
        ok = n > 0
        # soft counts may pass n by a rounding error; statsmodels divides by n
        lo, hi = proportion_confint(np.minimum(x, n), np.where(ok, n, 1.0),
                                    alpha=1 - confidence, method="jeffreys")
        return np.where(ok, lo, np.nan), np.where(ok, hi, np.nan)

    def draws(x, n):
        x = np.asarray(x, float)
        n = np.asarray(n, float)
        d = rng.beta(x + 0.5, np.maximum(n - x, 0) + 0.5, size=(n_draws, len(x)))
        return np.where(n > 0, d, np.nan)

    nA, nB = C[:, 0, :2].sum(1), C[:, 1, :2].sum(1)
    dAA, dBA, dBB = draws(C[:, 0, 0], nA), draws(C[:, 1, 0], nB), draws(C[:, 1, 1], nB)
    dLL, dSL = draws(L[:, 0, 0], L[:, 0, :].sum(1)), draws(L[:, 1, 0], L[:, 1, :].sum(1))
    for name, d1, d2 in (("skill", dAA, dBB), ("position_bias", dAA, dBA),
                         ("length_bias", dLL, dSL)):
        out[name] = _percentiles((d1 + d2) / 2, confidence)
    out["p_a_given_b"] = share(C[:, 1, 0], nB)
    out["p_b_given_a"] = share(C[:, 0, 1], nA)
    out["tie_given_strict"] = share(C[:, 0, 2] + C[:, 1, 2], C[:, :2, :].sum((1, 2)))
    out["tie_given_tie"] = share(C[:, 2, 2], C[:, 2, :].sum(1))
    out["confusion"] = share(C, np.broadcast_to(C.sum(2, keepdims=True), C.shape))
    return out


def _cohen_kappas(votes: VoteData, fit: TruthFit, confidence: float) -> dict:
    """Cohen's kappa of each annotator's shown votes against the others' consensus."""
    from scipy.stats import norm
    from statsmodels.stats.inter_rater import cohens_kappa

    loo, other = fit.loo_posterior(votes)
    loo_shown = np.where(votes.flip[:, None], loo[:, SWAP], loo)
    cons = consensus_of(loo_shown)
    z = float(norm.ppf(0.5 + confidence / 2))
    W = votes.n_workers
    out = {k: np.full(W, np.nan) for k in ("cohen_kappa", "cohen_kappa_lo", "cohen_kappa_hi")}
    out["n_kappa"] = np.zeros(W, dtype=int)
    for w in range(W):
        sel = (votes.worker == w) & other
        out["n_kappa"][w] = int(sel.sum())
        if sel.sum() < 2:
            continue
        tab = np.zeros((3, 3))
        np.add.at(tab, (votes.shown[sel], cons[sel]), 1.0)
        keep = (tab.sum(0) + tab.sum(1)) > 0
        tab = tab[np.ix_(keep, keep)]
        if len(tab) < 2:
            continue
        n = tab.sum()
        pe = float((tab.sum(0) / n) @ (tab.sum(1) / n))
        if pe >= 1 - 1e-12:
            continue
        with np.errstate(divide="ignore", invalid="ignore"):
            res = cohens_kappa(tab)
        k, sd = float(res.kappa), float(res.std_kappa)
        out["cohen_kappa"][w] = k
        if np.isfinite(sd):
            out["cohen_kappa_lo"][w] = max(-1.0, k - z * sd)
            out["cohen_kappa_hi"][w] = min(1.0, k + z * sd)
    return out


def fleiss_kappa_items(votes: VoteData, *, votes_per_item: int | None = None) -> dict:
    """Fleiss' kappa (statsmodels) over the items with exactly ``k`` people's votes.

    ``k`` defaults to the most common count among items with two or more votes (the larger
    count on a draw). Categories: A / B / tie in each item's reference orientation.

    Returns
    -------
    dict with ``fleiss_kappa`` (NaN when undefined), ``fleiss_items``, ``fleiss_votes_per_item``.
    """
    from statsmodels.stats.inter_rater import fleiss_kappa

    people = votes.model_mask(False)
    counts = np.zeros((votes.n_items, 3))
    np.add.at(counts, (votes.item[people], votes.label[people]), 1.0)
    n = counts.sum(1).astype(int)
    if votes_per_item is None:
        vals, freq = np.unique(n[n >= 2], return_counts=True)
        if not len(vals):
            return {"fleiss_kappa": float("nan"), "fleiss_items": 0, "fleiss_votes_per_item": None}
        votes_per_item = int(vals[np.flatnonzero(freq == freq.max())[-1]])
    tab = counts[n == votes_per_item]
    if len(tab) < 2 or (tab.sum(0) > 0).sum() < 2:
        kappa = float("nan")
    else:
        with np.errstate(divide="ignore", invalid="ignore"):
            kappa = float(fleiss_kappa(tab, method="fleiss"))
    return {"fleiss_kappa": kappa, "fleiss_items": int(len(tab)),
            "fleiss_votes_per_item": int(votes_per_item)}


def _percentiles(boot: np.ndarray, confidence: float) -> tuple[np.ndarray, np.ndarray]:
    """Equal-tailed percentiles over the first axis, NaN draws left out."""
    a = (1 - confidence) / 2
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        lo = np.nanquantile(boot, a, axis=0)
        hi = np.nanquantile(boot, 1 - a, axis=0)
    return lo, hi


@dataclass
class ModelReport:
    """Per-annotator reliability under a latent-truth model, and the model's item consensus.

    Attributes
    ----------
    annotators : DataFrame
        One row per annotator (the judge last, when present). Columns: ``annotator``,
        ``is_judge``, ``in_model``, ``n_votes``, ``n_strict``, each of :data:`STAT_COLUMNS`
        with ``_lo`` / ``_hi`` (bootstrap percentile interval), ``competence`` (+ interval, MACE),
        ``weight`` (CROWDLAB's annotator weight), ``cohen_kappa`` (+ ``_lo`` / ``_hi``,
        ``n_kappa``), ``flag_eligible``, ``flag_spammer``, ``flag_position``, ``flag_length``
        and ``model_flags`` (list of reason strings).
    confusion, confusion_lo, confusion_hi : ndarray (n_annotators, 3, 3)
        P(vote | truth) in the shown orientation, rows = truth A / B / tie, columns = vote.
    consensus : DataFrame
        One row per item with a person's vote: ``item_id``, ``row`` (its first row, whose A/B
        order the labels use), ``n_votes`` (people's), ``consensus``, ``confidence`` (posterior
        probability of the consensus), ``p_A``, ``p_B``, ``p_tie``, ``majority`` (majority vote,
        a shared top count giving ``tie``), ``differs`` (consensus != majority), ``judge`` (the
        judge's item vote).
    overall : dict
    fit : TruthFit
    votes : VoteData
    """

    annotators: pd.DataFrame
    confusion: np.ndarray
    confusion_lo: np.ndarray
    confusion_hi: np.ndarray
    consensus: pd.DataFrame
    overall: dict
    fit: TruthFit
    votes: VoteData
    params: dict = field(default_factory=dict)
    #: soft counts C (n_annotators, 3 truth, 3 vote) of the point fit, in the shown orientation
    counts: np.ndarray | None = None

    def to_frame(self) -> pd.DataFrame:
        """The annotator table with ``model_flags`` joined by ``"; "`` (for CSV export)."""
        out = self.annotators.copy()
        out["model_flags"] = ["; ".join(f) for f in out["model_flags"]]
        return out

    def to_dict(self) -> dict:
        """JSON-ready dict: ``annotators`` (records with ``confusion`` [truth][vote] and its
        interval as nested lists, NaN -> None) and ``overall``."""
        recs = []
        for j, rec in enumerate(self.annotators.to_dict(orient="records")):
            for name, arr in (("confusion", self.confusion), ("confusion_lo", self.confusion_lo),
                              ("confusion_hi", self.confusion_hi)):
                rec[name] = arr[j].astype(float)
            recs.append(rec)
        return to_jsonable({"model": self.overall["model"], "labels": list(LABELS),
                            "annotators": recs, "overall": self.overall})


#: a flagged skill interval within this of chance (0.5) reads "spammer", else "low skill"
NEAR_RANDOM = 0.1


def _fmt(v: float) -> str:
    return "n/a" if v is None or v != v else f"{v:.2f}"


def flag_reasons(r: dict, model_name: str, *, skill_bar: float, position_margin: float,
                 length_margin: float) -> list[str]:
    out = []
    ci = lambda c: f"{_fmt(r[c])} [{_fmt(r[c + '_lo'])}, {_fmt(r[c + '_hi'])}]"  # noqa: E731
    if np.isfinite(r["skill_hi"]) and r["skill_hi"] < skill_bar:
        # "spammer" means near-random: the interval comes within NEAR_RANDOM of chance; a
        # voter clearly better or clearly worse than that is "low skill"
        near_random = (np.isfinite(r["skill_lo"]) and r["skill_lo"] <= 0.5 + NEAR_RANDOM
                       and r["skill_hi"] >= 0.5 - NEAR_RANDOM)
        out.append(f"{'spammer' if near_random else 'low skill'}: skill ({model_name}) "
                   f"{ci('skill')} stays below {skill_bar:.2f} (chance is 0.50"
                   + ("" if near_random else f", more than {NEAR_RANDOM:.2f} away")
                   + f"; n={r['n_strict']} strict votes)")
    lo, hi = r["position_bias_lo"], r["position_bias_hi"]
    if np.isfinite(lo) and (lo > 0.5 + position_margin or hi < 0.5 - position_margin):
        side = "first" if lo > 0.5 else "second"
        out.append(f"position-biased: given the truth ({model_name}), {ci('position_bias')} of "
                   f"strict votes go to the {side}-shown response (interval clear of 0.50 by "
                   f"more than {position_margin:.2f})")
    lo = r["length_bias_lo"]
    if np.isfinite(lo) and lo > 0.5 + length_margin:
        out.append(f"length-biased: given the truth ({model_name}), {ci('length_bias')} of "
                   f"strict votes go to the longer response (lower bound above "
                   f"{0.5 + length_margin:.2f})")
    return out
def _check_report_args(model: str, confidence: float, n_boot: int) -> None:
    if model not in MODELS:
        raise PUAuditError(f"Unknown annotator model '{model}': choose one of {list(MODELS)}.")
    if not 0 < confidence < 1:
        raise PUAuditError(f"confidence must lie strictly between 0 and 1, got {confidence}.")
    if int(n_boot) < 0:
        raise PUAuditError(f"n_boot must be 0 or more, got {n_boot}.")


def _stat_keys(model: str) -> list[str]:
    return list(STAT_COLUMNS) + (["competence"] if model == "mace" else [])


def _bootstrap(votes: VoteData, *, model: str, include_judge: bool, pred_probs, n_boot: int,
               random_state: int) -> tuple[dict, list, int]:
    """Every statistic on ``n_boot`` replicates of the items drawn with replacement, the model
    refitted on each (by the vectorised port); a replicate the model cannot be fitted on is
    counted and skipped."""
    boot: dict = {k: [] for k in _stat_keys(model)}
    boot_conf = []
    n_failed = 0
    # the fit takes one weight per item: each item is its own group here
    for wts in cluster_bootstrap_weights(votes.n_items, n_boot, random_state=random_state):
        try:
            f = fit_truth_model(votes, model=model, include_judge=include_judge,
                                pred_probs=pred_probs, weights=wts, engine="numpy",
                                random_state=random_state)
        except (PUAuditError, ValueError, AssertionError, IndexError):
            n_failed += 1
            continue
        s = annotator_stats(votes, f.truth, weights=wts * f.fit_items)
        for k in STAT_COLUMNS:
            boot[k].append(s[k])
        if model == "mace":
            boot["competence"].append(f.worker_info["competence"])
        boot_conf.append(s["confusion"])
    return boot, boot_conf, n_failed


def _envelope(b_lo, b_hi, j):
    with np.errstate(invalid="ignore"):
        return np.fmin(b_lo, j[0]), np.fmax(b_hi, j[1])


def _interval_columns(votes: VoteData, fit: TruthFit, point: dict, boot: dict, boot_conf: list,
                      *, model: str, confidence: float, random_state: int) -> tuple:
    """Point values and intervals per annotator, and the confusion matrices' intervals: the
    wider of the bootstrap (model refitted) and the Jeffreys interval of the point fit's soft
    counts (see :func:`_count_intervals`)."""
    W = votes.n_workers
    jeff = _count_intervals(point, confidence, np.random.default_rng(random_state))
    cols: dict = {}
    for k in _stat_keys(model):
        val = point[k] if k != "competence" else fit.worker_info["competence"]
        if boot[k]:
            lo, hi = _percentiles(np.array(boot[k]), confidence)
        else:
            lo = hi = np.full(W, np.nan)
        if k in jeff:
            lo, hi = _envelope(lo, hi, jeff[k])
        cols[k], cols[f"{k}_lo"], cols[f"{k}_hi"] = val, lo, hi
    if boot_conf:
        conf_lo, conf_hi = _percentiles(np.array(boot_conf), confidence)
    else:
        conf_lo = conf_hi = np.full((W, 3, 3), np.nan)
    conf_lo, conf_hi = _envelope(conf_lo, conf_hi, jeff["confusion"])
    if model == "crowdlab":
        cols["weight"] = fit.worker_info["weight"]
    cols.update(_cohen_kappas(votes, fit, confidence))
    return cols, conf_lo, conf_hi


def _annotator_frame(votes: VoteData, fit: TruthFit, cols: dict, *, model: str,
                     min_votes_flag: int, skill_bar: float, position_margin: float,
                     length_margin: float) -> pd.DataFrame:
    """One row per annotator: counts, statistics with intervals and the flags."""
    W = votes.n_workers
    n_votes = np.bincount(votes.worker, minlength=W)
    n_strict = np.bincount(votes.worker[votes.shown < 2], minlength=W)
    in_model = np.zeros(W, dtype=bool)
    in_model[np.unique(votes.worker[fit.in_model])] = True
    is_judge = np.arange(W) == (votes.judge if votes.judge is not None else -1)
    df = pd.DataFrame({"annotator": votes.workers, "is_judge": is_judge, "in_model": in_model,
                       "n_votes": n_votes, "n_strict": n_strict, **cols})
    df["flag_eligible"] = df["n_strict"] >= min_votes_flag
    name = MODEL_NAMES[model]
    df["model_flags"] = [
        flag_reasons(r, name, skill_bar=skill_bar, position_margin=position_margin,
                     length_margin=length_margin) if r["flag_eligible"] else []
        for r in df.to_dict(orient="records")]
    for kind, prefix in (("spammer", "spammer"), ("low_skill", "low skill"),
                         ("position", "position"), ("length", "length")):
        df.insert(len(df.columns) - 1, f"flag_{kind}",
                  [any(f.startswith(prefix) for f in fl) for fl in df["model_flags"]])
    return df


def _overall(votes: VoteData, fit: TruthFit, df: pd.DataFrame, consensus: pd.DataFrame,
             params: dict, *, n_failed: int) -> dict:
    """The report's summary: what was fitted and dropped, Fleiss' kappa, agreement of the
    consensus with the judge, the flag settings."""
    people = votes.model_mask(False)
    n_people_votes = np.bincount(votes.item[people], minlength=votes.n_items)
    model = params["model"]
    overall = {
        "model": model, "model_name": MODEL_NAMES[model],
        "include_judge": bool(params["include_judge"]),
        "n_items": int(votes.n_items), "n_items_multi": int((n_people_votes >= 2).sum()),
        "n_items_fit": int(fit.fit_items.sum()),
        "n_votes": int(fit.in_model.sum()), "n_annotators": int((~df["is_judge"]).sum()),
        "n_boot": int(params["n_boot"]) - n_failed, "n_boot_failed": n_failed,
        "n_duplicates_dropped": votes.n_duplicates, "n_unmatched_dropped": votes.n_unmatched,
        **fleiss_kappa_items(votes),
        "n_consensus_differs_majority": int(consensus["differs"].sum()),
        **_judge_agreement(consensus),
        "n_model_flagged": int(sum(bool(f) for f in df["model_flags"])),
        **{k: params[k] for k in ("skill_bar", "position_margin", "length_margin",
                                  "min_votes_flag", "confidence")},
    }
    if model == "crowdlab":
        overall["model_weight"] = fit.info["model_weight"]
    return overall


def annotator_model_report(table: ComparisonTable, *, model: str = "ds",
                           include_judge: bool = False, judge_name: str = "LLM judge",
                           p_judge_right=None, pred_probs: np.ndarray | None = None,
                           n_boot: int = 200, confidence: float = 0.95,
                           min_votes_flag: int = 30, skill_bar: float = 0.8,
                           position_margin: float = 0.1, length_margin: float = 0.1,
                           engine: str = "crowdkit", random_state: int = 0,
                           votes: VoteData | None = None) -> ModelReport:
    r"""Fit a latent-truth model and audit every annotator (and the judge) under it.

    Parameters
    ----------
    table : ComparisonTable
        Needs an annotator column and human votes.
    model : {"ds", "mace", "crowdlab"}
        See the module notes. ``crowdlab`` needs ``p_judge_right`` (one per row, e.g. the
        audit's) or ``pred_probs`` (one row of A / B / tie probabilities per item).
    include_judge : bool
        The judge votes in the model as one more annotator. Either way the judge is evaluated
        against the model's truth like everyone else (when it is left out, its statistics are
        those of an outside annotator measured against the people's truth).
    n_boot : int
        Bootstrap replicates over items (the model refitted on each); 0 gives no intervals.
    min_votes_flag : int
        Strict votes an annotator needs to be flagged.
    skill_bar : float
        Flag when the whole interval of ``skill`` lies below this bar: *spammer* when the
        interval comes within :data:`NEAR_RANDOM` of chance (0.5), *low skill* otherwise.
    position_margin, length_margin : float
        Flag *position-biased* when the interval of ``position_bias`` lies entirely beyond
        0.5 ± the margin; *length-biased* when the lower bound of ``length_bias`` exceeds
        0.5 + the margin.
    engine : {"crowdkit", "numpy"}
        Point fit of ``ds`` / ``mace`` by crowd-kit (default) or by its vectorised port (the same
        numbers, faster); bootstrap refits always use the port.
    random_state : int
        Seeds the bootstrap (and MACE's start).

    Returns
    -------
    ModelReport
    """
    _check_report_args(model, confidence, n_boot)
    if votes is None:
        votes = collect_votes(table, judge=True, judge_name=judge_name)
    if model == "crowdlab" and pred_probs is None:
        if p_judge_right is None:
            raise PUAuditError("CROWDLAB needs the audit's probabilities: pass an audit export "
                               "(with a 'puaudit_p_judge_right' column) or p_judge_right.")
        pred_probs = item_pred_probs(table, votes, p_judge_right)
    fit = fit_truth_model(votes, model=model, include_judge=include_judge, pred_probs=pred_probs,
                          engine=engine, random_state=random_state)
    point = annotator_stats(votes, fit.truth, weights=fit.fit_items.astype(float))
    boot, boot_conf, n_failed = _bootstrap(votes, model=model, include_judge=include_judge,
                                           pred_probs=pred_probs, n_boot=n_boot,
                                           random_state=random_state)
    cols, conf_lo, conf_hi = _interval_columns(votes, fit, point, boot, boot_conf, model=model,
                                               confidence=confidence, random_state=random_state)
    df = _annotator_frame(votes, fit, cols, model=model, min_votes_flag=min_votes_flag,
                          skill_bar=skill_bar, position_margin=position_margin,
                          length_margin=length_margin)
    consensus = _consensus_frame(votes, fit)
    params = {"model": model, "include_judge": include_judge, "judge_name": judge_name,
              "n_boot": n_boot, "confidence": confidence, "min_votes_flag": min_votes_flag,
              "skill_bar": skill_bar, "position_margin": position_margin,
              "length_margin": length_margin, "random_state": random_state}
    return ModelReport(annotators=df, confusion=point["confusion"], confusion_lo=conf_lo,
                       confusion_hi=conf_hi, consensus=consensus,
                       overall=_overall(votes, fit, df, consensus, params, n_failed=n_failed),
                       fit=fit, votes=votes, params=params, counts=point["counts"])


def _letters(codes: np.ndarray) -> np.ndarray:
    return np.array([LABELS[c] if c >= 0 else None for c in codes], dtype=object)


def _consensus_frame(votes: VoteData, fit: TruthFit) -> pd.DataFrame:
    people = votes.model_mask(False)
    mv = fit_truth_model(votes, model="mv", include_judge=False)
    judge = np.full(votes.n_items, -1)
    if votes.judge is not None:
        jv = votes.worker == votes.judge
        judge[votes.item[jv]] = votes.label[jv]
    post = fit.posterior
    cons = fit.consensus
    return pd.DataFrame({
        "item_id": pd.Series(votes.items, dtype=object), "row": votes.item_row,
        "n_votes": np.bincount(votes.item[people], minlength=votes.n_items),
        "consensus": _letters(cons), "confidence": post[np.arange(len(cons)), cons],
        "p_A": post[:, 0], "p_B": post[:, 1], "p_tie": post[:, 2],
        "majority": _letters(mv.consensus), "differs": cons != mv.consensus,
        "judge": _letters(judge)})


def _judge_agreement(consensus: pd.DataFrame) -> dict:
    """Agreement of the model's and of the majority's consensus with the judge's item vote, over
    items where both are strict (and over the items where all three are strict)."""
    j = consensus["judge"]
    out = {}
    strict = lambda s: s.isin(["A", "B"])  # noqa: E731
    both_all = strict(j) & strict(consensus["consensus"]) & strict(consensus["majority"])
    for col, name in (("consensus", "consensus"), ("majority", "majority")):
        sel = strict(j) & strict(consensus[col])
        out[f"{name}_agree_judge"] = (float((consensus.loc[sel, col] == j[sel]).mean())
                                      if sel.any() else float("nan"))
        out[f"{name}_n_judge"] = int(sel.sum())
        out[f"{name}_agree_judge_common"] = (
            float((consensus.loc[both_all, col] == j[both_all]).mean()) if both_all.any()
            else float("nan"))
    out["n_judge_common"] = int(both_all.sum())
    return out
