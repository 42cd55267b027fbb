r"""Model leaderboards from pairwise verdicts: win rates and Bradley–Terry strengths, four ways.

People audit a judge because they rank models with it. This module turns a table of pairwise
comparisons (``model_a``, ``model_b`` and a verdict per row) into one leaderboard per source of
verdicts, side by side:

``judge``    the LLM judge's verdicts on every row;
``audited``  the audited verdicts (:attr:`puaudit.audit.estimator.AuditResult.adjusted`, the export's
             ``puaudit_adjusted``);
``human``    the human verdicts only, on the rows people labelled;
``ppi``      prediction-powered estimates (PPI++, Angelopoulos et al. 2023): the judge on every
             row, rectified by the human labels on the labelled rows. They stay valid when the
             judge is biased, provided the labelled rows are a uniform random sample of the rows.

For each model: the **win rate against the field**, :math:`(\text{wins} + \tfrac12
\text{ties}) / \text{comparisons}` over the rows where it appears (``ties="exclude"``:
wins / decisive comparisons), and the **Bradley–Terry strength** :math:`\theta_k` with
:math:`P(k \text{ beats } l) = \sigma(\theta_k - \theta_l)` (log-odds scale, mean zero), each with
a 95% interval. Optionally the **length-controlled win rate** (AlpacaEval 2.0 style): a
Bradley–Terry model with the length difference as a covariate, read with the covariate at zero.

Inference. Rows are grouped into **units**: rows of one item (``groups``, e.g. the table's item
id: question, turn and model pair) share a unit, so several votes on one item count as several
comparisons in the estimate but as one draw in the bootstrap; without ``groups`` each row is its
own item. Intervals are percentile bootstrap intervals over units
(:func:`puaudit.stats.bootstrap.cluster_bootstrap_indices`) for ``judge``, ``audited`` and
``human``, and the prediction-powered bootstrap (``ppi_py.ppboot``, Zrnic 2024) for ``ppi``, whose
power-tuning weight :math:`\lambda` (PPI++) is estimated from bootstrap draws as in ``ppboot`` and
clipped to [0, 1]. ``judge`` and ``audited`` intervals describe sampling noise only: a biased judge
gets a narrow interval around the wrong value (that is what the comparison shows).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from puaudit.data.cells import id_text
from puaudit.errors import PUAuditError
from puaudit.rankings.bootstrap import _classical_sources, _draw_notes, _plan
from puaudit.rankings.bradley_terry import bradley_terry
from puaudit.rankings.leaderboard_limits import BOOTSTRAP_WORK, MIN_DRAWS
from puaudit.rankings.ppi import _ppi_source
from puaudit.rankings.result import ModelRankings, _leaderboard_frame
from puaudit.rankings.units import _I, _J, _N, _W, _X, _stats, _Units
from puaudit.rankings.winrates import TIES, length_covariate, verdict_scores

# The building blocks live in modules named for what they hold (winrates, bradley_terry, units,
# bootstrap, ppi, result, simulate); every public name stays importable from here.
__all__ = ["model_rankings", "table_models", "table_rankings"]

MODEL_COLUMNS_HINT = ("Model rankings need the names of the two models compared in each row: "
                      "columns model_a and model_b (or model_1 / model_2). Map them on the Data "
                      "page, or with --model-a-col / --model-b-col on the command line.")


def model_rankings(model_a, model_b, judge, human=None, audited=None, *, groups=None,
                   length_a=None, length_b=None, ties: str = "half", alpha: float = 0.05,
                   n_resamples: int = 1000, length_control: bool = False, prior: float = 0.1,
                   max_work: int = BOOTSTRAP_WORK,
                   random_state: int | None = 0) -> ModelRankings:
    r"""Per-model win rates and Bradley–Terry strengths with intervals, four ways.

    Parameters
    ----------
    model_a, model_b : sequence of str
        The models compared in each row (response A is ``model_a``'s). Rows with a missing name
        or the same model on both sides are left out (counted in ``diagnostics``).
    judge : sequence of {"A", "B", "tie", None}
        The LLM judge's verdicts.
    human : sequence of {"A", "B", "tie", None}, optional
        Human verdicts (None where nobody labelled the row). Several votes on one item are
        several rows: each vote is a comparison.
    audited : sequence of {"A", "B", "tie", None}, optional
        Audited verdicts (``AuditResult.adjusted``); the ``audited`` columns are NaN without.
    groups : sequence, optional
        Item of each row (e.g. ``ComparisonTable.item_id``): rows of one item and model pair
        are resampled together. Default: every row on its own.
    length_a, length_b : sequence of float, optional
        Response lengths, needed for ``length_control``.
    ties : {"half", "exclude"}, default "half"
        A tie is half a win for each side, or not a comparison at all.
    alpha : float, default 0.05
        Intervals have nominal coverage ``1 − alpha``.
    n_resamples : int, default 1000
        Bootstrap draws per interval.
    length_control : bool, default False
        Also fit :math:`\sigma(\theta_i - \theta_j + \gamma x)` with the AlpacaEval length
        feature :math:`x` (:func:`length_covariate`) and report the length-controlled win rate
        :math:`\mathrm{lc}_k = \text{mean over } k\text{'s comparisons of } \sigma(\theta_k -
        \theta_{\text{opponent}})` (the covariate set to zero), with intervals, and each
        source's length coefficient γ in ``diagnostics``.
    prior : float, default 0.1
        Gaussian prior precision of the Bradley–Terry fits (:func:`bradley_terry`).
    max_work : int, default :data:`BOOTSTRAP_WORK`
        Cap on bootstrap draws × models for each Bradley–Terry interval (strengths and, with
        length control, the length-controlled win rate; every draw is a refit over all models).
        Fewer draws are used when ``n_resamples`` × models exceeds it; when even
        :data:`MIN_DRAWS` draws would, those intervals are left out (NaN) and the PPI strengths
        use the win rate's PPI++ weight. Both are said in ``notes``; the draws used are in
        ``diagnostics`` (``n_draws_bt``, ``n_draws_winrate``). Win-rate draws (bincounts) are
        capped likewise at ``max(max_work,`` :data:`WINRATE_WORK` ``)``.
    random_state : int or None, default 0

    Returns
    -------

    Notes
    -----
    The prediction-powered estimate, its interval and when it is valid: :mod:`puaudit.rankings.ppi`.
    """
    _check_arguments(judge, model_a=model_a, model_b=model_b, human=human, audited=audited,
                     groups=groups, length_a=length_a, length_b=length_b, ties=ties, alpha=alpha,
                     n_resamples=n_resamples, max_work=max_work, length_control=length_control)
    data = _rows(model_a, model_b, n_rows=len(judge), groups=groups, length_a=length_a,
                 length_b=length_b, length_control=length_control)
    k = len(data.models)
    scores = data.scores(ties=ties, judge=judge, audited=audited, human=human)
    stats = {s: (None if v is None else _stats(data.units, v)) for s, v in scores.items()}
    plan = _plan(data.units, n_models=k, prior=prior, length_control=length_control,
                 n_resamples=int(n_resamples), max_work=int(max_work), alpha=alpha,
                 random_state=random_state)
    diag = {**data.counts(), "n_draws_winrate": plan.draws["winrate"],
            "n_draws_bt": plan.draws["bt"]}
    notes = _draw_notes(plan.draws, int(n_resamples), k, int(max_work), length_control)
    results = _classical_sources(stats, plan, notes)
    results["ppi"] = _ppi_source(stats, results, plan, diag=diag, notes=notes)
    if length_control:
        diag.update(_length_coefficients(stats, n_models=k, prior=prior))
    frame, strengths = _leaderboard_frame(data.models, data.lo, data.hi, scores["human"], results,
                                          length_control=length_control, diag=diag)
    params = {"ties": ties, "alpha": alpha, "n_resamples": int(n_resamples),
              "length_control": bool(length_control), "prior": prior, "max_work": int(max_work),
              "random_state": random_state}
    return ModelRankings(frame=frame, models=data.models, strengths=strengths, params=params,
                         diagnostics=diag, notes=notes)


def _check_arguments(judge, *, ties, alpha, n_resamples, max_work, length_control,
                     **columns) -> None:
    """Options in range, every column as long as ``judge``, lengths when length control is on."""
    for bad, why in ((ties not in TIES, f"ties must be one of {list(TIES)}, got {ties!r}."),
                     (not 0 < alpha < 1, f"alpha must be in (0, 1), got {alpha}."),
                     (int(n_resamples) < MIN_DRAWS,
                      f"n_resamples must be at least {MIN_DRAWS}, got {n_resamples}."),
                     (int(max_work) < 1, f"max_work must be at least 1, got {max_work}.")):
        if bad:
            raise PUAuditError(why)
    n_rows = len(judge)
    for name, arr in columns.items():
        if arr is not None and len(arr) != n_rows:
            raise PUAuditError(f"{name} has {len(arr)} entries but judge has {n_rows}.")
    if length_control and (columns["length_a"] is None or columns["length_b"] is None):
        raise PUAuditError("Length control needs the response lengths (length_a, length_b).")


def _model_index(model_a, model_b) -> tuple[list[str], np.ndarray, np.ndarray, np.ndarray]:
    def names(values):
        return np.array([id_text(v) for v in values], dtype=object)

    a, b = names(list(model_a)), names(list(model_b))
    valid = (a != "") & (b != "") & (a != b)
    models = sorted(set(a[valid]) | set(b[valid]))
    pos = {m: k for k, m in enumerate(models)}
    ia = np.array([pos.get(v, -1) for v in a], dtype=np.int64)
    ib = np.array([pos.get(v, -1) for v in b], dtype=np.int64)
    return models, ia, ib, valid


@dataclass
class _Rows:
    """The rows with two distinct models, oriented from the lower model index, and their units."""

    models: list
    n_rows: int  # all rows, used or not
    rows: np.ndarray  # positions of the rows used
    lo: np.ndarray  # lower model index of each row used
    hi: np.ndarray
    flip: np.ndarray  # model A is the higher index: A's score is 1 − the unit's
    units: _Units

    def counts(self) -> dict[str, int]:
        return {"n_rows": self.n_rows, "n_rows_used": len(self.rows),
                "n_rows_dropped": self.n_rows - len(self.rows), "n_units": self.units.size,
                "n_models": len(self.models)}

    def scores(self, *, ties: str, **verdicts) -> dict:
        """Source → :meth:`oriented` scores, for the sources given as keyword arguments."""
        return {source: self.oriented(v, ties=ties) for source, v in verdicts.items()}

    def oriented(self, verdicts, *, ties: str):
        """Scores of the lower-index model on the rows used (None without verdicts)."""
        if verdicts is None:
            return None
        s = verdict_scores(np.asarray(verdicts, dtype=object)[self.rows], ties=ties)
        return np.where(self.flip, 1.0 - s, s)


def _rows(model_a, model_b, *, n_rows: int, groups, length_a, length_b,
          length_control: bool) -> _Rows:
    """Index the models, keep the rows with two distinct ones and group them into units."""
    models, ia, ib, valid = _model_index(model_a, model_b)
    k = len(models)
    if k < 2:
        # the models named at all, not only those of usable rows: a file of one model (rows
        # comparing it with itself) has one, not none
        named = sorted({str(v).strip() for v in (*model_a, *model_b)
                        if not (v is None or v is pd.NA or (isinstance(v, float) and np.isnan(v)))
                        and str(v).strip()})
        shown = f" ({', '.join(named[:3])})" if named else ""
        same = " and no row compares two different ones" if named else ""
        raise PUAuditError("Model rankings need at least two distinct models in model_a / "
                           f"model_b; found {len(named)}{shown}{same}. " + MODEL_COLUMNS_HINT)
    rows = np.flatnonzero(valid)
    lo, hi = np.minimum(ia[rows], ib[rows]), np.maximum(ia[rows], ib[rows])
    # Units are oriented from the lower model index: its score is 1 − A's when A is the higher.
    flip = ia[rows] > ib[rows]

    x_row = np.zeros(len(rows))
    if length_control:
        x_a = length_covariate(np.asarray(length_a, dtype=float)[rows],
                               np.asarray(length_b, dtype=float)[rows])
        x_row = np.where(flip, -x_a, x_a)
    grp = (np.arange(n_rows) if groups is None else np.asarray(groups, dtype=object))[rows]
    key = pd.Series(grp).astype(str).to_numpy() + "\x1f" + lo.astype(str) + "\x1f" + hi.astype(str)
    code, uniq = pd.factorize(key)
    first = np.full(len(uniq), -1)
    first[code[::-1]] = np.arange(len(code))[::-1]
    x_unit = np.bincount(code, x_row, len(uniq)) / np.bincount(code, minlength=len(uniq))
    units = _Units(code, lo[first].astype(float), hi[first].astype(float), x_unit, n_models=k)
    return _Rows(models=models, n_rows=n_rows, rows=rows, lo=lo, hi=hi, flip=flip, units=units)


def _length_coefficients(stats: dict, *, n_models: int, prior: float) -> dict[str, float]:
    """The length coefficient γ of each classical source (NaN without comparisons)."""
    out = {}
    for source in ("judge", "audited", "human"):
        st = stats[source]
        if st is None or not (st[:, _N] > 0).any():
            out[f"gamma_{source}"] = np.nan
            continue
        st = st[st[:, _N] > 0]
        _, g = bradley_terry(st[:, _I].astype(int), st[:, _J].astype(int), st[:, _W],
                             st[:, _N], n_models=n_models, covariate=st[:, _X], prior=prior)
        out[f"gamma_{source}"] = g
    return out


# --- tables -------------------------------------------------------------------------------------
def table_models(table) -> tuple[list, list]:
    """The ``model_a`` / ``model_b`` columns of a :class:`~puaudit.data.schema.ComparisonTable`.

    Raises
    ------
    PUAuditError
        When either column is not mapped, with what to do about it.
    """
    cols = getattr(table, "columns", {}) or {}
    missing = [r for r in ("model_a", "model_b") if not cols.get(r)]
    if missing:
        raise PUAuditError(f"No {' / '.join(missing)} column found. " + MODEL_COLUMNS_HINT)
    frame = table.frame
    return frame[cols["model_a"]].tolist(), frame[cols["model_b"]].tolist()


def table_rankings(table, audited=None, **kwargs) -> ModelRankings:
    """:func:`model_rankings` of a :class:`~puaudit.data.schema.ComparisonTable`.

    Uses the table's model columns, judge and human verdicts, item ids as groups and the
    responses' lengths in characters; ``audited`` is ``AuditResult.adjusted`` (or the export's
    ``puaudit_adjusted`` column, normalised). Other keyword arguments go to
    :func:`model_rankings`.
    """
    model_a, model_b = table_models(table)
    length_a = [len(str(t)) for t in table.response_a]
    length_b = [len(str(t)) for t in table.response_b]
    return model_rankings(model_a, model_b, table.judge, table.human, audited,
                          groups=table.item_id, length_a=length_a, length_b=length_b, **kwargs)
