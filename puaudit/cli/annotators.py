"""``puaudit annotators INPUT``: audit every annotator of a comparison table, the judge included.

Prints a human summary; with ``--json`` the summary goes to stderr and stdout holds one JSON
object alone, with ``annotators`` (one object per annotator, the fields of
:class:`AnnotatorReport.annotators` and ``flags``, plus the latent-truth model's ``skill``,
``skill_lo``, ``skill_hi``, ``cohen_kappa``, ... and ``model_flags``), ``overall``
(``krippendorff_alpha``, ``n_items_multi``, ..., ``fleiss_kappa`` where defined) and ``models``
(one full report per fitted model, confusion matrices included; see :mod:`puaudit.annotators`).
Bad input prints the message on stderr and returns 2.
"""

from __future__ import annotations

import argparse

from puaudit.annotators.agreement import annotator_report
from puaudit.annotators import MODEL_NAMES, MODELS, annotator_model_report
from puaudit.cli.output import add_json_argument, fmt as _f, report_stream
from puaudit.cli.table_input import add_input_arguments, read_frame
from puaudit.data.writers import check_output_path, write_table
from puaudit.data.jsonsafe import dumps
from puaudit.data.schema import load_comparisons
from puaudit.errors import PUAuditError

__all__ = ["add_parser", "run"]


def add_parser(subparsers) -> argparse.ArgumentParser:
    """Register the ``annotators`` sub-command on an ``argparse`` subparsers object."""
    p = subparsers.add_parser(
        "annotators", help="per-annotator reliability and biases (the LLM judge included)",
        description=__doc__.splitlines()[0])
    add_input_arguments(p)
    p.add_argument("--annotator-col", metavar="C", help="column holding the annotator ids")
    p.add_argument("--judge-col", metavar="C", help="column holding the LLM judge's verdicts")
    p.add_argument("--human-col", metavar="C", help="column holding the human votes")
    p.add_argument("--min-votes", metavar="N", type=int, default=30,
                   help="strict votes needed to be flagged and to set the norm (default 30)")
    p.add_argument("--judge-in-alpha", action="store_true",
                   help="count the judge as one more coder in Krippendorff's alpha")
    p.add_argument("--no-judge", action="store_true", help="leave the judge out of the table")
    p.add_argument("--model", choices=[*MODELS, "all", "none"], default=None,
                   help="latent-truth model of the annotators: ds (Dawid-Skene, default), mace, "
                        "crowdlab (needs the audit's probabilities: an audit export or "
                        "--probs-col), all, or none")
    p.add_argument("--judge-in-model", action="store_true",
                   help="the judge votes in the latent-truth model as one more annotator")
    p.add_argument("--n-boot", metavar="N", type=int, default=200,
                   help="bootstrap replicates over items for the model's intervals (default 200)")
    p.add_argument("--probs-col", metavar="C",
                   help="column of P(judge right) per row for crowdlab "
                        "(default: puaudit_p_judge_right when present)")
    p.add_argument("--skill-bar", metavar="S", type=float, default=0.8,
                   help="flag an annotator whose whole skill interval is below S (default 0.8)")
    p.add_argument("--consensus-output", metavar="items.csv",
                   help="write the model's item consensus (label, its probability, P(A), P(B), "
                        "P(tie), majority vote, judge) of the first model")
    add_json_argument(p, report="summary")
    p.add_argument("-o", "--output", metavar="report.csv", help="write the annotator table")
    return p


def _summary(report) -> str:
    df = report.annotators
    ov = report.overall
    people = df[~df["is_judge"]]
    coders = "people + judge" if ov["alpha_includes_judge"] else "people only"
    lines = [f"{ov['n_annotators']} annotators, {ov['n_votes']} votes over {ov['n_items']} items "
             f"({ov['n_items_multi']} with 2+ votes).",
             f"Krippendorff's alpha (nominal, {coders}, {ov['n_items_alpha']} items): "
             f"{_f(ov['krippendorff_alpha'])}"]
    judge = df[df["is_judge"]]
    if len(judge):
        j = judge.iloc[0]
        lines.append(f"{j['annotator']}: agreement with people {_f(j['agree_peers'])} over "
                     f"{j['n_peer_pairs']} pairs; people agree with each other at median "
                     f"{_f(ov['median_agree_peers'])}.")
    elig = people[people["flag_eligible"]].sort_values("agree_judge", ascending=False)
    if len(elig):
        lines.append(f"Agreement with the judge (people with >= {report.params['min_votes_flag']} "
                     "strict votes):")
        lines += [f"  {r['annotator']:<20} {_f(r['agree_judge'])} [{_f(r['agree_judge_lo'])}, "
                  f"{_f(r['agree_judge_hi'])}]  n={r['n_agree_judge']}" for r in _ends(elig)]
    return "\n".join(lines + _flag_lines(df, "flags", "Flagged"))


