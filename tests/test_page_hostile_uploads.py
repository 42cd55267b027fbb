"""Hostile files through the upload page: every hostile file either loads and audits, or the
page shows our message (naming the place and the fix); never a traceback. Hashing test encoder."""

import re

import pytest
from streamlit.testing.v1 import AppTest

from tests.conftest import ROOT
from tests.make_hostile_files import make_hostile_files
from tests.test_data_hostile_inputs import FAILS, WORKS

pytestmark = pytest.mark.usefixtures("app_env")


@pytest.fixture(scope="module")
def hostile(tmp_path_factory):
    return make_hostile_files(tmp_path_factory.mktemp("hostile_upload"))


def _upload(path):
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=180)
    at.run()
    at.file_uploader[0].upload(path.name, path.read_bytes(), "application/octet-stream").run()
    assert not at.exception, at.exception
    return at


@pytest.mark.parametrize("name", WORKS)
def test_working_files_load_and_audit(hostile, name):
    at = _upload(hostile[name])
    assert at.session_state["source_name"] == hostile[name].name
    at.switch_page("pages/audit.py").run()
    assert not at.exception, at.exception
    labels = [m.label for m in at.metric]
    assert "Cons_orig" in labels and "Cons_adj" in labels, [e.value for e in at.error]


@pytest.mark.parametrize("name", sorted(FAILS))
def test_failing_files_show_the_message(hostile, name):
    stage, phrases, _, _ = FAILS[name]
    at = _upload(hostile[name])
    if stage == "fit":
        at.switch_page("pages/audit.py").run()
        assert not at.exception, at.exception
    # messages are shown as text: every punctuation character is backslash-escaped Markdown
    shown = re.sub(r"\\([!-/:-@\[-`{-~])", r"\1", " ".join(e.value for e in at.error))
    assert phrases[0] in shown, shown
