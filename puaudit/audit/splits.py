"""The split stage: seeded P / validation / unlabelled rows (docs/method.md, "Splits"), and the
prepared split the later stages read (oriented difference vectors, verdict evidence)."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from puaudit.audit.config import AuditConfig
from puaudit.data.schema import ComparisonTable
from puaudit.embed.pairs import PairEmbeddings
from puaudit.errors import CLI, COLUMN_MAPPING, DASHBOARD, PUAuditError

__all__ = ["SPLIT_P", "SPLIT_VAL", "SPLIT_U", "SPLIT_EXCLUDED", "split_rows", "MIN_ANNOTATED",
           "PreparedSplit", "DiffRows", "prepare_split", "check_labels", "too_few_labels",
           "identical_responses"]

SPLIT_P = "P"
SPLIT_VAL = "validation"
SPLIT_U = "unlabelled"
SPLIT_EXCLUDED = "excluded"

#: fewest annotated strict rows (judge and human both A/B) the audit needs to learn anything.
MIN_ANNOTATED = 10


def too_few_labels(table: ComparisonTable, human: np.ndarray | None = None,
                   n_annotated: int | None = None) -> PUAuditError:
    """The error for a table with fewer than :data:`MIN_ANNOTATED` annotated rows, saying why.

    Three cases, each with what to do: no strict judge verdict at all; no human verdict at all
    (a judge file such as AlpacaEval annotations or arena-hard-auto judgments: how to add them,
    and the commands that work without them); too few.
    """
    human = table.human if human is None else human
    if n_annotated is None:
        n_annotated = int(sum(j in ("A", "B") and h in ("A", "B")
                              for j, h in zip(table.judge, human)))
    if not any(j in ("A", "B") for j in table.judge):
        n_ties = int(sum(j == "tie" for j in table.judge))
        return PUAuditError(
            f"Every judge verdict is a tie or empty ({n_ties} ties, {len(table) - n_ties} "
            f"empty, in column '{table.judge_column}'): the audit needs judge verdicts A or B.",
            column=table.judge_column, fix={
                CLI: "If another column holds the judge's verdicts, choose it (CLI: --judge-col "
                     "NAME).",
                DASHBOARD: "If another column holds the judge's verdicts, choose it (in "
                           f"{COLUMN_MAPPING})."})
    n_strict_h = int(sum(h in ("A", "B") for h in human))
    column = table.columns.get("human")
    if n_strict_h == 0:
        where = (f"its human column '{column}' holds no A or B" if column else
                 "no column of human verdicts was found")
        return PUAuditError(
            f"This file has no human verdicts ({where}; {len(table)} rows). The audit compares "
            f"the judge with people, so it needs at least {MIN_ANNOTATED} annotated rows (a "
            "person chose A or B where the judge did).", fix={
                DASHBOARD: "If a column holds them, choose it as the human column; otherwise "
                           "add one (A, B or tie, empty where nobody looked) and upload the "
                           "table again. Without human verdicts the Models page works on this "
                           "table, and the Consistency page on a pairwise table with question "
                           f"ids. The columns are chosen in {COLUMN_MAPPING}.",
                CLI: "Add human verdicts in one of three "
            "ways: a column of them (A, B or tie, empty where nobody looked; e.g. "
            "human_winner, or name it with --human-col); a human-judgments file joined with "
            "--human FILE (MT-Bench, FastChat and arena-hard-auto judgments); or label a "
            "sample of rows in Label Studio or Argilla and audit their export, which is read "
            "as it is (docs/data_formats.md). Once the audit runs, the Review page and `puaudit "
            "review export --table EXPORT --to label-studio` / `puaudit review import` queue "
            "more rows for people and bring their votes back. Without human verdicts, "
            "`puaudit report` and `puaudit models` work on this file as it is, and `puaudit "
            "trustjudge` (the judge's own consistency) on a pairwise table with question ids "
            "(docs/trustjudge.md)."})
    return PUAuditError(
        f"The audit needs at least {MIN_ANNOTATED} annotated rows (a human verdict A or B on a "
        f"row whose judge verdict is A or B); this table has {n_annotated} "
        f"({n_strict_h} strict human verdicts in all, {len(table)} rows). Add human labels "
        "for more rows (a few dozen per question type work best), or check that the human "
        f"column ('{column or 'none found'}') is the right one.",
        fix={DASHBOARD: f"The columns are chosen in {COLUMN_MAPPING}."})


def check_labels(table: ComparisonTable) -> None:
    """Refuse a table with fewer than :data:`MIN_ANNOTATED` annotated rows before any work.

    Counts rows whose judge and human verdicts are both A or B, so it needs no embedding:
    a judge file without human verdicts is refused in a second, not after the embedding pass.
    (:func:`prepare_split` checks again after identical responses are excluded.)
    """
    n = int(sum(j in ("A", "B") and h in ("A", "B") for j, h in zip(table.judge, table.human)))
    if n < MIN_ANNOTATED:
        raise too_few_labels(table, n_annotated=n)


def split_rows(judge: np.ndarray, human: np.ndarray, question_type: np.ndarray,
               item_id: np.ndarray, *, p_ratio: float, random_state: int | None,
               identical: np.ndarray | None = None, log: bool = False):
    """Assign each row to P, validation, unlabelled or excluded.

    Annotated rows (judge and human both strict) are split per question type, by item: a share
    ``p_ratio`` of each type's items (at least one when ``p_ratio > 0``) goes to **P**, the rest to
    **validation**; all rows of one item land on the same side. Rows with a strict judge verdict
    and no human verdict are **unlabelled**. Ties (either label), missing judge verdicts and
    identical responses are **excluded**, with the reason.

    Parameters
    ----------
    judge, human : arrays of {"A", "B", "tie", None}
    question_type, item_id : arrays of str
    p_ratio : float in (0, 1]
        Share of annotated items that become verified positives. ``1`` leaves no validation.
    random_state : int or None
    identical : bool array, optional
        Rows whose two responses are the same text (:func:`identical_responses`).
    log : bool
        Also return a dict with per-type counts.

    Returns
    -------
    split : ndarray of str
    reason : ndarray of str ("" where not excluded)
    """
    if not (0 < p_ratio <= 1):
        raise PUAuditError(f"p_ratio must be in (0, 1], got {p_ratio}.")
    n = len(judge)
    split = np.full(n, SPLIT_U, dtype=object)
    reason = np.full(n, "", dtype=object)
    judge_strict = np.array([j in ("A", "B") for j in judge], dtype=bool)
    human_strict = np.array([h in ("A", "B") for h in human], dtype=bool)
    human_any = np.array([h is not None for h in human], dtype=bool)
    for i in range(n):
        if judge[i] is None:
            split[i], reason[i] = SPLIT_EXCLUDED, "no judge verdict"
        elif judge[i] == "tie":
            split[i], reason[i] = SPLIT_EXCLUDED, "judge tie"
        elif human[i] == "tie":
            split[i], reason[i] = SPLIT_EXCLUDED, "human tie"
    if identical is not None:
        for i in np.flatnonzero(identical):
            if split[i] != SPLIT_EXCLUDED:
                split[i], reason[i] = SPLIT_EXCLUDED, "identical responses"
    annotated = judge_strict & human_strict & (split != SPLIT_EXCLUDED)
    unlabelled = judge_strict & ~human_any & (split != SPLIT_EXCLUDED)
    split[unlabelled] = SPLIT_U
    rng = np.random.default_rng(random_state)
    counts = {}
    qt = np.asarray(question_type, dtype=object)
    # An item belongs to one type (its most frequent among annotated rows) so that an item whose
    # rows carry different types still lands on one side.
    ann_rows = np.flatnonzero(annotated)
    item_type: dict = {}
    for r in ann_rows:
        item_type.setdefault(item_id[r], {}).setdefault(qt[r], 0)
        item_type[item_id[r]][qt[r]] += 1
    item_type = {k: max(sorted(v), key=lambda t: v[t]) for k, v in item_type.items()}
    for t in sorted(set(item_type.values())):
        items = np.array(sorted(k for k, v in item_type.items() if v == t), dtype=object)
        rows = np.array([r for r in ann_rows if item_type[item_id[r]] == t], dtype=int)
        order = rng.permutation(len(items))
        n_p = len(items) if p_ratio >= 1 else max(1, int(round(p_ratio * len(items))))
        p_items = set(items[order[:n_p]].tolist())
        in_p = np.array([item_id[r] in p_items for r in rows], dtype=bool)
        split[rows[in_p]] = SPLIT_P
        split[rows[~in_p]] = SPLIT_VAL
        counts[t] = {"items": len(items), "p_items": n_p, "P": int(in_p.sum()),
                     "validation": int((~in_p).sum())}
    if log:
        return split, reason, {"per_type": counts}
    return split, reason


#: rows per block when difference vectors are built for many rows at once (~100 MB of float64)
DIFF_BLOCK = 32_768


def _row_norms(emb: PairEmbeddings, rows: np.ndarray) -> np.ndarray:
    out = np.empty(len(rows))
    for s in range(0, len(rows), DIFF_BLOCK):
        out[s:s + DIFF_BLOCK] = np.linalg.norm(emb.diff(rows[s:s + DIFF_BLOCK]), axis=1)
    return out


class DiffRows:
    r"""Lazy ``(len(rows), d)`` array of normalised difference vectors oriented by ``sign``.

    :math:`z_i = s_i\,(F(x,o_A) - F(x,o_B)) / \lVert F(x,o_A) - F(x,o_B) \rVert`, built only
    for the rows a scorer asks for (slices or index arrays), so scoring a million audited rows
    never holds a million vectors.
    """

    def __init__(self, emb: PairEmbeddings, rows: np.ndarray, sign: np.ndarray):
        self.emb, self.rows, self.sign = emb, np.asarray(rows), np.asarray(sign, dtype=np.float64)
        self.shape = (len(self.rows), emb.dim)
        self.ndim = 2

    def __len__(self) -> int:
        return len(self.rows)

    def __getitem__(self, key) -> np.ndarray:
        r = self.rows[key]
        d = self.emb.diff(np.atleast_1d(r))
        d /= np.maximum(np.linalg.norm(d, axis=1), 1e-12)[:, None]
        d *= self.sign[np.atleast_1d(r)][:, None]
        return d if np.ndim(r) else d[0]

    def __array__(self, dtype=None, copy=None):
        out = self[:]
        return out if dtype is None else out.astype(dtype)


def _sign(verdicts: np.ndarray) -> np.ndarray:
    v = np.asarray(verdicts, dtype=object)
    return np.where(v == "A", 1.0, np.where(v == "B", -1.0, 0.0))


@dataclass
class PreparedSplit:
    """One seeded split with difference vectors oriented by the human and by the judge."""

    split: np.ndarray
    reason: np.ndarray
    emb: PairEmbeddings
    sign_human: np.ndarray  # (n,) +1 human says A, -1 B, 0 otherwise
    sign_judge: np.ndarray  # (n,) the same for the judge
    judge: np.ndarray
    human: np.ndarray
    question_type: np.ndarray
    item_id: np.ndarray
    p_ratio: float
    random_state: int | None
    m_estimate: float
    split_log: dict = field(default_factory=dict)
    #: label-free signals about each verdict (:mod:`puaudit.audit.evidence`); None: not computed
    evidence: object = None
    #: the judge's own probability of each verdict it gave
    #: (:func:`puaudit.data.judge_probabilities.judge_confidence`); None: it gives none
    confidence: np.ndarray | None = None
    #: each row's certification fold when the caller deals them (a cascade deals them once over
    #: the whole table, so its stages, the union and the strong judge alone share them); None:
    #: :func:`puaudit.audit.certify.judge.certify_split` deals them over this split's items
    folds: np.ndarray | None = None

    @property
    def p_rows(self) -> np.ndarray:
        return np.flatnonzero(self.split == SPLIT_P)

    @property
    def u_rows(self) -> np.ndarray:
        """Audited rows: unlabelled and validation (both ordered by the judge)."""
        return np.flatnonzero((self.split == SPLIT_U) | (self.split == SPLIT_VAL))

    def z_human(self, rows: np.ndarray) -> DiffRows:
        """Difference vectors of ``rows`` oriented by the human (winner minus loser), lazily."""
        return DiffRows(self.emb, rows, self.sign_human)

    def z_judge(self, rows: np.ndarray) -> DiffRows:
        """Difference vectors of ``rows`` oriented by the judge, lazily."""
        return DiffRows(self.emb, rows, self.sign_judge)

    def win_lose(self, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Embeddings of the human-preferred and the other response of ``rows`` (float64)."""
        rows = np.asarray(rows)
        a_wins = (self.sign_human[rows] >= 0)[:, None]
        e_a = self.emb.vectors[self.emb.idx_a[rows]].astype(np.float64)
        e_b = self.emb.vectors[self.emb.idx_b[rows]].astype(np.float64)
        return np.where(a_wins, e_a, e_b), np.where(a_wins, e_b, e_a)


