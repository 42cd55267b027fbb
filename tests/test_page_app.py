"""The dashboard under Streamlit's AppTest: every page, uploads, bad files, sliders, exports and
session isolation. Embeddings come from the deterministic hashing test encoder
(``PUAUDIT_TEST_ENCODER=hashing``, see components.encoder_state) so no model runs here."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pandas as pd
import pytest
from streamlit.runtime.memory_media_file_storage import MemoryMediaFileStorage
from streamlit.testing.v1 import AppTest

from puaudit.data.demo import generate_demo

pytestmark = pytest.mark.usefixtures("app_env")

ROOT = Path(__file__).resolve().parents[1]
APP = str(ROOT / "app.py")
TIMEOUT = 180


@pytest.fixture
def downloads(monkeypatch):
    """filename -> bytes of every download button drawn (AppTest keeps them in a mock runtime)."""
    seen: dict[str, bytes] = {}
    original = MemoryMediaFileStorage.load_and_get_id

    def record(self, path_or_data, mimetype, kind, filename=None):
        if isinstance(path_or_data, bytes) and filename:
            seen[filename] = path_or_data
        return original(self, path_or_data, mimetype, kind, filename)

    monkeypatch.setattr(MemoryMediaFileStorage, "load_and_get_id", record)
    return seen


def _metric(at, label):
    return next(m for m in at.metric if m.label == label)


def _csv(n_rows: int, seed: int) -> bytes:
    return generate_demo(n_rows=n_rows, random_state=seed).to_csv(index=False).encode("utf-8")


def _app() -> AppTest:
    at = AppTest.from_file(APP, default_timeout=TIMEOUT)
    at.run()
    assert not at.exception, at.exception
    return at


def test_opens_on_the_demo_data():
    at = _app()
    assert _metric(at, "Rows").value == "600"
    assert _metric(at, "Question types").value == "6"
    assert at.session_state["source_name"] == "demo data (generated)"
    # both demo judge columns are offered; the mapped one first
    judge_box = next(s for s in at.selectbox if s.label.startswith("Judge verdict"))
    assert judge_box.value == "judge_winner" and judge_box.options[1] == "judge_winner_padded"


def test_upload_replaces_the_demo_and_bad_files_say_why():
    at = _app()
    up = at.file_uploader[0]
    assert "200 MB" in up.help and {"csv", "parquet", "jsonl", "gz"} <= {t.lstrip(".") for t in up.allowed_type}
    up.upload("mine.csv", _csv(150, 3), "text/csv").run()
    assert not at.exception and not at.error
    assert _metric(at, "Rows").value == "150" and at.session_state["source_name"] == "mine.csv"

    at.file_uploader[0].upload("empty.csv", b"", "text/csv").run()
    assert not at.exception
    assert "empty.csv: the file is empty" in at.error[0].value
    assert _metric(at, "Rows").value == "150"  # the previous data stay

    at.file_uploader[0].upload("header.csv", b"prompt,response_a,response_b,judge_winner\n",
                               "text/csv").run()
    assert "has a header but no data rows" in at.error[0].value

    bad = generate_demo(n_rows=40, random_state=1)
    bad.loc[7, "judge_winner"] = "maybe"
    at.file_uploader[0].upload("bad.csv", bad.to_csv(index=False).encode(), "text/csv").run()
    assert not at.exception
    msg = at.error[0].value
    assert "judge_winner" in msg and "row 8" in msg and "maybe" in msg


def test_missing_required_column_is_named_and_can_be_mapped():
    df = generate_demo(n_rows=120, random_state=2).rename(columns={"judge_winner": "pick",
                                                                  "judge_winner_padded": "pad"})
    at = _app()
    at.file_uploader[0].upload("renamed.csv", df.to_csv(index=False).encode(), "text/csv").run()
    assert not at.exception
    assert any("Required column(s) not found: judge" in e.value for e in at.error)
    box = next(s for s in at.selectbox if s.label.startswith("Judge verdict"))
    box.select("pick").run()
    assert not at.exception and not at.error
    assert _metric(at, "Rows").value == "120"


def test_sliders_change_the_metrics_without_re_embedding():
    at = _app()
    at.switch_page("pages/audit.py").run()
    assert not at.exception and not at.error
    next(s for s in at.selectbox if s.label == "Scorer").select("centroid").run()
    next(s for s in at.selectbox if s.label == "Relabel rule").select("paper").run()
    assert not at.exception
    m_slider = next(s for s in at.slider if s.label.startswith("m "))
    est = float(next(c.value for c in at.caption if "Estimate from P" in c.value)
                .split("**")[1])
    assert m_slider.value == pytest.approx(round(est, 2))
    before = {m.label: m.value for m in at.metric}
    emb_before = at.session_state["table"].extra["content_hash"]
    m_slider.set_value(0.3).run()
    after = {m.label: m.value for m in at.metric}
    assert not at.exception
    assert after["Reversed"] != before["Reversed"]  # paper rule: fewer kept -> more reversed
    assert int(after["Reversed"].split()[0]) > int(before["Reversed"].split()[0])
    assert at.session_state["audit"]["m"] == 0.3
    assert at.session_state["table"].extra["content_hash"] == emb_before
    p_slider = next(s for s in at.slider if s.label.startswith("p_ratio"))
    p_slider.set_value(0.5).run()
    assert not at.exception
    assert {m.label: m.value for m in at.metric}["Cons_orig"] != after["Cons_orig"] or \
        at.session_state["audit"]["p_ratio"] == 0.5
    # the setting survives a page change
    at.switch_page("pages/scores.py").run()
    at.switch_page("pages/audit.py").run()
    assert next(s for s in at.slider if s.label.startswith("m ")).value == 0.3


def test_scores_map_and_question_type_pages():
    at = _app()
    for page in ("pages/scores.py", "pages/embedding_map.py", "pages/question_types.py"):
        at.switch_page(page).run()
        assert not at.exception, (page, at.exception)
        assert not at.error, (page, [e.value for e in at.error])
    # question types: both demo judge columns are audited side by side
    ms = at.multiselect[0]
    assert ms.value == ["judge_winner", "judge_winner_padded"]
    shown = at.dataframe[0].value
    assert set(shown["judge column"]) == {"judge_winner", "judge_winner_padded"}
    assert set(shown["question type"]) == {"coding", "math", "writing", "reasoning",
                                           "extraction", "stem"}
    at.switch_page("pages/scores.py").run()
    assert len(at.get("plotly_chart")) == 2
    at.switch_page("pages/embedding_map.py").run()
    assert len(at.get("plotly_chart")) == 1


def test_export_has_every_row_and_column(downloads):
    df = generate_demo(n_rows=180, random_state=5)
    df.loc[3, "prompt"] = "=HYPERLINK(\"x\")"
    at = _app()
    at.file_uploader[0].upload("mine.csv", df.to_csv(index=False).encode(), "text/csv").run()
    at.switch_page("pages/export.py").run()
    assert not at.exception and not at.error
    out = pd.read_csv(io.BytesIO(downloads["mine_puaudit.csv"]), dtype=str, keep_default_na=False)
    assert len(out) == 180
    assert list(out.columns[: len(df.columns)]) == list(df.columns)
    assert {"puaudit_split", "puaudit_score", "puaudit_group", "puaudit_adjusted"} <= set(out.columns)
    assert out["prompt"].tolist() == df["prompt"].tolist()  # byte-faithful default export
    pq = pd.read_parquet(io.BytesIO(downloads["mine_puaudit.parquet"]))
    assert len(pq) == 180 and list(pq.columns) == list(out.columns)
    js = pd.read_json(io.BytesIO(downloads["mine_puaudit.jsonl"]), lines=True)
    assert len(js) == 180
    manifest = json.loads(downloads["mine_puaudit_manifest.json"])
    assert manifest["input"]["n_rows"] == 180 and manifest["params"]["scorer"] == "auto"
    assert manifest["input"]["sha256"] == at.session_state["source_sha256"]
    # formula-looking cells: a warning and a spreadsheet-safe copy
    assert any("prompt (1)" in w.value for w in at.warning)
    safe = pd.read_csv(io.BytesIO(downloads["mine_puaudit_spreadsheet_safe.csv"]), dtype=str,
                       keep_default_na=False)
    assert safe.loc[3, "prompt"] == "'=HYPERLINK(\"x\")"


def test_two_sessions_never_see_each_others_data(downloads):
    a, b = _app(), _app()
    b.file_uploader[0].upload("other.csv", _csv(90, 9), "text/csv").run()
    for at in (a, b):
        at.switch_page("pages/export.py").run()
        assert not at.exception
    assert a.session_state["source_name"] == "demo data (generated)"
    assert b.session_state["source_name"] == "other.csv"
    assert len(a.session_state["table"]) == 600 and len(b.session_state["table"]) == 90
    a_rows = pd.read_csv(io.BytesIO(downloads["demo_puaudit.csv"]))
    b_rows = pd.read_csv(io.BytesIO(downloads["other_puaudit.csv"]))
    assert len(a_rows) == 600 and len(b_rows) == 90
    assert not set(b_rows["prompt"] + b_rows["response_a"]) >= set(a_rows["prompt"] + a_rows["response_a"])
    # a rerun of the first session still shows its own data
    a.run()
    assert len(a.session_state["table"]) == 600
