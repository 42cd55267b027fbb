"""The audit card as one self-contained HTML page (``puaudit report``, the Export page).

Drawn with :mod:`puaudit.report.figures`, the functions the dashboard's pages draw with, so every
number and plot is the dashboard's. No Streamlit here. The page opens offline: plotly's
JavaScript is inlined once (from the installed plotly package), the page links nowhere, and no
text from the data can become markup:

* data-derived text goes through :func:`text` (HTML entities for ``& < > " '`` and ``=``, so not
  even the words ``href=http:`` appear literally);
* each figure's JSON comes from plotly (which writes ``<``, ``>`` and ``/`` as ``\\u`` escapes)
  with ``=`` written as ``\\u003d`` too; the figure builders already escape labels for plotly;
* plotly.js carries map-tile attributions and its logo link as ``href="https://…"`` strings in
  code paths the report never runs (no maps; the logo is off): their colon is written ``\\u003a``,
  the same string to JavaScript, so the file holds no literal ``src``/``href`` to http(s).
"""

from __future__ import annotations

import functools
import html
import json
import math
import re

import pandas as pd

from puaudit.audit.evaluate import spread_sentence
from puaudit.percents import percent
from puaudit.rankings.leaderboard_limits import TOP_MODELS
from puaudit.report.figures.annotators import agreement_figure, annotator_table, bias_scatter
from puaudit.report.figures.certify import (CURVE_TARGETS, certification_text,
                                            coverage_curve_figure)
from puaudit.report.figures.consistency import metrics_bar_chart, metrics_table
from puaudit.report.figures.data_summary import question_type_frame, summary_metrics
from puaudit.report.figures.m_curve import m_curve_figure
from puaudit.audit.metrics import TOP_TYPES, TYPE_RULE, measured_types
from puaudit.report.figures.metrics import (PER_TYPE_HEADERS, expected_text, headline_metrics,
                                            per_type_display)
from puaudit.report.figures.radar import consistency_radar
from puaudit.report.figures.rankings import interval_figure, rank_figure, rank_table
from puaudit.report.figures.scores import score_density
from puaudit.report.parts import REFERENCE

__all__ = ["render_report", "report_html", "text", "plotly_js", "PLOTLY_CONFIG", "CSP"]

#: plotly's options for every figure: no logo, no links out, nothing to fetch
PLOTLY_CONFIG = {"displaylogo": False, "responsive": True, "showLink": False,
                 "showSendToCloud": False, "showEditInChartStudio": False, "topojsonURL": "",
                 "plotlyServerURL": ""}
#: the browser itself refuses any fetch: scripts and styles only from the page, images only
#: from the page's own data (plotly draws some with data: and blob: URLs)
CSP = ("default-src 'none'; script-src 'unsafe-inline' 'unsafe-eval'; style-src 'unsafe-inline'; "
       "img-src data: blob:; font-src data:")
#: the per-type table's numbers: percentages and a signed change in points, one decimal
_PER_TYPE_FORMATS = {**{c: "{:.1f}" for c in PER_TYPE_HEADERS.values()},
                     PER_TYPE_HEADERS["delta_pts"]: "{:+.1f}"}
