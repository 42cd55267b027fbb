"""Other judges on the dashboard: the Data page's picker and the Audit page's table (the table is
built by :func:`puaudit.audit.judges.other_judges_frame`; this module only shows it)."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from components import audit_runs, state
from components.safe_text import md

__all__ = ["heuristic_other_judges", "other_judge_picker", "other_judges_table"]


@st.cache_data(show_spinner=False, max_entries=8)
def _heuristic(content_hash: str, _table) -> list[str]:
    from puaudit.audit.evidence import verdict_evidence

    try:
        ev = verdict_evidence(_table, signals=("agrees",))
    except Exception:  # noqa: BLE001 - a table the heuristic cannot read offers no default
        return []
    return [c for cols in ev.sources.values() for c in cols]


def heuristic_other_judges(table) -> list[str]:
    """The columns the audit reads as other judges when none are named (the name heuristic),
    once per table."""
    return list(_heuristic(state.table_hash(table), table))


def other_judge_picker(frame: pd.DataFrame, table, mapping: dict, data_version) -> None:
    """The "Other judges" multi-select: its default is the name heuristic's columns; a choice
    names them explicitly (``AuditConfig.other_judges``; none chosen: no other judge)."""
    ss = st.session_state
    params = state.audit_params()
    if ss.get("other_judges_for") != data_version:  # new data: back to the heuristic
        ss["other_judges_for"] = data_version
        params["other_judges"] = None
    taken = {mapping.get("judge"), mapping.get("human")}
    options = [str(c) for c in frame.columns if str(c) not in taken
               and not str(c).startswith("puaudit_")]
    guessed = heuristic_other_judges(table)
    current = params.get("other_judges")
    default = [c for c in (guessed if current is None else current) if c in options]
    chosen = st.multiselect(
        "Other judges", options, default=default, key=f"other_judges_{data_version}",
        help="Columns holding other judges' verdicts on the same rows. Each becomes evidence "
             "(agrees / picks the other answer / tie) that the evidence scorer can weigh. "
             "Preselected: the columns whose name says judge. CLI: --other-judges COL ...")
    if current is None and chosen == default:
        return
    if current is None or tuple(current) != tuple(chosen):
        params["other_judges"] = tuple(chosen)


def other_judges_table(result, table) -> None:
    """Each other judge's agreement with people on P (exact 95% interval) and its weight in the
    evidence model (fold range); nothing when the audit read no other judge."""
    from puaudit.audit.judges import other_judges_frame

    try:
        frame = other_judges_frame(result, table)
    except Exception as exc:  # noqa: BLE001 - a table that changed under the result
        st.caption(md(f"Other judges: not shown ({exc})."))
        return
    if frame.empty:
        return
    st.markdown("**Other judges**: agreement with people on P, and weight in the evidence model")
    st.dataframe(
        frame.drop(columns=["signal"]), hide_index=True, width="stretch",
        column_config={
            "judge": st.column_config.TextColumn("judge (column)"),
            "n_p_items": st.column_config.NumberColumn("P items"),
            "agreement": st.column_config.NumberColumn("agrees with people", format="%.3f"),
            "agreement_lo": st.column_config.NumberColumn("95% low", format="%.3f"),
            "agreement_hi": st.column_config.NumberColumn("95% high", format="%.3f"),
            "audited_judge_agreement": st.column_config.NumberColumn(
                "audited judge, same items", format="%.3f"),
            "coverage": st.column_config.NumberColumn("has a verdict", format="%.2f"),
            "weight": st.column_config.NumberColumn("weight", format="%+.3f"),
            "weight_lo": st.column_config.NumberColumn("fold 2.5%", format="%+.3f"),
            "weight_hi": st.column_config.NumberColumn("fold 97.5%", format="%+.3f")})
    st.caption("Agreement on P items where that judge gave A or B (items counted once, exact "
               "Clopper–Pearson interval). Weight: its coefficient on the standardised scale "
               "(positive: the audited judge is more likely right when this one agrees), with "
               "its range over the cross-fitting fold fits; empty when the evidence model was "
               "not fitted.")


@st.cache_data(show_spinner=False, max_entries=8)
def _cascade(content_hash: str, encoder_label: str, judges: tuple, target: float, risk: float,
             config, certify: str, budget, _table, _emb):
    from puaudit.audit.certify.cascade import run_cascade

    res = run_cascade(_table, _emb, list(judges), target=target, risk=risk, config=config,
                      certify=certify, budget=budget)
    return res.summary(), res.to_frame(_table)


def _certify_controls() -> tuple[str, float | None]:
    """How the cascade's trusted rows are certified, and its budget (joint only)."""
    from puaudit.audit.certify.cascade import CERTIFY_MODES, JOINT, PER_STAGE

    certify = st.radio(
        "Certify the trusted rows", list(CERTIFY_MODES), horizontal=True,
        key="w_cascade_certify",
        format_func={JOINT: "together (one test at the risk)",
                     PER_STAGE: "each stage on its own (risk / K)"}.get,
        help="Together: every trusted row, each with its judge's verdict, is certified by one "
             "fixed-sequence test at the section's risk, so a stage that agrees well above the "
             "target lends its margin to the next. Each stage on its own: every stage's "
             "trusted rows meet the target by themselves (Trust or Escalate's rule; trusts "
             "less). CLI: --certify joint | per-stage.")
    budget = st.select_slider(
        "Budget: share of the rows each later judge may be asked about",
        options=[None] + [round(0.05 * i, 2) for i in range(2, 21)], value=None,
        key="w_cascade_budget", disabled=certify == PER_STAGE,
        format_func=lambda b: "what the stage before did not certify" if b is None else f"{b:.0%}",
        help="A stage that certified more than the budget leaves sends its least confident "
             "certified rows on too, and the later judge's verdict is trusted there where it "
             "is confident: more coverage for more calls to the later judge (certified "
             "together only). CLI: --budget 0.7.")
    return certify, None if certify == PER_STAGE else budget


