"""``puaudit models``: the four rankings on the command line, JSON fields, exports, exit codes."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from puaudit.cli.commands import main
from puaudit.rankings.result import SOURCES
from puaudit.rankings.simulate import simulate_comparisons
from tests.conftest import SHARED

LLMFAO = SHARED / "data" / "llmfao" / "llmfao_crowd_vs_gpt4.csv"
FIELDS = ("bt_{s}", "bt_{s}_lo", "bt_{s}_hi", "winrate_{s}", "winrate_{s}_lo", "winrate_{s}_hi",
          "rank_{s}")


def _sim_csv(tmp_path, *, share=0.2, n=1500, seed=0):
    df, truth = simulate_comparisons(n, n_models=5, label_share=share, random_state=seed)
    df.insert(0, "prompt", [f"question {i}" for i in range(len(df))])
    df.insert(1, "response_a", ["a" * int(v) for v in df["length_a"]])
    df.insert(2, "response_b", ["b" * int(v) for v in df["length_b"]])
    path = tmp_path / "sim.csv"
    df.to_csv(path, index=False)
    return path, df, truth


def _stdout_json(out: str) -> dict:
    """The ``--json`` object: stdout holds it alone (``| jq`` reads it)."""
    return json.loads(out)


def test_json_has_every_source_with_an_audit_export(tmp_path, capsys):
    path, df, _ = _sim_csv(tmp_path)
    export = df.copy()
    export["puaudit_adjusted"] = np.where(df.human_winner.notna(), df.human_winner,
                                          df.judge_winner)
    export_path = tmp_path / "audited.csv"
    export.to_csv(export_path, index=False)
    out_csv = tmp_path / "models.csv"
    rc = main(["models", str(path), "--audit-export", str(export_path), "--resamples", "80",
               "--json", "-o", str(out_csv)])
    cap = capsys.readouterr()
    assert rc == 0
    doc, out = _stdout_json(cap.out), cap.err  # the leaderboard a person reads: on stderr
    assert len(doc["models"]) == 5 and doc["input"] == "sim.csv"
    for rec in doc["models"]:
        assert {"model", "n"} <= set(rec)
        for s in SOURCES:
            for f in FIELDS:
                assert rec[f.format(s=s)] is not None, f.format(s=s)
        assert isinstance(rec["rank_ppi"], int)
    assert 0 <= doc["diagnostics"]["lambda_winrate"] <= 1
    written = pd.read_csv(out_csv)
    assert written["model"].tolist() == [r["model"] for r in doc["models"]]
    assert "rank judge" in out and "Win rate against the field" in out
    assert f"wrote 5 models to {out_csv}" in out
    # INPUT may itself be the export.
    rc = main(["models", str(export_path), "--resamples", "60", "--json"])
    assert rc == 0 and _stdout_json(capsys.readouterr().out)["models"][0]["rank_audited"] is not None


def test_without_audit_and_length_control(tmp_path, capsys):
    path, _, _ = _sim_csv(tmp_path, seed=1)
    rc = main(["models", str(path), "--resamples", "60", "--length-control", "--ties",
               "exclude", "--json"])
    cap = capsys.readouterr()
    assert rc == 0
    doc, out = _stdout_json(cap.out), cap.err
    assert doc["models"][0]["rank_audited"] is None
    assert any("No audited verdicts" in n for n in doc["notes"])
    assert doc["params"]["ties"] == "exclude" and "lc_winrate_ppi" in doc["models"][0]
    assert doc["diagnostics"]["gamma_judge"] > doc["diagnostics"]["gamma_human"]
    assert "Length-controlled win rate" in out


def test_missing_model_columns_exit_2(tmp_path, capsys):
    path = tmp_path / "nomodels.csv"
    pd.DataFrame({"prompt": ["p"], "response_a": ["a"], "response_b": ["b"],
                  "judge_winner": ["A"]}).to_csv(path, index=False)
    rc = main(["models", str(path), "--json"])
    cap = capsys.readouterr()
    assert rc == 2 and cap.out == ""
    assert cap.err.startswith("error: No model_a / model_b column found")
    assert "--model-a-col" in cap.err


def test_model_columns_by_flag_and_bad_export(tmp_path, capsys):
    path, df, _ = _sim_csv(tmp_path, seed=2)
    renamed = tmp_path / "renamed.csv"
    df.rename(columns={"model_a": "left", "model_b": "right"}).to_csv(renamed, index=False)
    rc = main(["models", str(renamed), "--model-a-col", "left", "--model-b-col", "right",
               "--resamples", "60", "--json"])
    assert rc == 0 and len(_stdout_json(capsys.readouterr().out)["models"]) == 5
    short = tmp_path / "short.csv"
    df.head(10).assign(puaudit_adjusted="A").to_csv(short, index=False)
    rc = main(["models", str(path), "--audit-export", str(short)])
    cap = capsys.readouterr()
    assert rc == 2 and "10 rows but INPUT has" in cap.err


def test_mtbench_cli(mtbench_path, capsys):
    rc = main(["models", str(mtbench_path), "--resamples", "100", "--json"])
    cap = capsys.readouterr()
    assert rc == 0
    doc = _stdout_json(cap.out)
    assert [r["model"] for r in doc["models"]][0] == "gpt-4" and len(doc["models"]) == 6
    assert "gpt-4" in cap.err.split("Judge vs people")[1]
    # without --json the same leaderboard is on stdout, and stderr holds no part of it
    rc = main(["models", str(mtbench_path), "--resamples", "100"])
    plain = capsys.readouterr()
    assert rc == 0 and plain.out == cap.err and "Judge vs people" not in plain.err


@pytest.mark.slow
def test_llmfao_cli(capsys):
    if not LLMFAO.exists():
        pytest.skip("../shared/data is not present")
    rc = main(["models", str(LLMFAO), "--resamples", "60", "--json"])
    doc = _stdout_json(capsys.readouterr().out)
    assert rc == 0 and len(doc["models"]) >= 50
    assert all(r["rank_human"] is not None and r["rank_judge"] is not None for r in doc["models"])
