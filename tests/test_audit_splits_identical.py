"""No silent drops: a row is excluded as "identical responses" only when its two texts are the
same (stripped), on every path (full audit, cascade, evidence-only), and every exclusion names
its row and its reason (the split's reason, the export's puaudit_reason, the summary and the
CLI's report)."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from puaudit.audit.certify.cascade import cascade_split
from puaudit.audit.config import AuditConfig
from puaudit.audit.estimator import PUAudit
from puaudit.audit.splits import SPLIT_EXCLUDED, identical_responses, prepare_split
from puaudit.cli.commands import main
from puaudit.data.io import read_table
from puaudit.data.schema import load_comparisons
from puaudit.embed.hashing import HashingEncoder
from puaudit.embed.pairs import PairEmbeddings, embed_table
from tests.conftest import planted_set


@pytest.fixture
def rows():
    """planted rows; row 4 (0-based) has the same text twice, row 5 different texts whose
    embeddings coincide, row 6 texts that differ only by surrounding spaces."""
    df, e_a, e_b, _ = planted_set(n=400)
    df = df.copy()
    for i in (4, 5, 6):
        df.loc[i, "human_winner"] = df.loc[i, "true_winner"]
    df.loc[4, "response_b"] = df.loc[4, "response_a"]
    df.loc[6, "response_b"] = "  " + df.loc[6, "response_a"] + "\n"
    e_b = e_b.copy()
    e_b[4], e_b[5], e_b[6] = e_a[4], e_a[5], e_a[6]
    return df, e_a, e_b


def test_identical_means_the_same_text_not_a_zero_difference(rows):
    df, e_a, e_b = rows
    table = load_comparisons(df)
    assert np.flatnonzero(identical_responses(table)).tolist() == [4, 6]
    prep = prepare_split(table, PairEmbeddings(e_a, e_b))
    assert prep.reason[4] == prep.reason[6] == "identical responses"
    assert prep.split[5] != SPLIT_EXCLUDED and prep.reason[5] == ""  # kept and audited
    # the evidence-only audit and the cascade exclude the same rows for the same reason
    only = prepare_split(table, None, AuditConfig(texts=False))
    np.testing.assert_array_equal(only.reason, prep.reason)
    split, reason = cascade_split(table, PairEmbeddings(e_a, e_b), table.human, AuditConfig())
    assert reason[4] == reason[6] == "identical responses"
    assert split[5] != SPLIT_EXCLUDED and reason[5] == ""


def test_every_exclusion_names_its_row_and_reason(rows, tmp_path, capsys):
    df, e_a, e_b = rows
    df.loc[0, "judge_winner"] = "tie"
    table = load_comparisons(df)
    res = PUAudit().fit(table, PairEmbeddings(e_a, e_b)).result_
    out = res.to_frame(table)
    assert out.loc[[4, 6], "puaudit_reason"].tolist() == ["identical responses"] * 2
    assert out.loc[0, "puaudit_reason"] == "judge tie"
    s = res.summary()
    assert s["excluded_reasons"] == {"identical responses": 2, "judge tie": 1}
    assert s["n_excluded"] == sum(s["excluded_reasons"].values())
    assert s["excluded_rows"] == {"identical responses": [5, 7]}  # 1-based, as in the export
    # the CLI: the JSON line and the report say the same
    df.to_csv(tmp_path / "in.csv", index=False)
    np.savez(tmp_path / "emb.npz", e_a=e_a, e_b=e_b)
    rc = main(["audit", str(tmp_path / "in.csv"), "-o", str(tmp_path / "out.csv"), "--embeddings",
               str(tmp_path / "emb.npz"), "--json", "--spread-seeds", "1"])
    got = capsys.readouterr()
    assert rc == 0, got.err
    js = json.loads(got.out.strip().splitlines()[-1])
    assert js["excluded_reasons"] == {"identical responses": 2, "judge tie": 1}
    assert js["excluded_rows"] == {"identical responses": [5, 7]}
    assert "excluded 3 (identical responses 2: rows 5, 7; judge tie 1)" in got.err
    written = pd.read_csv(tmp_path / "out.csv")
    assert written.loc[[4, 6], "puaudit_reason"].tolist() == ["identical responses"] * 2


def test_mtbench_excludes_as_identical_exactly_the_rows_with_one_text(mtbench_path):
    """MT-Bench (3,355 votes): 23 rows have response_a == response_b, all of them judge or
    human ties (so their reason is the tie, which is checked first); one more row (row 2257)
    has two texts that differ only in spacing inside, which MiniLM embeds alike: it is not
    identical, and would be audited if it were not a tie."""
    table = load_comparisons(read_table(mtbench_path))
    a = [str(x).strip() for x in table.response_a]
    b = [str(x).strip() for x in table.response_b]
    same = np.array([x == y for x, y in zip(a, b)])
    assert int(same.sum()) == 23
    np.testing.assert_array_equal(identical_responses(table), same)
    assert not same[2256] and table.response_a[2256] != table.response_b[2256]
    prep = prepare_split(table, embed_table(table, HashingEncoder(max_length=512)),
                         AuditConfig(evidence="none"))
    excluded_identical = prep.reason == "identical responses"
    tie_or_blank = np.isin(prep.reason, ["judge tie", "human tie", "no judge verdict"])
    np.testing.assert_array_equal(excluded_identical, same & ~tie_or_blank)
    assert (prep.split[same] == SPLIT_EXCLUDED).all()
