"""`puaudit audit` for a first-time user: options checked before any embedding, no folder made
behind their back, one default per option in --help, the change reported over seeded splits."""

import json
import re
import subprocess
import sys

import numpy as np
import pytest

from puaudit.audit.config import AuditConfig
from puaudit.audit.evaluate import evaluate
from puaudit.cli.commands import build_parser, main
from puaudit.data.schema import load_comparisons
from puaudit.embed.pairs import PairEmbeddings
from tests.conftest import ROOT, planted_set


@pytest.fixture(scope="module")
def planted_files(tmp_path_factory):
    d = tmp_path_factory.mktemp("first_hour")
    df, e_a, e_b, _ = planted_set(n=600)
    df.to_csv(d / "in.csv", index=False)
    np.savez(d / "emb.npz", e_a=e_a, e_b=e_b)
    return d, df, e_a, e_b


def test_bad_option_refused_before_the_encoder_is_loaded(planted_files, tmp_path):
    """--m 1.5 with an empty embedding cache and no encoder weights at hand: the encoder would
    have to be loaded (and every text embedded) before the old check; now exit 2 at once."""
    d, *_ = planted_files
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), "HOME": str(tmp_path),
           "HF_HUB_OFFLINE": "1", "PUAUDIT_CACHE_DIR": str(tmp_path / "cold")}
    code = ("import sys\nfrom puaudit.cli.commands import main\nrc = main(sys.argv[1:])\n"
            "print('encoder loaded' if 'sentence_transformers' in sys.modules or "
            "'torch' in sys.modules else 'no encoder')\nsys.exit(rc)")
    proc = subprocess.run([sys.executable, "-c", code, "audit", str(d / "in.csv"), "--m", "1.5",
                           "-o", str(tmp_path / "x.csv"), "--cache-dir", str(tmp_path / "cold")],
                          capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120)
    assert proc.returncode == 2, proc.stderr
    assert "m must be" in proc.stderr and "Traceback" not in proc.stderr
    assert proc.stdout.strip() == "no encoder"
    assert not (tmp_path / "x.csv").exists() and not (tmp_path / "cold").exists()


def test_missing_output_folder_is_refused_not_created(planted_files, tmp_path, capsys):
    d, *_ = planted_files
    out = tmp_path / "no_such_folder" / "x.csv"
    rc = main(["audit", str(d / "in.csv"), "-o", str(out), "--embeddings", str(d / "emb.npz"),
               "--spread-seeds", "1"])
    err = capsys.readouterr().err
    assert rc == 2
    assert "no_such_folder does not exist" in err and "mkdir -p" in err
    assert not (tmp_path / "no_such_folder").exists()


def test_help_gives_one_default_per_option():
    audit = build_parser()._subparsers._group_actions[0].choices["audit"]
    for action in audit._actions:
        assert len(re.findall(r"\(default", action.help or "")) <= 1, action.option_strings
    text = audit.format_help()
    m_help = text[text.index("  --m M"):text.index("  --p-ratio")]
    assert m_help.count("default") == 1


def test_json_reports_the_change_over_seeds(planted_files, capsys):
    d, df, e_a, e_b = planted_files
    rc = main(["audit", str(d / "in.csv"), "-o", str(d / "out.csv"), "--embeddings",
               str(d / "emb.npz"), "--json", "--scorer", "probe", "--seed", "3"])
    assert rc == 0
    captured = capsys.readouterr()
    js = json.loads(captured.out.strip().splitlines()[-1])
    spread = js["delta_over_seeds"]
    assert set(spread) == {"mean", "min", "max", "n"} and spread["n"] == 5
    # the same numbers as evaluate over seeds 3..7 on the same embeddings
    table = load_comparisons(df)
    emb = PairEmbeddings(e_a=e_a, e_b=e_b, encoder="file")
    runs = evaluate(table, emb, seeds=range(3, 8), config=AuditConfig(scorer="probe"))["runs"]
    deltas = runs.loc[runs["question_type"] == "__all__", "delta"].to_numpy()
    assert spread["mean"] == pytest.approx(deltas.mean(), abs=1e-12)
    assert spread["min"] == pytest.approx(deltas.min(), abs=1e-12)
    assert spread["max"] == pytest.approx(deltas.max(), abs=1e-12)
    assert deltas[0] == pytest.approx(js["delta"], abs=1e-12)  # the first split is the audit
    assert spread["min"] <= js["delta"] <= spread["max"]
    assert "Change over 5 seeded splits" in captured.err


def test_spread_seeds_sets_and_turns_off(planted_files, capsys):
    d, *_ = planted_files
    base = ["audit", str(d / "in.csv"), "-o", str(d / "out2.csv"), "--embeddings",
            str(d / "emb.npz"), "--json", "--scorer", "centroid"]
    assert main(base + ["--spread-seeds", "2"]) == 0
    assert json.loads(capsys.readouterr().out.strip().splitlines()[-1])["delta_over_seeds"]["n"] == 2
    assert main(base + ["--spread-seeds", "1"]) == 0
    assert json.loads(capsys.readouterr().out.strip().splitlines()[-1])["delta_over_seeds"] is None
    assert main(base + ["--spread-seeds", "0"]) == 2
    assert "--spread-seeds must be at least 1" in capsys.readouterr().err
