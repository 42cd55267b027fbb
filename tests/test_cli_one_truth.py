"""The command line says one thing (issue 39): a judge file without human verdicts is refused
before any embedding, with what to do; ``puaudit models`` reads every format ``audit`` reads;
``audit --json`` writes the JSON line alone on stdout; the certify line gives the realised
agreement; the verdict line says "within noise" when the spread says so; a change equals the
difference of the two numbers printed beside it."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import numpy as np
import pytest

from puaudit.audit.splits import MIN_ANNOTATED
from puaudit.cli.commands import main
from tests.conftest import ROOT, planted_set


def _annotations(path, df, *, human: bool):
    """AlpacaEval annotations of ``df``: the judge's verdict as preference; a person's verdict
    in ``human_winner`` only when ``human``."""
    records = []
    for _, row in df.iterrows():
        rec = {"instruction": row["prompt"], "output_1": row["response_a"],
               "output_2": row["response_b"], "generator_1": f"model{row['question_id'] % 4}",
               "generator_2": f"model{(row['question_id'] + 1) % 4 + 4}",
               "dataset": row["category"], "annotator": "alpaca_eval_gpt4_turbo_fn",
               "preference": 1 if row["judge_winner"] == "A" else 2}
        if human:
            rec["human_winner"] = row["human_winner"]
        records.append(rec)
    path.write_text(json.dumps(records), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("one_truth")
    df, e_a, e_b, _ = planted_set(n=600)
    df.to_csv(d / "in.csv", index=False)
    np.savez(d / "emb.npz", e_a=e_a, e_b=e_b)
    _annotations(d / "annotations.json", df, human=False)
    return d


def test_judge_file_without_human_verdicts_is_refused_before_any_embedding(files, tmp_path):
    """AlpacaEval annotations carry no human verdicts: exit 2 with what to do, the encoder never
    loaded and nothing written to the embedding cache (it used to embed every text first)."""
    cache = tmp_path / "cache"
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), "HOME": str(tmp_path),
           "HF_HUB_OFFLINE": "1", "PUAUDIT_CACHE_DIR": str(cache)}
    code = ("import sys\nfrom puaudit.cli.commands import main\nrc = main(sys.argv[1:])\n"
            "print('encoder loaded' if 'sentence_transformers' in sys.modules or "
            "'torch' in sys.modules else 'no encoder')\nsys.exit(rc)")
    proc = subprocess.run([sys.executable, "-c", code, "audit", str(files / "annotations.json"),
                           "-o", str(tmp_path / "out.csv")],
                          capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300)
    assert proc.returncode == 2, proc.stderr
    assert proc.stdout.strip() == "no encoder"
    assert not cache.exists() or not any(cache.rglob("*"))
    assert not (tmp_path / "out.csv").exists()
    err = " ".join(proc.stderr.split())
    assert "Traceback" not in err
    assert "This file has no human verdicts" in err
    assert f"at least {MIN_ANNOTATED} annotated rows" in err
    for how in ("a column of them", "--human FILE", "Label Studio or Argilla", "Review page",
                "puaudit review import"):
        assert how in err
    for works in ("`puaudit report`", "`puaudit models`", "`puaudit trustjudge`"):
        assert works in err


def test_too_few_labels_refused_before_embedding_too(files, tmp_path, capsys, monkeypatch):
    """Fewer than MIN_ANNOTATED annotated rows: the same early refusal, the count said."""
    import pandas as pd

    import puaudit.embed.encoders as encoders

    def no_encoder(*a, **k):
        raise AssertionError("the encoder must not be loaded")

    monkeypatch.setattr(encoders, "get_encoder", no_encoder)
    df = pd.read_csv(files / "in.csv", keep_default_na=False)
    df["human_winner"] = ""
    df.loc[: MIN_ANNOTATED - 2, "human_winner"] = df.loc[: MIN_ANNOTATED - 2, "true_winner"]
    df.to_csv(tmp_path / "few.csv", index=False)
    rc = main(["audit", str(tmp_path / "few.csv"), "-o", str(tmp_path / "o.csv")])
    err = capsys.readouterr().err
    assert rc == 2 and f"at least {MIN_ANNOTATED} annotated rows" in err
    assert f"this table has {MIN_ANNOTATED - 1} " in err


def test_models_reads_alpaca_eval_annotations(files, capsys):
    """It said "Required column(s) not found: judge"; the judge's preference is read now."""
    rc = main(["models", str(files / "annotations.json"), "--resamples", "50", "--json"])
    out, err = capsys.readouterr()
    assert rc == 0, err
    res = json.loads(out.strip().splitlines()[-1])
    assert res["n_models"] == 8 and res["judge"] == "judge_winner"
    assert sum(m["n"] for m in res["models"]) == 2 * 600