_LINK = re.compile(r"((?:src|href)\s*=\s*[\"']?https?):", re.IGNORECASE)
_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:2rem auto;
max-width:1100px;padding:0 1rem;color:#1f2933;line-height:1.45}
h1{margin-bottom:.2rem}h2{border-bottom:1px solid #d9e2ec;padding-bottom:.2rem;margin-top:2rem}
table{border-collapse:collapse;margin:.6rem 0;font-size:.88rem;display:block;overflow-x:auto}
td,th{border:1px solid #d9e2ec;padding:.25rem .5rem;text-align:left;vertical-align:top}
th{background:#f0f4f8}.verdict{font-size:1.1rem;background:#f0f4f8;padding:.7rem 1rem;
border-left:4px solid #4C78A8}.note{color:#52606d}.cmd{font-family:monospace;background:#f5f7fa;
padding:.5rem;white-space:pre-wrap;word-break:break-all}.grid{display:flex;gap:1rem;flex-wrap:wrap}
.metric{border:1px solid #d9e2ec;padding:.5rem .8rem;min-width:10rem}
.metric b{display:block;font-size:1.3rem}
"""


def text(value) -> str:
    """A data-derived value as HTML text: shown literally, never markup or a link."""
    return html.escape("" if value is None else str(value), quote=True).replace("=", "&#61;")


def _cell(v, fmt: str = "{:.3f}") -> str:
    if isinstance(v, float):
        return "" if math.isnan(v) else fmt.format(v)
    return text("" if v is None or v is pd.NA else v)


def _table(df: pd.DataFrame, formats: dict[str, str] | None = None) -> str:
    """A DataFrame as an HTML table, every header and cell escaped; ``formats`` maps a column
    to the format of its numbers (default three decimals)."""
    fmts = [(formats or {}).get(c, "{:.3f}") for c in df.columns]
    head = "".join(f"<th>{text(c)}</th>" for c in df.columns)
    rows = "".join("<tr>" + "".join(f"<td>{_cell(v, f)}</td>" for v, f in zip(row, fmts))
                   + "</tr>" for row in df.astype(object).itertuples(index=False, name=None))
    return f"<table><thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table>"


def _pairs(items) -> str:
    return _table(pd.DataFrame(list(items), columns=["", "value"]))


@functools.lru_cache(maxsize=1)
def plotly_js() -> str:
    """plotly.js, inlined once per page, with the colon of its literal http(s) links escaped."""
    from plotly.offline import get_plotlyjs

    return _LINK.sub(r"\1\\u003a", get_plotlyjs())


class _Figures:
    """Numbers each figure's ``<div>`` and writes the script that draws it."""

    def __init__(self) -> None:
        self.n = 0

    def __call__(self, fig) -> str:
        import plotly.io as pio

        self.n += 1
        # plotly's own template: under Streamlit's (the Export page) tick labels would be clipped
        fig.update_layout(template=pio.templates["plotly"])
        spec = pio.to_json(fig, validate=False).replace("=", "\\u003d")
        height = int(fig.layout.height or 450)
        config = json.dumps(PLOTLY_CONFIG)
        return (f'<div id="fig-{self.n}" class="plotly-graph-div" style="height:{height}px;'
                f'width:100%"></div><script>(function(){{var f={spec};Plotly.newPlot('
                f'"fig-{self.n}",f.data,f.layout,{config});}})();</script>')


def _section(title: str, *body: str) -> str:
    return f"<h2>{html.escape(title)}</h2>" + "".join(body)


def _note(words: str) -> str:
    return f'<p class="note">{text(words)}</p>'


def _reversals_vs_m(card: dict, fig: _Figures) -> str:
    """The Audit page's reversals-vs-m curve, drawn from the card's numbers ("" without it)."""
    curve = card.get("m_curve")
    if not curve:
        return ""
    points = [{"m": m, "n_reversed": n} for m, n in zip(curve["m"], curve["n_reversed"])]
    lo, hi = curve["range"]
    of = "" if curve.get("n_audited") is None else f" (of {curve['n_audited']:,} audited rows)"
    return ("<h3>How many verdicts are reversed as m varies</h3>"
            + fig(m_curve_figure(points, current_m=curve["current_m"]))
            + _note(f"Rows the {curve['rule'] or 'guarded'} rule would reverse{of} at each m "
                    f"from {lo:g} to {hi:g}, the Audit page's slider, on this audit's split and "
                    "scores: m is the share of the judge's verdicts believed right, so further "
                    "right means more trust in the judge and, as a rule, fewer reversals; the "
                    f"marked point is this report's m = {curve['current_m']:.3f}, and the steeper "
                    "the curve around it, the more the exported verdicts depend on the choice "
                    "of m."))


def _headline(parts, card: dict, fig: _Figures) -> str:
    """The verdict, agreement before/after with intervals, reversals and their curve over m,
    spread over seeds."""
    audit = card["audit"]
    if audit is None:
        return _section("Verdict", f'<p class="verdict">{text(card["notes"].get("audit"))}</p>',
                        _note("The sections below need no human label."))
    res = parts.result
    tiles = "".join(f'<div class="metric">{text(m["label"])}<b>{text(m["value"])}</b>'
                    f'{text(m["help"])}{" " + text(m["delta"]) if m["delta"] else ""}</div>'
                    for m in headline_metrics(res))
    spread = spread_sentence(audit.get("delta_over_seeds"))
    lines = [f'<p class="verdict">{text(audit.get("verdict"))}</p>', f'<div class="grid">{tiles}</div>',
             _note(f"Reversed share of audited rows: {percent(audit['reversed_share'])}; "
                   f"m = {res.m:.3f} (estimate from P {res.m_estimate:.3f}); scorer "
                   f"{audit.get('scorer_used')}.")]
    lines += [_note(t) for t in (spread or "The change over seeded splits was not measured.",
                                 expected_text(res)) if t]
    lines.append(_reversals_vs_m(card, fig))  # last: its sub-heading closes the section
    return _section("Verdict and agreement with people (validation rows)", *lines)


def _data(parts, card: dict) -> str:
    """Data summary, provenance and the judge's label-free tendencies."""
    data, inp = card["data"], card["input"]
    prov = [("Input", inp["name"]), *([("Split", inp["split"])] if inp.get("split") else []),
            ("sha256 of the file", inp["sha256"] or "n/a"),
            ("Content hash (texts, verdicts, types, items)", inp["content_hash"]),
            ("Judge column", inp["judge_column"]),
            ("Columns used", ", ".join(f"{k}: {v}" for k, v in inp["columns"].items() if v))]
    tend = data["judge_tendencies"]
    reference = tend.get("response_a") == REFERENCE
    first = ("Picks output_1, AlpacaEval's reference model (50% = as often as the model "
             "compared with it)" if reference else
             "Picks response A (first shown; 50% = no preference)")
    rows = [(label, "n/a" if d["share"] is None else
             f"{d['share']:.1%} [{d['lo']:.1%}, {d['hi']:.1%}] of {d['n']:,}")
            for label, d in ((first, tend["position"]),
                             ("Picks the longer response (unequal lengths)", tend["longer"]),
                             ("Ties", tend["ties"]))]
    why = (" AlpacaEval shows the two outputs to its judge in a random order, so the first row "
           "compares the reference with the model, not the first position with the second."
           if reference else "")
    return (_section("Data", _pairs(summary_metrics(data)), _pairs(prov),
                     _table(question_type_frame(data)))
            + _section("The judge's tendencies (no human label needed)", _pairs(rows),
                       _note("Wilson 95% intervals." + why)))


def _settings(card: dict) -> str:
    cfg = [(k, "auto" if v is None else v) for k, v in card["config"].items()]
    seeds = card["seeds"]
    return _section(
        "Settings and how to reproduce", _pairs(cfg + [("encoder", card["encoder"] or "n/a"),
                                                       ("seeds of the spread", seeds["spread"])]),
        "<p>The report:</p>", f'<p class="cmd">{text(card["reproduce"]["report"])}</p>',
        "<p>The audit's export:</p>", f'<p class="cmd">{text(card["reproduce"]["audit"])}</p>',
        _note(f"puaudit {card['version']}, {card['created']}."))


def _audit_plots(parts, card: dict, fig: _Figures) -> str:
    """Per-type table and radar, score densities, certification."""
    res = parts.result
    if res is None:
        return ""
    # one rule with the Audit and Question types pages: small types are counted, not drawn
    out = _section("Per question type",
                   _note(TYPE_RULE + " Agreement with people on each type's validation rows, "
                         "before and after the audit's reversals, in percent; the change in "
                         "points."),
                   _table(per_type_display(res), _PER_TYPE_FORMATS),
                   fig(consistency_radar({parts.table.judge_column: measured_types(
                       res.per_type, top=TOP_TYPES)})))
    out += _section("Score densities", fig(score_density(res, parts.table)))
    cert = (card["audit"] or {}).get("certification")
    if parts.config.target_agreement is not None and cert is not None:
        curve = (res.certification.curve(CURVE_TARGETS, risk=parts.config.risk)
                 if res.certification is not None else [])
        out += _section("Certified trust or escalate", f"<p>{text(certification_text(cert))}</p>",
                        fig(coverage_curve_figure(curve, current_target=cert.get("target")))
                        if curve else "")
    return out


def _rankings(parts, card: dict, fig: _Figures) -> str:
    r = parts.rankings
    if r is None:
        return _section("Model rankings", _note(card["notes"].get("rankings", "")))
    dis = card["rankings"].get("judge_vs_people") or []
    notes = [_note(n) for n in r.notes + [r.top_note(TOP_MODELS)] if n]
    return _section("Model rankings: judge, audited, people, PPI", *notes,
                    _table(rank_table(r, top=TOP_MODELS)),
                    _note(f"{len(dis)} model(s) whose judge win rate lies outside the "
                          "prediction-powered interval." if "ppi" in r.available() else
                          "No human votes: the judge's ranking alone."),
                    fig(rank_figure(r, top=TOP_MODELS)),
                    fig(interval_figure(r, statistic="bt", top=TOP_MODELS)))


def _annotators(parts, card: dict, fig: _Figures) -> str:
    a = parts.annotators
    if a is None:
        return _section("Annotators", _note(card["notes"].get("annotators", "")))
    flagged = card["annotators"]["flagged"]
    ov = a.overall
    alpha = ov.get("krippendorff_alpha")
    head = _pairs([("Annotators", ov.get("n_annotators")), ("Flagged", len(flagged)),
                   ("Krippendorff's alpha", "n/a" if alpha is None or alpha != alpha
                    else f"{alpha:.3f}")])
    flags = _table(pd.DataFrame([(f["annotator"], "; ".join(f["flags"])) for f in flagged],
                                columns=["Annotator", "Flags"])) if flagged else ""
    return _section("Annotators (the judge as one more)", head, flags,
                    _table(annotator_table(a)),
                    fig(agreement_figure(a, median=ov.get("median_agree_peers"))),
                    fig(bias_scatter(a)))


def _trustjudge(parts, card: dict, fig: _Figures) -> str:
    before, after = parts.trust_before, parts.trust_after or parts.trust_before
    if before is None:
        return _section("Consistency (TrustJudge)", _note(card["notes"].get("trustjudge", "")))
    ntr = ", ".join(f"NTR_{k} {percent(v)}" for k, v in after.ntr.items())
    return _section("Consistency (TrustJudge)",
                    _note(f"Relations: {after.method}. Share of k-candidate sets whose verdicts "
                          f"admit no ranking: {ntr}; Conflict Ratio "
                          f"{'n/a (no single scores)' if after.cr is None else percent(after.cr)}."),
                    fig(metrics_bar_chart(metrics_table(before, after, by="judge"), by="judge")))


def render_report(parts, card: dict) -> str:
    """The report page of :class:`~puaudit.report.parts.ReportParts` and its card
    (:func:`puaudit.report.card.build_card`): one HTML document, over 1 MB (plotly.js)."""
    fig = _Figures()
    body = [f"<h1>PUAudit audit card</h1><p class=\"note\">{text(card['input']['name'])} · "
            f"{card['input']['n_rows']:,} rows · judge column "
            f"{text(card['input']['judge_column'])}</p>",
            _headline(parts, card, fig), _audit_plots(parts, card, fig), _data(parts, card),
            _rankings(parts, card, fig), _annotators(parts, card, fig),
            _trustjudge(parts, card, fig), _settings(card)]
    missing = [f"{part}: {why}" for part, why in card["notes"].items()]
    if missing:
        body.append(_section("Not in this report", *(_note(m) for m in missing)))
    return ("<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\">"
            "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
            f"<meta http-equiv=\"Content-Security-Policy\" content=\"{CSP}\">"
            "<title>PUAudit audit card</title>"
            f"<style>{_CSS}</style><script>{plotly_js()}</script></head><body>"
            + "".join(body) + "</body></html>")


def report_html(table, result, config, *, m_curve: list[dict] | None = None,
                spread: dict | None = None, source: dict | None = None,
                encoder: str = "") -> bytes:
    """The report page of an audit as UTF-8 bytes (the Export page's download).

    Parameters
    ----------
    table : ComparisonTable
    result : AuditResult
    config : AuditConfig
    m_curve : list of dict, optional
        The Audit page's reversals vs m for this audit (the dashboard's ``m_curve`` over
        :func:`~puaudit.audit.m_curve.m_grid` of its m); the report notes when it is missing.
    spread : dict, optional
        The change over seeded splits, when it has been measured.
    source : dict, optional
        ``name`` and ``sha256`` of the uploaded file, and the ``split`` read from it when it
        is a dataset folder.
    encoder : str
        The encoder's label.
    """
    from puaudit.audit.m_curve import with_current_point
    from puaudit.audit.relabel import GROUP_NEG
    from puaudit.report.card import build_card, report_command
    from puaudit.report.parts import assemble_report

    source = dict(source or {})
    if m_curve is not None:  # pinned to the audit at its m, as the Audit page draws it
        m_curve = with_current_point(m_curve, result.m, int((result.group == GROUP_NEG).sum()))
    parts = assemble_report(table, config, result, m_curve=m_curve, spread=spread, source=source,
                     encoder=encoder, command=report_command(source.get("name") or "INPUT",
                                                             config, split=source.get("split")))
    return render_report(parts, build_card(parts)).encode("utf-8")
