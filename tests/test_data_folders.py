"""Dataset folders read as one table (puaudit.data.folders): Hugging Face ``save_to_disk``
folders written here with pyarrow in the library's exact layout, Parquet shards in the Hub's
layouts, their limits (over all files, before anything is decoded), zipped folders, and the
command line."""

from __future__ import annotations

import io
import json
import zipfile
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.ipc as ipc
import pyarrow.parquet as pq
import pytest

from puaudit.cli.commands import main
from puaudit.data.io import read_table
from puaudit.errors import PUAuditError
from tests.conftest import planted_set


def _rows(n: int, start: int = 0) -> pa.Table:
    i = np.arange(start, start + n)
    return pa.table({"prompt": [f"question {k}" for k in i],
                     "response_a": [f"first answer {k}" for k in i],
                     "response_b": [f"second answer {k}" for k in i],
                     "winner": pa.array(i % 3, pa.int64()),
                     "score": i.astype(np.float64) / 10})


def save_to_disk(folder: Path, table: pa.Table, *, n_files: int = 2, split: str | None = None,
                 compression: str | None = None) -> Path:
    """What ``Dataset.save_to_disk`` writes: Arrow IPC streams ``data-0000K-of-0000N.arrow``,
    ``state.json`` listing them, ``dataset_info.json`` with the features (``winner`` a
    ClassLabel)."""
    folder.mkdir(parents=True)
    step = -(-len(table) // n_files)
    names = []
    for k in range(n_files):
        name = f"data-{k:05d}-of-{n_files:05d}.arrow"
        options = ipc.IpcWriteOptions(compression=compression)
        with ipc.new_stream(str(folder / name), table.schema, options=options) as writer:
            writer.write_table(table.slice(k * step, step), max_chunksize=7)
        names.append(name)
    (folder / "state.json").write_text(json.dumps({
        "_data_files": [{"filename": n} for n in names], "_fingerprint": "f00d",
        "_format_columns": None, "_format_kwargs": {}, "_format_type": None,
        "_output_all_columns": False, "_split": split}, indent=2))
    features = {c: {"dtype": "string", "_type": "Value"} for c in ("prompt", "response_a",
                                                                    "response_b")}
    features["winner"] = {"names": ["model_a", "model_b", "tie"], "_type": "ClassLabel"}
    features["score"] = {"dtype": "float64", "_type": "Value"}
    (folder / "dataset_info.json").write_text(json.dumps({
        "citation": "", "description": "", "features": features, "homepage": "",
        "license": ""}, indent=2))
    return folder


def test_save_to_disk_dataset_reads_every_file_in_order_with_class_label_names(tmp_path):
    ds = save_to_disk(tmp_path / "ds", _rows(25), n_files=3, split="train")
    df = read_table(ds)
    assert len(df) == 25 and list(df.columns) == ["prompt", "response_a", "response_b",
                                                  "winner", "score"]
    assert df["prompt"].tolist() == [f"question {k}" for k in range(25)]
    assert df["winner"].tolist()[:4] == ["model_a", "model_b", "tie", "model_a"]
    assert df["score"].tolist()[24] == 2.4
    assert "3 data files, 25 rows" in df.attrs["read_note"]


def test_compressed_arrow_streams_are_measured_before_decoding(tmp_path):
    big = pa.table({"text": ["x" * 1000] * 400})
    ds = save_to_disk(tmp_path / "ds", big, n_files=2, compression="zstd")
    assert sum(p.stat().st_size for p in ds.glob("*.arrow")) < 40_000  # ~400 KB decoded
    assert len(read_table(ds)) == 400
    with pytest.raises(PUAuditError, match="decode to about.*refused before reading"):
        read_table(ds, max_bytes=200_000)
    with pytest.raises(PUAuditError, match="more than 300 data rows.*2 data files hold 400"):
        read_table(ds, max_rows=300)


def _dataset_dict(root: Path) -> Path:
    save_to_disk(root / "train", _rows(20), split="train")
    save_to_disk(root / "test", _rows(6, start=100), n_files=1, split="test")
    (root / "dataset_dict.json").write_text(json.dumps({"splits": ["train", "test"]}))
    return root


def test_dataset_dict_reads_the_named_split_and_says_which(tmp_path):
    root = _dataset_dict(tmp_path / "dd")
    train = read_table(root)
    assert len(train) == 20
    assert train.attrs["read_note"].startswith(f"read split 'train' of {root} (its splits: "
                                               "train, test")
    test = read_table(root, split="test")
    assert test["prompt"].tolist()[0] == "question 100" and len(test) == 6
    with pytest.raises(PUAuditError, match="has no split 'dev'; its splits are train, test"):
        read_table(root, split="dev")


def test_dataset_dict_without_train_or_test_asks_for_a_split(tmp_path):
    root = tmp_path / "dd"
    save_to_disk(root / "a", _rows(3), n_files=1)
    save_to_disk(root / "b", _rows(3), n_files=1)
    (root / "dataset_dict.json").write_text(json.dumps({"splits": ["a", "b"]}))
    with pytest.raises(PUAuditError, match=r"several splits \(a, b\).*--split NAME"):
        read_table(root)
    assert len(read_table(root, split="b")) == 3


def test_state_json_naming_a_file_outside_the_folder_is_refused(tmp_path):
    ds = save_to_disk(tmp_path / "ds", _rows(4), n_files=1)
    (tmp_path / "secret.arrow").write_bytes((ds / "data-00000-of-00001.arrow").read_bytes())
    (ds / "state.json").write_text(json.dumps({"_data_files": [{"filename": "../secret.arrow"}]}))
    with pytest.raises(PUAuditError, match="outside the dataset folder"):
        read_table(ds)


def _shards(folder: Path, sizes: list[int], *, split: str = "train") -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    out, start = [], 0
    for k, n in enumerate(sizes):
        path = folder / f"{split}-{k:05d}-of-{len(sizes):05d}.parquet"
        pq.write_table(_rows(n, start), path)
        out.append(path)
        start += n
    return out


def test_hub_parquet_shards_read_as_one_table_in_name_order(tmp_path):
    root = tmp_path / "hub"
    _shards(root / "data", [4, 5, 3])
    _shards(root / "data", [2], split="test")
    df = read_table(root)
    assert df["prompt"].tolist() == [f"question {k}" for k in range(12)]
    assert df.attrs["read_note"].startswith("read split 'train'") and "3 shards" in \
        df.attrs["read_note"]
    assert len(read_table(root, split="test")) == 2


def test_converted_config_split_layout_and_plain_shard_folder(tmp_path):
    root = tmp_path / "conv"
    for split, n in (("train", 7), ("validation", 2)):
        (root / "default" / split).mkdir(parents=True)
        pq.write_table(_rows(n), root / "default" / split / "0000.parquet")
    assert len(read_table(root)) == 7
    assert len(read_table(root, split="validation")) == 2  # the config's split by its name
    plain = tmp_path / "plain"
    plain.mkdir()
    for k in (1, 0):  # written out of order, read in name order
        pq.write_table(_rows(2, start=10 * k), plain / f"part-{k}.parquet")
    (plain / "_SUCCESS").write_text("")
    assert read_table(plain)["prompt"].tolist()[0] == "question 0"


def test_a_shard_with_other_columns_is_named_with_the_column(tmp_path):
    shards = _shards(tmp_path / "data", [3, 3])
    pq.write_table(_rows(3).set_column(4, "score", pa.array(["a", "b", "c"])), shards[1])
    with pytest.raises(PUAuditError) as err:
        read_table(tmp_path)
    msg = str(err.value)
    assert "train-00001-of-00002.parquet: column 'score' holds string" in msg
    assert err.value.column == "score"
    pq.write_table(_rows(3).drop_columns(["winner"]), shards[1])
    with pytest.raises(PUAuditError, match="00001-of-00002.parquet: has no column 'winner'"):
        read_table(tmp_path)


def test_a_missing_shard_is_named(tmp_path):
    shards = _shards(tmp_path / "data", [2, 2, 2])
    shards[1].unlink()
    with pytest.raises(PUAuditError, match="2 of its 3 shards; train-00001-of-00003.parquet"):
        read_table(tmp_path)


def test_shard_limits_count_every_shard_before_any_page_is_read(tmp_path, monkeypatch):
    _shards(tmp_path / "data", [400, 400, 400])
    import puaudit.data.folders as shards_mod

    def never(*a, **k):
        raise AssertionError("a page was read")
    monkeypatch.setattr(shards_mod, "parquet_table", never)
    with pytest.raises(PUAuditError, match="more than 1,000 data rows.*3 Parquet shards hold "
                                           "1,200 rows"):
        read_table(tmp_path, max_rows=1000)
    # each shard alone is well under the limit; together they are not
    with pytest.raises(PUAuditError, match="3 Parquet shards decode to about.*refused before"):
        read_table(tmp_path, max_bytes=60_000)


def test_a_folder_of_nothing_known_gets_one_message(tmp_path):
    (tmp_path / "notes.txt").write_text("hello")
    (tmp_path / "sub").mkdir()
    with pytest.raises(PUAuditError) as err:
        read_table(tmp_path)
    msg = str(err.value)
    assert "not a dataset folder puaudit reads" in msg and "notes.txt, sub/" in msg
    assert "dataset_dict.json" in msg and "*.parquet" in msg


def _zip(folder: Path, inner: str = "ds") -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        for p in sorted(folder.rglob("*")):
            if p.is_file():
                zf.write(p, f"{inner}/{p.relative_to(folder).as_posix()}")
    return buf.getvalue()


def test_a_zipped_folder_is_read_and_unsafe_archives_are_refused(tmp_path):
    data = _zip(_dataset_dict(tmp_path / "dd"))
    test = read_table(data, name="dd.zip", split="test")
    assert len(test) == 6 and test.attrs["read_note"].startswith("read split 'test' of dd.zip:ds")
    bomb = _zip(save_to_disk(tmp_path / "big", pa.table({"text": ["x" * 1000] * 400})))
    assert len(bomb) < 20_000
    with pytest.raises(PUAuditError, match="unpacks to .* over the .* limit here; refused"):
        read_table(bomb, name="big.zip", max_bytes=100_000)
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr("../evil.parquet", b"PAR1")
    with pytest.raises(PUAuditError, match="a name outside the folder"):
        read_table(buf.getvalue(), name="evil.zip")
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr("[Content_Types].xml", "<Types/>")
    with pytest.raises(PUAuditError, match="Excel .xlsx workbook"):
        read_table(buf.getvalue(), name="book.xlsx")


def test_cli_audits_a_shard_folder_and_says_which_split(tmp_path, capsys):
    df, e_a, e_b, _ = planted_set(n=300)
    root = tmp_path / "hub" / "data"
    root.mkdir(parents=True)
    for k, part in enumerate(np.array_split(np.arange(300), 3)):
        df.iloc[part].to_parquet(root / f"train-{k:05d}-of-00003.parquet", index=False)
    df.iloc[:5].to_parquet(root / "test-00000-of-00001.parquet", index=False)
    np.savez(tmp_path / "emb.npz", e_a=e_a, e_b=e_b)
    out = tmp_path / "out.csv"
    rc = main(["audit", str(tmp_path / "hub"), "-o", str(out), "--embeddings",
               str(tmp_path / "emb.npz"), "--spread-seeds", "1", "--split", "train"])
    err = capsys.readouterr().err
    assert rc == 0, err
    assert "read split 'train' of" in err
    assert len(pd.read_csv(out)) == 300
    rc = main(["audit", str(tmp_path / "hub"), "-o", str(out), "--embeddings",
               str(tmp_path / "emb.npz"), "--split", "dev"])
    assert rc == 2 and "has no split 'dev'" in capsys.readouterr().err


def test_alpaca_eval_annotations_in_parquet_shards_are_detected_as_such(tmp_path):
    from puaudit.data.load import load_input

    records = pd.DataFrame({"instruction": ["a", "b", "c", "d"], "output_1": ["x1", "x2", "x3", "x4"],
                            "output_2": ["y1", "y2", "y3", "y4"], "generator_1": "ref",
                            "generator_2": "new", "preference": [1.0, 2.0, 1.5, 2.0]})
    (tmp_path / "data").mkdir()
    records.iloc[:2].to_parquet(tmp_path / "data" / "train-00000-of-00002.parquet")
    records.iloc[2:].to_parquet(tmp_path / "data" / "train-00001-of-00002.parquet")
    df = load_input(tmp_path)
    assert df["judge_winner"].tolist() == ["A", "B", "tie", "B"]
    assert df["model_b"].tolist() == ["new"] * 4


def test_data_page_reads_a_zipped_folder_and_says_which_split(tmp_path, app_env):
    from streamlit.testing.v1 import AppTest

    from tests.conftest import ROOT

    df, _, _, _ = planted_set(n=80)
    root = tmp_path / "hub"
    (root / "data").mkdir(parents=True)
    df.iloc[:50].to_parquet(root / "data" / "train-00000-of-00002.parquet", index=False)
    df.iloc[50:].to_parquet(root / "data" / "train-00001-of-00002.parquet", index=False)
    df.iloc[:4].to_parquet(root / "data" / "test-00000-of-00001.parquet", index=False)
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=180)
    at.run()
    at.file_uploader[0].upload("hub.zip", _zip(root, "hub"), "application/zip").run()
    assert not at.exception, at.exception
    assert not at.error, [e.value for e in at.error]
    assert at.session_state["source_name"] == "hub.zip"
    assert len(at.session_state["raw_frame"]) == 80
    shown = " ".join(c.value for c in at.caption).replace("\\", "")
    assert "read split 'train' of hub.zip:hub" in shown


def test_a_damaged_data_file_is_named(tmp_path):
    ds = save_to_disk(tmp_path / "ds", _rows(10), n_files=2)
    data = (ds / "data-00001-of-00002.arrow").read_bytes()
    (ds / "data-00001-of-00002.arrow").write_bytes(data[:len(data) // 2])
    with pytest.raises(PUAuditError, match="data-00001-of-00002.arrow: not a readable Arrow data "
                                           "file .*save_to_disk"):
        read_table(ds)
    _shards(tmp_path / "hub" / "data", [3, 3])
    (tmp_path / "hub" / "data" / "train-00001-of-00002.parquet").write_bytes(b"PAR1 nonsense")
    with pytest.raises(PUAuditError, match="train-00001-of-00002.parquet: not a readable Parquet"):
        read_table(tmp_path / "hub")
