"""A dataset folder's read names its splits and the one read (``attrs["splits"]``,
``attrs["split"]``), so that the dashboard can offer the others; reading another by its name
gives that split's rows, within the same limits. The folders are built with the builders of
tests/test_data_folders.py (``datasets``' save_to_disk layout written with pyarrow)."""

from __future__ import annotations

import json

import pandas as pd
import pyarrow.parquet as pq
import pytest

from components.uploads import offered_splits, read_note_caption, read_upload
from puaudit.cli.commands import main
from puaudit.data.io import read_table
from puaudit.data.limits import UploadLimits
from puaudit.data.folders import UnpackedZip
from puaudit.errors import PUAuditError
from tests.test_data_folders import _dataset_dict, _rows, _zip, save_to_disk


def test_a_zipped_dataset_dict_names_its_splits_and_reads_the_chosen_one(tmp_path):
    data = _zip(_dataset_dict(tmp_path / "dd"))  # train: 20 rows from 0, test: 6 from 100
    train = read_table(data, name="dd.zip")
    assert train.attrs["splits"] == ["train", "test"] and train.attrs["split"] == "train"
    assert len(train) == 20 and train["prompt"].iloc[0] == "question 0"
    test = read_table(data, name="dd.zip", split=train.attrs["splits"][1])
    assert test.attrs["splits"] == ["train", "test"] and test.attrs["split"] == "test"
    assert test["prompt"].tolist() == [f"question {k}" for k in range(100, 106)]
    assert test["winner"].tolist()[:3] == ["model_b", "tie", "model_a"]  # ClassLabel names
    assert test.attrs["read_note"].startswith("read split 'test' of dd.zip:ds (its splits: "
                                              "train, test; another: --split NAME); 1 data file")
    assert offered_splits(train) == offered_splits(test) == ["train", "test"]


def test_one_unpacked_archive_serves_every_split_and_is_removed_on_close(tmp_path):
    data = _zip(_dataset_dict(tmp_path / "dd"))
    with UnpackedZip(data, "dd.zip") as folder:
        reads = [read_table(data, name="dd.zip", split=split, unpack_zip=lambda *_: folder)
                 for split in ("train", "test")]
        root = folder.root
        assert root.is_dir()
    assert not root.exists()
    assert [len(r) for r in reads] == [20, 6] and reads[1].attrs["split"] == "test"
    assert reads[1].attrs["read_note"].startswith("read split 'test' of dd.zip:ds")


def test_the_upload_reader_reads_a_split_within_the_upload_limits(tmp_path):
    root = tmp_path / "dd"
    save_to_disk(root / "train", _rows(20), split="train")
    save_to_disk(root / "big", _rows(40, start=500), split="big")
    (root / "dataset_dict.json").write_text(json.dumps({"splits": ["train", "big"]}))
    data = _zip(root)
    limits = UploadLimits(max_mb=50, max_rows=30, max_columns=50)
    assert len(read_upload(data, "dd.zip", limits=limits)) == 20
    with pytest.raises(PUAuditError, match=r"more than 30 data rows.*puaudit audit dd.zip "
                                           r"--split big -o audited.csv"):
        read_upload(data, "dd.zip", limits=limits, split="big")
    big = read_upload(data, "dd.zip", limits=UploadLimits(50, 100, 50), split="big")
    assert big["prompt"].iloc[0] == "question 500" and big.attrs["split"] == "big"


def test_parquet_shards_and_single_splits_say_what_split_accepts(tmp_path):
    hub = tmp_path / "hub"
    for split, n in (("train", 7), ("validation", 2)):
        (hub / "default" / split).mkdir(parents=True)
        pq.write_table(_rows(n), hub / "default" / split / "0000.parquet")
    df = read_table(hub)
    assert df.attrs["splits"] == ["default/train", "default/validation"]
    assert df.attrs["split"] == "default/train"
    other = read_table(hub, split=df.attrs["splits"][1])
    assert len(other) == 2 and other.attrs["split"] == "default/validation"
    # one split, or none named: nothing to choose
    flat = tmp_path / "flat"
    flat.mkdir()
    pq.write_table(_rows(3), flat / "part-0.parquet")
    assert read_table(flat).attrs["splits"] == [] and read_table(flat).attrs["split"] is None
    lone = read_table(save_to_disk(tmp_path / "ds", _rows(5), n_files=1, split="test"))
    assert lone.attrs["splits"] == ["test"] and offered_splits(lone) == []
    assert offered_splits(pd.DataFrame({"a": [1]})) == []  # a table file


def test_the_read_note_points_to_the_picker_only_when_one_is_shown():
    note = "read split 'train' of dd.zip:ds (its splits: train, test; another: --split NAME)"
    shown = read_note_caption(note, picker=True)
    assert "--split" not in shown and "command line" not in shown
    assert shown.endswith("(its splits: train, test; another: the Split box)")
    assert "the command line's --split NAME" in read_note_caption(note, picker=False)


def test_the_dashboard_reads_the_first_split_when_none_is_train_or_test(tmp_path, capsys):
    root = tmp_path / "dd"
    save_to_disk(root / "validation", _rows(8), n_files=1, split="validation")
    save_to_disk(root / "dev", _rows(5, start=200), n_files=1, split="dev")
    (root / "dataset_dict.json").write_text(json.dumps({"splits": ["validation", "dev"]}))
    data = _zip(root)
    # the command line (read_table) still asks for --split, naming both
    with pytest.raises(PUAuditError, match=r"several splits \(validation, dev\).*--split NAME"):
        read_table(data, name="dd.zip")
    (tmp_path / "dd.zip").write_bytes(data)
    rc = main(["audit", str(tmp_path / "dd.zip"), "-o", str(tmp_path / "out.csv")])
    err = capsys.readouterr().err
    assert rc == 2 and "several splits (validation, dev)" in err and "--split NAME" in err, err
    # the dashboard reads the first, in the folder's order, and names both for the picker
    first = read_upload(data, "dd.zip", limits=UploadLimits(50, 100, 50))
    assert first.attrs["split"] == "validation" and len(first) == 8
    assert first.attrs["splits"] == ["validation", "dev"]
    assert offered_splits(first) == ["validation", "dev"]
    assert read_note_caption(first.attrs["read_note"], picker=True).startswith(
        "read split 'validation' of dd.zip:ds (its splits: validation, dev; another: the Split "
        "box)")
    dev = read_upload(data, "dd.zip", limits=UploadLimits(50, 100, 50), split="dev")
    assert dev["prompt"].iloc[0] == "question 200" and dev.attrs["split"] == "dev"
    # a split asked for by name and missing is still refused, not replaced by the first
    with pytest.raises(PUAuditError, match="has no split 'test'; its splits are validation, dev"):
        read_upload(data, "dd.zip", split="test")
    # the Hub's Parquet layout too (its splits in name order)
    hub = tmp_path / "hub" / "data"
    hub.mkdir(parents=True)
    pq.write_table(_rows(4), hub / "validation-00000-of-00001.parquet")
    pq.write_table(_rows(3, start=50), hub / "dev-00000-of-00001.parquet")
    hub_zip = _zip(tmp_path / "hub")
    with pytest.raises(PUAuditError, match=r"several splits \(dev, validation\)"):
        read_table(hub_zip, name="hub.zip")
    shards = read_upload(hub_zip, "hub.zip", limits=UploadLimits(50, 100, 50))
    assert shards.attrs["split"] == "dev" and len(shards) == 3
