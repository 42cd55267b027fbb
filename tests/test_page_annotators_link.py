"""The Annotators page's audit link, inside the app (hashing test encoder, no model)."""


import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

from tests.conftest import ROOT

pytestmark = pytest.mark.usefixtures("app_env")


def test_audit_link_table_lists_each_annotator():
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=180)
    at.run()
    at.switch_page("pages/annotators.py").run()
    assert not at.exception, at.exception
    box = next(c for c in at.checkbox if c.label == "Compare with the audit")
    box.check().run()
    assert not at.exception, at.exception
    link = at.dataframe[-1].value
    assert {"annotator", "n_scored", "audit_disagree"} <= set(link.columns)
    assert len(link) >= 5  # the demo's annotators with audited votes
    assert ((link["audit_disagree"] >= 0) & (link["audit_disagree"] <= 1)).all()
    assert (link["n_scored"] > 0).all() and np.isfinite(link["audit_disagree"]).all()
