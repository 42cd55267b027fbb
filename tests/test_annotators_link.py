"""The audit link: P from item consensus, and per-annotator disagreement with an audit export."""

import json

import numpy as np
import pytest

from puaudit.annotators.consensus import consensus_labels
from puaudit.embed.pairs import PairEmbeddings
from puaudit.audit.estimator import PUAudit
from puaudit.cli.commands import main
from puaudit.data.schema import load_comparisons
from tests.conftest import planted_set


def _with_votes(seed=0):
    df, e_a, e_b, _ = planted_set(n=600, annotated=0.5, seed=seed)
    rng = np.random.default_rng(seed)
    df["annotator"] = np.where(df["human_winner"] != "", rng.choice(["ann1", "ann2", "ann3"], len(df)), "")
    return df, e_a, e_b


def test_consensus_human_source_uses_item_majority():
    df, e_a, e_b = _with_votes()
    # three rows of one item: two say A, one says B -> consensus A on every row of the item
    df.loc[[0, 1, 2], ["question_id", "prompt", "response_a", "response_b"]] = [7, "p", "a", "b"]
    df.loc[[0, 1, 2], "human_winner"] = ["A", "A", "B"]
    t = load_comparisons(df)
    cons = consensus_labels(t)
    assert cons[:3].tolist() == ["A", "A", "A"]
    est = PUAudit(human_source="consensus").fit(t, PairEmbeddings(e_a, e_b))
    assert est.result_.params["human_source"] == "consensus"
    assert est.metrics_["n"] > 0


def test_annotators_command_reports_audit_disagreement_on_exports(tmp_path, capsys):
    df, e_a, e_b = _with_votes()
    t = load_comparisons(df)
    res = PUAudit(rule="paper").fit(t, PairEmbeddings(e_a, e_b)).result_
    export = res.to_frame(t)
    export.to_csv(tmp_path / "export.csv", index=False)
    assert main(["annotators", str(tmp_path / "export.csv"), "--json"]) == 0
    js = json.loads(capsys.readouterr().out)
    people = {a["annotator"]: a for a in js["annotators"] if a["annotator"].startswith("ann")}
    # direct computation for ann1 on audited rows
    audited = np.isin(res.split, ["validation", "unlabelled"])
    sel = audited & (df["annotator"].to_numpy() == "ann1") & np.isin(t.human, ["A", "B"])
    expected = np.mean(res.adjusted[sel] != t.human[sel])
    assert people["ann1"]["audit_disagree"] == pytest.approx(expected)
    assert people["ann1"]["audit_n_scored"] == sel.sum()
