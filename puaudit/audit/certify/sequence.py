r"""The fixed-sequence test of certified trust or escalate: which share of the most confident
items a target agreement is certified for, with exact binomial bounds.

:func:`choose_share` walks the grid of shares :func:`share_grid` (0.30, 0.35, ..., 1), fixed
before any outcome is seen, from the most confident share down, and tests each candidate set
(that share of every source's most confident items, pooled) with the one-sided exact
(Clopper–Pearson) lower bound :func:`lower_bound`; testing stops at the first set whose bound is
below the target, and the last passing share is certified (Learn-then-Test; the whole procedure,
its validity and its folds are in :mod:`puaudit.audit.certify.judge` and docs/method.md). Items, not
votes: :func:`item_outcomes` counts each item once with the share of its votes that agree.
"""

from __future__ import annotations

import functools
import math

import numpy as np

from puaudit.audit.config import check_risk, check_target
from puaudit.errors import PUAuditError

__all__ = ["START_SHARE", "SHARE_STEP", "share_grid", "lower_bound", "two_sided_interval",
           "rows_needed", "item_outcomes", "sorted_items", "top_count", "choose_share",
           "choose_share_sorted", "walk_shares"]


#: Where the fixed sequence starts: the most confident 30% of each source's items. Started at
#: the smallest set that could pass (22 items at 0.9 / 0.1), one unlucky wrong verdict among the
#: first few dozen ends the sequence before the larger sets that would pass are tested: on
#: MT-Bench GPT-4 (seeds 0-3, target 0.9) coverage was 0.05, 0, 0, 0 from 22 items and 0.43, 0,
#: 0.41, 0.64 from 30%; with P and validation pooled, starting at 20% instead of 30% lowered
#: the mean coverage over 20 seeds (0.54 vs 0.56). The price is that a share below 30% is never
#: certified.
START_SHARE = 0.3
#: Steps of the grid of shares: 0.30, 0.35, ..., 1. Steps of 0.10 gave 0.53 mean coverage
#: against 0.56 (MT-Bench GPT-4, 0.90, 20 seeds), and every distinct probability (steps of one
#: item) more stops by chance.
SHARE_STEP = 0.05


def share_grid(*, start_share: float = START_SHARE, step: float = SHARE_STEP) -> np.ndarray:
    """The candidate shares, from ``start_share`` up to 1 in steps of ``step`` (1 included)."""
    if not (0 < start_share <= 1 and 0 < step <= 1):
        raise PUAuditError(f"start_share and step must be in (0, 1]; got {start_share}, {step}.")
    n = int(math.floor((1 - start_share) / step + 1e-9))
    grid = np.round(start_share + step * np.arange(n + 1), 12)
    return grid if grid[-1] >= 1 - 1e-12 else np.r_[grid, 1.0]


def lower_bound(k: float, n: float, *, risk: float) -> float:
    r"""One-sided exact (Clopper–Pearson) lower confidence bound of a share, level ``1 − risk``.

    :math:`L = \mathrm{Beta}^{-1}(\delta; k, n - k + 1)` (0 when :math:`k = 0` or :math:`n = 0`);
    the lower end of :func:`puaudit.stats.proportions.proportion_interval` at ``alpha = 2 *
    risk``, method ``"beta"``.
    """
    from puaudit.stats.proportions import proportion_interval

    if n <= 0 or k <= 0:
        return 0.0
    return float(proportion_interval(k, n, alpha=2 * risk, method="beta")[0])


def two_sided_interval(k: float, n: float, *, level: float = 0.95) -> tuple[float, float]:
    """Exact (Clopper–Pearson) two-sided interval of a share; ``(nan, nan)`` when ``n == 0``."""
    from puaudit.stats.proportions import proportion_interval

    lo, hi = proportion_interval(k, n, alpha=1 - level, method="beta")
    return (float(lo), float(hi))


@functools.lru_cache(maxsize=256)
def rows_needed(target: float, *, risk: float) -> int:
    r"""Fewest items whose lower bound can reach ``target``: the smallest :math:`n` with
    :math:`L(n, n) = \delta^{1/n} \ge \alpha`, i.e. :math:`\lceil \ln\delta / \ln\alpha \rceil`
    (22 at :math:`\alpha = 0.9, \delta = 0.1`), checked with the beta quantile itself."""
    n = max(1, math.ceil(math.log(risk) / math.log(target)))
    while n > 1 and lower_bound(n - 1, n - 1, risk=risk) >= target:
        n -= 1
    while lower_bound(n, n, risk=risk) < target:
        n += 1
    return n


