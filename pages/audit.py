"""Audit: choose m, p_ratio and the advanced settings; see Cons_orig, Cons_adj and the change."""

from __future__ import annotations

import streamlit as st

from components import audit_jobs, audit_runs, audit_views, encoder_state, first_look, state
from components.jobs import job_status
from puaudit.audit.config import SCORER_CHOICES
from puaudit.audit.m_curve import M_RANGE
from components.m_curve import M_STEP, curve_ready, show_m_curve
from components.safe_text import md
from puaudit.report.figures.certify import (CURVE_TARGETS, RISK_CHOICES, certification_text,
                                            coverage_curve_figure)
from puaudit.report.figures.evidence import (evidence_info, evidence_note, evidence_weights_figure,
                                             evidence_weights_frame)
from puaudit.audit.metrics import TYPE_RULE
from puaudit.report.figures.metrics import (as_percent, audit_note, auto_choice_text,
                                            auto_comparison_table, expected_text,
                                            leaderboard_table, per_type_table, spread_text,
                                            type_text)
from puaudit.audit.evaluate import default_spread_seeds

P_RANGE, P_STEP = (0.05, 0.95), 0.05
BOARD_SHARES = ("cons_orig", "cons_adj", "reversed_share", "reversal_precision")
BOARD_COLUMNS = {
    "cons_orig": st.column_config.NumberColumn("Cons_orig", format="%.1f%%"),
    "cons_adj": st.column_config.NumberColumn("Cons_adj", format="%.1f%%"),
    "delta_pts": st.column_config.NumberColumn("change (pts)", format="%+.1f"),
    "delta_sd_pts": st.column_config.NumberColumn("sd (pts)", format="%.1f"),
    "reversed_share": st.column_config.NumberColumn("reversed", format="%.1f%%"),
    "reversal_precision": st.column_config.NumberColumn("reversal precision", format="%.1f%%"),
}
from puaudit.errors import PUAuditError

state.through_navigation()
st.title("Audit")
st.caption("Verified human preferences (P) and their reversals are matched by transport to the "
           "rows the judge decided, with m as the prior share of right verdicts; rows that match "
           "the reversed side are candidates for reversal. Label-free evidence about each "
           "verdict (the judge's favourite models, lengths, position, probabilities) can join "
           "them. The scorer is chosen from P alone (auto). Validation rows (annotated, held out) measure whether the reversals help.")

ss = st.session_state
table = audit_runs.loaded_table()
params = state.audit_params()

with st.expander("Advanced"):
    a, b, c = st.columns(3)
    with a:
        st.slider("alpha1 (P-core keep ratio)", 0.1, 1.0, step=0.05, **state.bind("alpha1"),
                  help="Share of verified positives kept nearest their type's core.")
        st.slider("alpha2 (improvement-alignment keep ratio)", 0.1, 1.0, step=0.05,
                  **state.bind("alpha2"))
        st.number_input("Seed", min_value=0, max_value=2**31 - 1, step=1, **state.bind("random_state"))
    with b:
        st.selectbox("Encoder", encoder_state.encoder_options(), **state.bind("encoder"),
                     help="Frozen text encoders this server offers (set by its operator).")
        st.selectbox("Scorer", SCORER_CHOICES, **state.bind("scorer"),
                     help="auto: the scorer with the lowest cross-fitted log loss on P "
                          "(prior-ot, probe, knn, centroid, their stack, or evidence: a model of "
                          "the judge's own habits — favourite models, lengths, position, "
                          "both-order consistency, probabilities, other judges — together with "
                          "the embedding scorers). prior-ot: "
                          "two-sided transport with P's agreement rate as the prior (graded "
                          "scores; m moves its probabilities by the prior shift); pot: the "
                          "paper's partial OT (0/1 scores); full-ot: full transport; centroid, "
                          "probe, knn: simpler baselines.")
    with c:
        st.selectbox("Relabel rule", state.RULE_CHOICES, **state.bind("rule"),
                     help="guarded: reverse only where calibrated P(judge right) < 0.5 − margin. "
                          "paper: keep the top ⌊m·|U|⌋ per type, reverse the rest.")
        st.slider("Margin (guarded rule)", 0.0, 0.45, step=0.01, **state.bind("margin"))
        st.selectbox("Verdict evidence", ["auto", "none"], **state.bind("evidence"),
                     help="auto: the evidence scorer may learn from every label-free signal the "
                          "table carries about each verdict (the judge's favourite models, "
                          "lengths, position, both-order consistency, its probabilities, other "
                          "judges). none: only the texts' embeddings.")