def _ends(frame, k: int = 5) -> list:
    """Rows of ``frame`` to list: all of them up to 2k, else the first and last k."""
    show = frame if len(frame) <= 2 * k else frame.iloc[list(range(k)) + list(range(-k, 0))]
    return [r for _, r in show.iterrows()]


def _flag_lines(df, column: str, title: str) -> list[str]:
    """``title: N`` then one line per reason of every annotator flagged in ``column``."""
    flagged = df[[bool(f) for f in df[column]]]
    return [f"{title}: {len(flagged)}"] + [f"  {r['annotator']}: {reason}"
                                          for _, r in flagged.iterrows() for reason in r[column]]


def _model_summary(mrep) -> str:
    ov = mrep.overall
    df = mrep.annotators
    name = ov["model_name"]
    who = "people + judge" if ov["include_judge"] else "people only"
    lines = [f"{name} ({who}; {ov['n_items_fit']} items with 2+ votes fitted, "
             f"{ov['n_boot']} bootstrap refits): consensus differs from majority vote on "
             f"{ov['n_consensus_differs_majority']} of {ov['n_items']} items; agreement with the "
             f"judge on items where both are strict: {_f(ov['consensus_agree_judge_common'])} "
             f"(majority vote {_f(ov['majority_agree_judge_common'])}, "
             f"{ov['n_judge_common']} items).",
             f"Fleiss' kappa ({ov['fleiss_items']} items with "
             f"{ov['fleiss_votes_per_item']} votes): {_f(ov['fleiss_kappa'])}"]
    elig = df[df["flag_eligible"] & ~df["is_judge"] & df["skill"].notna()].sort_values("skill")
    if len(elig):
        lines.append(f"Skill (strict votes naming the true winner, balanced; chance 0.5), "
                     f"people with >= {mrep.params['min_votes_flag']} strict votes:")
        lines += [f"  {r['annotator']:<20} {_f(r['skill'])} [{_f(r['skill_lo'])}, "
                  f"{_f(r['skill_hi'])}]  kappa {_f(r['cohen_kappa'])}  n={r['n_strict']}"
                  for r in _ends(elig)]
    return "\n".join(lines + _flag_lines(df, "model_flags", f"Flagged by {name}"))


#: Per-annotator fields of the primary model merged into the annotator table and JSON.
MODEL_FIELDS = tuple(f"{k}{end}" for k in ("skill", "position_bias", "length_bias", "p_a_given_b",
                                           "p_b_given_a", "tie_given_strict", "tie_given_tie",
                                           "competence") for end in ("", "_lo", "_hi")) + (
    "weight", "cohen_kappa", "cohen_kappa_lo", "cohen_kappa_hi", "n_kappa", "model_flags")
MODEL_OVERALL = ("fleiss_kappa", "fleiss_items", "fleiss_votes_per_item",
                 "n_consensus_differs_majority", "n_model_flagged")


def _probabilities(df, table, column):
    """P(judge right) per row for CROWDLAB: ``column`` or an audit export's column; None."""
    import numpy as np
    import pandas as pd

    col = column or ("puaudit_p_judge_right" if "puaudit_p_judge_right" in df.columns else None)
    if col is None:
        return None
    if col not in df.columns:
        raise PUAuditError(f"--probs-col: no column '{col}' in the input.", column=col)
    p = pd.to_numeric(df[col], errors="coerce").to_numpy(dtype=float, copy=True)
    if np.isfinite(p).sum() == 0:
        raise PUAuditError(f"Column '{col}' holds no probabilities.", column=col)
    if ((p < 0) | (p > 1))[np.isfinite(p)].any():
        raise PUAuditError(f"Column '{col}' must hold probabilities in [0, 1].", column=col)
    return p


def _model_reports(args, table, df, judge_name="LLM judge") -> tuple[list, list[str]]:
    """The requested latent-truth model reports, and notes on the ones that could not run."""
    choice = args.model or "ds"
    if choice == "none":
        return [], []
    names = list(MODELS) if choice == "all" else [choice]
    probs = _probabilities(df, table, args.probs_col)
    reports, notes = [], []
    for name in names:
        if name == "crowdlab" and probs is None:
            msg = ("crowdlab needs the audit's probabilities: give an audit export (its "
                   "'puaudit_p_judge_right' column) or --probs-col.")
            if choice == "crowdlab":
                raise PUAuditError(msg)
            notes.append(f"{MODEL_NAMES[name]} skipped: {msg}")
            continue
        try:
            reports.append(annotator_model_report(
                table, model=name, include_judge=args.judge_in_model, judge_name=judge_name,
                p_judge_right=probs, n_boot=args.n_boot, min_votes_flag=args.min_votes,
                skill_bar=args.skill_bar))
        except PUAuditError as exc:
            if args.model is not None:  # asked for by name: an error
                raise
            notes.append(f"{MODEL_NAMES[name]} skipped: {exc}")
    return reports, notes


