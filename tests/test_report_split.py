"""The report of a dataset folder names the split it read: in the card's ``input``, in the
page's provenance and in both reproduce commands (a folder's other split is another table)."""

from __future__ import annotations

import json

import pyarrow as pa

from puaudit.cli.commands import main
from puaudit.data.demo import generate_demo
from tests.test_data_folders import save_to_disk
from tests.test_report import _embed


def _folder(tmp_path):
    df = generate_demo(n_rows=240, random_state=4)
    root = tmp_path / "dd"
    save_to_disk(root / "train", pa.Table.from_pandas(df.iloc[:120], preserve_index=False),
                 split="train")
    save_to_disk(root / "test", pa.Table.from_pandas(df.iloc[120:], preserve_index=False),
                 split="test")
    (root / "dataset_dict.json").write_text(json.dumps({"splits": ["train", "test"]}))
    _embed(df.iloc[120:], tmp_path / "emb.npz")
    return root


def test_the_card_and_page_name_the_split_read(tmp_path):
    root = _folder(tmp_path)
    args = ["--split", "test", "--embeddings", str(tmp_path / "emb.npz"), "--scorer", "centroid",
            "--spread-seeds", "1"]
    assert main(["report", str(root), "-o", str(tmp_path / "card.json"), *args]) == 0
    card = json.loads((tmp_path / "card.json").read_text())
    assert card["input"]["split"] == "test" and card["input"]["n_rows"] == 120
    assert "--split test" in card["reproduce"]["audit"]
    assert "--split test" in card["reproduce"]["report"]
    assert main(["report", str(root), "-o", str(tmp_path / "r.html"), *args]) == 0
    page = (tmp_path / "r.html").read_text(encoding="utf-8")
    assert "<tr><td>Split</td><td>test</td></tr>" in page


def test_a_table_file_has_no_split(tmp_path):
    df = generate_demo(n_rows=120, random_state=5)
    df.to_csv(tmp_path / "t.csv", index=False)
    _embed(df, tmp_path / "emb.npz")
    assert main(["report", str(tmp_path / "t.csv"), "-o", str(tmp_path / "card.json"),
                 "--embeddings", str(tmp_path / "emb.npz"), "--scorer", "centroid",
                 "--spread-seeds", "1"]) == 0
    card = json.loads((tmp_path / "card.json").read_text())
    assert card["input"]["split"] is None and "--split" not in card["reproduce"]["audit"]
