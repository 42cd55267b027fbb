"""Vectorised ports of crowd-kit's EM for Dawid–Skene and MACE, with item weights.

The point fits call crowd-kit itself; the bootstrap refits (hundreds of them) use these ports,
which give the same fits about 50 times faster and accept item multiplicities as weights.
"""

from __future__ import annotations

import numpy as np

__all__ = ["dawid_skene_em", "mace_em"]

EPS = 1e-10          # crowd-kit's Dawid-Skene clipping constant


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
        e = np.where(used[:, :, None], np.maximum(e, EPS), 0.0)
        s = e.sum(1, keepdims=True)
        return np.divide(e, s, out=np.zeros_like(e), where=s > 0)

    def prior_of(q):
        return (wt[:, None] * q).sum(0) / total_w

    def e_step(prior, err):
        ll = np.zeros((n_items, n_labels))
        with np.errstate(divide="ignore"):
            np.add.at(ll, item, np.log2(err[worker, label]))
        ll += np.log2(np.maximum(prior, EPS))
        ll -= ll.max(1, keepdims=True)
        p = np.exp2(ll)
        return p / p.sum(1, keepdims=True)

    def elbo(q, prior, err):
        with np.errstate(divide="ignore"):
            le = np.log(err[worker, label]) + np.log(np.maximum(prior, EPS))
        joint = np.sum(vw[:, None] * q[item] * np.where(np.isfinite(le), le, 0.0))
        qc = np.maximum(q, EPS)
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
    return {"posterior": np.maximum(q, EPS), "prior": prior, "errors": err, "n_iter": it}


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
