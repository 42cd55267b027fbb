import json
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

from puaudit.audit.config import AuditConfig
from puaudit.embed.pairs import PairEmbeddings
from puaudit.audit.splits import prepare_split
from puaudit.audit.relabel import relabel_split
from puaudit.audit.scorers.scoring import score_split
from puaudit.cli.commands import main
from puaudit.data.io import read_table
from puaudit.data.schema import load_comparisons
from tests.conftest import ROOT, planted_set


@pytest.fixture(scope="module")
def planted_files(tmp_path_factory):
    d = tmp_path_factory.mktemp("cli")
    df, e_a, e_b, _ = planted_set(n=600)
    df.to_csv(d / "in.csv", index=False)
    np.savez(d / "emb.npz", e_a=e_a, e_b=e_b)
    return d, df


def _last_json(out: str) -> dict:
    return json.loads(out.strip().splitlines()[-1])


def test_audit_writes_export_and_json(planted_files, capsys):
    d, df = planted_files
    rc = main(["audit", str(d / "in.csv"), "-o", str(d / "out.parquet"), "--embeddings",
               str(d / "emb.npz"), "--json", "--manifest", str(d / "manifest.json")])
    assert rc == 0
    js = _last_json(capsys.readouterr().out)
    for key in ("n_rows", "n_validation", "m", "cons_orig", "cons_adj"):
        assert key in js
    assert js["n_rows"] == 600
    out = pd.read_parquet(d / "out.parquet")
    assert len(out) == 600 and list(out.columns[: df.shape[1]]) == list(df.columns)
    man = json.loads((d / "manifest.json").read_text())
    assert man["params"]["p_ratio"] == 0.3 and man["metrics"]["cons_adj"] == js["cons_adj"]


def test_evaluate_json_matches_direct_computation(planted_files, capsys):
    d, df = planted_files
    rc = main(["evaluate", str(d / "in.csv"), "--embeddings", str(d / "emb.npz"), "--seeds", "3",
               "--scorers", "centroid,probe", "--rules", "all", "--json"])
    assert rc == 0
    captured = capsys.readouterr()
    # stdout is the JSON line alone (| jq reads it); the table went to stderr
    assert len(captured.out.strip().splitlines()) == 1 and "Cons_orig" in captured.err
    js = _last_json(captured.out)
    for key in ("cons_orig_mean", "cons_orig_sd", "cons_adj_mean", "cons_adj_sd", "delta_mean",
                "delta_sd", "per_type", "leaderboard", "n_validation", "m"):
        assert key in js
    lb = {(e["scorer"], e["rule"]): e for e in js["leaderboard"]}
    assert set(lb) == {("centroid", "guarded"), ("centroid", "paper"), ("probe", "guarded"),
                       ("probe", "paper")}
    for e in lb.values():
        for key in ("cons_orig_mean", "cons_adj_mean", "delta_mean", "delta_sd", "reversed_share",
                    "reversal_precision", "per_type"):
            assert key in e
    # direct recomputation of one entry
    t = load_comparisons(read_table(d / "in.csv"))
    z = np.load(d / "emb.npz")
    emb = PairEmbeddings(z["e_a"], z["e_b"])
    adj, orig, n_rev, n_rev_ok, n_val = [], [], 0, 0, 0
    for seed in range(3):
        prep = prepare_split(t, emb, AuditConfig(p_ratio=0.3, random_state=seed))
        sc = score_split(prep, AuditConfig(scorer="probe", random_state=seed))
        rel = relabel_split(prep, sc, AuditConfig(rule="paper"), n_boot=0)
        val = prep.split == "validation"
        h, j, a = prep.human[val], prep.judge[val], rel["adjusted"][val]
        orig.append(np.mean(j == h)); adj.append(np.mean(a == h))
        n_rev += int((a != j).sum()); n_rev_ok += int(((a != j) & (j != h)).sum()); n_val += len(h)
    e = lb[("probe", "paper")]
    assert e["cons_orig_mean"] == pytest.approx(np.mean(orig))
    assert e["cons_adj_mean"] == pytest.approx(np.mean(adj))
    assert e["delta_sd"] == pytest.approx(np.std(np.array(adj) - np.array(orig), ddof=1))
    assert e["reversed_share"] == pytest.approx(n_rev / n_val)
    assert e["reversal_precision"] == pytest.approx(n_rev_ok / n_rev)
    assert set(e["per_type"]) == {"type0", "type1", "type2"}