@pytest.fixture(scope="module")
def certified_run(files, tmp_path_factory):
    """One `audit --json --target-agreement` run in a subprocess: (stdout, stderr, summary)."""
    out = tmp_path_factory.mktemp("json") / "o.csv"
    proc = subprocess.run(
        [sys.executable, "-m", "puaudit", "audit", str(files / "in.csv"), "-o", str(out),
         "--embeddings", str(files / "emb.npz"), "--spread-seeds", "3", "--target-agreement",
         "0.75", "--json"],
        capture_output=True, text=True, cwd=files, timeout=600,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), "HOME": str(files)})
    assert proc.returncode == 0, proc.stderr
    return proc.stdout, proc.stderr, json.loads(proc.stdout)


def test_audit_json_writes_exactly_one_line_to_stdout(certified_run):
    stdout, stderr, summary = certified_run
    assert stdout.count("\n") == 1 and stdout.endswith("}\n")  # `| jq` reads it
    assert summary["n_rows"] == 600
    assert "Cons_orig" in stderr and "groups:" in stderr  # the report went to stderr


def test_certify_line_gives_realised_agreement_on_trusted_validation_rows(certified_run):
    _, stderr, summary = certified_run
    cert = summary["certification"]
    line = [ln for ln in stderr.splitlines() if ln.startswith("certified:")][0]
    assert (f"realised agreement on {cert['n_validation_trusted']} trusted validation items "
            f"{cert['realised']:.3f}") in line
    assert f"({cert['n_escalated_unlabelled']} without a human verdict, for people)" in line


def test_printed_change_is_the_difference_of_the_printed_numbers(certified_run):
    _, stderr, _ = certified_run
    m = re.search(r"Cons_orig (\d\.\d{3})  Cons_adj (\d\.\d{3})  change ([+-]\d\.\d{3})", stderr)
    assert m, stderr
    assert float(m.group(3)) == pytest.approx(float(m.group(2)) - float(m.group(1)), abs=1e-9)


def test_verdict_line_says_within_noise_when_the_spread_reaches_zero():
    from puaudit.audit.evaluate import verdict_with_spread

    verdict = ("Reversals help on validation (+3.1 points of agreement with people on 300 rows; "
               "40 verdicts reversed in all).")
    noisy = verdict_with_spread(verdict, {"n": 5, "min": -0.005, "max": 0.03, "mean": 0.01})
    assert noisy.startswith("Reversals help on validation only within noise (+3.1 points")
    assert "over 5 seeded splits the change ranges from -0.5 to +3.0 points" in noisy
    clear = {"n": 5, "min": 0.01, "max": 0.03, "mean": 0.02}
    assert verdict_with_spread(verdict, clear) == verdict
    assert verdict_with_spread(verdict, None) == verdict


def test_json_verdict_agrees_with_the_spread(certified_run):
    _, stderr, summary = certified_run
    spread = summary["delta_over_seeds"]
    verdict = summary["verdict"]
    assert verdict in stderr
    if verdict.startswith("Reversals help") and spread["min"] <= 0 <= spread["max"]:
        assert "within noise" in verdict
    elif verdict.startswith("Reversals help"):
        assert "within noise" not in verdict


def _label_minimums(path) -> set[int]:
    """Every "at least N" that states how many human labels / annotated rows the audit needs."""
    text = " ".join(path.read_text(encoding="utf-8").split())
    return {int(n) for n in re.findall(r"at least (\d+)(?= annotated rows|;| human labels)", text)}


def test_one_minimum_label_count_in_the_docs():
    """The audit's minimum is MIN_ANNOTATED everywhere it is stated (issue 39: the README said
    20, the CLI 10). The code's 10 stands (the fewest annotated rows the audit learns anything
    from; the docs add that a few dozen per type work best), and the per-type percentages have
    their own, larger bar (MIN_TYPE_ROWS validation rows)."""
    stated = {p.name: _label_minimums(p) for p in sorted((ROOT / "docs").glob("*.md"))}
    assert {n for v in stated.values() for n in v} == {MIN_ANNOTATED}, stated


def test_one_minimum_label_count_in_the_readme():
    assert _label_minimums(ROOT / "README.md") == {MIN_ANNOTATED}
