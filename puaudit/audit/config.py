"""One audit configuration: every parameter of the audit, its default and its validation, once.

:class:`AuditConfig` is what :class:`puaudit.audit.estimator.PUAudit`, :func:`puaudit.audit.evaluate.evaluate`,
the command line (its options are generated from the fields here, by
:mod:`puaudit.cli.options`) and the dashboard (which keeps
one in its session and uses it as its cache key) all take. It is frozen and hashable.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field

import numpy as np

from puaudit.errors import PUAuditError
from puaudit.audit.evidence import EVIDENCE_SIGNALS, evidence_signal_names
from puaudit.audit.scorers import SCORERS

__all__ = ["AuditConfig", "SCORER_CHOICES", "RULES", "OT_METHODS", "CALIBRATION_CHOICES",
           "HUMAN_SOURCES", "CERTIFICATES"]

#: Relabel rules (:mod:`puaudit.audit.relabel`).
RULES = ("guarded", "paper")
#: Every scorer a user may name: ``auto`` (the default) chooses among the others from P.
SCORER_CHOICES = ("auto", *SCORERS, "evidence")
OT_METHODS = ("auto", "exact", "entropic", "fast")
CALIBRATION_CHOICES = ("isotonic", "platt")
HUMAN_SOURCES = ("votes", "consensus", "ds", "crowdlab")
#: Certificates (:mod:`puaudit.audit.certify.judge`): ``auto`` chooses per fold among the others.
CERTIFICATES = ("auto", "audit", "confidence")


def check_target(target: float) -> float:
    """``target`` as a float in (0.5, 1), else a :class:`PUAuditError` saying so."""
    try:
        t = float(target)
    except (TypeError, ValueError):
        raise PUAuditError(f"target_agreement must be a number, got {target!r}.") from None
    if not 0.5 < t < 1:
        raise PUAuditError(f"target_agreement must be in (0.5, 1) (e.g. 0.9: trusted verdicts "
                           f"agree with people at least 90% of the time), got {target}.")
    return t


def check_risk(risk: float) -> float:
    """``risk`` as a float in (0, 0.5], else a :class:`PUAuditError` saying so."""
    try:
        r = float(risk)
    except (TypeError, ValueError):
        raise PUAuditError(f"risk must be a number, got {risk!r}.") from None
    if not 0 < r <= 0.5:
        raise PUAuditError(f"risk must be in (0, 0.5] (e.g. 0.1: the guarantee holds with 90% "
                           f"confidence), got {risk}.")
    return r


def _cli(flag: str | None, help: str, **kw) -> dict:
    return {"flag": flag, "help": help, **kw}


@dataclass(frozen=True)
class AuditConfig:
    """Parameters of one audit (docs/method.md), with their defaults.

    Parameters
    ----------
    m : float in (0, 1], optional
        Share of audited verdicts believed right. ``None`` (default): the judge–human agreement
        rate on P, and the calibrated probabilities stay as fitted. A value moves every scorer's
        calibrated P(judge right) from P's base rate to ``m`` (Bayes' prior shift) and is the
        transported mass of ``prior-ot`` and ``pot``.
    p_ratio : float in (0, 1], default 0.3
        Share of annotated items used as verified positives P; the rest validate.
    alpha1, alpha2 : float in (0, 1], default 0.7
        P-core and improvement-alignment keep ratios of the denoising step.
    scorer : str, default "auto"
        ``auto`` compares ``prior-ot``, ``probe``, ``knn``, ``centroid`` and their stack by
        cross-fitted log loss on P and keeps the best; or name one of :data:`SCORER_CHOICES`.
        ``pot`` is the paper's partial transport (0/1 scores).
    rule : {"guarded", "paper"}, default "guarded"
        ``guarded`` reverses only rows whose calibrated P(judge right) < 0.5 − ``margin`` (and
        whose upper bound is below 0.5); ``paper`` keeps the top ⌊m·|U|⌋ per type.
    margin : float in [0, 0.5), default 0.05
    review_band : (lo, hi), optional
        ``paper`` rule: scores in [lo, hi) are marked ``uncertain`` instead of reversed.
    per_type : bool, default True
        Score per question type (else pooled). Denoising is always per type.
    ot_method : {"auto", "exact", "entropic", "fast"}, default "auto"
        Solver of the ``pot`` scorer.
    reg : float, optional
        Entropic regularisation of the transport scorers (default: each solver's own).
    n_folds : int >= 2, default 5
        Cross-fitting folds for calibration and for the automatic choice.
    calibration : {"isotonic", "platt"}, default "isotonic"
    cv_repeats : int >= 1, optional
        Repetitions of the cross-fitting folds; the calibrator is fitted on the out-of-fold
        scores of all of them, so one draw of the folds does not decide the audit. ``None``
        (default): enough repetitions for 20,000 out-of-fold scores, between 1 and 3 (3 below
        10,000 P rows, 2 below 20,000, 1 from there on, where one draw of the folds already
        moves little).
    calibration_bags : int >= 0, default 50
        Bootstrap refits (over items) of the isotonic calibration, averaged; the guarded rule's
        upper bound is their 95th percentile. 0: one fit, Wilson bounds per isotonic block.
    human_source : {"votes", "consensus", "ds", "crowdlab"}, default "votes"
        ``consensus`` replaces each row's human verdict by its item's majority vote; ``ds`` by
        the most probable truth of a Dawid-Skene model of the people's votes; ``crowdlab`` by
        CROWDLAB's consensus of the votes and the audit's own ``p_judge_right`` (a first audit
        on single votes, same configuration), so its validation is not independent of the
        scorer (see :mod:`puaudit.annotators`).
    evidence : "auto", "none" or tuple of str, default "auto"
        Label-free signals about each verdict (:mod:`puaudit.audit.evidence`: the judge's own
        Bradley–Terry model, lengths, position, both-order consistency, its probabilities,
        other judges) that the ``evidence`` scorer learns from: ``auto`` every one the table
        allows, ``none`` none (``auto`` then compares the embedding scorers only), or the
        signal families named (a comma-separated string on the command line).
    other_judges : tuple of str, optional
        Columns holding other judges' verdicts on the same rows, read as the evidence signals
        ``agrees_<column>`` (+1 agrees with the audited judge, -1 picks the other answer, 0 a
        tie, NaN no verdict). ``None`` (default): every column whose name says ``judge`` and
        not human, annotator, worker, rater, gold or true; ``()``: none.
    random_state : int or None, default 0
        Seeds the split, the folds and any sampling.
    target_agreement : float in (0.5, 1), optional
        Certified trust or escalate (:mod:`puaudit.audit.certify.judge`): audited verdicts whose
        calibrated P(judge right) clears a threshold certified on P (agreement with people
        >= the target, with probability 1 - ``risk``) are trusted, the rest escalated.
        ``None`` (default): no certification.
    risk : float in (0, 0.5], default 0.1
        Probability that the certified set misses the target.
    texts : bool, default True
        ``False``: the evidence-only audit (:mod:`puaudit.audit.scorers.evidence`): no text
        encoder is loaded and no embedding is computed or cached; P(judge right) comes from the
        evidence scorer on the verdict evidence and the question type alone, with the same
        calibration, guarded rule, base-rate test and certification. The first look while the
        texts are embedded, and the audit of tables too large to embed.
    """

    m: float | None = field(default=None, metadata=_cli(
        "--m", "share of audited verdicts believed right (default: judge-human agreement on P)"))
    p_ratio: float = field(default=0.3, metadata=_cli(
        "--p-ratio", "share of annotated items used as P"))
    alpha1: float = field(default=0.7, metadata=_cli("--alpha1", "P-core keep ratio"))
    alpha2: float = field(default=0.7, metadata=_cli("--alpha2", "improvement-alignment keep ratio"))
    scorer: str = field(default="auto", metadata=_cli(
        "--scorer", "scorer ('auto' chooses from P by cross-fitted log loss)",
        choices=SCORER_CHOICES))
    rule: str = field(default="guarded", metadata=_cli("--rule", "relabel rule", choices=RULES))
    margin: float = field(default=0.05, metadata=_cli("--margin", "guarded rule margin around 0.5"))
    review_band: tuple[float, float] | None = field(default=None, metadata=_cli(
        "--review-band", "paper rule: scores in [LO, HI) are flagged for review", nargs=2,
        metavar=("LO", "HI")))
    per_type: bool = field(default=True, metadata=_cli(
        "--pooled", "score pooled over question types instead of per type", invert=True))
    ot_method: str = field(default="auto", metadata=_cli(
        "--ot-method", "solver of the pot scorer", choices=OT_METHODS))
    reg: float | None = field(default=None, metadata=_cli(
        "--reg", "entropic regularisation of the transport scorers"))
    n_folds: int = field(default=5, metadata=_cli("--folds", "cross-fitting folds"))
    calibration: str = field(default="isotonic", metadata=_cli(
        "--calibration", "score -> P(judge right) map", choices=CALIBRATION_CHOICES))
    cv_repeats: int | None = field(default=None, metadata=_cli(
        "--cv-repeats", "repetitions of the cross-fitting folds pooled by the calibration "
        "(default: 3 for small P, down to 1 from 20,000 P rows)"))
    calibration_bags: int = field(default=50, metadata=_cli(
        "--calibration-bags", "bootstrap refits averaged by the isotonic calibration (0: one fit)"))
    human_source: str = field(default="votes", metadata=_cli(
        "--human-source", "build P from single votes, item majority (consensus), a Dawid-Skene "
        "model of the votes (ds) or CROWDLAB with the audit's probabilities (crowdlab)",
        choices=HUMAN_SOURCES))
    evidence: str | tuple = field(default="auto", metadata=_cli(
        "--evidence", "verdict-evidence signals the evidence scorer learns from: auto, none, or "
        "a comma-separated list of " + ", ".join(EVIDENCE_SIGNALS)))
    other_judges: tuple[str, ...] | None = field(default=None, metadata=_cli(
        "--other-judges", "columns holding other judges' verdicts, read as evidence (default: "
        "columns whose name says judge; the flag alone: none)", nargs="*", metavar="COL"))
    random_state: int | None = field(default=0, metadata=_cli("--seed", "random seed"))
    target_agreement: float | None = field(default=None, metadata=_cli(
        "--target-agreement", "certify the verdicts that agree with people at least this often "
        "(e.g. 0.9) and escalate the rest (default: no certification)"))
    risk: float = field(default=0.1, metadata=_cli(
        "--risk", "probability that the certified verdicts miss --target-agreement"))
    certificate: str = field(default="auto", metadata=_cli(
        "--certificate", "which certificate trusts verdicts: auto (the audit's P(judge right) "
        "and, when the judge gives probabilities, the judge's own confidence, each at risk/2, "
        "the one trusting more rows per fold), audit, or confidence",
        choices=CERTIFICATES))
    texts: bool = field(default=True, metadata=_cli(
        "--no-texts", "evidence-only audit: no text encoder, no embeddings; P(judge right) from "
        "the judge's own evidence (Bradley-Terry, lengths, position, both orders, "
        "probabilities, other judges) alone", invert=True))

    def __post_init__(self):
        def unit(name, lo_open=True, hi=1.0):
            v = getattr(self, name)
            try:
                v = float(v)
            except (TypeError, ValueError):
                raise PUAuditError(f"{name} must be a number, got {v!r}.") from None
            if math.isnan(v) or not ((0 < v) if lo_open else (0 <= v)) or v > hi:
                raise PUAuditError(f"{name} must be in {'(' if lo_open else '['}0, {hi}], got {v}.")
            object.__setattr__(self, name, v)

        if self.m is not None:
            unit("m")
        for name in ("p_ratio", "alpha1", "alpha2"):
            unit(name)
        if not (0 <= float(self.margin) < 0.5):
            raise PUAuditError(f"margin must be in [0, 0.5), got {self.margin}.")
        for name, allowed in (("scorer", SCORER_CHOICES), ("rule", RULES),
                              ("ot_method", OT_METHODS), ("calibration", CALIBRATION_CHOICES),
                              ("human_source", HUMAN_SOURCES)):
            if getattr(self, name) not in allowed:
                raise PUAuditError(f"Unknown {name.replace('_', ' ')} '{getattr(self, name)}': "
                                   f"choose one of {list(allowed)}.")
        if self.reg is not None and not (float(self.reg) > 0):
            raise PUAuditError(f"reg must be positive, got {self.reg}.")
        if int(self.n_folds) < 2:
            raise PUAuditError(f"n_folds must be at least 2, got {self.n_folds}.")
        object.__setattr__(self, "n_folds", int(self.n_folds))

        def whole(name: str, lo: int, hi: int = 1000) -> None:
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or not lo <= v <= hi:
                raise PUAuditError(f"{name} must be a whole number from {lo} to {hi}, got {v!r}.")
            object.__setattr__(self, name, int(v))

        if self.cv_repeats is not None:
            whole("cv_repeats", 1)
        whole("calibration_bags", 0)
        if self.review_band is not None:
            lo, hi = (float(v) for v in self.review_band)
            if not lo < hi:
                raise PUAuditError(f"review_band needs lo < hi, got {self.review_band}.")
            object.__setattr__(self, "review_band", (lo, hi))
        object.__setattr__(self, "per_type", bool(self.per_type))
        ev = self.evidence
        if isinstance(ev, str) and ev not in ("auto", "none"):
            ev = tuple(v.strip() for v in ev.split(",") if v.strip())
        elif not isinstance(ev, str):
            ev = tuple(ev)
        evidence_signal_names(ev)  # validates
        object.__setattr__(self, "evidence", ev)
        if self.other_judges is not None:
            names = ((self.other_judges,) if isinstance(self.other_judges, str)
                     else tuple(self.other_judges))
            if not all(isinstance(c, str) and c.strip() for c in names):
                raise PUAuditError(f"other_judges must be column names, got {self.other_judges!r}.")
            object.__setattr__(self, "other_judges", tuple(dict.fromkeys(names)))
        if self.target_agreement is not None:
            object.__setattr__(self, "target_agreement", check_target(self.target_agreement))
        object.__setattr__(self, "risk", check_risk(self.risk))
        if self.certificate not in CERTIFICATES:
            raise PUAuditError(f"certificate must be one of {list(CERTIFICATES)}, got "
                               f"{self.certificate!r}.")
        object.__setattr__(self, "texts", bool(self.texts))
        if not self.texts and self.scorer not in ("auto", "evidence"):
            raise PUAuditError(f"The {self.scorer} scorer reads the texts' embeddings; the "
                               "evidence-only audit (texts=False, --no-texts) has only the "
                               "evidence scorer: use scorer 'auto' or 'evidence'.")
        if not self.texts and self.evidence == "none":
            raise PUAuditError("The evidence-only audit (texts=False, --no-texts) learns from "
                               "the verdict evidence alone: evidence 'none' leaves it nothing. "
                               "Use evidence 'auto', or audit the texts.")

    def replace(self, **changes) -> "AuditConfig":
        """A copy with some fields changed (validated again)."""
        unknown = sorted(set(changes) - {f.name for f in dataclasses.fields(self)})
        if unknown:
            raise PUAuditError(f"Unknown audit parameter(s) {unknown}.")
        return dataclasses.replace(self, **changes)

    def to_cli(self) -> list[str]:
        """The command-line options that give exactly this configuration (every field whose
        value is not ``None``; ``None`` is the option's own default, "auto")."""
        out: list[str] = []
        for f in dataclasses.fields(self):
            value, flag = getattr(self, f.name), f.metadata["flag"]
            if f.metadata.get("invert"):
                if not value:
                    out.append(flag)
            elif value is None:
                continue
            elif isinstance(value, tuple) and f.name == "review_band":
                out += [flag, *(repr(float(v)) for v in value)]
            elif f.name == "other_judges":
                out += [flag, *value]
            elif isinstance(value, tuple):
                out += [flag, ",".join(value)]
            else:
                out += [flag, str(value)]
        return out

    def to_dict(self) -> dict:
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}

    @classmethod
    def defaults(cls) -> dict:
        """Every parameter's default (what the CLI, the dashboard and PUAudit report)."""
        return cls().to_dict()
