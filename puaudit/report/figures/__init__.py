"""The report's and the dashboard's figures and tables: pure functions from results to plotly
figures and DataFrames, no Streamlit. A page and the HTML report (:mod:`puaudit.report.html`)
draw the same figure with the same function.

One module per subject: :mod:`.metrics` (the audit's headline numbers and tables),
:mod:`.m_curve` (reversals vs m), :mod:`.scores` (densities, sorted scores), :mod:`.radar`
(agreement per question type), :mod:`.certify` (coverage vs target), :mod:`.evidence` (the
evidence scorer's weights), :mod:`.embedding_map`, :mod:`.rankings` (the four model rankings),
:mod:`.annotators` and :mod:`.annotator_models` (annotator charts), :mod:`.consistency`
(TrustJudge), :mod:`.data_summary` (a table's summary); :mod:`.text` escapes data-derived
labels for plotly.
"""
