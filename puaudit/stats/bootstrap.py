"""The item-clustered bootstrap every interval of the tool draws from.

Rows of one item (a comparison's item id: question id, turn, prompt and model pair; see
:class:`~puaudit.data.schema.ComparisonTable`) are repeated votes on one comparison, and so are
correlated: resampling rows would treat them as independent and make intervals too narrow.
Every bootstrap therefore resamples **items**, each drawn item bringing all of its rows. A
caller without item ids passes the number of rows, and each row is then its own item.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
from numpy.typing import ArrayLike

__all__ = ["cluster_bootstrap_weights", "cluster_bootstrap_indices", "group_codes"]


def group_codes(groups: ArrayLike | int) -> tuple[np.ndarray, int]:
    """Code of each row's item (items numbered in the sorted order of their text) and the
    number of items; ``groups`` an int ``n`` gives ``n`` rows, each its own item."""
    if isinstance(groups, (int, np.integer)):
        return np.arange(int(groups)), int(groups)
    g = np.asarray(groups)
    if len(g) == 0:
        return np.zeros(0, dtype=int), 0
    # str: item ids may mix types (a question id read as int here, str there)
    _, codes = np.unique(g.astype(str), return_inverse=True)
    codes = codes.ravel()
    return codes, int(codes.max()) + 1


def cluster_bootstrap_weights(groups: ArrayLike | int, n_boot: int, *,
                              random_state: int | np.random.Generator | None
                              ) -> Iterator[np.ndarray]:
    """Row multiplicities of ``n_boot`` bootstrap resamples over items.

    Each resample draws as many items as there are, uniformly with replacement; a row's
    multiplicity is the number of times its item was drawn (0 = left out). Rows of one item
    therefore always enter together.

    Parameters
    ----------
    groups : array_like of item ids, one per row, or int
        Each row's item; an int ``n`` means ``n`` rows, each its own item (for callers that
        hold no item ids, or whose rows are already items).
    n_boot : int
        Number of resamples.
    random_state : int, Generator or None
        Seeds the draws; a ``numpy.random.Generator`` is used as is (its state advances with
        each resample, so a caller may interleave other draws from it).

    Yields
    ------
    ndarray of int, shape (n_rows,)
        The multiplicity of every row in one resample.
    """
    codes, n_groups = group_codes(groups)
    rng = np.random.default_rng(random_state)
    for _ in range(int(n_boot)):
        yield np.bincount(rng.integers(0, n_groups, n_groups), minlength=n_groups)[codes]


def cluster_bootstrap_indices(groups: ArrayLike | int, n_boot: int, *,
                              random_state: int | np.random.Generator | None
                              ) -> Iterator[np.ndarray]:
    """Row indices of ``n_boot`` bootstrap resamples over items: the draws of
    :func:`cluster_bootstrap_weights` (same parameters), seed for seed.

    Yields
    ------
    ndarray of int
        The rows of one resample, in row order, each repeated as often as its item was drawn:
        index a row-aligned array with it (``y[idx]``).
    """
    for weight in cluster_bootstrap_weights(groups, n_boot, random_state=random_state):
        yield np.repeat(np.arange(len(weight)), weight)
