"""``puaudit annotators --model ...``: the latent-truth model's fields in the JSON, the CSV and
the summary; CROWDLAB from an audit export; errors exit 2; the old fields stay."""

from __future__ import annotations

import json

import numpy as np
import pytest

from puaudit.annotators import annotator_model_report, simulate_votes
from puaudit.cli.commands import main as puaudit_main
from puaudit.data.io import read_table
from puaudit.data.schema import load_comparisons


def cli_main(argv):
    """``puaudit annotators ARGV`` (the command's own module has no entry point of its own)."""
    return puaudit_main(["annotators", *argv])


@pytest.fixture(scope="module")
def planted_csv(tmp_path_factory):
    df, info = simulate_votes(300, random_state=4, shuffle_order=True)
    path = tmp_path_factory.mktemp("votes") / "votes.csv"
    df.to_csv(path, index=False)
    return path, df, info


def _payload(capsys):
    """The ``--json`` object: stdout holds it alone (the summary goes to stderr)."""
    return json.loads(capsys.readouterr().out)


def test_default_model_is_dawid_skene_with_its_fields(planted_csv, capsys, tmp_path):
    path, df, info = planted_csv
    out_csv = tmp_path / "report.csv"
    assert cli_main([str(path), "--json", "--n-boot", "30", "-o", str(out_csv)]) == 0
    cap = capsys.readouterr()
    payload, text = json.loads(cap.out), cap.err
    assert "Dawid-Skene (people only" in text and "Fleiss' kappa" in text
    assert set(payload["models"]) == {"ds"}
    ann = {a["annotator"]: a for a in payload["annotators"]}
    for a in ann.values():  # old and new fields side by side
        assert {"agree_peers", "pick_a_share", "flags", "skill", "skill_lo", "skill_hi",
                "cohen_kappa", "position_bias", "length_bias", "model_flags"} <= set(a)
    direct = annotator_model_report(load_comparisons(df), n_boot=30).annotators.set_index(
        "annotator")
    for w in ("good_01", "random_01", "LLM judge"):
        assert ann[w]["skill"] == pytest.approx(direct.loc[w, "skill"])
        assert ann[w]["skill_lo"] == pytest.approx(direct.loc[w, "skill_lo"])
        assert ann[w]["cohen_kappa"] == pytest.approx(direct.loc[w, "cohen_kappa"])
    assert any(f.startswith("spammer") for f in ann["random_01"]["model_flags"])
    assert any(f.startswith("position") for f in ann["always_a_01"]["model_flags"])
    ov = payload["overall"]
    assert ov["model"] == "ds" and 0 < ov["fleiss_kappa"] < 1 and ov["fleiss_items"] > 0
    assert "krippendorff_alpha" in ov
    m = payload["models"]["ds"]
    assert m["labels"] == ["A", "B", "tie"]
    conf = {a["annotator"]: a for a in m["annotators"]}["good_01"]["confusion"]
    assert np.allclose(np.sum(conf, axis=1), 1)
    written = read_table(out_csv)
    assert {"skill", "skill_lo", "skill_hi", "model_flags", "flags"} <= set(written.columns)
    assert written.loc[written["annotator"] == "random_01", "model_flags"].iloc[0].startswith(
        "spammer")


def test_all_models_and_none(planted_csv, capsys):
    path, *_ = planted_csv
    assert cli_main([str(path), "--json", "--model", "all", "--n-boot", "10"]) == 0
    cap = capsys.readouterr()
    payload, text = json.loads(cap.out), cap.err
    assert set(payload["models"]) == {"ds", "mace"}           # no probabilities: no CROWDLAB
    assert "CROWDLAB skipped" in text
    assert "competence" in payload["models"]["mace"]["annotators"][0]
    assert cli_main([str(path), "--json", "--model", "none"]) == 0
    payload = _payload(capsys)
    assert "models" not in payload and "skill" not in payload["annotators"][0]
    assert cli_main([str(path), "--json", "--model", "mace", "--judge-in-model",
                     "--n-boot", "0"]) == 0
    payload = _payload(capsys)
    assert payload["models"]["mace"]["overall"]["include_judge"] is True


def test_crowdlab_needs_probabilities_and_reads_an_audit_export(planted_csv, capsys, tmp_path):
    path, df, _ = planted_csv
    assert cli_main([str(path), "--model", "crowdlab"]) == 2
    assert "puaudit_p_judge_right" in capsys.readouterr().err
    export = df.assign(puaudit_p_judge_right=np.where(df["judge_winner"] == df["true_winner"],
                                                      0.8, 0.3))
    epath = tmp_path / "export.csv"
    export.to_csv(epath, index=False)
    assert cli_main([str(epath), "--json", "--model", "crowdlab", "--n-boot", "10"]) == 0
    payload = _payload(capsys)
    assert payload["overall"]["model"] == "crowdlab"
    assert payload["models"]["crowdlab"]["overall"]["model_weight"] > 0
    assert all("weight" in a for a in payload["annotators"])
    assert cli_main([str(path), "--model", "crowdlab", "--probs-col", "nope"]) == 2
    assert "--probs-col" in capsys.readouterr().err
    bad = tmp_path / "bad.csv"
    export.assign(puaudit_p_judge_right=2.0).to_csv(bad, index=False)
    assert cli_main([str(bad), "--model", "crowdlab"]) == 2
    assert "[0, 1]" in capsys.readouterr().err


def test_model_that_cannot_run_is_skipped_by_default_but_an_error_when_asked(tmp_path, capsys):
    df, _ = simulate_votes(40, random_state=1)
    single = df.drop_duplicates("question_id")             # one vote per item
    path = tmp_path / "single.csv"
    single.to_csv(path, index=False)
    assert cli_main([str(path), "--json"]) == 0
    cap = capsys.readouterr()
    assert "Dawid-Skene skipped" in cap.err and "two or more votes" in cap.err
    assert "skill" not in json.loads(cap.out)["annotators"][0]
    assert cli_main([str(path), "--model", "ds"]) == 2
    assert "two or more votes" in capsys.readouterr().err
    assert cli_main([str(path), "--n-boot", "-1"]) == 2


def test_main_cli_dispatch_with_model_options(planted_csv, capsys):
    path, *_ = planted_csv
    assert puaudit_main(["annotators", str(path), "--json", "--model", "ds", "--n-boot", "5",
                         "--skill-bar", "0.6"]) == 0
    payload = _payload(capsys)
    assert payload["models"]["ds"]["overall"]["skill_bar"] == 0.6


def test_consensus_output_writes_one_row_per_item(planted_csv, capsys, tmp_path):
    path, df, _ = planted_csv
    out = tmp_path / "items.csv"
    assert cli_main([str(path), "--n-boot", "0", "--consensus-output", str(out)]) == 0
    assert "Item consensus (Dawid-Skene) written" in capsys.readouterr().out
    items = read_table(out)
    assert len(items) == df["question_id"].nunique()
    assert {"consensus", "confidence", "p_A", "p_B", "p_tie", "majority", "differs",
            "judge"} <= set(items.columns)
    assert np.allclose(items[["p_A", "p_B", "p_tie"]].astype(float).sum(axis=1), 1)
    assert cli_main([str(path), "--consensus-output", str(path)]) == 2      # never the input
    assert cli_main([str(path), "--model", "none", "--consensus-output", str(out)]) == 2