def cascade_section(table, emb, params: dict) -> None:
    """The Certify section's cascade view: judges chosen cheapest first, the funnel from judge 1
    trusted to people, and per stage the share asked, the share trusted and the realised
    agreement (``puaudit cascade`` on this table, at the section's target and risk)."""
    from puaudit.report.figures.certify import cascade_funnel_figure, cascade_stage_frame
    from components.data_summary import judge_candidates
    from puaudit.errors import PUAuditError

    ss = st.session_state
    options = judge_candidates(table.frame, ss.get("columns", {}))
    options += [f"rule:{r}" for r in ("longer", "shorter", "position-a")]
    judges = st.multiselect(
        "Judges, cheapest first", options, key="w_cascade_judges",
        help="Stage k certifies judge k on the rows the stages before it did not trust, at "
             "risk / K, reading only judges 1..k: that decides who the next judge is asked "
             "about; people get the rest. CLI: puaudit cascade FILE --judges COL1 COL2 ...")
    if not judges:
        st.caption("Choose two or more judges (a rule such as rule:longer counts as one).")
        ss.pop("review_cascade", None)  # no cascade: the Review queue goes back to the audit's
        return
    certify, budget = _certify_controls()
    cfg = state.audit_config(params).replace(target_agreement=None, m=None, other_judges=None)
    target, risk = float(params["target_agreement"]), float(params["risk"])
    try:
        with st.spinner(f"Running the cascade of {len(judges)} judges…"):
            summary, export = _cascade(state.table_hash(table), params["encoder"],
                                       tuple(judges), target, risk, cfg, certify, budget,
                                       table, emb)
    except PUAuditError as exc:
        audit_runs.show_error(exc)
        return
    from components.review import cascade_for_review

    # the Review page queues the rows left for people first (issue 42 item 4)
    ss["review_cascade"] = {**cascade_for_review(table, export, judges),
                            "data_version": ss.get("data_version")}
    lo, hi = summary["realised_ci"]
    real = summary["realised"]
    st.markdown(md(
        f"Coverage {summary['coverage']:.1%} of {summary['n_audited']:,} audited rows; "
        + ("no trusted validation rows" if real is None or real != real else
           f"trusted validation rows agree {real:.1%} (95% interval {lo:.1%}–{hi:.1%})")
        + f"; guarantee: agreement ≥ {target:g} with probability ≥ {1 - risk:.0%} ("
        + ("the trusted rows certified together; " if summary["guarantee"]["certification"]
           == "joint" else "each stage certified on its own; ")
        + f"each stage routes the rest at risk {risk / len(judges):.3g})."))
    st.plotly_chart(cascade_funnel_figure(summary), width="stretch", key="cascade_funnel")
    st.dataframe(cascade_stage_frame(summary), hide_index=True, width="stretch",
                 column_config={
                     "asked": st.column_config.NumberColumn("share asked", format="%.3f"),
                     "trusted": st.column_config.NumberColumn("share trusted", format="%.3f"),
                     "trusted_alone": st.column_config.NumberColumn(
                         "trusted on its own", format="%.3f",
                         help="share its own certification at risk / K trusted: what sent "
                              "the rest to the next judge"),
                     "n_handed_on": st.column_config.NumberColumn(
                         "certified, sent on", format="%d",
                         help="rows its own certification trusted that the budget sent to the "
                              "next judge as well"),
                     "realised": st.column_config.NumberColumn("realised", format="%.3f"),
                     "realised_lo": st.column_config.NumberColumn("95% low", format="%.3f"),
                     "realised_hi": st.column_config.NumberColumn("95% high", format="%.3f")})
    from puaudit.report.figures.metrics import spreadsheet_safe_copy

    st.download_button(
        f"Download the cascade's export ({summary['n_people']:,} audited rows left for people)",
        spreadsheet_safe_copy(export).to_csv(index=False).encode("utf-8"),
        file_name="cascade.csv", mime="text/csv", key="cascade_download",
        help="Every row and column plus puaudit_cascade_split, puaudit_cascade_stage (the judge "
             "trusted, or people), puaudit_cascade_verdict and puaudit_cascade_routed_to (the "
             "last judge each row was sent to). The next judge: puaudit judge cascade.csv "
             "--only-escalated ... (docs/judge.md).")
