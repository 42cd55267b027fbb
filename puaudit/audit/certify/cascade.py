r"""A cascade of judges, cheapest first: trust a judge where it is certified, ask the next one
elsewhere, send to people what no judge is trusted on (docs/method.md, "A cascade of judges").

One split, drawn once by item and independent of every judge (:func:`cascade_split`), gives P
and validation rows. Stage :math:`k` audits judge :math:`k` on the region :math:`R_k` the stages
before it did not trust (its table holds no column of a later judge; earlier verdicts enter as
``agrees_<judge>`` evidence), certifies it at risk :math:`\delta / K`
(:func:`puaudit.audit.certify.judge.certify_folds`) and passes the rest on (with a ``budget``,
also its least confident certified rows).

**The guarantee** (``certify="joint"``, the default): every trusted row, with the verdict of the
*last* judge whose held-out probability reaches the threshold, is certified by one
fixed-sequence test of the union at risk :math:`\delta` (:func:`certify_union`), each earlier
judge's probability capped by ``1 - q`` of a later judge with the opposite strict verdict
(:func:`coherent_probabilities`):

.. math:: q_{ji} \leftarrow \min\bigl(q_{ji},\ 1 - q_{ki}\bigr)
          \quad\text{for } k > j \text{ asked, } v_{ki}, v_{ji} \in \{A, B\},\ v_{ki} \ne v_{ji}.

With probability at least :math:`1 - \delta` the trusted rows agree with people at least
:math:`\alpha` of the time. ``certify="per-stage"`` (Trust or Escalate's rule): each stage's own
trusted rows, each at :math:`\delta / K`.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from puaudit.audit.certify.judge import AUDIT, certify_folds
from puaudit.audit.certify.sequence import (SHARE_STEP, START_SHARE, item_outcomes,
                                            two_sided_interval, walk_shares)
from puaudit.audit.config import AuditConfig, check_risk, check_target
from puaudit.audit.result import exclusions
from puaudit.audit.splits import (MIN_ANNOTATED, SPLIT_EXCLUDED, SPLIT_P, SPLIT_U, SPLIT_VAL,
                                  split_rows)
from puaudit.data.schema import JUDGE_RULES, ComparisonTable, apply_judge_rule, normalize_verdicts
from puaudit.errors import PUAuditError

__all__ = ["PEOPLE", "CASCADE_COLUMNS", "CERTIFY_MODES", "JOINT", "PER_STAGE", "CascadeStage",
           "CascadeResult", "run_cascade", "stage_probabilities", "judge_columns_of",
           "coherent_probabilities", "union_sources", "choose_union_share", "certify_union"]

#: The stage of rows no judge is trusted on.
PEOPLE = "people"
#: How the trusted rows are certified (:func:`run_cascade`'s ``certify``).
JOINT, PER_STAGE = "joint", "per-stage"
CERTIFY_MODES = (JOINT, PER_STAGE)
#: Columns the cascade's export adds to the input.
CASCADE_COLUMNS = ("puaudit_cascade_split", "puaudit_cascade_stage", "puaudit_cascade_verdict",
                   "puaudit_cascade_routed_to")


@dataclass
class CascadeStage:
    """One stage: the rows sent to its judge (``region``) and the rows it trusts.

    ``region``, ``trusted`` and ``certified`` are (n,) bool over the input rows; ``verdicts``
    the judge's (A / B / tie / None); ``audit`` the stage's :class:`AuditResult` on its region
    (None when it could not run); ``message`` says why nothing was certified ("" otherwise).
    """

    judge: str
    risk: float
    region: np.ndarray
    trusted: np.ndarray
    verdicts: np.ndarray
    message: str = ""
    audit: object = None
    rows: np.ndarray | None = None
    #: rows the stage's own certification (risk / K, its region alone) trusted: they decide
    #: who the next judge is asked about; ``trusted`` is the final answer (the union's rule
    #: when the cascade is certified jointly, else the same rows)
    certified: np.ndarray | None = None
    #: rows of ``certified`` sent to the next judge as well (``run_cascade``'s ``budget``: its
    #: least confident certified rows); None when none were
    handed_on: np.ndarray | None = None


@dataclass
class CascadeResult:
    """A run of the cascade; arrays are aligned with the input rows.

    Attributes
    ----------
    judges : tuple of str
    target, risk : float
        The guarantee: trusted rows agree with people at least ``target`` of the time, with
        probability at least ``1 - risk``: one test of the union when ``certification`` is
        ``"joint"``, else each stage certified at ``risk / K`` (the stages' own certifications
        at ``risk / K`` decide who is asked either way).
    split, reason : (n,) str
        The cascade's own roles (P, validation, unlabelled, excluded) and why a row is excluded.
    human : (n,) object
        The people's verdicts the cascade used.
    item_id : (n,) str
    stages : list of CascadeStage
    stage : (n,) object
        The judge trusted on each row, or :data:`PEOPLE`.
    verdict : (n,) object
        That judge's verdict; for people, their verdict where known, else None.
    """

    judges: tuple
    target: float
    risk: float
    split: np.ndarray
    reason: np.ndarray
    human: np.ndarray
    item_id: np.ndarray
    stages: list = field(default_factory=list)
    stage: np.ndarray | None = None
    verdict: np.ndarray | None = None
    params: dict = field(default_factory=dict)
    #: ``"joint"``: the union certified by one test (:mod:`puaudit.audit.certify.cascade`);
    #: ``"per-stage"``: each stage's own certification is the answer
    certification: str = "per-stage"
    #: the joint certification's answer (:func:`~puaudit.audit.certify.cascade.certify_union`,
    #: without its per-row ``stage``); None when per-stage
    union: dict | None = None

    @property
    def audited(self) -> np.ndarray:
        """(n,) bool: the rows whose verdict the cascade decides (validation and unlabelled)."""
        return np.isin(self.split, [SPLIT_VAL, SPLIT_U])

    @property
    def routed(self) -> np.ndarray:
        """(n,) bool: rows sent through the stages (every row not excluded)."""
        return self.split != SPLIT_EXCLUDED

    def _realised(self, rows: np.ndarray, verdicts: np.ndarray) -> dict:
        """Agreement with people on ``rows`` (validation, items once), exact 95% interval."""
        rows = rows & (self.split == SPLIT_VAL)
        _, share, _ = item_outcomes(np.zeros(rows.sum()), verdicts[rows] == self.human[rows],
                                    self.item_id[rows])
        n, k = len(share), float(share.sum())
        return {"n": int(n), "agreement": k / n if n else float("nan"),
                "ci": two_sided_interval(k, n)}

    def coverage(self) -> float:
        """Share of audited rows trusted by some stage."""
        a = self.audited
        return float(np.mean(self.stage[a] != PEOPLE)) if a.any() else float("nan")

    def realised(self) -> dict:
        """Agreement with people among every trusted validation row (each with the verdict of
        the judge trusted on it), items counted once, with its exact 95% interval."""
        return self._realised(self.stage != PEOPLE, self.verdict)

    def stage_summaries(self) -> list[dict]:
        """Per stage: ``judge``, ``coverage`` (share of all audited rows it trusts),
        ``coverage_alone`` (share its own certification at ``risk / K`` trusted: what routed
        the rest to the next judge), ``coverage_of_region``, ``n_trusted`` (audited rows),
        ``realised`` (its trusted validation rows, items once, with ``realised_ci``),
        ``asked`` (share of routed rows sent to its judge), ``n_handed_on`` (rows it certified
        that were sent to the next judge as well: ``budget``), ``risk``, ``threshold``,
        ``certified_lower`` and ``message``."""
        a, routed = self.audited, self.routed
        n_a, n_routed = int(a.sum()), int(routed.sum())
        out = []
        for st in self.stages:
            r = self._realised(st.trusted, st.verdicts)
            n_t = int((st.trusted & a).sum())
            n_reg = int((st.region & a).sum())
            cert = getattr(st.audit, "certification", None)
            out.append({
                "judge": st.judge, "risk": st.risk,
                "coverage": n_t / n_a if n_a else float("nan"),
                "coverage_of_region": n_t / n_reg if n_reg else float("nan"),
                "n_trusted": n_t, "n_asked": int(st.region.sum()),
                "coverage_alone": float((st.certified & a).sum() / n_a) if n_a else float("nan"),
                "asked": float(st.region.sum() / n_routed) if n_routed else float("nan"),
                "n_handed_on": 0 if st.handed_on is None else int(st.handed_on.sum()),
                "realised": r["agreement"], "realised_ci": r["ci"], "n_validation_trusted": r["n"],
                "threshold": float("inf") if cert is None else cert.threshold,
                "certified_lower": float("nan") if cert is None else cert.choice["lower"],
                "scorer": None if st.audit is None else st.audit.params.get("scorer_used"),
                "message": st.message})
        return out

    def summary(self) -> dict:
        """The cascade in one dict: ``stages`` (:meth:`stage_summaries`), overall
        ``coverage``, ``realised`` (with ``realised_ci``), ``guarantee`` (target, risk,
        ``certification`` — ``joint`` or ``per-stage`` — and each stage's own risk), ``union``
        (the joint test per fold; None when per-stage) and the row counts."""
        r = self.realised()
        a = self.audited
        return {"judges": list(self.judges), "stages": self.stage_summaries(),
                "coverage": self.coverage(), "realised": r["agreement"],
                "realised_ci": r["ci"], "n_validation_trusted": r["n"],
                "guarantee": {"target": self.target, "risk": self.risk,
                              "certification": self.certification,
                              "risk_per_stage": self.risk / max(len(self.judges), 1)},
                "union": self.union,
                "n_rows": int(len(self.split)), "n_routed": int(self.routed.sum()),
                "n_audited": int(a.sum()), "n_people": int((self.stage[a] == PEOPLE).sum()),
                "n_p": int((self.split == SPLIT_P).sum()),
                "n_validation": int((self.split == SPLIT_VAL).sum()),
                "n_excluded": int((self.split == SPLIT_EXCLUDED).sum()),
                **exclusions(self.split, self.reason), "params": self.params}

    def as_per_stage(self) -> "CascadeResult":
        """The same run answered stage by stage: each stage trusts what its own certification
        at ``risk / K`` trusted (no refitting; the stages' audits and regions are shared)."""
        if self.certification == PER_STAGE:
            return self
        if any(st.handed_on is not None for st in self.stages):
            raise PUAuditError("This cascade sent certified rows on to the next judge (a "
                               "budget), so its stages' own answers overlap: only the joint "
                               "certification gives one judge per row.")
        stages = [dataclasses.replace(st, trusted=st.certified.copy()) for st in self.stages]
        stage, verdict = _answer(self.judges, stages, self.human)
        return dataclasses.replace(self, stages=stages, stage=stage, verdict=verdict,
                                   certification=PER_STAGE, union=None,
                                   params={**self.params, "certify": PER_STAGE})

    def to_frame(self, table: ComparisonTable) -> pd.DataFrame:
        """Every input row and column, plus :data:`CASCADE_COLUMNS`."""
        if len(table) != len(self.split):
            raise PUAuditError(f"This cascade ran on {len(self.split)} rows; the table has "
                               f"{len(table)}.")
        out = table.frame.copy()
        out["puaudit_cascade_split"] = self.split
        out["puaudit_cascade_stage"] = self.stage
        out["puaudit_cascade_verdict"] = self.verdict
        out["puaudit_cascade_routed_to"] = self.routed_to()
        return out

    def routed_to(self) -> np.ndarray:
        """(n,) object: the last judge each row was sent to (for a judge not asked yet: whom to
        ask it next), None for rows excluded from the cascade. Regions are nested, so every
        judge before it was asked too."""
        out = np.full(len(self.split), None, dtype=object)
        for st in self.stages:
            out[st.region] = st.judge
        return out


def judge_columns_of(columns, judges) -> dict:
    """Column -> the judge it belongs to: the judge's own column, and every column whose name
    starts with the judge's name and ``_`` (the longest such judge name wins); others absent."""
    names = sorted((j for j in judges if not str(j).startswith("rule:")), key=len, reverse=True)
    out = {}
    for c in columns:
        s = str(c)
        for j in names:
            if s == j or s.startswith(j + "_"):
                out[c] = j
                break
    return out


def _verdicts(table: ComparisonTable, spec: str, *, pending_ok: bool) -> np.ndarray | None:
    """A judge's verdicts (A / B / tie / None per row): a column, or ``rule:NAME``. None: the
    column is not in the table yet (allowed for trailing judges only)."""
    if spec.startswith("rule:"):
        rule = spec[5:]
        if rule not in JUDGE_RULES:
            raise PUAuditError(f"Unknown judge rule '{spec}': choose one of "
                               f"{['rule:' + r for r in JUDGE_RULES]} or a column.")
        return np.asarray(apply_judge_rule(table, rule).judge, dtype=object)
    frame = table.frame
    if spec not in frame.columns:
        if pending_ok:
            return None
        raise PUAuditError(f"Judge column '{spec}' is not in the table (its columns: "
                           f"{', '.join(map(str, list(frame.columns)[:30]))}).", column=spec)
    get = (lambda role: frame[table.columns[role]].tolist()  # noqa: E731
           if table.columns.get(role) in frame.columns else None)
    return np.asarray(normalize_verdicts(frame[spec].tolist(), column=spec,
                                         model_a=get("model_a"), model_b=get("model_b"),
                                         allow_missing=True), dtype=object)


def _check_judges(table: ComparisonTable, judges) -> tuple[list[str], list]:
    judges = [str(j).strip() for j in judges]
    if not judges or not all(judges):
        raise PUAuditError("Name the judges of the cascade, cheapest first (--judges COL1 COL2; "
                           "a rule as rule:longer).")
    dup = sorted({j for j in judges if judges.count(j) > 1})
    if dup:
        raise PUAuditError(f"Judge {dup[0]!r} is named twice; name each judge once.")
    human_col = table.columns.get("human")
    if human_col in judges:
        raise PUAuditError(f"Column '{human_col}' holds the people's verdicts, not a judge's.",
                           column=human_col)
    present = [j.startswith("rule:") or j in table.frame.columns for j in judges]
    # a judge not asked yet may be named after the ones that were: the loop of docs/judge.md
    last_present = max((i for i, p in enumerate(present) if p), default=-1)
    verdicts = [_verdicts(table, j, pending_ok=0 < i and last_present < i)
                for i, j in enumerate(judges)]
    return judges, verdicts


def cascade_split(table: ComparisonTable, embeddings, human: np.ndarray, config: AuditConfig):
    """P / validation / unlabelled / excluded, drawn once for every stage: by item, per type,
    among the rows with a people's verdict, whatever any judge said."""
    from puaudit.audit.splits import identical_responses

    if len(embeddings) != len(table):
        raise PUAuditError(f"Embeddings have {len(embeddings)} rows but the table has "
                           f"{len(table)}; embed this table again.")
    identical = identical_responses(table)  # the same text, not a zero embedding difference
    split, reason = split_rows(np.full(len(table), "A", dtype=object), human,
                               table.question_type, table.item_id, p_ratio=config.p_ratio,
                               random_state=config.random_state, identical=identical)
    n_ann = int(np.isin(split, [SPLIT_P, SPLIT_VAL]).sum())
    if n_ann < MIN_ANNOTATED:
        raise PUAuditError(f"The cascade needs at least {MIN_ANNOTATED} rows with a people's "
                           f"verdict A or B; this table has {n_ann}.")
    return split, reason


def _stage_table(table: ComparisonTable, rows: np.ndarray, judges: list, verdicts: list, k: int,
                 human: np.ndarray) -> ComparisonTable:
    """The table stage ``k`` sees: the region's rows, no column of a later judge, the earlier
    rules' verdicts as columns, judge ``k``'s verdicts as the judge."""
    from puaudit.data.judge_probabilities import (default_judge_column,
                                                  owner_of_probability_columns)

    default = table.extra.get("default_judge", "auto")
    default = default_judge_column(table.frame.columns) if default == "auto" else default
    # unprefixed p_A / p_B are the default judge's: a stage before it never sees them
    owner = {**owner_of_probability_columns(table.frame.columns, judges, default_judge=default),
             **judge_columns_of(table.frame.columns, judges)}
    later = set(judges[k + 1:])
    frame = table.frame.iloc[rows]
    frame = frame.drop(columns=[c for c, j in owner.items() if j in later])
    frame = frame.reset_index(drop=True)
    for j, v in zip(judges[:k + 1], verdicts[:k + 1]):
        if j.startswith("rule:"):
            frame[j] = v[rows]
    cols = {role: c for role, c in table.columns.items() if c in frame.columns}
    cols["judge"] = judges[k]
    take = lambda a: None if a is None else np.asarray(a)[rows]  # noqa: E731
    return ComparisonTable(frame=frame, columns=cols, prompt=take(table.prompt),
                           response_a=take(table.response_a), response_b=take(table.response_b),
                           judge=verdicts[k][rows], human=human[rows],
                           question_type=take(table.question_type), item_id=take(table.item_id),
                           annotator=take(table.annotator), judge_column=judges[k],
                           extra={**table.extra, "default_judge": default})


def _run_stage(table, embeddings, judges, verdicts, k, region, split, reason, human, config,
               target, risk_k, folds) -> CascadeStage:
    from puaudit.embed.pairs import PairEmbeddings
    from puaudit.audit.stages import audit_table
    from puaudit.audit.splits import prepare_split

    n = len(table)
    judge = judges[k]
    v = verdicts[k]
    empty = CascadeStage(judge=judge, risk=risk_k, region=region.copy(), trusted=np.zeros(n, bool),
                         verdicts=np.full(n, None, dtype=object) if v is None else v)
    if v is None:
        empty.message = (f"'{judge}' is not in the table yet: this stage certifies nothing and "
                         "passes every row on. Ask that judge about the rows the cascade routes to "
                         "it (puaudit_cascade_routed_to: puaudit judge CASCADE_EXPORT "
                         f"--only-escalated --winner-column {judge}) and run the cascade again "
                         "on its output.")
        return empty
    rows = np.flatnonzero(region)
    empty.rows = rows
    if not len(rows):
        empty.message = "No row reaches this stage."
        return empty
    sub = _stage_table(table, rows, judges, verdicts, k, human)
    emb = PairEmbeddings(vectors=embeddings.vectors, idx_a=embeddings.idx_a[rows],
                         idx_b=embeddings.idx_b[rows], encoder=embeddings.encoder)
    cfg = config.replace(target_agreement=target, risk=risk_k, human_source="votes",
                         other_judges=tuple(judges[:k]))
    try:
        prep = prepare_split(sub, emb, cfg, human=human[rows])
        s, why = split[rows].copy(), reason[rows].copy()
        jv = v[rows]
        for mask, text in ((np.array([x is None for x in jv]), "no judge verdict"),
                           (jv == "tie", "judge tie")):
            hit = mask & (s != SPLIT_EXCLUDED)
            s[hit], why[hit] = SPLIT_EXCLUDED, text
        p = s == SPLIT_P
        m_est = float(np.mean(jv[p] == human[rows][p])) if p.any() else float("nan")
        n_ann = int(np.isin(s, [SPLIT_P, SPLIT_VAL]).sum())
        if not p.any() or n_ann < MIN_ANNOTATED:
            raise PUAuditError(f"Too few annotated rows reach this stage ({int(p.sum())} P rows, "
                               f"{n_ann} annotated with a strict verdict of '{judge}').")
        prep = dataclasses.replace(prep, split=s, reason=why, m_estimate=m_est,
                                   split_log={"cascade_stage": k + 1, "n_rows": len(rows)},
                                   folds=folds[rows])
        res = audit_table(sub, emb, cfg, prep=prep)
    except PUAuditError as exc:
        empty.message = f"Nothing certified: {exc} Every row passes on."
        return empty
    trusted_sub = np.array([t is not None and bool(t) for t in res.certification.trusted])
    trusted = np.zeros(n, bool)
    trusted[rows[trusted_sub]] = True
    msg = res.certification.choice.get("message", "")
    return CascadeStage(judge=judge, risk=risk_k, region=region.copy(), trusted=trusted,
                        verdicts=v, message=(msg + " Every row passes on.") if msg else "",
                        audit=res, rows=rows)


def run_cascade(table: ComparisonTable, embeddings, judges, *, target: float, risk: float = 0.1,
                config: AuditConfig | None = None, certify: str = "joint",
                budget: float | None = None) -> CascadeResult:
    r"""Run the cascade of ``judges`` (cheapest first) at ``target`` agreement and ``risk``.

    Parameters
    ----------
    table : ComparisonTable
        Every judge's verdicts as a column (``rule:longer`` etc. for a rule); a judge's blank
        cells (not asked) and ties pass the row on.
    embeddings : PairEmbeddings
        Of ``table``'s rows (judge-independent).
    judges : sequence of str
        Columns (or ``rule:NAME``), cheapest first. Judges after the last column present may be
        absent (not asked yet): their stages certify nothing.
    target : float in (0.5, 1)
    risk : float in (0, 0.5]
        Each of the K stages certifies its own region at ``risk / K``, which decides who the
        next judge is asked about.
    certify : {"joint", "per-stage"}, default "joint"
        ``"joint"``: the trusted rows are those of one fixed-sequence test of the union at
        ``risk`` (:mod:`puaudit.audit.certify.cascade`); with one judge, or a judge not asked
        yet, the per-stage answer. ``"per-stage"``: each stage's own certification is the
        answer (Trust or Escalate's rule: every stage's trusted rows meet ``target``).
    budget : float in (0, 1], optional
        The share of the routed rows each later judge may be asked about: when the rows a stage
        did not certify are fewer than the budget buys (:math:`\lfloor b \cdot n \rfloor`), its
        least confident certified rows (by its held-out probability) are sent on as well, and
        the union's rule gives them the later judge's verdict where that judge is confident.
        Rows no stage certified are always sent on, so a judge is asked about more than the
        budget when the stages before it certified less. None (default): only the rows a stage
        did not certify. Certified jointly only (the regions overlap, so stage-by-stage answers
        would not be one per row).
    config : AuditConfig, optional
        Everything else of each stage's audit (``p_ratio``, ``random_state``, ``scorer``,
        ``human_source`` — ``votes``, ``consensus`` or ``ds`` —, ...). Its ``target_agreement``,
        ``risk``, ``m`` and ``other_judges`` are set per stage.

    Returns
    -------
    CascadeResult
    """
    from puaudit.audit.stages import human_labels

    target, risk = check_target(target), check_risk(risk)
    budget = _check_certify(certify, budget)
    config = AuditConfig() if config is None else config
    if config.human_source == "crowdlab":
        raise PUAuditError("human_source 'crowdlab' needs one judge's audit for its consensus; a "
                           "cascade has several judges. Use votes, consensus or ds.")
    config = config if config.m is None else config.replace(m=None)
    judges, verdicts = _check_judges(table, judges)
    human = human_labels(table, config)
    human = np.asarray(table.human if human is None else human, dtype=object)
    split, reason = cascade_split(table, embeddings, human, config)
    K = len(judges)
    items = np.asarray(table.item_id).astype(str)
    # one dealing of the certification folds for every stage, the union and the judge alone,
    # so that a fold's rows are judged by one rule chosen without that fold's outcomes
    folds = certify_folds(items, random_state=config.random_state)
    region = split != SPLIT_EXCLUDED
    routed = region.copy()
    bought = None if budget is None else math.floor(budget * region.sum() + 1e-9)
    stages = []
    left = risk
    for k in range(K):
        # a stage that tests nothing (its judge not asked yet, too few annotated rows, sets too
        # small to pass) spends none of the risk: its share goes to the stages after it
        risk_k = left / (K - k)
        st = _run_stage(table, embeddings, judges, verdicts, k, region, split, reason, human,
                        config, target, risk_k, folds)
        if _tested(st):
            left -= risk_k
        st.certified = st.trusted.copy()
        stages.append(st)
        nxt = region & ~st.certified
        region = nxt if bought is None or k == K - 1 else _hand_on(st, region, nxt, bought)
    union = None
    # a judge not asked yet: the per-stage answer, whose escalations are whom to ask next
    if certify == JOINT and K > 1 and all(v is not None for v in verdicts):
        # the strongest judge asked about every routed row is a candidate too: the union and
        # it are certified at risk / 2 each, and each fold takes the one that trusts more
        alone = (_run_stage(table, embeddings, judges[-1:], verdicts[-1:], 0, routed, split,
                            reason, human, config, target, risk / 2, folds)
                 if all(x is not None for x in verdicts[-1][routed]) else None)
        union = _certify_jointly(stages, split, human, items, folds,
                                 target=target, risk=risk if alone is None else risk / 2)
        if alone is not None:
            _union_or_alone(stages, union, alone, split, folds)
    stage, verdict = _answer(judges, stages, human)
    params = {**config.replace(target_agreement=target, risk=risk).to_dict(),
              "judges": list(judges), "certify": certify, "budget": budget}
    params.pop("other_judges", None)
    return CascadeResult(judges=tuple(judges), target=target, risk=risk, split=split,
                         reason=reason, human=human, item_id=items, stages=stages, stage=stage,
                         verdict=verdict, params=params,
                         certification=JOINT if union is not None else PER_STAGE, union=union)


def _check_certify(certify: str, budget) -> float | None:
    """``certify`` checked, and ``budget`` as a float in (0, 1] (None: no budget), refused with
    per-stage answers."""
    if certify not in CERTIFY_MODES:
        raise PUAuditError(f"certify must be one of {list(CERTIFY_MODES)}, got {certify!r}.")
    if budget is None:
        return None
    budget = float(budget)
    if not 0.0 < budget <= 1.0:
        raise PUAuditError(f"The budget is a share of the rows in (0, 1]; got {budget:g}.")
    if certify == PER_STAGE:
        raise PUAuditError("Each stage certified on its own needs every judge asked only about "
                           "the rows the earlier ones did not certify: drop the budget "
                           "(--budget) or certify jointly.")
    return budget


def _hand_on(st: CascadeStage, region: np.ndarray, nxt: np.ndarray, want: int) -> np.ndarray:
    """``nxt`` (the rows ``st`` did not certify) plus, until it holds ``want`` rows, ``st``'s
    certified rows of ``region`` of lowest held-out probability (ties by row order); sets
    ``st.handed_on``."""
    need = want - int(nxt.sum())
    cand = np.flatnonzero(region & st.certified)
    if need <= 0 or not len(cand):
        return nxt
    q = np.nan_to_num(stage_probabilities([st], len(region))[0][cand], nan=-np.inf)
    give = cand[np.argsort(q, kind="stable")[:need]]
    st.handed_on = np.zeros(len(region), bool)
    st.handed_on[give] = True
    return nxt | st.handed_on


def _answer(judges, stages: list, human: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(n,) the judge trusted on each row (:data:`PEOPLE` where none) and its verdict (for
    people, theirs where known), from each stage's ``trusted``."""
    stage = np.full(len(human), PEOPLE, dtype=object)
    verdict = np.where(np.array([h is not None for h in human]), human, None).astype(object)
    for j, st in zip(judges, stages):
        stage[st.trusted], verdict[st.trusted] = j, st.verdicts[st.trusted]
    return stage, verdict


def stage_probabilities(stages: list, n: int) -> np.ndarray:
    """(K, n) each stage's held-out P(judge right) over the input rows: P rows out of fold,
    audited rows by the stage's calibrator (before any prior shift); NaN outside its region or
    where its audit did not run."""
    prob = np.full((len(stages), n), np.nan)
    for k, st in enumerate(stages):
        cert = getattr(st.audit, "certification", None)
        if cert is None or st.rows is None:
            continue
        # the audit's calibrated P(judge right) (it reads the judge's confidence as evidence):
        # one scale for every judge, which the union's rule compares at one threshold
        cert = (cert.candidates or {}).get(AUDIT, cert)
        prob[k, st.rows[cert.p_rows]] = cert.p_prob
        prob[k, st.rows[cert.u_rows]] = cert.u_prob
    return prob


def _tested(st: CascadeStage) -> bool:
    """Whether the stage's certification tested any candidate set (and so spent its risk)."""
    cert = getattr(st.audit, "certification", None)
    if cert is None:
        return False
    cands = (cert.candidates or {"": cert}).values()
    return any(f.get("n_tested", 0) > 0 for c in cands for f in c.choice.get("folds", []))


def _union_or_alone(stages, union: dict, alone: CascadeStage, split, folds) -> None:
    """Per fold, the union's answer or the last judge's alone, whichever trusts more of the
    fold's audited rows (ties: the union); sets each stage's ``trusted`` (and the last stage's
    ``region``: a fold answered by the judge alone asked it about every routed row) and records
    the choice in ``union``."""
    audited = np.isin(split, [SPLIT_VAL, SPLIT_U])
    routed = split != SPLIT_EXCLUDED
    any_union = np.any([st.trusted for st in stages], axis=0)
    last = stages[-1]
    chosen = []
    for f, ans in enumerate(union["folds"]):
        mine = folds == f
        n_union = int((any_union & audited & mine).sum())
        n_alone = int((alone.trusted & audited & mine).sum())
        pick = "alone" if n_alone > n_union else "union"
        ans["certificate"] = pick
        chosen.append(pick)
        if pick == "alone":
            for st in stages:
                st.trusted = st.trusted & ~mine
            last.trusted = last.trusted | (alone.trusted & mine)
            last.region = last.region | (routed & mine)
    cov_alone = (float((alone.trusted & audited).sum() / audited.sum()) if audited.any()
                 else float("nan"))
    union["alone"] = {"judge": alone.judge, "risk": alone.risk, "coverage": cov_alone,
                      "n_folds_chosen": chosen.count("alone"), "message": alone.message}
    union["risk_union"] = alone.risk


def _certify_jointly(stages, split, human, items, folds, *, target, risk) -> dict:
    """Certify the union (:func:`puaudit.audit.certify.cascade.certify_union`) and set each
    stage's ``trusted`` to the rows the union's rule gives its judge."""
    n = len(split)
    prob = coherent_probabilities(stage_probabilities(stages, n), [st.verdicts for st in stages])
    correct = np.array([[v is not None and v == h for v, h in zip(st.verdicts, human)]
                        for st in stages], dtype=float)
    out = certify_union(prob, correct, split, items, folds, target=target, risk=risk)
    who = out.pop("stage")
    for k, st in enumerate(stages):
        st.trusted = who == k
    return out


def coherent_probabilities(prob: np.ndarray, verdicts) -> np.ndarray:
    """``prob`` (K, n) with each earlier judge's probability capped by ``1 - q_k`` of every later
    judge ``k`` asked about the row that gave the opposite strict verdict (two judges that
    disagree are not both right; module docstring).

    ``verdicts``: K arrays of each judge's verdict per row (A, B, tie or None). A copy is
    returned; NaN (not asked) stays NaN and never caps.
    """
    prob = np.array(prob, dtype=np.float64, copy=True)
    v = [np.asarray(x, dtype=object) for x in verdicts]
    strict = [np.isin(x, ["A", "B"]) for x in v]
    asked = np.isfinite(prob)
    for j in range(len(prob) - 1):
        for k in range(j + 1, len(prob)):
            apart = asked[j] & asked[k] & strict[j] & strict[k] & (v[j] != v[k])
            prob[j, apart] = np.minimum(prob[j, apart], 1.0 - prob[k, apart])
    return prob


def union_sources(prob: np.ndarray, correct: np.ndarray, items: np.ndarray, rows: np.ndarray
                  ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One source's items, most confident first: ``(c, q, a)``.

    ``c`` (n_items,): the item's best probability over the judges asked; ``q`` (K, n_items):
    each judge's probability (``-inf``: not asked); ``a`` (K, n_items): the share of the item's
    votes that agree with judge k. Items without any probability are left out.
    """
    q_rows = np.nan_to_num(np.asarray(prob, dtype=np.float64)[:, rows], nan=-np.inf)
    keep = np.isfinite(q_rows).any(axis=0)
    rows, q_rows = np.asarray(rows)[keep], q_rows[:, keep]
    k = q_rows.shape[0]
    if not len(rows):
        return np.zeros(0), np.zeros((k, 0)), np.zeros((k, 0))
    _, inv = np.unique(np.asarray(items)[rows].astype(str), return_inverse=True)
    n_items = int(inv.max()) + 1
    count = np.bincount(inv, minlength=n_items).astype(float)
    # votes of one item are one pair: one probability per judge (the max guards float noise)
    q = np.full((k, n_items), -np.inf)
    for j in range(k):
        np.maximum.at(q[j], inv, q_rows[j])
    a = np.stack([np.bincount(inv, weights=np.asarray(correct, dtype=np.float64)[j, rows],
                              minlength=n_items) / count for j in range(k)])
    c = q.max(axis=0)
    order = np.argsort(-c, kind="stable")
    return c[order], q[:, order], a[:, order]


def _last_reaching(q: np.ndarray, tau: float) -> np.ndarray:
    """Index of the last judge whose probability reaches ``tau`` (columns of ``q``); -1: none."""
    hit = q[::-1] >= tau
    return np.where(hit.any(axis=0), len(q) - 1 - np.argmax(hit, axis=0), -1)


def choose_union_share(sources, *, target: float, risk: float, floor: float = 0.5,
                       start_share: float = START_SHARE, step: float = SHARE_STEP,
                       log: bool = False) -> dict:
    """The largest share of the union certified by fixed-sequence testing (docs/method.md, "A
    cascade of judges": each item scored by the verdict of the last judge reaching the threshold).

    Parameters
    ----------
    sources : sequence of (c, q, a)
        Each source's items from :func:`union_sources`.
    target, risk, floor, start_share, step, log
        As :func:`puaudit.audit.certify.sequence.choose_share`.

    Returns
    -------
    dict with ``share`` (0: nothing certified), ``thresholds`` (per source, its lowest ``c`` in
    the certified set; ``inf`` when none), ``lower``, ``n``, ``k``, ``n_items``,
    ``n_items_by_source``, ``n_needed``, ``n_tested``, ``stopped_at``, ``message`` and, with
    ``log``, ``path`` (share, n, k, lower, passed of every candidate tested): the walk of
    :func:`~puaudit.audit.certify.sequence.walk_shares`, each candidate scored by the rule.
    """
    def outcome(counts) -> float:
        k = 0.0
        for m, (c, q, a) in zip(counts, sources):
            if m:  # each item scored by the verdict the rule gives it at this source's c[m-1]
                who = _last_reaching(q[:, :m], c[m - 1])
                k += float(a[who, np.arange(m)].sum())
        return k

    out = walk_shares([c for c, _, _ in sources], outcome, target=target, risk=risk,
                      floor=floor, start_share=start_share, step=step, log=log)
    if out["share"] == 0:
        out["message"] = _uncertified_message(out, floor)
    return out


def _uncertified_message(out: dict, floor: float) -> str:
    """Why no share of the union was certified (``out``: :func:`walk_shares`'s answer)."""
    target, risk, first = out["target"], out["risk"], out["first_fail"]
    if out["n_items"] < out["n_needed"]:
        return (f"Too few annotated items to certify the cascade's agreement >= {target:g} at "
                f"risk {risk:g}: at least {out['n_needed']} are needed and the judges' regions "
                f"hold {out['n_items']}.")
    return (f"No share of the cascade's trusted rows certifies agreement >= {target:g} at risk "
            f"{risk:g}" + (f": the {first[0]} most confident annotated items agree "
                           f"{first[1] / first[0]:.1%} of the time, lower bound "
                           f"{first[2]:.3f}." if first else
                           f": no share starts with a probability of at least {floor:g}.")
            + " Every row goes to people.")


def certify_union(prob, correct, role, items, folds, *, target: float, risk: float,
                  floor: float = 0.5, log: bool = False) -> dict:
    """Certify the union of a cascade's stages, one fold at a time (docs/method.md).

    Parameters
    ----------
    prob : (K, n) float
        Held-out P(judge k right) per row (P: out of fold; others: the stage's calibrator);
        NaN where judge k was not asked or has no probability.
    correct : (K, n) bool or float
        Judge k's verdict equals the people's (read on P and validation rows only).
    role : (n,) str
        ``P``, ``validation``, ``unlabelled`` or anything else (never trusted).
    items, folds : (n,)
        Each row's item, and its certification fold (dealt by item before any outcome is read).
    target, risk : float
        :math:`\\alpha` and :math:`\\delta`.

    Returns
    -------
    dict with ``stage`` (n,) int (the judge trusted on each P, validation and unlabelled row,
    -1: people), ``folds`` (each fold's :func:`choose_union_share` answer, with ``fold`` and
    ``risk``), ``share`` (their mean), ``lower`` (the smallest bound certified), ``risk_fold``,
    ``n_folds_certified`` and ``message`` (why no fold certified anything, or "").
    """
    target, risk = check_target(target), check_risk(risk)
    prob = np.atleast_2d(np.asarray(prob, dtype=np.float64))
    correct = np.atleast_2d(np.asarray(correct, dtype=np.float64))
    role, folds = np.asarray(role).astype(str), np.asarray(folds)
    n = prob.shape[1]
    if correct.shape != prob.shape or not (len(role) == len(items) == len(folds) == n):
        raise PUAuditError(f"certify_union: prob {prob.shape}, correct {correct.shape}, role "
                           f"{len(role)}, items {len(items)} and folds {len(folds)} disagree.")
    c = np.nan_to_num(prob, nan=-np.inf).max(axis=0)
    is_p, is_v = role == SPLIT_P, role == SPLIT_VAL
    audited = is_v | (role == SPLIT_U)
    p_src = union_sources(prob, correct, items, np.flatnonzero(is_p))
    has_val = bool((is_v & np.isfinite(c)).any())
    n_folds = int(folds.max(initial=-1)) + 1 if n else 0
    risk_f = risk / n_folds if has_val and n_folds > 1 else risk
    stage = np.full(n, -1)
    answers = []
    shared = None if has_val else choose_union_share([p_src], target=target, risk=risk_f,
                                                     floor=floor, log=log)
    for f in range(n_folds):
        if has_val:
            v_src = union_sources(prob, correct, items, np.flatnonzero(is_v & (folds != f)))
            ans = choose_union_share([p_src, v_src], target=target, risk=risk_f, floor=floor,
                                     log=log)
        else:
            ans = dict(shared, thresholds=list(shared["thresholds"]) + [math.inf])
        answers.append(dict(ans, fold=f, risk=risk_f))
        if ans["share"] <= 0:
            continue
        tau_p, tau_v = ans["thresholds"][0], ans["thresholds"][1]
        mine = folds == f
        p_rows = np.flatnonzero(mine & is_p & (c >= tau_p))
        stage[p_rows] = _last_reaching(prob[:, p_rows], tau_p)
        if has_val:
            u_rows = np.flatnonzero(mine & audited & (c >= tau_v))
            stage[u_rows] = _last_reaching(prob[:, u_rows], tau_v)
        else:
            cand = np.flatnonzero(mine & audited & np.isfinite(c))
            cand = cand[np.argsort(-c[cand], kind="stable")]
            top = cand[:int(math.floor(ans["share"] * len(cand) + 1e-9))]
            top = top[c[top] >= tau_p]
            stage[top] = _last_reaching(prob[:, top], tau_p)
    done = [a for a in answers if a["share"] > 0]
    return {"stage": stage, "folds": answers, "risk_fold": risk_f,
            "share": float(np.mean([a["share"] for a in answers])) if answers else 0.0,
            "lower": min(a["lower"] for a in done) if done else float("nan"),
            "n_folds_certified": len(done),
            "message": "" if done else (answers[0]["message"] if answers else
                                        "No annotated row reaches the cascade.")}
