"""The Audit page's trust-or-escalate section: the certify box, the target slider, the curve."""

import pytest
from streamlit.testing.v1 import AppTest

from tests.conftest import ROOT

pytestmark = pytest.mark.usefixtures("app_env")


def _chart_target(at) -> float:
    import json

    fig = json.loads(next(c for c in at.get("plotly_chart")
                          if "certify_curve" in str(c.proto.id)).proto.spec)
    return [s for s in fig["layout"]["shapes"]][0]["x0"]


def test_moving_the_target_slider_recertifies_and_redraws_the_curve():
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=300)
    at.run()
    at.switch_page("pages/audit.py").run()
    box = next(c for c in at.checkbox if c.label.startswith("Certify verdicts"))
    box.check().run()
    assert not at.exception, at.exception
    slider = next(s for s in at.slider if s.label == "Target agreement")
    assert slider.value == pytest.approx(0.9)
    text_09 = [m.value for m in (*at.success, *at.warning) if "trusted" in m.value
               or "certif" in m.value]
    assert _chart_target(at) == pytest.approx(0.9)
    slider.set_value(0.7).run()
    assert not at.exception, at.exception
    text_07 = [m.value for m in (*at.success, *at.warning) if "trusted" in m.value
               or "certif" in m.value]
    assert _chart_target(at) == pytest.approx(0.7)
    assert text_09 and text_07 and text_09 != text_07
    assert at.session_state["audit"]["target_agreement"] == pytest.approx(0.7)
    box = next(c for c in at.checkbox if c.label.startswith("Certify verdicts"))
    box.uncheck().run()
    assert at.session_state["audit"]["target_agreement"] is None
    assert not [s for s in at.slider if s.label == "Target agreement"]


def test_review_page_says_escalated_rows_come_first_when_certified():
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=300)
    at.run()
    at.switch_page("pages/audit.py").run()
    next(c for c in at.checkbox if c.label.startswith("Certify verdicts")).check().run()
    next(s for s in at.slider if s.label == "Target agreement").set_value(0.7).run()
    at.switch_page("pages/review.py").run()
    assert not at.exception, at.exception
    assert any("escalated rows come first" in c.value for c in at.caption)
