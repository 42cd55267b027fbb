"""The ``trustjudge`` subcommand through a local argparse parser."""

import argparse
import json

import pandas as pd
import pytest

from puaudit.data.io import read_table
import puaudit.cli.trustjudge as cli
from puaudit.trustjudge import make_demo


def _run(argv, capsys):
    parser = argparse.ArgumentParser(prog="puaudit")
    cli.add_parser(parser.add_subparsers(dest="command"))
    rc = cli.run(parser.parse_args(["trustjudge", *argv]))
    out = capsys.readouterr()
    return rc, out.out, out.err


@pytest.fixture()
def demo_files(tmp_path):
    pairs, scores = make_demo(n_questions=8, n_candidates=5, random_state=1)
    p, s = tmp_path / "pairs.csv", tmp_path / "scores.csv"
    pairs.to_csv(p, index=False)
    scores.to_csv(s, index=False)
    return p, s


def test_json_alone_on_stdout(demo_files, capsys, tmp_path):
    p, s = demo_files
    out_csv = tmp_path / "viol.csv"
    argv = [str(p), "--scores", str(s), "--method", "bidirectional", "--delta", "0.01", "--k", "3",
            "4", "--violations-out", str(out_csv)]
    rc, out, err = _run([*argv, "--json"], capsys)
    assert rc == 0, err
    obj = json.loads(out)  # stdout holds the JSON object alone (| jq reads it)
    # the summary went to stderr, the same lines stdout holds without --json
    rc, plain, _ = _run(argv, capsys)
    assert rc == 0 and plain.startswith("TrustJudge: method=bidirectional")
    assert err == plain and "violating triples to" in err
    assert set(obj["ntr"]) == {"3", "4"} and 0 <= obj["cr"] <= 1
    assert set(obj["per_judge"]) == {"judge-large", "judge-small"}
    for block in (*obj["per_judge"].values(), *obj["per_type"].values()):
        assert set(block["ntr"]) == {"3", "4"} and "cr" in block
    assert obj["score_method"] == "distribution"
    viol = read_table(out_csv)
    assert len(viol) == len(obj["violations"])
    for v in obj["violations"]:
        assert set(v) >= {"judge", "question_id", "candidates", "relations", "kind"}
        assert len(v["candidates"]) == 3 and len(v["relations"]) == 3
        assert v["kind"] in {"strict_cycle", "tie_cycle", "equivalence_contradiction"}


def test_matches_library(demo_files, capsys):
    from puaudit.trustjudge import analyse
    p, _ = demo_files
    rc, out, _ = _run([str(p), "--json"], capsys)
    obj = json.loads(out)
    rep = analyse(pd.read_csv(p))
    assert obj["cr"] is None
    assert obj["ntr"] == {str(k): v for k, v in rep.ntr.items()}
    assert sum(1 for v in obj["violations"] if v["kind"] == "strict_cycle") == rep.triples["strict_cycle"]


def test_bad_input_exits_2_with_message(tmp_path, capsys):
    bad = tmp_path / "bad.csv"
    bad.write_text("question_id,candidate_i,candidate_j,verdict_1\n1,x,y,maybe\n")
    rc, out, err = _run([str(bad), "--json"], capsys)
    assert rc == 2 and out == ""
    assert "verdict 'maybe'" in err and "row 1" in err
    rc, _, err = _run([str(tmp_path / "missing.csv")], capsys)
    assert rc == 2 and "File not found" in err


def test_bidirectional_without_probabilities_exits_2(tmp_path, capsys):
    f = tmp_path / "p.csv"
    f.write_text("question_id,candidate_i,candidate_j,verdict_1\n1,x,y,A\n")
    rc, _, err = _run([str(f), "--method", "bidirectional"], capsys)
    assert rc == 2 and "p1_A" in err
