"""The Data page says when no human (or judge) column is detected, pointing at the mapping
control; it counts the rows the audit leaves out, says why and offers them for download; the
library's errors carry the dashboard's fix (its controls, not command-line flags)."""

from __future__ import annotations


import pandas as pd
import pytest
from streamlit.testing.v1 import AppTest

from components.data_summary import excluded_rows, excluded_text, mapping_warnings
from puaudit.data.demo import generate_demo
from puaudit.data.schema import load_comparisons
from puaudit.errors import CLI, COLUMN_MAPPING, DASHBOARD, PUAuditError
from tests.conftest import ROOT

pytestmark = pytest.mark.usefixtures("app_env")


def _data_page(frame: pd.DataFrame) -> AppTest:
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=180)
    at.run()
    at.switch_page("pages/data.py").run()

    at.session_state["raw_frame"] = frame
    at.session_state["source_name"] = "upload.csv"
    from components.data_summary import mapping_defaults

    at.session_state["columns"] = {r: c for r, c in mapping_defaults(frame).items() if c}
    at.session_state["data_version"] = 7
    at.session_state["table"] = load_comparisons(frame, columns={
        r: at.session_state["columns"].get(r) for r in ("prompt", "response_a", "response_b",
                                                        "judge", "human")})
    at.run()
    assert not at.exception, at.exception
    return at


def test_undetected_human_column_is_warned_with_the_mapping_control():
    frame = generate_demo(n_rows=120, random_state=0).rename(columns={"human_winner": "people_pick"})
    at = _data_page(frame)
    warnings = [w.value for w in at.warning]
    assert any("No human verdict column was detected" in w and "Column mapping" in w
               for w in warnings), warnings
    assert not any("judge verdict column" in w for w in warnings)
    assert mapping_warnings({"judge": "j", "human": "h"}) == []
    assert len(mapping_warnings({})) == 2


def test_excluded_rows_are_counted_explained_and_downloadable():
    frame = generate_demo(n_rows=120, random_state=0)
    frame["judge_winner"] = frame["judge_winner"].where(frame["judge_winner"] != "tie", "A")
    frame["human_winner"] = frame["human_winner"].where(frame["human_winner"] != "tie", "B")
    frame.loc[[0, 1, 2], "judge_winner"] = "tie"
    frame.loc[[3], "human_winner"] = "tie"
    frame.loc[4, "response_b"] = frame.loc[4, "response_a"]
    at = _data_page(frame)
    infos = [i.value for i in at.info]
    assert any(v.startswith("5 of 120 rows are left out of the audit (3 judge tie, 1 human tie, "
                            "1 identical responses)") for v in infos), infos
    table = load_comparisons(frame)
    ex = excluded_rows(table, frame)
    assert ex["row"].tolist() == [1, 2, 3, 4, 5]
    assert list(ex.columns[2:]) == list(frame.columns)
    assert ex.loc[4, "response_a"] == frame.loc[4, "response_a"]
    button = at.get("download_button")
    assert len(button) == 1
    assert excluded_text(ex.iloc[:0], 120) is None


def test_an_error_carries_each_interfaces_fix():
    exc = PUAuditError("Column 'x' is missing.", column="x",
                       fix={CLI: "Name it with --judge-col NAME.",
                            DASHBOARD: f"Choose it in {COLUMN_MAPPING}."})
    assert str(exc) == exc.advice(CLI) == "Column 'x' is missing. Name it with --judge-col NAME."
    assert exc.advice(DASHBOARD) == f"Column 'x' is missing. Choose it in {COLUMN_MAPPING}."
    assert exc.column == "x" and exc.message == "Column 'x' is missing."
    plain = PUAuditError("Bad value.")  # no fix of its own: the same words everywhere
    assert str(plain) == plain.advice(DASHBOARD) == "Bad value."
    assert PUAuditError("m.", fix={CLI: "Use --x."}).advice(DASHBOARD) == "m. Use --x."


def test_library_errors_read_as_dashboard_advice():
    """Real errors of the library carry the dashboard's fix: no flag and no Python in it, the
    command line's words unchanged."""
    from puaudit.embed.pairs import embed_table
    from puaudit.audit.splits import prepare_split
    from puaudit.embed.hashing import HashingEncoder

    frame = generate_demo(n_rows=120, random_state=0)
    with pytest.raises(PUAuditError) as missing:
        load_comparisons(frame.drop(columns=["judge_winner", "judge_winner_padded"]))
    assert str(missing.value).endswith(
        "Rename the column or map it explicitly (CLI: --prompt-col/--response-a-col/"
        "--response-b-col/--judge-col; Python: columns={'judge': 'my_column', ...}).")
    assert missing.value.advice(DASHBOARD).endswith(
        f"Rename the column or map it explicitly (in {COLUMN_MAPPING}).")
    assert "(looked for: judge_winner, " in missing.value.advice(DASHBOARD)  # its own hint
    frame["judge_winner"] = "tie"
    table = load_comparisons(frame)
    with pytest.raises(PUAuditError) as ties:
        prepare_split(table, embed_table(table, HashingEncoder()))
    for exc in (missing.value, ties.value):
        assert "--" in str(exc)  # the library's advice on the command line names a flag...
        text = exc.advice(DASHBOARD)
        assert "--" not in text and "CLI" not in text and "Python" not in text
        assert COLUMN_MAPPING in text  # ...the dashboard's its control
    human = frame.assign(human_winner="")
    human["judge_winner"] = generate_demo(n_rows=120, random_state=0)["judge_winner"]
    table = load_comparisons(human)
    with pytest.raises(PUAuditError) as none:
        prepare_split(table, embed_table(table, HashingEncoder()))
    assert "--human-col" in str(none.value) and "puaudit models" in str(none.value)
    assert none.value.advice(DASHBOARD).endswith(
        f"on a pairwise table with question ids. The columns are chosen in {COLUMN_MAPPING}.")


def test_audit_page_without_a_human_column_points_to_the_mapping():
    """The Audit page on a table whose human column was not detected: the error names the
    Data page's Column mapping, not a flag."""
    from tests.page_support import open_page

    frame = generate_demo(n_rows=120, random_state=0).rename(columns={"human_winner": "people_pick"})
    at = open_page("pages/audit.py", frame)
    assert not at.exception, at.exception
    [error] = [e.value for e in at.error]
    assert "has no human verdicts (no column of human verdicts was found" in error
    assert "choose it as the human column" in error
    assert error.endswith(f"The columns are chosen in {COLUMN_MAPPING}.")
    assert "--" not in error and "CLI" not in error
