r"""Annotator reliability from a model of the latent truth, not from raw agreement.

Pairwise votes (A / B / tie) with annotator ids are fitted with a latent-truth model; each
annotator's skill, confusion matrix, tie habit, position bias and length bias are then read off
the model's posterior of the truth, with bootstrap intervals over items.

Models
------
``"ds"``
    Dawid–Skene (crowd-kit ``DawidSkene``): annotator :math:`w` has a confusion matrix
    :math:`\pi^w_{tv} = P(\text{vote } v \mid \text{truth } t)`, the items' truths are drawn from a
    prior :math:`p_t`, and EM maximises

    .. math:: \prod_i \sum_t p_t \prod_{(i, w, v)} \pi^w_{tv}.

``"mace"``
    MACE (crowd-kit ``MACE``, variational Bayes): annotator :math:`w` knows the truth with
    probability :math:`\theta_w` (its *competence*) and otherwise votes from its own habit
    :math:`\xi_w`, so :math:`P(v \mid t) = \theta_w [v = t] + (1 - \theta_w)\,\xi_{w v}`; truths
    are uniform.
``"crowdlab"``
    CROWDLAB (cleanlab ``get_label_quality_multiannotator``): the posterior of an item is a
    weighted average of a model's predicted probabilities (here the audit's calibrated
    ``p_judge_right``, out of fold on P) and the annotators' votes, weights estimated from
    agreement with the consensus.
``"mv"``
    Majority vote (the existing consensus: a shared top count gives ``tie``), the baseline.

GLAD (crowd-kit) is not offered: it gives one skill per annotator with errors spread evenly
over the other labels, so it cannot express a tie habit or a position bias, and it took
195 s on the 8,931 LLMFAO votes (Dawid–Skene: 2 s).

Orientation
-----------
Rows of one item may show the pair in either order. The model's truth lives in the item's
*reference orientation* (its first row in file order): a vote on a row that shows the pair the
other way round is translated (A ↔ B) before fitting. Statistics about *what the annotator saw*
(position bias, "says A when the truth is B") translate the truth back into the orientation of
each vote's row; length bias translates it into "longer / shorter".

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

CROWDLAB's posterior is a weighted average of votes and model, not a calibrated posterior, so
its statistics count against its consensus label (:math:`q_i` one-hot). Only the items with two
or more votes in the model count (see :attr:`TruthFit.fit_items`).

Intervals are percentiles of the bootstrap over items: items are drawn with replacement, the
model is **refitted** on each replicate (a vectorised port of crowd-kit's EM for ``ds`` and
``mace``, checked against crowd-kit in the tests; cleanlab itself for ``crowdlab``), and every
statistic is recomputed.

Cohen's kappa of an annotator is computed against the consensus *of the others*: the model's
posterior with the annotator's own vote divided out (exact for Dawid–Skene, MACE and CROWDLAB,
whose posteriors factorise over votes or average them), over the votes whose item has at least
one other vote in the model (statsmodels ``cohens_kappa``, asymptotic 95% interval). Fleiss'
kappa (statsmodels ``fleiss_kappa``) uses the items with exactly ``k`` people's votes, ``k`` the
most common count of two or more.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from puaudit.annotators.agreement import _is_missing, winner_keys
from puaudit.data.jsonsafe import to_jsonable
from puaudit.errors import PUAuditError
from puaudit.data.schema import ComparisonTable

__all__ = [
    "LABELS", "MODELS", "CONSENSUS_MODELS", "VoteData", "TruthFit", "ModelReport",
    "collect_votes", "fit_truth_model", "annotator_stats", "annotator_model_report",
    "model_consensus_labels", "item_pred_probs", "fleiss_kappa_items", "simulate_votes",
    "dawid_skene_em", "mace_em",
]

#: Labels in the order used by every array here: 0 = A, 1 = B, 2 = tie.
LABELS = ("A", "B", "tie")
#: Models that estimate each annotator's reliability.
MODELS = ("ds", "mace", "crowdlab")
#: Models that give an item consensus (majority vote included, as the baseline).
CONSENSUS_MODELS = ("mv", *MODELS)
MODEL_NAMES = {"mv": "majority vote", "ds": "Dawid-Skene", "mace": "MACE", "crowdlab": "CROWDLAB"}
_EPS = 1e-10          # crowd-kit's Dawid-Skene clipping constant
_SWAP = np.array([1, 0, 2])


# --------------------------------------------------------------------------------------------
# votes
# --------------------------------------------------------------------------------------------

@dataclass
class VoteData:
    """One row per vote: people's votes (first per item and person) and the judge's item votes.

    Attributes
    ----------
    items : ndarray of object
        Item ids (those with at least one person's vote), in order of first appearance.
    item_row : ndarray of int
        Each item's first row in the table: it fixes the item's reference orientation.
    workers : ndarray of object
        Annotator names; the judge (when present) is the last one.
    judge : int or None
        Index of the judge in ``workers``.
    item, worker : ndarray of int
        Per vote: its item and annotator.
    label : ndarray of int
        Per vote, 0/1/2 = A/B/tie in the item's reference orientation.
    shown : ndarray of int
        Per vote, 0/1/2 as the annotator saw it (the letter on the row).
    flip : ndarray of bool
        The vote's row shows the pair in the opposite order to the reference.
    longer : ndarray of int
        Per vote, 0 if response A (as shown) is longer, 1 if B is, -1 for equal lengths.
    row : ndarray of int
        The vote's row in the table.
    n_duplicates, n_unmatched : int
        Votes left out: a second vote of one person on one item; a row whose pair could not be
        matched to its item's first row.
    """

    items: np.ndarray
    item_row: np.ndarray
    workers: np.ndarray
    judge: int | None
    item: np.ndarray
    worker: np.ndarray
    label: np.ndarray
    shown: np.ndarray
    flip: np.ndarray
    longer: np.ndarray
    row: np.ndarray
    n_duplicates: int = 0
    n_unmatched: int = 0

    @property
    def n_items(self) -> int:
        return len(self.items)

    @property
    def n_workers(self) -> int:
        return len(self.workers)

    def model_mask(self, include_judge: bool) -> np.ndarray:
        """Votes that enter the model: the people's, plus the judge's when ``include_judge``."""
        if self.judge is None or include_judge:
            return np.ones(len(self.item), dtype=bool)
        return self.worker != self.judge


def collect_votes(table: ComparisonTable, *, judge: bool = True,
                  judge_name: str = "LLM judge") -> VoteData:
    """The votes of a comparison table in the form the models take.

    People's votes are the rows with an annotator id and a human verdict in {A, B, tie}; a
    second vote of one person on one item is left out (``n_duplicates``). The judge votes once
    per item with a person's vote: the majority of its verdicts over the item's rows (a shared
    top count gives ``tie``, as in :func:`puaudit.annotators.agreement.annotator_report`), placed on the
    item's first row holding a judge verdict.

    Raises
    ------
    PUAuditError
        No annotator column, no person's vote, or a person named ``judge_name``.
    """
    from puaudit.annotators.agreement import require_annotator_column

    require_annotator_column(table)
    n = len(table)
    annot = np.array(["" if _is_missing(a) else str(a).strip() for a in table.annotator],
                     dtype=object)
    human = np.asarray(table.human, dtype=object)
    code_of = {"A": 0, "B": 1, "tie": 2}
    hcode = np.array([code_of.get(h, -1) if isinstance(h, str) else -1 for h in human])
    person = (annot != "") & (hcode >= 0)
    if not person.any():
        raise PUAuditError("No human votes with an annotator id: the latent-truth models need "
                           "votes (A, B or tie) and who cast them.",
                           column=table.columns.get("human"))
    if judge and judge_name in set(annot[person]):
        raise PUAuditError(f"An annotator is named '{judge_name}', the judge's name in the "
                           "report; choose another judge_name.",
                           column=table.columns.get("annotator"))
    key_a, key_b = winner_keys(table)
    item_codes, uniq = pd.factorize(pd.Series(table.item_id, dtype=object))
    first_row = np.full(len(uniq), -1)
    for r in range(n - 1, -1, -1):
        first_row[item_codes[r]] = r
    ref_a, ref_b = key_a[first_row[item_codes]], key_b[first_row[item_codes]]
    same = (key_a == ref_a) & (key_b == ref_b)
    flipped = (key_a == ref_b) & (key_b == ref_a) & ~same
    matched = same | flipped
    len_a = np.array([len(str(t)) for t in table.response_a])
    len_b = np.array([len(str(t)) for t in table.response_b])
    longer = np.where(len_a > len_b, 0, np.where(len_b > len_a, 1, -1))

    rows = np.flatnonzero(person & matched)
    n_unmatched = int((person & ~matched).sum())
    d = pd.DataFrame({"row": rows, "item": item_codes[rows], "who": annot[rows]})
    dup = d.duplicated(["item", "who"], keep="first").to_numpy()
    rows = rows[~dup]
    voted_items = np.unique(item_codes[rows])
    # keep the items with a person's vote, in order of first appearance
    order = voted_items[np.argsort(first_row[voted_items], kind="stable")]
    new_code = np.full(len(uniq), -1)
    new_code[order] = np.arange(len(order))
    people = np.array(sorted(set(annot[rows])), dtype=object)
    wcode = {w: j for j, w in enumerate(people)}

    shown = hcode[rows]
    flip = flipped[rows]
    parts = {"item": new_code[item_codes[rows]], "worker": np.array([wcode[a] for a in annot[rows]]),
             "shown": shown, "flip": flip, "longer": longer[rows], "row": rows}
    workers = people
    judge_idx = None
    if judge:
        jcode = np.array([code_of.get(v, -1) if isinstance(v, str) else -1 for v in table.judge])
        jok = (jcode >= 0) & matched & (new_code[item_codes] >= 0)
        # the judge's item vote, counted in the reference orientation
        jref = np.where(flipped & (jcode < 2) & (jcode >= 0), 1 - jcode, jcode)
        counts = np.zeros((len(order), 3))
        np.add.at(counts, (new_code[item_codes[jok]], jref[jok]), 1)
        has = counts.sum(1) > 0
        top = counts.max(1, keepdims=True)
        shared = (counts == top).sum(1) > 1
        jitem = np.where(shared, 2, counts.argmax(1))
        jfirst = np.full(len(order), -1)
        for r in np.flatnonzero(jok)[::-1]:
            jfirst[new_code[item_codes[r]]] = r
        its = np.flatnonzero(has)
        jrows = jfirst[its]
        jflip = flipped[jrows]
        jshown = np.where(jflip & (jitem[its] < 2), 1 - jitem[its], jitem[its])
        judge_idx = len(people)
        workers = np.array([*people, judge_name], dtype=object)
        parts = {"item": np.r_[parts["item"], its],
                 "worker": np.r_[parts["worker"], np.full(len(its), judge_idx)],
                 "shown": np.r_[parts["shown"], jshown], "flip": np.r_[parts["flip"], jflip],
                 "longer": np.r_[parts["longer"], longer[jrows]], "row": np.r_[parts["row"], jrows]}
    label = np.where(parts["flip"] & (parts["shown"] < 2), 1 - parts["shown"], parts["shown"])
    return VoteData(items=np.asarray(uniq, dtype=object)[order], item_row=first_row[order],
                    workers=workers, judge=judge_idx, item=parts["item"].astype(int),
                    worker=parts["worker"].astype(int), label=label.astype(int),
                    shown=parts["shown"].astype(int), flip=parts["flip"].astype(bool),
                    longer=parts["longer"].astype(int), row=parts["row"].astype(int),
                    n_duplicates=int(dup.sum()), n_unmatched=n_unmatched)


# --------------------------------------------------------------------------------------------
# EM ports (used for the bootstrap refits; the point fits call crowd-kit)
# --------------------------------------------------------------------------------------------

def dawid_skene_em(item: np.ndarray, worker: np.ndarray, label: np.ndarray, *, n_items: int,
                   n_workers: int, n_labels: int = 3, weights: np.ndarray | None = None,
                   n_iter: int = 100, tol: float = 1e-5) -> dict:
    r"""Dawid–Skene EM exactly as crowd-kit's ``DawidSkene`` runs it, vectorised, with item weights.

    Initialisation: majority-vote shares :math:`q_i(t)`; then repeat M-step
    (:math:`p_t = \bar q(t)`, :math:`\pi^w_{vt} \propto \max(\sum_{r: w, v} q_{i(r)}(t),
    10^{-10})` over the labels :math:`v` the annotator used), E-step
    (:math:`q_i(t) \propto p_t \prod_r \pi^{w_r}_{v_r t}`) until the evidence lower bound per
    vote rises by less than ``tol``. ``weights`` (one per item, e.g. bootstrap multiplicities)
    multiply every sum over items, which equals fitting on the items repeated that many times.

    Returns
    -------
    dict with ``posterior`` (n_items, n_labels), ``prior`` (n_labels,), ``errors``
    (n_workers, n_labels vote, n_labels truth; 0 for labels an annotator never used) and
    ``n_iter``.
    """
    wt = np.ones(n_items) if weights is None else np.asarray(weights, dtype=float)
    vw = wt[item]
    counts = np.zeros((n_items, n_labels))
    np.add.at(counts, (item, label), 1.0)
    tot = counts.sum(1, keepdims=True)
    q = np.divide(counts, tot, out=np.full_like(counts, 1.0 / n_labels), where=tot > 0)
    used = np.zeros((n_workers, n_labels))
    np.add.at(used, (worker, label), vw)
    used = used > 0
    total_w = wt.sum()
    total_votes = vw.sum()

    def m_step(q):
        e = np.zeros((n_workers, n_labels, n_labels))
        np.add.at(e, (worker, label), vw[:, None] * q[item])
        e = np.where(used[:, :, None], np.maximum(e, _EPS), 0.0)
        s = e.sum(1, keepdims=True)
        return np.divide(e, s, out=np.zeros_like(e), where=s > 0)

    def prior_of(q):
        return (wt[:, None] * q).sum(0) / total_w

    def e_step(prior, err):
        ll = np.zeros((n_items, n_labels))
        with np.errstate(divide="ignore"):
            np.add.at(ll, item, np.log2(err[worker, label]))
        ll += np.log2(np.maximum(prior, _EPS))
        ll -= ll.max(1, keepdims=True)
        p = np.exp2(ll)
        return p / p.sum(1, keepdims=True)

    def elbo(q, prior, err):
        with np.errstate(divide="ignore"):
            le = np.log(err[worker, label]) + np.log(np.maximum(prior, _EPS))
        joint = np.sum(vw[:, None] * q[item] * np.where(np.isfinite(le), le, 0.0))
        qc = np.maximum(q, _EPS)
        ent = -np.sum(wt[:, None] * qc * np.log(qc))
        return float(joint + ent) / total_votes

    prior = prior_of(q)
    err = m_step(q)
    loss = -np.inf
    it = 0
    for it in range(1, n_iter + 1):
        q = e_step(prior, err)
        prior = prior_of(q)
        err = m_step(q)
        new = elbo(q, prior, err)
        if new - loss < tol:
            break
        loss = new
    return {"posterior": np.maximum(q, _EPS), "prior": prior, "errors": err, "n_iter": it}


def mace_em(item: np.ndarray, worker: np.ndarray, label: np.ndarray, *, n_items: int,
            n_workers: int, n_labels: int, weights: np.ndarray | None = None, n_iter: int = 50,
            alpha: float = 0.5, beta: float = 0.5, default_noise: float = 0.5,
            random_state: int = 0) -> dict:
    r"""MACE by variational Bayes exactly as crowd-kit's ``MACE(method="vb")`` runs it, vectorised.

    Annotator :math:`w` knows the truth with probability :math:`\theta_w`, else votes from
    :math:`\xi_w`; truths are uniform over the ``n_labels`` labels. E-step:
    :math:`g_i(t) = \frac{1}{K}\prod_r \big(s_{w_r 0}\, \xi_{w_r v_r} + s_{w_r 1} [v_r = t]\big)`;
    VB M-step: :math:`s_w \propto \exp\psi(n_w + (\alpha, \beta))`,
    :math:`\xi_w \propto \exp\psi(m_w + 10)` from the expected spamming / knowing counts
    :math:`n_w` and the expected spam votes per label :math:`m_w`; ``n_iter`` rounds from
    crowd-kit's seeded start (its restarts all reuse one seed, so one run is the same fit).
    Labels and annotators are codes 0.. in the order crowd-kit would factorise them.

    Returns
    -------
    dict with ``posterior`` (n_items, n_labels), ``spamming`` (n_workers, 2: spamming, knowing)
    and ``thetas`` (n_workers, n_labels).
    """
    import scipy.stats as sps
    from scipy.special import digamma

    wt = np.ones(n_items) if weights is None else np.asarray(weights, dtype=float)
    vw = wt[item]
    spam = sps.uniform(1, 1 + default_noise).rvs(size=(n_workers, 2), random_state=random_state)
    theta = sps.uniform(1, 1 + default_noise).rvs(size=(n_workers, n_labels),
                                                   random_state=random_state)
    spam = spam / spam.sum(1, keepdims=True)
    theta = theta / theta.sum(1, keepdims=True)
    tprior = np.array([alpha, beta])

    def vnorm(x, h):
        norm = np.exp(digamma((x + h).sum(1)))[:, None]
        return np.divide(np.exp(digamma(x + h)), norm, out=np.zeros_like(x),
                         where=~np.isclose(norm, 0))

    def e_step(spam, theta):
        s0 = spam[worker, 0] * theta[worker, label]          # spam likelihood of the vote
        s1 = spam[worker, 1]
        m = s0[:, None] + s1[:, None] * (label[:, None] == np.arange(n_labels)[None, :])
        logm = np.log(m)
        lg = np.zeros((n_items, n_labels))
        np.add.at(lg, item, logm)
        gold = np.exp(lg) / n_labels
        present = np.zeros(n_items, bool)
        present[item] = True
        inst = gold.sum(1)
        strat = (gold[item] / m).sum(1) * s0 / inst[item]
        know = gold[item, label] * s1 / (s0 + s1) / inst[item]
        sc = np.zeros((n_workers, n_labels))
        np.add.at(sc, (worker, label), vw * strat)
        kc = np.zeros((n_workers, 2))
        np.add.at(kc[:, 0], worker, vw * strat)
        np.add.at(kc[:, 1], worker, vw * know)
        return gold, sc, kc

    gold, sc, kc = e_step(spam, theta)
    for _ in range(n_iter):
        spam = vnorm(kc, tprior[None, :])
        theta = vnorm(sc, np.full_like(sc, 10.0))
        gold, sc, kc = e_step(spam, theta)
    post = gold / gold.sum(1, keepdims=True)
    return {"posterior": post, "spamming": spam, "thetas": theta}


# --------------------------------------------------------------------------------------------
# fitting a model
# --------------------------------------------------------------------------------------------

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
        Items the model was fitted on, those with at least two votes in the model. An item with
        a single vote says nothing about its voter's skill; fitted with the others it lets EM
        confirm each voter's current confusion matrix (majority-vote initialisation makes a lone
        vote look right), and on MT-Bench, where 853 of 1,814 items have one vote, that alone
        drove a third of the people to a skill of 1.00. Their posterior comes from the fitted
        parameters afterwards, and the annotator statistics use the fitted items only.
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
        CROWDLAB, whose weighted average of votes and model is no calibrated posterior (its mean
        top probability is 0.52 on LLMFAO against Dawid-Skene's 0.91, which would pull every
        skill towards 0.5): there, its consensus label."""
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
        return _softmax(lo), n_other > 0


def _vote_log_lik(lik: np.ndarray, worker: np.ndarray, label: np.ndarray) -> np.ndarray:
    """log P(vote | truth) per vote; 0 (no information) where the annotator's likelihood of that
    label is unknown (a label never used on the fitted items, or an annotator not fitted)."""
    rows = lik[worker, :, label]
    used = rows.sum(1, keepdims=True) > 0
    with np.errstate(divide="ignore"):
        return np.where(used, np.log(np.maximum(rows, 1e-300)), 0.0)


def _softmax(ll: np.ndarray) -> np.ndarray:
    ll = ll - ll.max(1, keepdims=True)
    p = np.exp(ll)
    return p / p.sum(1, keepdims=True)


def _consensus_of(post: np.ndarray) -> np.ndarray:
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
        return TruthFit(model, post, _consensus_of(post), mask, fit_items)
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
    post = np.where(fit_items[:, None], post, _softmax(ll))
    return TruthFit(model, post, _consensus_of(post), mask, fit_items, likelihood=lik,
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
                np.log(np.maximum(out["prior"], _EPS)), {"info": {"n_iter": out["n_iter"]}})
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
    import warnings

    with warnings.catch_warnings():  # crowd-kit 1.4 uses pandas' deprecated inplace= arguments
        warnings.simplefilter("ignore", FutureWarning)
        warnings.simplefilter("ignore", DeprecationWarning)
        try:
            from pandas.errors import Pandas4Warning
            warnings.simplefilter("ignore", Pandas4Warning)
        except ImportError:
            pass
        return _fit_crowdkit_inner(votes, fit_mask, model, random_state)


def _fit_crowdkit_inner(votes, fit_mask, model, random_state):
    from crowdkit.aggregation import MACE, DawidSkene

    order, _, wcodes, wnames, lcodes, lnames = _canonical_frame(votes, fit_mask)
    data = pd.DataFrame({"task": votes.item[fit_mask][order], "worker": wcodes,
                         "label": lcodes})
    n_items, n_workers = votes.n_items, votes.n_workers
    if model == "ds":
        ds = DawidSkene(n_iter=100, tol=1e-5).fit(data)
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
        return post, lik, np.log(np.maximum(prior, _EPS)), {
            "info": {"n_iter": len(ds.loss_history_)}}
    mace = MACE(n_restarts=1, n_iter=50, method="vb", random_state=random_state).fit(data)
    pr = mace.probas_
    post_codes = np.zeros((n_items, len(lnames)))
    post_codes[pr.index.to_numpy(dtype=int)] = pr[list(range(len(lnames)))].to_numpy()
    return _mace_parts(votes, post_codes, mace.spamming_, mace.thetas_, wnames, lnames)


def _fit_crowdlab(votes, mask, fit_items, pred_probs, wts) -> TruthFit:
    import warnings

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
    item_of_row = np.full(len(table), -1)
    pos = {it: i for i, it in enumerate(votes.items)}
    for r, it in enumerate(table.item_id):
        item_of_row[r] = pos.get(it, -1)
    key_a, key_b = winner_keys(table)
    ref_a = np.array([key_a[votes.item_row[i]] if i >= 0 else None for i in item_of_row],
                     dtype=object)
    judge = np.asarray(table.judge, dtype=object)
    ok = (item_of_row >= 0) & np.isfinite(p) & np.isin(judge, ["A", "B"])
    sums = np.zeros((votes.n_items, 3))
    cnt = np.zeros(votes.n_items)
    for r in np.flatnonzero(ok):
        pick_key = key_a[r] if judge[r] == "A" else key_b[r]
        x = 0 if pick_key == ref_a[r] else 1
        v = np.zeros(3)
        v[x] = (1 - tau) * p[r]
        v[1 - x] = (1 - tau) * (1 - p[r])
        v[2] = tau
        sums[item_of_row[r]] += v
        cnt[item_of_row[r]] += 1
    out = np.full((votes.n_items, 3), 1 / 3)
    has = cnt > 0
    out[has] = sums[has] / cnt[has, None]
    out = np.clip(out, 1e-6, None)
    return out / out.sum(1, keepdims=True)


# --------------------------------------------------------------------------------------------
# per-annotator statistics from a posterior
# --------------------------------------------------------------------------------------------

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
    q_shown = np.where(votes.flip[:, None], q[:, _SWAP], q)
    ct = np.zeros((W, 3, 3))                                 # (worker, vote, truth)
    np.add.at(ct, (votes.worker, votes.shown), w[:, None] * q_shown)
    C = ct.transpose(0, 2, 1)                                # (worker, truth, vote)
    strict = C[:, :2, :2]
    a = _div(strict, strict.sum(2, keepdims=True))           # share of strict votes given truth
    # length orientation: truth and vote as "the longer (0) / the shorter (1) won"
    has_len = votes.longer >= 0
    b_long = votes.longer[has_len] == 1
    q_len = np.where(b_long[:, None], q_shown[has_len][:, _SWAP], q_shown[has_len])
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
    percentiles of the average of independent draws. These stay honest where the bootstrap
    collapses: an annotator who never lost a disagreement has the share 1.00 in every
    replicate, while 15 such items only show that the error rate is below about 0.2.
    """
    from statsmodels.stats.proportion import proportion_confint

    a = (1 - confidence) / 2
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

    def mean_of(d1, d2):
        import warnings

        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            m = (d1 + d2) / 2
            return np.nanquantile(m, a, axis=0), np.nanquantile(m, 1 - a, axis=0)

    nA, nB = C[:, 0, :2].sum(1), C[:, 1, :2].sum(1)
    dAA, dBA, dBB = draws(C[:, 0, 0], nA), draws(C[:, 1, 0], nB), draws(C[:, 1, 1], nB)
    out["skill"] = mean_of(dAA, dBB)
    out["position_bias"] = mean_of(dAA, dBA)
    nLt, nSt = L[:, 0, :].sum(1), L[:, 1, :].sum(1)
    out["length_bias"] = mean_of(draws(L[:, 0, 0], nLt), draws(L[:, 1, 0], nSt))
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
    loo_shown = np.where(votes.flip[:, None], loo[:, _SWAP], loo)
    cons = _consensus_of(loo_shown)
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


# --------------------------------------------------------------------------------------------
# the report
# --------------------------------------------------------------------------------------------

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


def _fmt(v: float) -> str:
    return "n/a" if v is None or v != v else f"{v:.2f}"


def _model_flags(r: dict, model_name: str, *, skill_bar: float, position_margin: float,
                 length_margin: float) -> list[str]:
    out = []
    ci = lambda c: f"{_fmt(r[c])} [{_fmt(r[c + '_lo'])}, {_fmt(r[c + '_hi'])}]"  # noqa: E731
    if np.isfinite(r["skill_hi"]) and r["skill_hi"] < skill_bar:
        out.append(f"spammer: skill ({model_name}) {ci('skill')} stays below {skill_bar:.2f} "
                   f"(chance is 0.50; n={r['n_strict']} strict votes)")
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


def _percentiles(boot: np.ndarray, confidence: float) -> tuple[np.ndarray, np.ndarray]:
    import warnings

    a = (1 - confidence) / 2
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        lo = np.nanquantile(boot, a, axis=0)
        hi = np.nanquantile(boot, 1 - a, axis=0)
    return lo, hi


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
        Flag *spammer* when the whole interval of ``skill`` lies below this bar (chance is 0.5).
        A bar above chance is needed: a random voter's sample skill can be lucky (0.62 over 107
        strict votes in a planted test, interval [0.54, 0.76]).
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
    if model not in MODELS:
        raise PUAuditError(f"Unknown annotator model '{model}': choose one of {list(MODELS)}.")
    if not 0 < confidence < 1:
        raise PUAuditError(f"confidence must lie strictly between 0 and 1, got {confidence}.")
    if int(n_boot) < 0:
        raise PUAuditError(f"n_boot must be 0 or more, got {n_boot}.")
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
    W = votes.n_workers
    keys = list(STAT_COLUMNS) + (["competence"] if model == "mace" else [])
    boot = {k: [] for k in keys}
    boot_conf = []
    rng = np.random.default_rng(random_state)
    n_failed = 0
    for _ in range(int(n_boot)):
        wts = rng.multinomial(votes.n_items, np.full(votes.n_items, 1 / votes.n_items))
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
    cols: dict = {}
    n_votes = np.bincount(votes.worker, minlength=W)
    n_strict = np.bincount(votes.worker[votes.shown < 2], minlength=W)
    # intervals: the wider of the bootstrap (model refitted) and the Jeffreys interval of the
    # point fit's soft counts (see _count_intervals)
    jeff = _count_intervals(point, confidence, np.random.default_rng(random_state))

    def envelope(b_lo, b_hi, j):
        with np.errstate(invalid="ignore"):
            return np.fmin(b_lo, j[0]), np.fmax(b_hi, j[1])

    for k in keys:
        val = point[k] if k != "competence" else fit.worker_info["competence"]
        if boot[k]:
            lo, hi = _percentiles(np.array(boot[k]), confidence)
        else:
            lo = hi = np.full(W, np.nan)
        if k in jeff:
            lo, hi = envelope(lo, hi, jeff[k])
        cols[k], cols[f"{k}_lo"], cols[f"{k}_hi"] = val, lo, hi
    if boot_conf:
        conf_lo, conf_hi = _percentiles(np.array(boot_conf), confidence)
    else:
        conf_lo = conf_hi = np.full((W, 3, 3), np.nan)
    conf_lo, conf_hi = envelope(conf_lo, conf_hi, jeff["confusion"])
    if model == "crowdlab":
        cols["weight"] = fit.worker_info["weight"]
    cols.update(_cohen_kappas(votes, fit, confidence))
    in_model = np.zeros(W, dtype=bool)
    in_model[np.unique(votes.worker[fit.in_model])] = True
    is_judge = np.arange(W) == (votes.judge if votes.judge is not None else -1)
    df = pd.DataFrame({"annotator": votes.workers, "is_judge": is_judge, "in_model": in_model,
                       "n_votes": n_votes, "n_strict": n_strict, **cols})
    df["flag_eligible"] = df["n_strict"] >= min_votes_flag
    name = MODEL_NAMES[model]
    df["model_flags"] = [
        _model_flags(r, name, skill_bar=skill_bar, position_margin=position_margin,
                     length_margin=length_margin) if r["flag_eligible"] else []
        for r in df.to_dict(orient="records")]
    for kind in ("spammer", "position", "length"):
        df.insert(len(df.columns) - 1, f"flag_{kind}",
                  [any(f.startswith(kind) for f in fl) for fl in df["model_flags"]])

    consensus = _consensus_frame(votes, fit)
    people = votes.model_mask(False)
    n_people_votes = np.bincount(votes.item[people], minlength=votes.n_items)
    multi = n_people_votes >= 2
    overall = {
        "model": model, "model_name": name, "include_judge": bool(include_judge),
        "n_items": int(votes.n_items), "n_items_multi": int(multi.sum()),
        "n_items_fit": int(fit.fit_items.sum()),
        "n_votes": int(fit.in_model.sum()), "n_annotators": int((~is_judge).sum()),
        "n_boot": int(n_boot) - n_failed, "n_boot_failed": n_failed,
        "n_duplicates_dropped": votes.n_duplicates, "n_unmatched_dropped": votes.n_unmatched,
        **fleiss_kappa_items(votes),
        "n_consensus_differs_majority": int(consensus["differs"].sum()),
        **_judge_agreement(consensus),
        "n_model_flagged": int(sum(bool(f) for f in df["model_flags"])),
        "skill_bar": skill_bar, "position_margin": position_margin,
        "length_margin": length_margin, "min_votes_flag": min_votes_flag,
        "confidence": confidence,
    }
    if model == "crowdlab":
        overall["model_weight"] = fit.info["model_weight"]
    params = {"model": model, "include_judge": include_judge, "judge_name": judge_name,
              "n_boot": n_boot, "confidence": confidence, "min_votes_flag": min_votes_flag,
              "skill_bar": skill_bar, "position_margin": position_margin,
              "length_margin": length_margin, "random_state": random_state}
    return ModelReport(annotators=df, confusion=point["confusion"], confusion_lo=conf_lo,
                       confusion_hi=conf_hi, consensus=consensus, overall=overall, fit=fit,
                       votes=votes, params=params, counts=point["counts"])


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


# --------------------------------------------------------------------------------------------
# model-based consensus as the audit's human source
# --------------------------------------------------------------------------------------------

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


# --------------------------------------------------------------------------------------------
# simulation with known truth
# --------------------------------------------------------------------------------------------

def _shown(label: int, flip: bool) -> int:
    return label if label == 2 or not flip else 1 - label


def simulate_votes(n_items: int = 500, *, votes_per_item: tuple[int, int] = (3, 5),
                   n_good: int = 8, accuracy: tuple[float, float] = (0.75, 0.9),
                   n_random: int = 2, n_always_a: int = 1, n_longer: int = 1,
                   tie_share: float = 0.1, longer_better: float = 0.6,
                   judge_accuracy: float = 0.8, shuffle_order: bool = True,
                   random_state: int = 0) -> tuple[pd.DataFrame, dict]:
    """A comparison table with planted annotators and a known truth.

    Each item's truth is tie with probability ``tie_share``, else one of its two responses;
    the better one is the longer with probability ``longer_better``. Each item gets between
    ``votes_per_item[0]`` and ``votes_per_item[1]`` votes from distinct annotators drawn
    uniformly. Annotators: ``good_NN`` (vote the truth with their accuracy, drawn from
    ``accuracy``, else one of the two other labels at random), ``random_NN`` (A, B, tie
    uniformly), ``always_a_NN`` (always the first-shown response) and ``longer_NN`` (always the
    longer response). With ``shuffle_order`` every vote's row shows the pair in a random order
    (as in MT-Bench); else each item has one random order (as in LLMFAO). The judge votes the
    truth with ``judge_accuracy``, else one of the two other labels.

    Returns
    -------
    df : DataFrame
        ``question_id, category, prompt, response_a, response_b, human_winner, annotator,
        judge_winner, true_winner`` (truth in the row's order), one row per vote.
    info : dict
        ``roles`` (annotator -> role), ``accuracy`` (good annotator -> accuracy), ``confusion``
        (annotator -> planted 3x3 P(vote | truth) in the shown orientation; None for the
        ``longer`` annotators, whose votes depend on lengths), ``truth`` (item -> 0/1/2 for
        first / second response / tie).
    """
    rng = np.random.default_rng(random_state)
    roles, acc = {}, {}
    for j in range(n_good):
        name = f"good_{j + 1:02d}"
        roles[name] = "good"
        acc[name] = float(rng.uniform(*accuracy))
    for prefix, role, k in (("random", "random", n_random), ("always_a", "always_a", n_always_a),
                            ("longer", "longer", n_longer)):
        for j in range(k):
            roles[f"{prefix}_{j + 1:02d}"] = role
    names = list(roles)
    lo_k, hi_k = votes_per_item
    if len(names) < hi_k:
        raise PUAuditError(f"{len(names)} annotators cannot give {hi_k} distinct votes per item.")
    truth = np.where(rng.random(n_items) < tie_share, 2, rng.integers(0, 2, n_items))
    # lengths: the better response is the longer one with probability longer_better
    short = rng.integers(200, 600, n_items)
    extra = rng.integers(50, 400, n_items)
    first_longer = np.where(truth == 2, rng.random(n_items) < 0.5,
                            np.where(rng.random(n_items) < longer_better, truth == 0, truth == 1))
    len_first = np.where(first_longer, short + extra, short)
    len_second = np.where(first_longer, short, short + extra)
    item_flip = rng.random(n_items) < 0.5
    rows = []

    def other(t):
        return int(rng.choice([x for x in range(3) if x != t]))

    for i in range(n_items):
        texts = (f"Answer one to question {i}. " + "x" * int(len_first[i]),
                 f"Answer two to question {i}. " + "y" * int(len_second[i]))
        t = int(truth[i])
        jv = t if rng.random() < judge_accuracy else other(t)
        k = int(rng.integers(lo_k, hi_k + 1))
        for name in rng.choice(names, size=k, replace=False):
            flip = bool(rng.random() < 0.5) if shuffle_order else bool(item_flip[i])
            a_text, b_text = (texts[1], texts[0]) if flip else texts
            t_shown = _shown(t, flip)
            role = roles[name]
            if role == "good":
                v = t_shown if rng.random() < acc[name] else other(t_shown)
            elif role == "random":
                v = int(rng.integers(0, 3))
            elif role == "always_a":
                v = 0
            else:
                v = 0 if len(a_text) > len(b_text) else 1
            rows.append({"question_id": i, "category": "sim", "prompt": f"Question {i}?",
                         "response_a": a_text, "response_b": b_text,
                         "human_winner": LABELS[v], "annotator": name,
                         "judge_winner": LABELS[_shown(jv, flip)],
                         "true_winner": LABELS[t_shown]})
    confusion = {}
    for name, role in roles.items():
        if role == "good":
            a = acc[name]
            confusion[name] = np.full((3, 3), (1 - a) / 2) + np.eye(3) * (a - (1 - a) / 2)
        elif role == "random":
            confusion[name] = np.full((3, 3), 1 / 3)
        elif role == "always_a":
            confusion[name] = np.tile([1.0, 0.0, 0.0], (3, 1))
        else:
            confusion[name] = None
    return pd.DataFrame(rows), {"roles": roles, "accuracy": acc, "confusion": confusion,
                                "truth": truth}
