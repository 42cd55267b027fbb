"""A benchmark release in one folder or zip (the judge's file, question.jsonl, model_answer/,
human.jsonl) is read as ``puaudit audit JUDGMENTS --human human.jsonl --answers FOLDER`` reads
it: the same table from the folder, the zip's path and its uploaded bytes, and one clear
message when the folder holds no judge's file or several; a zipped Argilla ``to_disk`` folder
is read as the folder."""

from __future__ import annotations

import json
import shutil
import zipfile

import pandas as pd
import pytest

from puaudit.data.formats.release import zip_is_release
from puaudit.data.load import load_input
from puaudit.errors import PUAuditError
from tests.conftest import SHARED

SOURCE = SHARED / "data" / "mtbench" / "source"
VOTES = SOURCE / "human_judgments"
QUESTIONS = range(81, 87)  # six questions: a small release, every model and turn of them


def _subset(src, dst, questions=QUESTIONS) -> None:
    """``src``'s JSONL lines about ``questions`` written to ``dst``."""
    keep = [ln for ln in src.read_text(encoding="utf-8").splitlines()
            if ln.strip() and json.loads(ln)["question_id"] in questions]
    dst.write_text("\n".join(keep) + "\n", encoding="utf-8")


def make_release(root, *, judge_dir: str = ".", questions=QUESTIONS):
    """A release folder at ``root`` built from the shared MT-Bench files (in a temporary folder:
    nothing of their texts is kept in this repository); returns ``root``."""
    if not SOURCE.exists():
        pytest.skip("../shared/data is not present")
    (root / judge_dir).mkdir(parents=True, exist_ok=True)
    shutil.copy(SOURCE / "fastchat" / "question.jsonl", root / "question.jsonl")
    shutil.copytree(SOURCE / "fastchat" / "model_answer", root / "model_answer")
    _subset(VOTES / "human.jsonl", root / "human.jsonl", questions)
    _subset(VOTES / "gpt4_pair.jsonl", root / judge_dir / "gpt4_pair.jsonl", questions)
    return root


def zipped(folder, path):
    """``folder`` zipped as ``zip -r path folder`` does (its one top folder inside)."""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        for p in sorted(folder.rglob("*")):
            zf.write(p, p.relative_to(folder.parent).as_posix())
    return path


@pytest.fixture(scope="module")
def release(tmp_path_factory):
    root = make_release(tmp_path_factory.mktemp("rel") / "mt_bench")
    explicit = load_input(root / "gpt4_pair.jsonl", human=root / "human.jsonl", answers=root)
    return root, explicit


def test_folder_zip_and_upload_give_the_table_of_the_explicit_command(release, tmp_path):
    root, explicit = release
    n_votes = len((root / "human.jsonl").read_text().splitlines())
    assert len(explicit) == n_votes  # one row per person's vote, as --human reads them
    assert set(explicit["question_id"].astype(int)) == set(QUESTIONS)
    assert (explicit["response_a"].str.len() > 0).all()  # the texts came from model_answer/
    archive = zipped(root, tmp_path / "mt_bench.zip")
    pd.testing.assert_frame_equal(load_input(root), explicit)
    pd.testing.assert_frame_equal(load_input(archive), explicit)
    pd.testing.assert_frame_equal(load_input(archive.read_bytes(), name="upload.zip"), explicit)


@pytest.mark.parametrize("judge_dir", ["model_judgment", "model_judgment/gpt-4"])
def test_judgments_under_model_judgment_fastchat_and_arena_hard_layouts(tmp_path, release,
                                                                         judge_dir):
    _, explicit = release
    root = make_release(tmp_path / "fc", judge_dir=judge_dir)
    pd.testing.assert_frame_equal(load_input(root), explicit)


def test_a_zipped_argilla_to_disk_folder_is_read_as_the_folder(tmp_path):
    from tests.test_data_formats_argilla import _records, _to_disk

    folder = _to_disk(tmp_path / "pairs", _records())
    archive = zipped(folder, tmp_path / "pairs.zip")
    expected = load_input(folder)
    assert len(expected) > 0
    pd.testing.assert_frame_equal(load_input(archive.read_bytes(), name="pairs.zip"), expected)
    pd.testing.assert_frame_equal(load_input(archive), expected)


def test_several_judges_or_none_is_one_message_naming_the_files(tmp_path, release):
    root = tmp_path / "two"
    shutil.copytree(release[0], root)
    shutil.copy(root / "gpt4_pair.jsonl", root / "claude_pair.jsonl")
    with pytest.raises(PUAuditError) as exc:
        load_input(zipped(root, tmp_path / "two.zip").read_bytes(), name="two.zip")
    msg = str(exc.value)
    assert msg.startswith("two.zip") and "2 judges' files (claude_pair.jsonl, gpt4_pair.jsonl)"\
        in msg and "puaudit audit JUDGMENTS --answers FOLDER" in msg
    (root / "claude_pair.jsonl").unlink()
    (root / "gpt4_pair.jsonl").unlink()
    with pytest.raises(PUAuditError, match="no judge's file"):
        load_input(root)


def test_what_is_no_release_is_read_as_before(tmp_path):
    table = tmp_path / "t.csv"
    table.write_text("prompt,response_a,response_b,judge_winner\nq,a,b,A\n")
    archive = tmp_path / "t.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        zf.write(table, "ds/t.csv")
        zf.writestr("ds/model_answer/x.jsonl", "{}\n")  # answers but no question.jsonl
    assert not zip_is_release(archive.read_bytes())
    assert not zip_is_release(b"PK\x03\x04 not a zip")
    with zipfile.ZipFile(tmp_path / "r.zip", "w") as zf:  # the release at the archive's top
        zf.writestr("question.jsonl", "{}\n")
        zf.writestr("model_answer/m.jsonl", "{}\n")
    assert zip_is_release((tmp_path / "r.zip").read_bytes())
    assert load_input(table)["judge_winner"].tolist() == ["A"]
