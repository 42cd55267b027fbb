"""The Data page's Split picker: an uploaded zipped folder with several splits shows a "Split"
selectbox at the split read; choosing another reads the same upload at that split, for every
page (the table, the mapping, the audit's input, the export's manifest), and a split that
cannot be read leaves the table shown with the reader's message."""

from __future__ import annotations

import json

import pyarrow as pa
import pytest
from streamlit.testing.v1 import AppTest

from tests.conftest import ROOT, planted_set
from tests.test_data_folders import _zip, save_to_disk
from tests.test_page_app import downloads  # noqa: F401 - the fixture recording download bytes

pytestmark = pytest.mark.usefixtures("app_env")


def _splits_zip(tmp_path, name: str, sizes: dict[str, int]) -> bytes:
    """A zipped save_to_disk DatasetDict ``name`` whose splits, in ``sizes``' order, hold
    consecutive planted rows (other prompts in each, so that the table shown tells them apart)."""
    df, _, _, _ = planted_set(n=sum(sizes.values()))
    root, start = tmp_path / name, 0
    for split, n in sizes.items():
        save_to_disk(root / split, pa.Table.from_pandas(df.iloc[start:start + n],
                                                        preserve_index=False), split=split)
        start += n
    (root / "dataset_dict.json").write_text(json.dumps({"splits": list(sizes)}))
    return _zip(root, name)


def _two_split_zip(tmp_path, *, test_rows: int = 24) -> bytes:
    """``train`` holds planted rows 0-59, ``test`` the next ``test_rows``."""
    return _splits_zip(tmp_path, "dd", {"train": 60, "test": test_rows})


def _no_default_split_zip(tmp_path) -> bytes:
    """Splits ``validation`` (40 rows) then ``dev`` (30): neither ``train`` nor ``test``."""
    return _splits_zip(tmp_path, "vd", {"validation": 40, "dev": 30})


def _uploaded(data: bytes) -> AppTest:
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=180)
    at.run()
    at.file_uploader[0].upload("dd.zip", data, "application/zip").run()
    assert not at.exception, at.exception
    assert not at.error, [e.value for e in at.error]
    return at


def _picker(at: AppTest):
    found = [s for s in at.selectbox if s.label == "Split"]
    assert len(found) == 1, [s.label for s in at.selectbox]
    return found[0]


def _shown(at: AppTest) -> str:
    return " ".join(c.value for c in at.caption).replace("\\", "")


def test_choosing_another_split_reads_it_for_every_page_and_keeps_the_mapping(tmp_path):
    at = _uploaded(_two_split_zip(tmp_path))
    assert _picker(at).options == ["train", "test"] and _picker(at).value == "train"
    assert at.subheader[0].value.endswith("60 rows × 8 columns")
    assert "--split" not in _shown(at) and "another: the Split box" in _shown(at)
    assert at.dataframe[-1].value["prompt"].iloc[0] == "prompt 0"
    # the visitor maps the judge to another column before switching splits
    version = at.session_state["data_version"]
    at.selectbox(key=f"map_judge_{version}").select("true_winner").run()
    assert at.session_state["table"].columns["judge"] == "true_winner"

    _picker(at).select("test").run()
    assert not at.exception, at.exception
    assert not at.error, [e.value for e in at.error]
    ss = at.session_state
    assert len(ss["raw_frame"]) == 24 and ss["source_split"] == "test"
    assert ss["source_name"] == "dd.zip"
    assert at.subheader[0].value.endswith("24 rows × 8 columns")
    assert at.dataframe[-1].value["prompt"].tolist()[:2] == ["prompt 60", "prompt 61"]
    assert "read split 'test' of dd.zip:dd" in _shown(at) and "command line" not in _shown(at)
    # the audit's table is the test split, built with the mapping the visitor chose
    table = ss["table"]
    assert table.columns["judge"] == "true_winner"
    assert at.selectbox(key=f"map_judge_{ss['data_version']}").value == "true_winner"
    assert len(table.frame) == 24
    # and the mapping still answers on the new split
    at.selectbox(key=f"map_judge_{ss['data_version']}").select("judge_winner").run()
    assert at.session_state["table"].columns["judge"] == "judge_winner"
    assert len(at.session_state["table"].frame) == 24

    _picker(at).select("train").run()
    assert len(at.session_state["raw_frame"]) == 60 and _picker(at).value == "train"


def test_a_split_over_the_upload_limits_keeps_the_table_and_says_why(tmp_path, monkeypatch):
    monkeypatch.setenv("PUAUDIT_MAX_UPLOAD_ROWS", "70")  # train (60) fits, test (90) does not
    at = _uploaded(_two_split_zip(tmp_path, test_rows=90))
    _picker(at).select("test").run()
    assert not at.exception, at.exception
    errors = [e.value for e in at.error]
    assert len(errors) == 1 and "more than 70 data rows" in errors[0], errors
    assert "Traceback" not in errors[0]
    assert len(at.session_state["raw_frame"]) == 60
    assert at.subheader[0].value.endswith("60 rows × 8 columns")
    assert _picker(at).value == "train"  # the picker names the table still shown