try:
    # while the texts are embedded: the evidence-only audit, replaced in place when they are
    emb = first_look.embeddings_or_first_look(table, params)
    if emb is None:
        st.stop()
except PUAuditError as exc:
    audit_runs.show_error(exc)
    st.stop()


# Everything below reads m, p_ratio or Certify, and their widgets are made in here: a step of
# one of them reruns this fragment only (not the header, the Advanced settings or the
# embeddings), and what does not read m is kept across its steps (audit_views.by_scores).
@st.fragment
def _audit_section() -> None:
    params = state.audit_params()
    try:
        est = audit_runs.m_estimate(table, emb, params)
    except PUAuditError as exc:
        audit_runs.show_error(exc)
        return
    left, right = st.columns(2)
    with left:
        m_value = params["m"] if params["m"] is not None else round(est, 2)
        st.slider("m — share of audited verdicts believed right", *M_RANGE, step=M_STEP,
                  **state.bind("m", min(max(m_value, M_RANGE[0]), M_RANGE[1])))
        st.caption(f"Estimate from P (judge–human agreement): **{est:.3f}**"
                   + (" (in use)" if params["m"] is None else ""))
        if params["m"] is not None and st.button("Use the estimate"):
            ss["audit"]["m"] = None
            st.rerun()
        curve_slot = st.container()
    with right:
        st.slider("p_ratio — share of annotated items used as P", *P_RANGE, step=P_STEP,
                  **state.bind("p_ratio"))
        st.caption("The rest of the annotated items validate the audit.")

    params = state.audit_params()
    try:
        result = audit_runs.run_audit(table, emb, params)
    except PUAuditError as exc:
        audit_runs.show_error(exc)
        return
    _results(params, result, curve_slot)


def _results(params: dict, result, curve_slot) -> None:
    """Everything drawn from one audit, in the page's order."""
    with curve_slot:  # after the audit: the curve is a background job, its marked point the audit
        curve_pending = not curve_ready(table, emb, params)
        st.fragment(lambda: show_m_curve(table, emb, params, result, polling=curve_pending),
                    run_every=1.0 if curve_pending else None)()
    verdict = first_look.show_headline(result)
    _spread_section(params, result, verdict)
    _how_it_chose(params, result)
    _evidence_section(params, result)
    _certify_section(params, result)
    st.subheader("By question type")
    st.caption(TYPE_RULE)
    # text cells: an unshown number is empty (not "None"), a change is that of the percents shown
    st.dataframe(type_text(per_type_table(result)), hide_index=True, width="stretch")
    _compare_section(params)
    # idle time, once the page is drawn: the audits one slider step away, so the next step is
    # usually instant (after the curve, before the spread; cancelled as soon as the visitor
    # moves on, and every slider answer goes first)
    audit_jobs.precompute_neighbours(table, emb, params, m_step=M_STEP, p_step=P_STEP,
                                     m_range=M_RANGE, p_range=P_RANGE)


def _spread_section(params: dict, result, verdict) -> None:
    """The change over seeded splits, measured in the background after the first result (a
    fragment that polls while the job runs)."""
    n_seeds = default_spread_seeds(len(table))
    measured = n_seeds > 1 and bool(result.metrics["n"])
    pending = measured and job_status(audit_runs.spread_job(
        table, emb, params, result, n_seeds=n_seeds)[0]) == "pending"

    def _spread():
        if not measured:
            return
        fut, prog = audit_runs.spread_job(table, emb, params, result, n_seeds=n_seeds)
        status = job_status(fut)
        if status == "pending":
            st.caption(f"Measuring the change over {n_seeds} seeded splits in the background: "
                       f"{prog['done']} of {prog['total']} further splits audited…")
        elif status == "failed":
            st.caption(f"The spread over seeds could not be measured ({md(fut.exception())}).")
        else:
            spread = fut.result()
            text = spread_text(spread, verdict)  # "within noise" when the range crosses zero
            if text:
                (st.warning if spread["min"] <= 0 else st.success)(text)
            if pending:
                st.rerun()  # arrived during a timed fragment run: redraw once, stop polling

    st.fragment(_spread, run_every=2.0 if pending else None)()