def prepare_split(table: ComparisonTable, emb: PairEmbeddings, config: AuditConfig | None = None,
                  *, human: np.ndarray | None = None, with_evidence: bool = True) -> PreparedSplit:
    """Split rows (seeded, per type, by item), build the oriented difference vectors and the
    verdict evidence.

    ``config`` gives ``p_ratio``, ``random_state`` and ``evidence`` (which signals of
    :func:`puaudit.audit.evidence.verdict_evidence` to compute; ``"none"``: none, and the
    ``evidence`` scorer is unavailable); default :class:`AuditConfig`. ``human`` overrides the
    table's human verdicts (e.g. item-level consensus labels). ``with_evidence`` False: leave
    ``evidence`` None for the caller to fill (the stage cache computes it once per table, apart
    from the split). With ``config.texts`` False
    (the evidence-only audit) ``emb`` is not read and may be None. On both paths the rows
    excluded as identical are those whose two responses are the same text
    (:func:`identical_responses`), never those whose embeddings merely coincide.
    """
    config = AuditConfig() if config is None else config
    human = table.human if human is None else np.asarray(human, dtype=object)
    if not config.texts:  # the evidence-only audit: no embeddings (puaudit.audit.scorers.evidence)
        return _finish_split(table, emb, config, human, identical_responses(table),
                             with_evidence=with_evidence)
    if emb is None:
        raise PUAuditError("The audit needs the table's embeddings (embed_table), or "
                           "texts=False for the evidence-only audit.")
    if len(emb) != len(table):
        raise PUAuditError(f"Embeddings have {len(emb)} rows but the table has {len(table)}; "
                           "embed this table again.")
    norms = _row_norms(emb, np.arange(len(emb)))
    # Identical means the same text, never merely a zero difference of embeddings: two texts
    # an encoder cannot tell apart (a window too short, case in an uncased model) are audited.
    identical = identical_responses(table)
    # Say what is wrong with the embeddings themselves, rather than "too few annotated rows".
    if not np.isfinite(norms).all():
        bad = np.flatnonzero(~np.isfinite(norms))
        raise PUAuditError(
            f"The embeddings of row {bad[0] + 1} hold NaN or infinite values ({len(bad)} such "
            "rows): the encoder failed on them.", row=int(bad[0]) + 1, fix={
                CLI: "Embed the table again (or recompute those rows of the --embeddings file).",
                DASHBOARD: "Embed the table again."})
    if len(norms) and (norms < 1e-6).all():
        what = ("are all zero" if not emb.vectors.any() else
                "of response A and response B are identical on every row")
        raise PUAuditError(
            f"The embeddings {what} ({len(norms)} rows), so no response can be told from the "
            "other and nothing can be audited.", fix={
                CLI: "Check the encoder (or the --embeddings file: e_a must embed response A, e_b "
                     "response B) and that the two response columns differ.",
                DASHBOARD: "Check the encoder and that the two response columns differ."})
    return _finish_split(table, emb, config, human, identical, with_evidence=with_evidence)