def item_outcomes(prob: np.ndarray, correct: np.ndarray, groups: np.ndarray | None = None
                  ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Collapse votes to items: each item's mean probability and share of right verdicts.

    Returns ``(item_prob, item_share, inverse)``; ``inverse[i]`` is row i's item. Without
    ``groups`` every row is its own item.
    """
    prob = np.asarray(prob, dtype=np.float64)
    correct = np.asarray(correct, dtype=np.float64)
    if groups is None:
        return prob, correct, np.arange(len(prob))
    _, inv = np.unique(np.asarray(groups).astype(str), return_inverse=True)
    count = np.bincount(inv, minlength=inv.max() + 1 if len(inv) else 0).astype(float)
    with np.errstate(invalid="ignore"):
        p_item = np.bincount(inv, weights=prob, minlength=len(count)) / count
        share = np.bincount(inv, weights=correct, minlength=len(count)) / count
    return p_item, share, inv


def _uncertified_message(target: float, risk: float, floor: float, n_needed: int,
                         n_items: int, first_fail, start_share: float) -> str:
    """Why no share was certified, and what to do."""
    if n_items < n_needed:
        return (f"Too few annotated items to certify agreement >= {target:g} at risk {risk:g}: "
                f"even if the judge were right on every one, at least {n_needed} items are "
                f"needed and P and validation have {n_items} with a held-out probability. "
                "Nobody is trusted (every audited verdict is escalated); label more items.")
    if first_fail is None:
        return (f"No share certifies agreement >= {target:g} at risk {risk:g}: the most "
                f"confident {start_share:.0%} of the annotated items (at least {n_needed}) do "
                f"not all have a calibrated P(judge right) of at least {floor:g}. Nobody is "
                "trusted (every audited verdict is escalated).")
    n_j, k_j, lo = first_fail
    return (f"No share certifies agreement >= {target:g} at risk {risk:g}: the "
            f"{n_j} most confident annotated items agree with people {k_j / n_j:.1%} of the "
            f"time, lower bound {lo:.3f}. Nobody is trusted (every audited verdict is "
            "escalated); try a lower target or a higher risk, or label more items.")


def sorted_items(prob, correct, groups) -> tuple[np.ndarray, np.ndarray]:
    """One source's items from the most confident down: ``(probability, cumulative right)``."""
    p_item, share, _ = item_outcomes(prob, correct, groups)
    ok = np.isfinite(p_item)
    p_item, share = p_item[ok], share[ok]
    order = np.argsort(-p_item, kind="stable")
    return p_item[order], np.cumsum(share[order])


def top_count(p_sorted: np.ndarray, share: float) -> int:
    """How many of a source's items (sorted down) its top ``share`` holds: the first
    :math:`\\lceil s n \\rceil`, and every item tied with the last of them."""
    m = min(len(p_sorted), int(math.ceil(share * len(p_sorted) - 1e-9)))
    if m == 0:
        return 0
    return int(np.searchsorted(-p_sorted, -p_sorted[m - 1], side="right"))


def choose_share(sources, *, target: float, risk: float, floor: float = 0.5,
                 start_share: float = START_SHARE, step: float = SHARE_STEP,
                 log: bool = False) -> dict:
    """The largest share certified by fixed-sequence testing over a grid of shares (see the
    module's docstring), pooling the sources' items by share.

    Parameters
    ----------
    sources : sequence of (prob, correct, groups)
        Each source's held-out calibrated P(judge right) per row (NaN: never trusted), judge ==
        human per row, and the item of each row (None: every row its own item; votes of one
        item count once).
    target, risk : float
        :math:`\\alpha` in (0.5, 1) and :math:`\\delta` in (0, 0.5].
    floor : float, default 0.5
        The sequence ends before the first share at which some source's probability is below
        ``floor``: a verdict more likely wrong than right is never trusted.
    start_share, step : float
        The grid (:func:`share_grid`).
    log : bool
        Add ``path``: every tested candidate (share, n, k, lower bound, passed).

    Returns
    -------
    dict with ``share`` (0 when nothing is certified), ``thresholds`` (per source, its lowest
    probability in the certified set; ``inf`` when none), ``lower`` (the bound; NaN when none),
    ``n`` and ``k`` (items in the set, their right share summed), ``n_items`` (pooled
    finite-probability items), ``n_items_by_source``, ``n_needed`` (:func:`rows_needed`),
    ``n_start`` (items in the first candidate tested), ``n_tested``, ``stopped_at`` (the share
    of the first candidate not rejected, or None) and ``message`` (why nothing was certified,
    or "").
    """
    return choose_share_sorted([sorted_items(*s) for s in sources], target=target, risk=risk,
                          floor=floor, start_share=start_share, step=step, log=log)


def choose_share_sorted(srcs, *, target: float, risk: float, floor: float, start_share: float,
                   step: float, log: bool) -> dict:
    """:func:`choose_share` on sources already collapsed and sorted (:func:`sorted_items`)."""
    out = walk_shares([p for p, _ in srcs],
                      lambda counts: sum(kc[m - 1] for m, (_, kc) in zip(counts, srcs) if m),
                      target=target, risk=risk, floor=floor, start_share=start_share,
                      step=step, log=log)
    if out["share"] == 0:
        out["message"] = _uncertified_message(out["target"], out["risk"], floor,
                                              out["n_needed"], out["n_items"],
                                              out["first_fail"], start_share)
    return out


def walk_shares(probs, outcome, *, target: float, risk: float, floor: float,
                start_share: float, step: float, log: bool) -> dict:
    """The fixed-sequence walk over the grid of shares, for any rule that scores a candidate set.

    ``probs``: each source's probabilities sorted down; the candidate at share :math:`s` holds
    each source's first ``counts`` = :func:`top_count` items, and ``outcome(counts)`` is how
    many of them are right (summed shares). The sequence skips candidates under
    :func:`rows_needed` items and ends before the first share at which some source's
    probability is below ``floor``; testing stops at the first candidate whose exact bound is
    below ``target``. Returns :func:`choose_share`'s dict with ``message`` empty and
    ``first_fail`` (n, k, lower bound of the candidate that stopped the walk, or None).
    """
    from puaudit.stats.proportions import proportion_interval

    target, risk = check_target(target), check_risk(risk)
    n_needed = rows_needed(target, risk=risk)
    # the sequence: the grid's shares whose set could pass, until a source falls below the floor
    seq = []
    for s in share_grid(start_share=start_share, step=step):
        counts = [top_count(p, s) for p in probs]
        if any(m and p[m - 1] < floor for m, p in zip(counts, probs)):
            break
        n = sum(counts)
        if n >= n_needed:
            seq.append((float(s), counts, n, float(outcome(counts))))
    out = {"share": 0.0, "thresholds": [math.inf] * len(probs), "lower": float("nan"), "n": 0,
           "k": 0.0, "n_items": int(sum(len(p) for p in probs)),
           "n_items_by_source": [len(p) for p in probs], "n_needed": n_needed,
           "n_start": seq[0][2] if seq else 0, "n_tested": 0, "stopped_at": None,
           "first_fail": None, "target": target, "risk": risk, "message": ""}
    n_seq = np.array([c[2] for c in seq], dtype=float)
    k_seq = np.array([c[3] for c in seq], dtype=float)
    lower = (proportion_interval(k_seq, n_seq, alpha=2 * risk, method="beta")[0] if seq
             else np.zeros(0))
    passed = lower >= target
    # fixed-sequence testing: everything before the first failure is rejected, nothing after
    n_run = int(np.argmin(passed)) if not passed.all() else len(seq)
    out["n_tested"] = min(n_run + 1, len(seq))
    if n_run < len(seq):
        out["stopped_at"] = seq[n_run][0]
        out["first_fail"] = (seq[n_run][2], seq[n_run][3], float(lower[n_run]))
    if n_run > 0:
        s, counts, n, k = seq[n_run - 1]
        out.update(share=s, lower=float(lower[n_run - 1]), n=n, k=k,
                   thresholds=[float(p[m - 1]) if m else math.inf
                               for m, p in zip(counts, probs)])
    if log:
        out["path"] = [{"share": c[0], "n": c[2], "k": c[3], "lower": float(lower[i]),
                        "passed": bool(passed[i])} for i, c in enumerate(seq[:out["n_tested"]])]
    return out