def test_no_picker_for_one_split_or_when_the_table_is_not_the_uploads(tmp_path):
    df, _, _, _ = planted_set(n=40)
    root = tmp_path / "one"
    save_to_disk(root / "train", pa.Table.from_pandas(df, preserve_index=False), split="train")
    (root / "dataset_dict.json").write_text(json.dumps({"splits": ["train"]}))
    at = _uploaded(_zip(root, "one"))
    assert len(at.session_state["raw_frame"]) == 40
    assert not [s for s in at.selectbox if s.label == "Split"]
    # a two-split folder, then a file that fails: the folder's table stays on screen, but the
    # uploader now holds other bytes, so no picker offers to re-read them as the folder
    at = _uploaded(_two_split_zip(tmp_path))
    assert _picker(at).options == ["train", "test"]
    at.file_uploader[0].upload("broken.csv", b"", "text/csv").run()
    assert [e.value for e in at.error] and at.session_state["source_name"] == "dd.zip"
    assert not [s for s in at.selectbox if s.label == "Split"]


def test_the_export_manifest_names_the_split_chosen(tmp_path, downloads):  # noqa: F811
    at = _uploaded(_two_split_zip(tmp_path, test_rows=120))
    _picker(at).select("test").run()
    at.switch_page("pages/export.py").run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    manifest = json.loads(downloads["dd_puaudit_manifest.json"])
    assert manifest["input"]["split"] == "test" and manifest["input"]["n_rows"] == 120
    assert "--split test" in manifest["reproduce"]


def test_a_folder_without_train_or_test_opens_at_its_first_split(tmp_path):
    # the command line asks for --split here; the dashboard reads the first and offers the rest
    at = _uploaded(_no_default_split_zip(tmp_path))
    assert _picker(at).options == ["validation", "dev"] and _picker(at).value == "validation"
    assert at.subheader[0].value.endswith("40 rows × 8 columns")
    assert "read split 'validation' of dd.zip:vd" in _shown(at)
    assert "another: the Split box" in _shown(at) and "--split" not in _shown(at)
    assert at.session_state["source_split"] == "validation"

    _picker(at).select("dev").run()
    assert not at.exception, at.exception
    assert not at.error, [e.value for e in at.error]
    assert len(at.session_state["raw_frame"]) == 30 and at.session_state["source_split"] == "dev"
    assert at.dataframe[-1].value["prompt"].iloc[0] == "prompt 40"
    assert "read split 'dev' of dd.zip:vd" in _shown(at)


@pytest.mark.parametrize("build, other, rows, first_prompt", [
    (_two_split_zip, "test", 24, "prompt 60"),
    (_no_default_split_zip, "dev", 30, "prompt 40"),  # its first read falls back to a split
])
def test_an_upload_is_unpacked_once_whatever_splits_are_chosen(tmp_path, monkeypatch, build,
                                                               other, rows, first_prompt):
    from components import split_picker
    from puaudit.data import folders

    split_picker._unpacked_zip.clear()  # an earlier test may have unpacked the same bytes
    unpacked = []
    unpack = folders._unpack
    monkeypatch.setattr(folders, "_unpack", lambda *a: unpacked.append(a[3]) or unpack(*a))
    at = _uploaded(build(tmp_path))
    default = _picker(at).value
    for split in (other, default, other):
        _picker(at).select(split).run()
        assert not at.exception and not at.error, [e.value for e in at.error]
    assert unpacked == ["dd.zip"]
    ss = at.session_state
    assert ss["source_split"] == other and len(ss["raw_frame"]) == rows
    assert at.dataframe[-1].value["prompt"].iloc[0] == first_prompt
    assert len(ss["table"].frame) == rows


def test_the_annotators_page_reader_unpacks_a_zip_once(tmp_path, monkeypatch):
    # no default split: the first read falls back to the folder's first split, from the same
    # unpacking (it was unpacked twice)
    from components import page_data, split_picker
    from puaudit.data import folders

    page_data._read_upload.clear()
    split_picker._unpacked_zip.clear()
    unpacked = []
    unpack = folders._unpack
    monkeypatch.setattr(folders, "_unpack", lambda *a: unpacked.append(a[3]) or unpack(*a))
    frame = page_data.read_page_upload(_no_default_split_zip(tmp_path), "dd.zip")
    assert unpacked == ["dd.zip"]
    assert len(frame) == 40 and frame["prompt"].iloc[0] == "prompt 0"