def _finish_split(table: ComparisonTable, emb: PairEmbeddings | None, config: AuditConfig,
                  human: np.ndarray, identical: np.ndarray, *,
                  with_evidence: bool = True) -> PreparedSplit:
    """Split the rows and compute the verdict evidence (``identical``: rows that cannot be
    audited because their two responses are the same)."""
    p_ratio, random_state = config.p_ratio, config.random_state
    split, reason, slog = split_rows(table.judge, human, table.question_type, table.item_id,
                                     p_ratio=p_ratio, random_state=random_state,
                                     identical=identical, log=True)
    n_ann = int(((split == SPLIT_P) | (split == SPLIT_VAL)).sum())
    if n_ann < MIN_ANNOTATED:
        raise too_few_labels(table, human, n_ann)
    sh, sj = _sign(human), _sign(table.judge)
    p = split == SPLIT_P
    m_est = float(np.mean(table.judge[p] == human[p])) if p.any() else float("nan")
    ev = None
    if with_evidence and config.evidence != "none":
        from puaudit.audit.evidence import verdict_evidence

        ev = verdict_evidence(table, signals=config.evidence,
                              other_judges=config.other_judges)
    from puaudit.data.judge_probabilities import judge_confidence

    return PreparedSplit(split=split, reason=reason, emb=emb, sign_human=sh, sign_judge=sj,
                         judge=table.judge, human=human,
                         question_type=np.asarray(table.question_type, dtype=object),
                         item_id=table.item_id, p_ratio=p_ratio, random_state=random_state,
                         m_estimate=m_est, split_log=slog, evidence=ev,
                         confidence=judge_confidence(table))


def _same_text(x, y) -> bool:
    from puaudit.embed.text import as_text

    return x == y or as_text(x).strip() == as_text(y).strip()


def identical_responses(table: ComparisonTable) -> np.ndarray:
    """Rows whose two responses are the same text once surrounding white space is dropped
    (a missing response counts as the empty text). Every audit path excludes exactly these
    rows as "identical responses": the full audit, the cascade and the evidence-only audit. A
    row whose texts differ is audited even where the two embed alike."""
    a = np.asarray(table.response_a, dtype=object)
    b = np.asarray(table.response_b, dtype=object)
    return np.fromiter((_same_text(x, y) for x, y in zip(a.tolist(), b.tolist())), dtype=bool,
                       count=len(a))