def test_sweep_json(planted_files, capsys):
    d, _ = planted_files
    rc = main(["sweep", str(d / "in.csv"), "--embeddings", str(d / "emb.npz"), "--param", "m",
               "--values", "0.5", "0.7", "0.9", "--seeds", "2", "--scorer", "centroid", "--json"])
    assert rc == 0
    captured = capsys.readouterr()
    assert len(captured.out.strip().splitlines()) == 1 and "value" in captured.err
    js = _last_json(captured.out)
    assert [r["value"] for r in js["results"]] == [0.5, 0.7, 0.9]
    assert all(0 <= r["cons_adj_mean"] <= 1 for r in js["results"])


def test_judge_rule_replaces_judge(planted_files, capsys, tmp_path):
    d, df = planted_files
    df2 = df.copy()
    df2["response_a"] = ["x" * (i % 7 + 1) for i in range(len(df2))]
    df2.to_csv(tmp_path / "in.csv", index=False)
    rc = main(["evaluate", str(tmp_path / "in.csv"), "--embeddings", str(d / "emb.npz"),
               "--seeds", "1", "--scorers", "centroid", "--judge-rule", "position-a", "--json"])
    assert rc == 0
    js = _last_json(capsys.readouterr().out)
    assert js["judge"] == "rule:position-a"
    human_a = np.mean(df2["human_winner"][df2["human_winner"] != ""] == "A")
    assert js["cons_orig_mean"] == pytest.approx(human_a, abs=0.06)


@pytest.mark.parametrize("content,needle", [
    (b"", "empty"),
    (b"prompt,response_a,response_b\np,a,b\n", "judge"),
    (b"prompt,response_a,response_b,judge\np,a,b,maybe\n", "row 1"),
])
def test_bad_input_exits_2_with_message_and_no_traceback(tmp_path, capsys, content, needle):
    f = tmp_path / "bad.csv"
    f.write_bytes(content)
    rc = main(["audit", str(f), "-o", str(tmp_path / "o.csv"), "--embeddings", "x.npz"])
    err = capsys.readouterr().err
    assert rc == 2 and needle in err and "Traceback" not in err


def test_nothing_auditable_message(tmp_path, capsys):
    df, e_a, e_b, _ = planted_set(n=50, annotated=0.0)
    df.to_csv(tmp_path / "in.csv", index=False)
    np.savez(tmp_path / "e.npz", e_a=e_a, e_b=e_b)
    rc = main(["audit", str(tmp_path / "in.csv"), "-o", str(tmp_path / "o.csv"), "--embeddings",
               str(tmp_path / "e.npz")])
    assert rc == 2 and "at least 10 annotated rows" in capsys.readouterr().err


def test_demo_command_and_module_entry_point(tmp_path):
    out = tmp_path / "demo.jsonl"
    proc = subprocess.run([sys.executable, "-m", "puaudit", "demo", "-o", str(out), "--rows", "60"],
                          cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    df = read_table(out)
    assert len(df) == 60 and "true_winner" in df.columns
    t = load_comparisons(df)
    assert t.columns["judge"] == "judge_winner" and t.columns["human"] == "human_winner"


def test_audit_warns_when_relabelling_is_worse_on_validation(tmp_path, capsys):
    df, e_a, e_b, _ = planted_set(n=600, signal=0.0, seed=5)  # scores are noise
    df.to_csv(tmp_path / "in.csv", index=False)
    np.savez(tmp_path / "e.npz", e_a=e_a, e_b=e_b)
    rc = main(["audit", str(tmp_path / "in.csv"), "-o", str(tmp_path / "o.csv"), "--embeddings",
               str(tmp_path / "e.npz"), "--rule", "paper", "--json"])
    captured = capsys.readouterr()
    js = _last_json(captured.out)
    assert rc == 0 and js["delta"] < 0
    assert "warning: on" in captured.err and "--rule guarded" in captured.err