def _merge_model(report, mrep) -> None:
    """Merge the primary model's per-annotator fields and overall figures into ``report``."""
    m = mrep.annotators
    keep = ["annotator"] + [c for c in MODEL_FIELDS if c in m.columns]
    merged = report.annotators.merge(m[keep], on="annotator", how="left")
    merged["model_flags"] = [f if isinstance(f, list) else [] for f in merged["model_flags"]]
    report.annotators = merged
    report.overall["model"] = mrep.overall["model"]
    report.overall["model_includes_judge"] = mrep.overall["include_judge"]
    for k in MODEL_OVERALL:
        report.overall[k] = mrep.overall[k]


def _audit_link(table, df):
    """Per-annotator disagreement with the audit, when INPUT is a ``puaudit audit`` export."""
    if not {"puaudit_score", "puaudit_adjusted"} <= set(df.columns):
        return None
    import numpy as np
    import pandas as pd

    from puaudit.annotators.audit_link import annotator_score_disagreement

    score = pd.to_numeric(df["puaudit_score"], errors="coerce").to_numpy(dtype=float, copy=True)
    if "puaudit_split" in df.columns:  # P rows carry the human verdict itself: not audited
        score[~df["puaudit_split"].isin(["validation", "unlabelled"]).to_numpy()] = np.nan
    adjusted = np.array([v if v in ("A", "B") else None for v in df["puaudit_adjusted"]], dtype=object)
    link = annotator_score_disagreement(table, score, adjusted)
    keep = [c for c in link.columns if c != "annotator"]
    return link.rename(columns={c: c if c.startswith("audit") else f"audit_{c}" for c in keep})


def run(args: argparse.Namespace) -> int:
    """Run the sub-command; 0 on success (bad input raises :class:`PUAuditError`)."""
    if args.output:  # before any work: never overwrite the input, fail early on a bad path
        check_output_path(args.output, inputs=[args.input], what="output (-o)")
    if getattr(args, "consensus_output", None):
        check_output_path(args.consensus_output, inputs=[args.input], outputs=[args.output],
                          what="--consensus-output")
    df = read_frame(args)
    columns = {}
    if args.annotator_col:
        columns["annotator"] = args.annotator_col
    if args.human_col:
        columns["human"] = args.human_col
    table = load_comparisons(df, columns=columns, judge_column=args.judge_col)
    if args.n_boot < 0:
        raise PUAuditError(f"--n-boot must be 0 or more, got {args.n_boot}.")
    report = annotator_report(table, include_judge=not args.no_judge,
                              judge_in_alpha=args.judge_in_alpha,
                              min_votes_flag=args.min_votes)
    models, notes = _model_reports(args, table, df)
    if models:
        _merge_model(report, models[0])
    audit_link = _audit_link(table, df)
    if audit_link is not None:
        report.annotators = report.annotators.merge(audit_link, on="annotator", how="left")
    if args.output:
        out = report.to_frame()
        if "model_flags" in out.columns:
            out["model_flags"] = ["; ".join(f) for f in out["model_flags"]]
        write_table(out, args.output)
    if getattr(args, "consensus_output", None):
        if not models:
            raise PUAuditError("--consensus-output needs a latent-truth model (--model).")
        write_table(models[0].consensus, args.consensus_output)
    out = report_stream(args)  # stderr under --json: stdout holds the JSON line alone
    print(_summary(report), file=out)
    for mrep in models:
        print(_model_summary(mrep), file=out)
    for note in notes:
        print(note, file=out)
    if "audit_disagree" in report.annotators.columns:
        print("Audit link (INPUT is an audit export): share of each person's scored votes that "
              "the audit's adjusted verdict contradicts is in the 'audit_disagree' field.",
              file=out)
    if args.output:
        print(f"Annotator report written to {args.output}", file=out)
    if getattr(args, "consensus_output", None):
        print(f"Item consensus ({models[0].overall['model_name']}) written to "
              f"{args.consensus_output}", file=out)
    if args.json:
        payload = report.to_dict()
        if models:
            payload["models"] = {m.overall["model"]: m.to_dict() for m in models}
        print(dumps(payload))
    return 0

