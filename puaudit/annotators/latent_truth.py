r"""Latent-truth models of pairwise votes: what each item's truth probably is, given who voted.

Models (docs/annotator_models.md compares them, and says why GLAD is not offered):

``"ds"``
    Dawid–Skene (crowd-kit ``DawidSkene``): annotator :math:`w` has a confusion matrix
    :math:`\pi^w_{tv} = P(\text{vote } v \mid \text{truth } t)`; EM maximises
    :math:`\prod_i \sum_t p_t \prod_{(i, w, v)} \pi^w_{tv}`.
``"mace"``
    MACE (crowd-kit ``MACE``, variational Bayes): :math:`P(v \mid t) = \theta_w [v = t] +
    (1 - \theta_w)\,\xi_{w v}` with competence :math:`\theta_w`; truths are uniform.
``"crowdlab"``
    CROWDLAB (cleanlab ``get_label_quality_multiannotator``): a weighted average of the audit's
    calibrated ``p_judge_right`` (out of fold on P) and the annotators' votes.
``"mv"``
    Majority vote (a shared top count gives ``tie``), the baseline.

The truth lives in the item's *reference orientation* (its first row in file order): a vote on a
row showing the pair the other way round is translated (A ↔ B) before fitting.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from scipy.special import softmax

from puaudit.annotators.consensus import winner_keys
from puaudit.annotators.crowdkit_em import EPS, dawid_skene_em, mace_em
from puaudit.annotators.votes import LABELS, VoteData, collect_votes
from puaudit.data.schema import ComparisonTable
from puaudit.errors import PUAuditError

__all__ = ["MODELS", "CONSENSUS_MODELS", "MODEL_NAMES", "TruthFit", "fit_truth_model",
           "item_pred_probs", "model_consensus_labels"]

#: Models that estimate each annotator's reliability.
MODELS = ("ds", "mace", "crowdlab")
#: Models that give an item consensus (majority vote included, as the baseline).
CONSENSUS_MODELS = ("mv", *MODELS)
MODEL_NAMES = {"mv": "majority vote", "ds": "Dawid-Skene", "mace": "MACE", "crowdlab": "CROWDLAB"}


@dataclass
class TruthFit:
    r"""A fitted latent-truth model.

    Attributes
    ----------
    model : str
    posterior : ndarray (n_items, 3)
        P(truth = A / B / tie) of each item, in its reference orientation.
    consensus : ndarray of int (n_items,)
        Most probable truth; 2 (tie) when A and B are equally probable and lead.
    in_model : ndarray of bool (n_votes,)
        Votes of the annotators in the model (the people, and the judge when included).
    fit_items : ndarray of bool (n_items,)
        Items the model was fitted on, those with at least two votes in the model (why:
        docs/annotator_models.md). The others' posterior comes from the fitted parameters
        afterwards; the annotator statistics use the fitted items only.
    likelihood : ndarray (n_workers, 3 truth, 3 vote) or None
        :math:`P(v \mid t)` of each annotator in the reference orientation, up to a factor per
        vote (``ds``, ``mace``); 0 for a label the annotator never used on the fitted items.
    log_prior : ndarray (3,) or None
    worker_info : dict
        Model-specific arrays per annotator: ``competence`` (MACE, the probability of knowing
        the truth), ``weight`` and ``quality`` (CROWDLAB's annotator weight and quality).
    info : dict
        ``n_iter`` (Dawid-Skene), ``model_weight`` (CROWDLAB) ...
    """

    model: str
    posterior: np.ndarray
    consensus: np.ndarray
    in_model: np.ndarray
    fit_items: np.ndarray
    likelihood: np.ndarray | None = None
    log_prior: np.ndarray | None = None
    worker_info: dict = field(default_factory=dict)
    info: dict = field(default_factory=dict)
    # CROWDLAB's weighted-average pieces, for the leave-own-vote-out posterior
    crowdlab_parts: dict | None = None

    @property
    def truth(self) -> np.ndarray:
        """The truth the annotator statistics are counted against: the posterior, except for
        CROWDLAB, whose weighted average is no calibrated posterior: there, its consensus
        label (docs/annotator_models.md)."""
        if self.model == "crowdlab":
            return np.eye(3)[self.consensus]
        return self.posterior

    def loo_posterior(self, votes: VoteData) -> tuple[np.ndarray, np.ndarray]:
        """Per vote: the posterior of its item without that vote (reference orientation), and
        whether another vote of the model remains on the item."""
        item, worker, label = votes.item, votes.worker, votes.label
        m = self.in_model
        n_other = np.bincount(item[m], minlength=votes.n_items)[item] - m.astype(int)
        if self.model == "mv":
            counts = np.zeros((votes.n_items, 3))
            np.add.at(counts, (item[m], label[m]), 1.0)
            c = counts[item] - np.eye(3)[label] * m[:, None]
            tot = c.sum(1, keepdims=True)
            return np.divide(c, tot, out=np.full_like(c, 1 / 3), where=tot > 0), n_other > 0
        if self.model == "crowdlab":
            cl = self.crowdlab_parts
            total = cl["total_weight"][item]
            wk = np.where(m, cl["annotator_weight"][worker], 0.0)
            own = np.where(np.eye(3)[label] > 0, cl["agree"], cl["disagree"]) * wk[:, None]
            p = np.clip(self.posterior[item] * total[:, None] - own, 0, None)
            tot = p.sum(1, keepdims=True)
            return np.divide(p, tot, out=np.full_like(p, 1 / 3), where=tot > 0), n_other > 0
        contrib = _vote_log_lik(self.likelihood, worker, label)
        ll = np.zeros((votes.n_items, 3))
        np.add.at(ll, item[m], contrib[m])
        ll += self.log_prior
        lo = ll[item] - np.where(m[:, None], contrib, 0.0)
        return softmax(lo, axis=1), n_other > 0


def _vote_log_lik(lik: np.ndarray, worker: np.ndarray, label: np.ndarray) -> np.ndarray:
    """log P(vote | truth) per vote; 0 (no information) where the annotator's likelihood of that
    label is unknown (a label never used on the fitted items, or an annotator not fitted)."""
    rows = lik[worker, :, label]
    used = rows.sum(1, keepdims=True) > 0
    with np.errstate(divide="ignore"):
        return np.where(used, np.log(np.maximum(rows, 1e-300)), 0.0)


def consensus_of(post: np.ndarray) -> np.ndarray:
    """Most probable label; tie (2) when two labels share the top probability (as majority
    vote's shared top count)."""
    top = post.argmax(1)
    shared = (post >= post.max(1, keepdims=True) - 1e-9).sum(1) > 1
    return np.where(shared, 2, top)


def _canonical_frame(votes: VoteData, mask: np.ndarray):
    """Votes sorted by (annotator, item, label), annotators and labels coded 0.. in order of
    first appearance, so that crowd-kit's factorised orders equal its sorted orders (its MACE
    pairs strategy counts grouped, hence sorted, by name with factorised codes: on other orders
    it mixes annotators up)."""
    item, worker, label = votes.item[mask], votes.worker[mask], votes.label[mask]
    order = np.lexsort((label, item, worker))
    wcodes, wnames = pd.factorize(worker[order])
    lcodes, lnames = pd.factorize(label[order])
    inv = np.empty(len(order), int)
    inv[order] = np.arange(len(order))
    return order, inv, wcodes, np.asarray(wnames), lcodes, np.asarray(lnames)


def fit_truth_model(votes: VoteData, *, model: str = "ds", include_judge: bool = False,
                    pred_probs: np.ndarray | None = None, weights: np.ndarray | None = None,
                    engine: str = "crowdkit", random_state: int = 0) -> TruthFit:
    """Fit one latent-truth model on the votes.

    ``ds`` and ``mace`` are fitted on the items with at least two votes in the model (see
    :attr:`TruthFit.fit_items`); the other items then get the posterior the fitted parameters
    give them. ``crowdlab`` uses every item (a lone vote is weighed against the model's
    probabilities). ``mv`` counts the votes.

    Parameters
    ----------
    votes : VoteData
    model : {"mv", "ds", "mace", "crowdlab"}
    include_judge : bool
        The judge votes in the model as one more annotator (default: people only).
    pred_probs : ndarray (n_items, 3), required for ``crowdlab``
        A model's probabilities of A / B / tie per item (reference orientation); see
        :func:`item_pred_probs`.
    weights : ndarray of int (n_items,), optional
        Multiplicity of each item (bootstrap); items with weight 0 are left out.
    engine : {"crowdkit", "numpy"}
        ``ds`` and ``mace``: crowd-kit itself, or the vectorised port of its EM (the same fit,
        about 50 times faster; used for bootstrap refits, and whenever ``weights`` is given).
    random_state : int
        MACE's seeded start.
    """
    if model not in CONSENSUS_MODELS:
        raise PUAuditError(f"Unknown annotator model '{model}': choose one of "
                           f"{list(CONSENSUS_MODELS)}.")
    if engine not in ("crowdkit", "numpy"):
        raise PUAuditError(f"Unknown engine '{engine}': choose 'crowdkit' or 'numpy'.")
    mask = votes.model_mask(include_judge)
    wts = None if weights is None else np.asarray(weights, dtype=float)
    if wts is not None:
        mask = mask & (wts[votes.item] > 0)
    if not mask.any():
        raise PUAuditError("No votes to fit the annotator model on.")
    n_items = votes.n_items
    fit_items = np.bincount(votes.item[mask], minlength=n_items) >= 2
    if model == "mv":
        counts = np.zeros((n_items, 3))
        np.add.at(counts, (votes.item[mask], votes.label[mask]), 1.0)
        tot = counts.sum(1, keepdims=True)
        post = np.divide(counts, tot, out=np.full_like(counts, 1 / 3), where=tot > 0)
        return TruthFit(model, post, consensus_of(post), mask, fit_items)
    if model == "crowdlab":
        return _fit_crowdlab(votes, mask, fit_items, pred_probs, wts)
    fit_mask = mask & fit_items[votes.item]
    if not fit_mask.any():
        raise PUAuditError(f"{MODEL_NAMES[model]} needs items with two or more votes; every "
                           "item here has one.")
    if engine == "numpy" or wts is not None:
        post, lik, log_prior, extra = _fit_port(votes, fit_mask, model, wts, random_state)
    else:
        post, lik, log_prior, extra = _fit_crowdkit(votes, fit_mask, model, random_state)
    # items outside the fit: the posterior of the fitted parameters
    rest = mask & ~fit_items[votes.item]
    ll = np.zeros((n_items, 3)) + log_prior
    np.add.at(ll, votes.item[rest], _vote_log_lik(lik, votes.worker[rest], votes.label[rest]))
    post = np.where(fit_items[:, None], post, softmax(ll, axis=1))
    return TruthFit(model, post, consensus_of(post), mask, fit_items, likelihood=lik,
                    log_prior=log_prior, worker_info=extra.get("worker_info", {}),
                    info=extra.get("info", {}))


def _fit_port(votes, fit_mask, model, wts, random_state):
    n_items, n_workers = votes.n_items, votes.n_workers
    item, worker, label = votes.item[fit_mask], votes.worker[fit_mask], votes.label[fit_mask]
    if model == "ds":
        out = dawid_skene_em(item, worker, label, n_items=n_items, n_workers=n_workers,
                             weights=wts)
        post = out["posterior"] / out["posterior"].sum(1, keepdims=True)
        return (post, out["errors"].transpose(0, 2, 1),
                np.log(np.maximum(out["prior"], EPS)), {"info": {"n_iter": out["n_iter"]}})
    _, inv, wcodes, wnames, lcodes, lnames = _canonical_frame(votes, fit_mask)
    out = mace_em(item, wcodes[inv], lcodes[inv], n_items=n_items, n_workers=len(wnames),
                  n_labels=len(lnames), weights=wts, random_state=random_state)
    return _mace_parts(votes, out["posterior"], out["spamming"], out["thetas"], wnames, lnames)


def _mace_parts(votes, post_codes, spamming, thetas, wnames, lnames):
    """MACE's posterior, likelihood (its E-step's factor per vote), prior and competence."""
    n_items, n_workers = votes.n_items, votes.n_workers
    post = np.zeros((n_items, 3))
    post[:, lnames] = post_codes
    s0 = np.zeros(n_workers)
    s1 = np.zeros(n_workers)
    s0[wnames], s1[wnames] = spamming[:, 0], spamming[:, 1]
    th = np.zeros((n_workers, 3))
    th[np.ix_(wnames, lnames)] = thetas
    lik = s0[:, None, None] * th[:, None, :] + s1[:, None, None] * np.eye(3)[None]
    unused = np.ones((n_workers, 3), bool)              # labels outside the fit: no information
    unused[np.ix_(wnames, lnames)] = False
    lik = np.where(unused[:, None, :], 0.0, lik)
    competence = np.full(n_workers, np.nan)
    competence[wnames] = spamming[:, 1] / spamming.sum(1)  # VB leaves the rows unnormalised
    # MACE's truths are uniform over the labels in the data
    log_prior = np.where(np.isin(np.arange(3), lnames), -math.log(len(lnames)), -np.inf)
    return post, lik, log_prior, {"worker_info": {"competence": competence}}


def _fit_crowdkit(votes, fit_mask, model, random_state):
    order, _, wcodes, wnames, lcodes, lnames = _canonical_frame(votes, fit_mask)
    data = pd.DataFrame({"task": votes.item[fit_mask][order], "worker": wcodes,
                         "label": lcodes})
    n_items, n_workers = votes.n_items, votes.n_workers
    with warnings.catch_warnings():  # crowd-kit 1.4 uses pandas' deprecated inplace= arguments
        for category in (FutureWarning, DeprecationWarning,
                         getattr(pd.errors, "Pandas4Warning", None)):
            if category is not None:
                warnings.simplefilter("ignore", category)
        from crowdkit.aggregation import MACE, DawidSkene

        if model == "ds":
            ds = DawidSkene(n_iter=100, tol=1e-5).fit(data)
        else:
            mace = MACE(n_restarts=1, n_iter=50, method="vb", random_state=random_state).fit(data)
    if model == "ds":
        post = np.zeros((n_items, 3))
        pr = ds.probas_
        tasks = pr.index.to_numpy(dtype=int)
        for code, lab in enumerate(lnames):
            post[tasks, lab] = pr[code].to_numpy()
        post[tasks] /= post[tasks].sum(1, keepdims=True)
        lik = np.zeros((n_workers, 3, 3))
        err = ds.errors_
        w_idx = wnames[err.index.get_level_values(0).to_numpy(dtype=int)]
        v_idx = lnames[err.index.get_level_values(1).to_numpy(dtype=int)]
        for code, lab in enumerate(lnames):
            lik[w_idx, lab, v_idx] = err[code].to_numpy()
        prior = np.zeros(3)
        prior[lnames] = ds.priors_.reindex(range(len(lnames))).to_numpy()
        return post, lik, np.log(np.maximum(prior, EPS)), {
            "info": {"n_iter": len(ds.loss_history_)}}
    pr = mace.probas_
    post_codes = np.zeros((n_items, len(lnames)))
    post_codes[pr.index.to_numpy(dtype=int)] = pr[list(range(len(lnames)))].to_numpy()
    return _mace_parts(votes, post_codes, mace.spamming_, mace.thetas_, wnames, lnames)


def _fit_crowdlab(votes, mask, fit_items, pred_probs, wts) -> TruthFit:
    from cleanlab.multiannotator import get_label_quality_multiannotator

    if pred_probs is None:
        raise PUAuditError("CROWDLAB needs a model's probabilities for every item: pass the "
                           "audit's p_judge_right (an audit export's 'puaudit_p_judge_right' "
                           "column, or the audit run of the dashboard).")
    pred_probs = np.asarray(pred_probs, dtype=float)
    n_items, n_workers = votes.n_items, votes.n_workers
    if pred_probs.shape != (n_items, 3):
        raise PUAuditError(f"pred_probs must have shape ({n_items}, 3), got {pred_probs.shape}.")
    if not fit_items.any():
        raise PUAuditError("CROWDLAB needs items with two or more votes; every item here has "
                           "one.")
    copies = np.ones(n_items, int) if wts is None else wts.astype(int)
    rows = np.repeat(np.arange(n_items), copies)              # bootstrap copies as examples
    first = np.full(n_items, -1)
    first[rows[::-1]] = np.arange(len(rows))[::-1]
    wide = np.full((n_items, n_workers), np.nan)
    wide[votes.item[mask], votes.worker[mask]] = votes.label[mask]
    wide = wide[rows]
    cols = np.flatnonzero(~np.isnan(wide).all(0))
    wide = wide[:, cols]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = get_label_quality_multiannotator(
            pd.DataFrame(wide, columns=[str(c) for c in cols]), pred_probs[rows],
            return_detailed_quality=False, return_annotator_stats=wts is None,
            return_weights=True, verbose=False)
    lq = out["label_quality"]
    num = lq["num_annotations"].to_numpy()
    agree = float(np.mean(lq["annotator_agreement"].to_numpy()[num != 1]))
    disagree = (1 - agree) / 2
    mw = float(out["model_weight"])
    ann_w = np.zeros(n_workers)
    ann_w[cols] = np.asarray(out["annotator_weight"], dtype=float)
    # cleanlab's posterior, rebuilt from its weights: (model weight x pred_probs + each vote's
    # weight x (agree on its label, disagree elsewhere)) / total weight
    total = np.full(n_items, mw)
    np.add.at(total, votes.item[mask], ann_w[votes.worker[mask]])
    post = pred_probs * mw
    lik_votes = np.where(np.eye(3)[votes.label[mask]] > 0, agree, disagree)
    np.add.at(post, votes.item[mask], ann_w[votes.worker[mask], None] * lik_votes)
    post /= total[:, None]
    consensus = np.full(n_items, 2)
    present = first >= 0
    consensus[present] = lq["consensus_label"].to_numpy()[first[present]]
    in_cols = np.isin(np.arange(n_workers), cols)
    worker_info = {"weight": np.where(in_cols, ann_w, np.nan)}
    if wts is None and "annotator_stats" in out:
        quality = np.full(n_workers, np.nan)
        quality[cols] = out["annotator_stats"]["annotator_quality"].reindex(
            [str(c) for c in cols]).to_numpy()
        worker_info["quality"] = quality
    return TruthFit("crowdlab", post, consensus, mask, fit_items, worker_info=worker_info,
                    info={"model_weight": mw, "consensus_likelihood": agree},
                    crowdlab_parts={"total_weight": total, "annotator_weight": ann_w,
                                    "agree": agree, "disagree": disagree})


def item_pred_probs(table: ComparisonTable, votes: VoteData, p_judge_right) -> np.ndarray:
    r"""Per item, a model's probabilities of A / B / tie from the audit's ``p_judge_right``.

    ``p_judge_right`` is the calibrated probability that the judge's strict verdict on a row
    matches a person's strict vote (out of fold on P rows; fitted without the row on the
    others). With :math:`\tau` the people's share of ties, a row whose judge picked :math:`X`
    gives :math:`P(X) = (1-\tau)\,p`, :math:`P(\bar X) = (1-\tau)(1-p)`, :math:`P(tie) = \tau`,
    in the item's reference orientation; an item averages its rows. Items with no finite
    ``p_judge_right`` (judge tie, excluded rows) get the uniform (1/3, 1/3, 1/3), which moves no
    consensus.
    """
    p = np.asarray(p_judge_right, dtype=float)
    if len(p) != len(table):
        raise PUAuditError(f"p_judge_right needs one value per row ({len(table)}), got {len(p)}.")
    people = votes.model_mask(False)
    tau = float(np.mean(votes.label[people] == 2)) if people.any() else 0.0
    pos = {it: i for i, it in enumerate(votes.items)}
    item_of_row = np.array([pos.get(it, -1) for it in table.item_id], dtype=int)
    key_a, key_b = winner_keys(table)
    ref_a = np.array([key_a[votes.item_row[i]] if i >= 0 else None for i in item_of_row],
                     dtype=object)
    judge = np.asarray(table.judge, dtype=object)
    ok = (item_of_row >= 0) & np.isfinite(p) & np.isin(judge, ["A", "B"])
    rows = np.flatnonzero(ok)
    x = (np.where(judge[rows] == "A", key_a[rows], key_b[rows]) != ref_a[rows]).astype(int)
    v = np.zeros((len(rows), 3))
    v[np.arange(len(rows)), x] = (1 - tau) * p[rows]
    v[np.arange(len(rows)), 1 - x] = (1 - tau) * (1 - p[rows])
    v[:, 2] = tau
    sums = np.zeros((votes.n_items, 3))
    np.add.at(sums, item_of_row[rows], v)
    cnt = np.bincount(item_of_row[rows], minlength=votes.n_items)
    out = np.full((votes.n_items, 3), 1 / 3)
    has = cnt > 0
    out[has] = sums[has] / cnt[has, None]
    out = np.clip(out, 1e-6, None)
    return out / out.sum(1, keepdims=True)


def model_consensus_labels(table: ComparisonTable, *, model: str = "ds", p_judge_right=None,
                           random_state: int = 0) -> np.ndarray:
    """Each row's human label from a latent-truth model of the people's votes (the judge never
    votes in it): the item's most probable truth, in the row's own A/B order.

    ``model="crowdlab"`` needs ``p_judge_right`` (one per row). Rows of items without a
    person's vote (or whose pair does not match the item's first row) get None.

    Returns
    -------
    ndarray of {"A", "B", "tie", None}, one per row
    """
    if model not in CONSENSUS_MODELS:
        raise PUAuditError(f"Unknown consensus model '{model}': choose one of "
                           f"{list(CONSENSUS_MODELS)}.")
    votes = collect_votes(table, judge=False)
    pred = None
    if model == "crowdlab":
        if p_judge_right is None:
            raise PUAuditError("CROWDLAB consensus needs p_judge_right (one per row).")
        pred = item_pred_probs(table, votes, p_judge_right)
    fit = fit_truth_model(votes, model=model, include_judge=False, pred_probs=pred,
                          random_state=random_state)
    key_a, key_b = winner_keys(table)
    pos = {it: i for i, it in enumerate(votes.items)}
    out = np.full(len(table), None, dtype=object)
    for r, it in enumerate(table.item_id):
        i = pos.get(it)
        if i is None:
            continue
        c = int(fit.consensus[i])
        ref = votes.item_row[i]
        if c == 2:
            out[r] = "tie"
        elif key_a[r] == key_a[ref] and key_b[r] == key_b[ref]:
            out[r] = LABELS[c]
        elif key_a[r] == key_b[ref] and key_b[r] == key_a[ref]:
            out[r] = LABELS[1 - c]
    return out