def _how_it_chose(params: dict, result) -> None:
    """The expected change, how auto chose the scorer, and the audit's own warning."""
    st.info(expected_text(result))
    choice = auto_choice_text(result)
    if choice:
        st.text(choice)
        with st.expander("How auto chose the scorer (cross-fitted on P only)"):
            st.dataframe(audit_views.by_scores("auto_table", table, emb, params,
                                               lambda: auto_comparison_table(result)),
                         hide_index=True, width="stretch")
    note = audit_note(result)
    if note:
        st.warning(note)


def _evidence_section(params: dict, result) -> None:
    """What P(judge right) sees besides the texts: the signals' weights and the other judges."""
    ev_note = evidence_note(result)
    for message in evidence_info(result).get("messages", []):
        st.warning(md(message))  # a malformed signal column, left out (data shown as text)
    if not ev_note:
        return
    with st.expander("Verdict evidence: what P(judge right) sees besides the texts"):
        st.text(ev_note)
        weights = audit_views.by_scores("evidence_frame", table, emb, params,
                                        lambda: evidence_weights_frame(result))
        if not weights.empty:
            st.plotly_chart(audit_views.by_scores("evidence_figure", table, emb, params,
                                                  lambda: evidence_weights_figure(result)),
                            width="stretch", key="evidence_weights")
            st.dataframe(weights.drop(columns=["feature"]), hide_index=True, width="stretch",
                         column_config={c: st.column_config.NumberColumn(format="%+.3f")
                                        for c in ("coef", "lo", "hi")})
        from components.judges import other_judges_table  # issue 42: the other judges
        other_judges_table(result, table)


def _certify_section(params: dict, result) -> None:
    """Trust or escalate: the checkbox, the target and risk, the certificate, its curve and the
    cascade."""
    st.subheader("Trust or escalate")
    st.caption("Certify the verdicts whose calibrated P(judge right) clears a threshold chosen "
               "on P so that they agree with people at least the target share of the time (with "
               "1 − risk confidence); escalate the rest to people.")
    ss["w_certify"] = params["target_agreement"] is not None
    st.checkbox("Certify verdicts (trust or escalate)", key="w_certify",
                on_change=state.set_certify)
    if result.certification is None:
        return
    t_col, r_col = st.columns([3, 1])
    with t_col:
        st.slider("Target agreement", 0.55, 0.99, step=0.01, **state.bind("target_agreement"))
    with r_col:
        st.selectbox("Risk", RISK_CHOICES, **state.bind("risk"),
                     help="Probability that the trusted verdicts agree with people less often "
                          "than the target.")
    cert = result.summary()["certification"]
    (st.warning if cert["message"] else st.success)(certification_text(cert))
    st.plotly_chart(coverage_curve_figure(result.certification.curve(CURVE_TARGETS),
                                          current_target=cert["target"]),
                    width="stretch", key="certify_curve")
    with st.expander("Cascade of judges: cheapest first, then people"):  # issue 42
        from components.judges import cascade_section
        cascade_section(table, emb, params)


def _compare_section(params: dict) -> None:
    """Every scorer and rule on the same data, a background job polled by a fragment."""
    st.subheader("Compare scorers")
    st.caption("Every scorer and relabel rule on the same data and settings, averaged over three "
               "seeded splits and measured on validation rows only — so you can see when "
               "PUAudit's transport scorer does not beat simpler baselines, or the judge itself.")
    if not st.checkbox("Compare every scorer × rule (3 seeds)", key="w_compare"):
        return
    compare_pending = job_status(audit_jobs.compare_job(table, emb, params)) == "pending"

    def _compare():
        """The comparison: its progress until it is ready (a slider answer goes first; the
        comparison resumes after it)."""
        job = audit_jobs.compare_job(table, emb, params)
        status = job_status(job)
        if status == "pending":
            d, t = job.progress["done"], job.progress["total"]
            st.caption(f"{job.progress['text'] or 'Comparing scorers'} in the background"
                       + (f" (step {min(d + 1, t)} of {t})" if t else "") + "…")
            return
        if status == "failed":
            audit_runs.show_error(job.exception())
            return
        st.dataframe(as_percent(leaderboard_table(job.result()), BOARD_SHARES), hide_index=True,
                     width="stretch", column_config=BOARD_COLUMNS)
        if compare_pending:
            st.rerun()  # arrived during a timed fragment run: redraw once, stop polling

    st.fragment(_compare, run_every=2.0 if compare_pending else None)()


_audit_section()
