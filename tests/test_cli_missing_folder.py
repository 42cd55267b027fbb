"""An output path in a folder that does not exist is refused (exit 2, a message naming the folder
and ``mkdir -p``), and no folder is created, by every command that writes a file — the
behaviour docs/audit.md describes."""

from __future__ import annotations

import re

import pytest

from puaudit.cli.commands import main
from puaudit.data.demo import generate_demo
from tests.conftest import ROOT


@pytest.fixture(scope="module")
def demo_csv(tmp_path_factory):
    path = tmp_path_factory.mktemp("missing_folder") / "demo.csv"
    generate_demo(n_rows=120, random_state=0).to_csv(path, index=False)
    return path


# Each command with the argument list that would write into the missing folder ``{out}``.
COMMANDS = {
    "audit -o": ["audit", "{input}", "-o", "{out}", "--spread-seeds", "1"],
    "audit --manifest": ["audit", "{input}", "-o", "{ok}", "--manifest", "{out}"],
    "models -o": ["models", "{input}", "-o", "{out}"],
    "annotators -o": ["annotators", "{input}", "-o", "{out}"],
    "demo -o": ["demo", "-o", "{out}"],
}


@pytest.mark.parametrize("name", list(COMMANDS))
def test_output_in_a_missing_folder_is_refused_and_nothing_is_made(name, demo_csv, tmp_path,
                                                                   capsys):
    missing = tmp_path / "no_such_folder"
    values = {"input": str(demo_csv), "out": str(missing / "x.csv"),
              "ok": str(tmp_path / "ok.csv")}
    rc = main([a.format(**values) for a in COMMANDS[name]])
    err = capsys.readouterr().err
    assert rc == 2, err
    assert "no_such_folder does not exist" in err and "mkdir -p" in err, err
    assert "Traceback" not in err
    assert not missing.exists()
    assert not (tmp_path / "ok.csv").exists()  # refused before any work, not after the audit


def test_the_refusal_is_documented():
    doc = " ".join((ROOT / "docs" / "audit.md").read_text(encoding="utf-8").split())
    assert re.search(r"`-o` \(or `--manifest`\) in a folder that does not exist is refused", doc)
    assert "Every command that writes a file behaves the same way" in doc
