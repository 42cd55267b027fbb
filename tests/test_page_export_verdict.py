"""The Export page says, from validation rows, whether the relabelled verdicts are better or worse
than the judge's before anyone downloads them (hashing test encoder)."""

import re

import pytest
from streamlit.testing.v1 import AppTest

from tests.conftest import ROOT

pytestmark = pytest.mark.usefixtures("app_env")


def _verdict(at):
    boxes = [("error", e.value) for e in at.error] + [("success", s.value) for s in at.success]
    return [(kind, text) for kind, text in boxes if "held-out validation rows" in text]


def test_export_page_states_the_validated_effect():
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=180)
    at.run()
    for rule in ("guarded", "paper"):
        at.session_state["audit"] = {**at.session_state["audit"], "rule": rule}
        at.switch_page("pages/export.py").run()
        assert not at.exception, at.exception
        (kind, text), = _verdict(at)
        adj, orig = [float(x) / 100 for x in re.findall(r"([\d.]+)%", text)[:2]]
        assert kind == ("error" if adj < orig else "success"), (rule, text)
