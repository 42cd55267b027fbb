"""Safe defaults (docs/safety.md): local binding, XSRF, upload limit, no free model paths, no
remote code, no unpickling."""

import os

import numpy as np
import pytest
import tomllib
from streamlit import config as st_config
from streamlit.testing.v1 import AppTest

from puaudit.cli.commands import main
from puaudit.embed.hf_encoder import HFEncoder
from puaudit.embed.encoder_menu import encoder_choices
from tests.conftest import ROOT, planted_set

pytestmark = pytest.mark.usefixtures("app_env")


def test_streamlit_config_is_local_and_protected():
    cfg = tomllib.loads((ROOT / ".streamlit" / "config.toml").read_text())
    assert cfg["server"]["address"] == "127.0.0.1"
    assert cfg["server"]["enableXsrfProtection"] is True
    assert cfg["browser"]["gatherUsageStats"] is False
    assert 1 <= cfg["server"]["maxUploadSize"] <= 1000


def test_upload_over_the_limit_names_the_limit():
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=180)
    old = st_config.get_option("server.maxUploadSize")
    st_config.set_option("server.maxUploadSize", 1)
    try:
        at.run()
        big = b"prompt,response_a,response_b,judge\n" + b"p,a,b,A\n" * 200_000  # 1.6 MB
        at.file_uploader[0].upload("big.csv", big, "text/csv").run()
        errors = [e.value for e in at.error]
        assert any("over this server's 1 MB upload limit" in e and "maxUploadSize" in e
                   for e in errors), errors
        assert next(m for m in at.metric if m.label == "Rows").value == "600"  # demo kept
    finally:
        st_config.set_option("server.maxUploadSize", old)


def test_encoders_come_only_from_the_configured_list(tmp_path, monkeypatch):
    model = tmp_path / "my-model"
    model.mkdir()
    (model / "config.json").write_text("{}")
    monkeypatch.setenv("PUAUDIT_ENCODERS", f"{model}{os.pathsep}{tmp_path / 'missing'}")
    choices = encoder_choices()
    assert choices == {"all-MiniLM-L6-v2": None, "my-model": str(model)}
    monkeypatch.delenv("PUAUDIT_ENCODERS")
    assert list(encoder_choices()) == ["all-MiniLM-L6-v2"]


def test_dashboard_refuses_an_encoder_label_not_offered(monkeypatch):
    import components.encoder_state
    from puaudit.errors import PUAuditError

    monkeypatch.delenv("PUAUDIT_TEST_ENCODER", raising=False)
    components.encoder_state.load_encoder.clear()
    with pytest.raises(PUAuditError, match="not offered"):
        components.encoder_state.load_encoder.__wrapped__("/etc")
    monkeypatch.setenv("PUAUDIT_TEST_ENCODER", "hashing")


def test_remote_code_is_off_by_default():
    assert HFEncoder().trust_remote_code is False


def test_pickled_embeddings_are_refused(tmp_path, capsys):
    df, e_a, e_b, _ = planted_set(n=100)
    df.to_csv(tmp_path / "in.csv", index=False)
    obj = np.empty(2, dtype=object)
    obj[:] = [e_a, e_b]
    np.savez(tmp_path / "evil.npz", e_a=obj, e_b=obj)  # object arrays need pickle to load
    rc = main(["audit", str(tmp_path / "in.csv"), "-o", str(tmp_path / "o.csv"),
               "--embeddings", str(tmp_path / "evil.npz")])
    assert rc == 2 and "Could not read embeddings" in capsys.readouterr().err
