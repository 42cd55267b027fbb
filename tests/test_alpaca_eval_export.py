"""AlpacaEval annotations in, audited AlpacaEval annotations out (``--format alpaca-eval``): every
record and field kept, ``preference`` the audited verdict, the judge's own kept beside it; and
the export read back as AlpacaEval annotations."""

from __future__ import annotations

import json

import numpy as np
import pytest

from puaudit.cli.commands import main
from puaudit.data.load import load_input
from puaudit.data.io import read_table
from puaudit.data.formats.alpaca_eval_export import JUDGE_PREFERENCE, to_annotations
from puaudit.errors import PUAuditError
from tests.conftest import planted_set

N = 300


@pytest.fixture(scope="module")
def annotations(tmp_path_factory):
    """AlpacaEval annotations of the planted set (the judge's verdict as a preference, a
    person's on some records), a failed annotation, a soft preference, nested fields."""
    d = tmp_path_factory.mktemp("alpaca")
    df, e_a, e_b, _ = planted_set(n=N)
    records = []
    for i, row in df.iterrows():
        rec = {"instruction": row["prompt"], "output_1": row["response_a"],
               "output_2": row["response_b"], "generator_1": "gpt4_turbo",
               "generator_2": "my-model", "dataset": row["category"],
               "annotator": "weighted_alpaca_eval_gpt4_turbo",
               "preference": 1 if row["judge_winner"] == "A" else 2,
               "raw_completion": {"logprobs": [-0.1, -2.3], "text": f"m{i}"},
               "price_per_example": 0.001, "human_winner": row["human_winner"]}
        records.append(rec)
    records[3]["preference"] = None            # a failed annotation
    records[5]["preference"] = 1.8 if records[5]["preference"] == 2 else 1.2  # weighted
    records[7]["only_here"] = "a field one record has"
    path = d / "annotations.json"
    path.write_text(json.dumps(records, indent=2), encoding="utf-8")
    np.savez(d / "emb.npz", e_a=e_a, e_b=e_b)
    return d, path, records


def _audit(d, path, out, *extra):
    return main(["audit", str(path), "-o", str(out), "--embeddings", str(d / "emb.npz"),
                 "--spread-seeds", "1", *extra])


def test_round_trip_keeps_every_record_and_field_with_audited_preferences(annotations, capsys):
    d, path, records = annotations
    out = d / "audited.json"
    assert _audit(d, path, out, "--format", "alpaca-eval") == 0, capsys.readouterr().err
    table = d / "audited.csv"
    assert _audit(d, path, table) == 0  # the same audit as a table, to compare with
    capsys.readouterr()
    assert len(load_input(table)) == N  # an audited table is read (and audited) again
    written = json.loads(out.read_text(encoding="utf-8"))
    assert isinstance(written, list) and len(written) == len(records)
    adjusted = read_table(table)["puaudit_adjusted"].tolist()
    for rec, new, audited in zip(records, written, adjusted):
        assert [k for k in new if k in rec] == list(rec)  # in the input's order
        for key, value in rec.items():
            if key != "preference":
                assert new[key] == value, key       # every original field, as it was
        assert new[JUDGE_PREFERENCE] == rec["preference"]
        judge = {1: "A", 2: "B", 1.8: "B", 1.2: "A"}.get(rec["preference"], "")
        if audited in ("", judge):                 # nothing changed: the judge's own value
            assert new["preference"] == rec["preference"]
        else:
            assert new["preference"] == {"A": 1, "B": 2, "tie": 1.5}[audited]
        assert new["puaudit_adjusted"] == audited and "puaudit_reason" in new
        assert not {"model_a", "judge_winner", "verdict_source", "p_B"} & set(new)
    assert written[3]["preference"] is None
    assert sum(r["preference"] != r[JUDGE_PREFERENCE] for r in written) > 0  # the audit changed some
    # read back: AlpacaEval annotations whose judge is now the audit
    again = load_input(out)
    assert len(again) == len(records)
    kept = [i for i, r in enumerate(records) if r["preference"] is not None]
    assert again["judge_winner"].iloc[kept].tolist() == [adjusted[i] for i in kept]


def test_alpaca_eval_format_refuses_a_table_that_is_not_annotations(tmp_path, capsys):
    df, e_a, e_b, _ = planted_set(n=60)
    df.to_csv(tmp_path / "in.csv", index=False)
    np.savez(tmp_path / "emb.npz", e_a=e_a, e_b=e_b)
    rc = main(["audit", str(tmp_path / "in.csv"), "-o", str(tmp_path / "out.json"),
               "--embeddings", str(tmp_path / "emb.npz"), "--format", "alpaca-eval"])
    err = capsys.readouterr().err
    assert rc == 2 and "in.csv is not AlpacaEval annotations" in err
    assert not (tmp_path / "out.json").exists()


def test_to_annotations_needs_an_audited_table(annotations):
    _, path, _ = annotations
    with pytest.raises(PUAuditError, match="puaudit_adjusted"):
        to_annotations(load_input(path))
