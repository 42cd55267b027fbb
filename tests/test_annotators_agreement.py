"""puaudit.annotators.agreement: every statistic pinned on a hand-made table, alpha against the package,
flags on a generated population, and agreement on the MT-Bench file against plain pandas."""

from __future__ import annotations

import json
import math

import krippendorff
import numpy as np
import pandas as pd
import pytest

from puaudit.annotators.agreement import annotator_report
from puaudit.annotators.audit_link import annotator_score_disagreement
from puaudit.annotators.consensus import consensus_labels
from puaudit.annotators.agreement import share_interval
from puaudit.cli.commands import main as puaudit_main
from puaudit.data.io import read_table
from puaudit.data.schema import load_comparisons
from puaudit.errors import PUAuditError
from puaudit.stats.proportions import wilson_interval


def cli_main(argv):
    """``puaudit annotators ARGV`` (the command's own module has no entry point of its own)."""
    return puaudit_main(["annotators", *argv])


# Response texts per (item, model): their lengths decide "longer".
_LEN = {(1, "X"): 10, (1, "Y"): 20, (2, "X"): 30, (2, "Y"): 5, (3, "X"): 7, (3, "Z"): 7,
        (4, "W"): 3, (4, "V"): 9, (5, "V"): 4, (5, "U"): 2, (6, "X"): 8, (6, "Y"): 12}
# (item, model_a, model_b, annotator, human vote, judge verdict); "" = missing.
_ROWS = [
    (1, "X", "Y", "p1", "A", "A"),     # r0: p1 -> X
    (1, "Y", "X", "p2", "B", "B"),     # r1: swapped order, p2 -> X, judge -> X
    (1, "X", "Y", "p3", "B", "A"),     # r2: p3 -> Y
    (2, "X", "Y", "p1", "tie", "B"),   # r3
    (2, "X", "Y", "p2", "B", "B"),     # r4: p2 -> Y
    (3, "X", "Z", "p1", "A", ""),      # r5: judge missing on item 3
    (3, "Z", "X", "p3", "A", ""),      # r6: p3 -> Z
    (4, "W", "V", "p4", "A", "A"),     # r7: p4 never overlaps with another person
    (5, "V", "U", "p4", "B", "A"),     # r8: p4 -> U, judge -> V
    (6, "X", "Y", "p2", "tie", "tie"),  # r9
    (6, "X", "Y", "p3", "A", "tie"),   # r10
]


def hand_frame() -> pd.DataFrame:
    recs = []
    for item, ma, mb, who, h, j in _ROWS:
        recs.append({"question_id": str(item), "turn": "1", "model_a": ma, "model_b": mb,
                     "prompt": f"question {item}",
                     "response_a": ma.lower() * _LEN[(item, ma)],
                     "response_b": mb.lower() * _LEN[(item, mb)],
                     "human_winner": h, "judge_winner": j, "annotator": who})
    return pd.DataFrame(recs)


@pytest.fixture(scope="module")
def hand_table():
    return load_comparisons(hand_frame())


@pytest.fixture(scope="module")
def hand_report(hand_table):
    return annotator_report(hand_table, min_votes_flag=1)


def _row(report, name) -> dict:
    df = report.annotators
    return df[df["annotator"] == name].iloc[0].to_dict()


# ------------------------------------------------------------------------------------------
# intervals
# ------------------------------------------------------------------------------------------

def test_wilson_known_values():
    lo, hi = wilson_interval(8, 10)
    assert lo == pytest.approx(0.4901624, abs=1e-6) and hi == pytest.approx(0.9433178, abs=1e-6)
    lo, hi = wilson_interval(0, 20)
    assert lo == 0.0 and hi == pytest.approx(0.1611251, abs=1e-6)
    lo, hi = wilson_interval([3, 0], [0, 0])
    assert np.isnan(lo).all() and np.isnan(hi).all()
    lo2, hi2 = share_interval(8, 10, method="wilson", confidence=0.95)
    assert lo2 == pytest.approx(0.4901624, abs=1e-6) and hi2 == pytest.approx(0.9433178, abs=1e-6)


def test_jeffreys_matches_beta_quantiles():
    from scipy.stats import beta
    lo, hi = share_interval(7, 20, method="jeffreys")
    assert lo == pytest.approx(beta.ppf(0.025, 7.5, 13.5)) and hi == pytest.approx(
        beta.ppf(0.975, 7.5, 13.5))
    lo, hi = share_interval(0, 5, method="jeffreys")
    assert lo == 0.0
    with pytest.raises(PUAuditError, match="wilson"):
        share_interval(1, 2, method="bootstrap")


# ------------------------------------------------------------------------------------------
# per-annotator statistics on the hand-made table (worked out in the row comments above)
# ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("name, expected", [
    ("p1", dict(n_votes=3, n_strict=2, agree_judge=1.0, n_agree_judge=1, agree_peers=1 / 3,
                n_peer_pairs=3, n_peer_votes=2, pick_a_share=1.0, tie_share=1 / 3,
                longer_share=0.0, n_unequal_length=1)),
    ("p2", dict(n_votes=3, n_strict=2, agree_judge=1.0, n_agree_judge=2, agree_peers=0.5,
                n_peer_pairs=2, n_peer_votes=1, pick_a_share=0.0, tie_share=1 / 3,
                longer_share=0.0, n_unequal_length=2)),
    ("p3", dict(n_votes=3, n_strict=3, agree_judge=0.0, n_agree_judge=1, agree_peers=0.0,
                n_peer_pairs=3, n_peer_votes=2, pick_a_share=2 / 3, tie_share=0.0,
                longer_share=0.5, n_unequal_length=2)),
    ("p4", dict(n_votes=2, n_strict=2, agree_judge=0.5, n_agree_judge=2, agree_peers=math.nan,
                n_peer_pairs=0, n_peer_votes=0, pick_a_share=0.5, tie_share=0.0,
                longer_share=0.0, n_unequal_length=2)),
    # The judge votes once per item: items 1, 2, 4, 5, 6 (item 3 has no verdict); its item
    # vote sits on the item's first row: A, B, A, A, tie.
    ("LLM judge", dict(n_votes=5, n_strict=4, agree_judge=math.nan, agree_peers=4 / 6,
                       n_peer_pairs=6, n_peer_votes=4, pick_a_share=0.75, tie_share=0.2,
                       longer_share=0.25, n_unequal_length=4)),
])
def test_statistics_on_hand_table(hand_report, name, expected):
    row = _row(hand_report, name)
    for key, want in expected.items():
        got = row[key]
        if isinstance(want, float) and math.isnan(want):
            assert math.isnan(got), (name, key, got)
        else:
            assert got == pytest.approx(want), (name, key, got)


def test_intervals_are_the_wilson_intervals_of_each_share(hand_report):
    df = hand_report.annotators
    for share, k_of, n_col in (("pick_a_share", None, "n_strict"), ("tie_share", None, "n_votes"),
                               ("longer_share", None, "n_unequal_length"),
                               ("agree_peers", None, "n_peer_votes")):
        n = df[n_col].to_numpy(dtype=float)
        lo, hi = wilson_interval(np.nan_to_num(df[share].to_numpy()) * n, n)
        ok = df[share].notna().to_numpy()
        np.testing.assert_allclose(df[f"{share}_lo"].to_numpy()[ok], lo[ok])
        np.testing.assert_allclose(df[f"{share}_hi"].to_numpy()[ok], hi[ok])
        assert (df[f"{share}_lo"][ok] <= df[share][ok] + 1e-12).all()
        assert (df[share][ok] <= df[f"{share}_hi"][ok] + 1e-12).all()
    p4 = _row(hand_report, "p4")
    assert math.isnan(p4["agree_peers_lo"]) and math.isnan(p4["agree_peers_hi"])


def test_table_layout(hand_report):
    df = hand_report.annotators
    assert df["annotator"].tolist()[0] == "LLM judge"
    assert df["is_judge"].tolist() == [True, False, False, False, False]
    assert set(df["annotator"]) == {"LLM judge", "p1", "p2", "p3", "p4"}
    no_judge = annotator_report(load_comparisons(hand_frame()), include_judge=False)
    assert not no_judge.annotators["is_judge"].any() and len(no_judge.annotators) == 4


def test_overall_and_alpha_against_the_package(hand_table, hand_report):
    ov = hand_report.overall
    assert ov["n_items"] == 6 and ov["n_items_multi"] == 4 and ov["n_annotators"] == 4
    assert ov["n_votes"] == 11 and ov["alpha_includes_judge"] is False
    # Units: items 1, 2, 3, 6; codes 0 = first of the sorted pair, 1 = second, 2 = tie.
    nan = np.nan
    people = np.array([[0, 2, 0, nan],      # p1: X, tie, X
                       [0, 1, nan, 2],      # p2: X, Y, tie
                       [1, nan, 1, 0]])     # p3: Y, Z, X
    want = krippendorff.alpha(reliability_data=people, level_of_measurement="nominal")
    assert ov["krippendorff_alpha"] == pytest.approx(want) and ov["n_items_alpha"] == 4

    with_judge = annotator_report(hand_table, judge_in_alpha=True).overall
    # Items 4 (V<W: p4 W=1, judge W=1) and 5 (U<V: p4 U=0, judge V=1) become units too.
    data = np.array([[0, 2, 0, nan, nan, nan],
                     [0, 1, nan, 2, nan, nan],
                     [1, nan, 1, 0, nan, nan],
                     [nan, nan, nan, nan, 1, 0],
                     [0, 1, nan, 2, 1, 1]])  # judge: X, Y, (missing), tie, W, V
    want = krippendorff.alpha(reliability_data=data, level_of_measurement="nominal")
    assert with_judge["krippendorff_alpha"] == pytest.approx(want)
    assert with_judge["n_items_alpha"] == 6 and with_judge["alpha_includes_judge"] is True


def test_alpha_is_one_on_perfect_agreement_and_nan_without_overlap():
    df = hand_frame()
    df["annotator"] = [f"solo{i}" for i in range(len(df))]
    df = df.drop_duplicates("question_id")  # one vote per item: nobody overlaps
    rep = annotator_report(load_comparisons(df))
    assert math.isnan(rep.overall["krippendorff_alpha"]) and rep.overall["n_items_multi"] == 0
    assert rep.annotators["n_peer_pairs"][~rep.annotators["is_judge"]].eq(0).all()
    once = hand_frame().drop_duplicates("question_id")
    two = pd.concat([once.assign(annotator="u"), once.assign(annotator="v")])
    rep = annotator_report(load_comparisons(two))
    assert rep.overall["krippendorff_alpha"] == pytest.approx(1.0)
    assert _row(rep, "u")["agree_peers"] == 1.0


def test_consensus_labels_in_each_rows_order(hand_table, hand_report):
    labels, log = consensus_labels(hand_table, log=True)
    # item 1: X, X, Y -> X (A on r0/r2, B on the swapped r1); items 2, 3, 6 split -> tie;
    # item 4: W (A); item 5: U (B).
    assert labels.tolist() == ["A", "B", "A", "tie", "tie", "tie", "tie", "A", "B", "tie", "tie"]
    assert log == {"n_items": 6, "n_items_voted": 6, "n_items_multi": 4, "n_items_split": 3}
    cons = hand_report.consensus.set_index("row")
    assert cons.loc[0, "consensus"] == "A" and cons.loc[0, "n_votes"] == 3
    assert cons.loc[0, "consensus_share"] == pytest.approx(2 / 3)
    assert pd.isna(cons.loc[5, "judge"]) and cons.loc[8, "judge"] == "A"


def test_consensus_without_model_names_uses_response_texts():
    df = hand_frame().drop(columns=["model_a", "model_b"])
    labels = consensus_labels(load_comparisons(df))
    assert labels.tolist() == ["A", "B", "A", "tie", "tie", "tie", "tie", "A", "B", "tie", "tie"]
    rep = annotator_report(load_comparisons(df), min_votes_flag=1)
    assert _row(rep, "p2")["agree_peers"] == pytest.approx(0.5)


def test_errors_name_the_fix():
    df = hand_frame().rename(columns={"annotator": "who"})
    with pytest.raises(PUAuditError, match="human_judge.*--annotator-col"):
        annotator_report(load_comparisons(df))
    rep = annotator_report(load_comparisons(df, columns={"annotator": "who"}))
    assert rep.overall["n_annotators"] == 4
    df = hand_frame().assign(human_winner="")
    with pytest.raises(PUAuditError, match="human_winner"):
        annotator_report(load_comparisons(df))
    df = hand_frame().assign(annotator="LLM judge")
    with pytest.raises(PUAuditError, match="judge_name"):
        annotator_report(load_comparisons(df))


# ------------------------------------------------------------------------------------------
# flags on a generated population
# ------------------------------------------------------------------------------------------

def _population(rng: np.random.Generator, n_items: int = 400) -> pd.DataFrame:
    """Ten careful people (90% right), one coin-flipper, one always-A, one always-longer; every
    item gets three votes; the judge is right; lengths are unrelated to the right answer."""
    people = [f"good{i}" for i in range(10)] + ["coin", "always_a", "longer", "tiny_a"]
    recs = []
    for it in range(n_items):
        truth = rng.choice(["A", "B"])
        la, lb = rng.integers(5, 50, size=2)
        if la == lb:
            lb += 1
        voters = rng.choice(people[:13], size=3, replace=False)
        if it < 5:
            voters = np.append(voters, "tiny_a")
        for who in voters:
            if who == "coin":
                v = rng.choice(["A", "B"])
            elif who in ("always_a", "tiny_a"):
                v = "A"
            elif who == "longer":
                v = "A" if la > lb else "B"
            else:
                v = truth if rng.random() < 0.9 else ("B" if truth == "A" else "A")
            recs.append({"question_id": str(it), "prompt": f"q{it}", "response_a": "a" * la,
                         "response_b": "b" * lb, "judge_winner": truth, "human_winner": v,
                         "rater": who})
    return pd.DataFrame(recs)


def test_flags_find_the_planted_annotators():
    table = load_comparisons(_population(np.random.default_rng(0)))
    rep = annotator_report(table, min_votes_flag=30)
    flags = dict(zip(rep.annotators["annotator"], rep.annotators["flags"]))
    kinds = {a: sorted(f.split(" ")[0] for f in fl) for a, fl in flags.items() if fl}
    assert "pick_a_share" in kinds["always_a"]
    assert "longer_share" in kinds["longer"]
    assert {"agree_judge", "agree_peers"} <= set(kinds["coin"])
    assert not any(a.startswith("good") for a in kinds), kinds
    assert "tiny_a" not in kinds  # 5 votes: below min_votes_flag, never flagged
    assert not _row(rep, "tiny_a")["flag_eligible"]
    reason = [f for f in flags["always_a"] if f.startswith("pick_a_share")][0]
    assert "1.00 [" in reason and "first-shown" in reason
    # medians come from eligible people only
    people = rep.annotators[~rep.annotators["is_judge"] & rep.annotators["flag_eligible"]]
    assert rep.overall["median_agree_peers"] == pytest.approx(people["agree_peers"].median())
    # thresholds are parameters: huge margins silence every flag
    quiet = annotator_report(table, peer_margin=1, judge_margin=1, position_margin=0.5,
                             length_margin=1)
    assert quiet.overall["n_flagged"] == 0


# ------------------------------------------------------------------------------------------
# audit link
# ------------------------------------------------------------------------------------------

def test_annotator_score_disagreement(hand_table):
    score = np.arange(11) / 10.0
    score[5] = np.nan                       # r5 (p1) not scored
    adjusted = np.array(["A"] * 11, dtype=object)
    adjusted[6] = None                      # r6 (p3) has no adjusted verdict
    out = annotator_score_disagreement(hand_table, score, adjusted).set_index("annotator")
    # p3 strict votes scored: r2 (B), r10 (A); adjusted A both -> 1 of 2 disagree.
    assert out.loc["p3", "n_scored"] == 2 and out.loc["p3", "audit_disagree"] == 0.5
    assert out.loc["p3", "mean_score_disagree_judge"] == pytest.approx(0.2)  # r2 vs judge A
    assert np.isnan(out.loc["p3", "mean_score_agree_judge"])               # r10: judge tie
    # p2: r1 (B), r4 (B) -> both disagree with adjusted A; both agree with the judge.
    assert out.loc["p2", "audit_disagree"] == 1.0
    assert out.loc["p2", "mean_score_agree_judge"] == pytest.approx((0.1 + 0.4) / 2)
    # p4: r7 (A, agrees with judge), r8 (B, disagrees with judge A).
    assert out.loc["p4", "audit_disagree"] == 0.5
    assert out.loc["p4", "mean_score_disagree_judge"] == pytest.approx(0.8)
    assert out.loc["p1", "n_scored"] == 1
    lo, hi = wilson_interval(out["n_audit_disagree"], out["n_scored"])
    np.testing.assert_allclose(out["audit_disagree_lo"], lo)
    with pytest.raises(PUAuditError, match="one value per row"):
        annotator_score_disagreement(hand_table, score[:3], adjusted)


# ------------------------------------------------------------------------------------------
# CLI
# ------------------------------------------------------------------------------------------

def test_cli_json_alone_on_stdout(tmp_path, capsys):
    path = tmp_path / "votes.csv"
    hand_frame().to_csv(path, index=False)
    out_csv = tmp_path / "report.csv"
    rc = cli_main([str(path), "--json", "--min-votes", "1", "-o", str(out_csv)])
    cap = capsys.readouterr()
    assert rc == 0
    # the summary a person reads goes to stderr; stdout holds the JSON object alone (| jq)
    assert "4 annotators" in cap.err and f"Annotator report written to {out_csv}" in cap.err
    payload = json.loads(cap.out)
    assert {"annotators", "overall"} <= set(payload)  # + "models" (test_annotator_models_cli)
    by_name = {a["annotator"]: a for a in payload["annotators"]}
    assert by_name["p2"]["agree_peers"] == pytest.approx(0.5)
    assert by_name["p4"]["agree_peers"] is None
    assert isinstance(by_name["p1"]["flags"], list)
    assert payload["overall"]["n_items_multi"] == 4
    assert payload["overall"]["krippendorff_alpha"] == pytest.approx(
        annotator_report(load_comparisons(hand_frame())).overall["krippendorff_alpha"])
    written = read_table(out_csv)
    assert written["annotator"].tolist()[0] == "LLM judge" and len(written) == 5
    # without --json the summary is on stdout, as before
    assert cli_main([str(path), "--min-votes", "1", "-o", str(out_csv)]) == 0
    assert capsys.readouterr().out == cap.err


def test_cli_errors_exit_2(tmp_path, capsys):
    path = tmp_path / "votes.csv"
    hand_frame().rename(columns={"annotator": "who"}).to_csv(path, index=False)
    assert cli_main([str(path), "--json"]) == 2
    err = capsys.readouterr().err
    assert "--annotator-col" in err and "human_judge" in err
    assert cli_main([str(path), "--annotator-col", "who", "--json"]) == 0
    assert cli_main([str(tmp_path / "missing.csv")]) == 2


# ------------------------------------------------------------------------------------------
# MT-Bench human judgments (65 people)
# ------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def mtbench(mtbench_path):
    df = read_table(mtbench_path)
    return df, annotator_report(load_comparisons(df))


@pytest.mark.parametrize("who", ["expert_24", "author_4", "expert_50"])
def test_mtbench_agree_judge_against_pandas(mtbench, who):
    df, rep = mtbench
    mine = df[df["human_judge"] == who]
    strict = mine[mine["human_winner"].isin(["model_a", "model_b"])
                  & mine["judge_winner"].isin(["model_a", "model_b"])]
    row = _row(rep, who)
    assert row["n_votes"] == len(mine)
    assert row["n_strict"] == mine["human_winner"].isin(["model_a", "model_b"]).sum()
    assert row["n_agree_judge"] == len(strict)
    agree = (strict["human_winner"] == strict["judge_winner"]).mean()
    assert row["agree_judge"] == pytest.approx(agree)


def test_mtbench_pinned_numbers(mtbench):
    _, rep = mtbench
    pinned = {"expert_24": (205, 108, 95 / 108), "author_4": (204, 117, 106 / 117),
              "expert_50": (48, 28, 19 / 28)}
    for who, (n, n_j, agree) in pinned.items():
        row = _row(rep, who)
        assert (row["n_votes"], row["n_agree_judge"]) == (n, n_j)
        assert row["agree_judge"] == pytest.approx(agree)
    ov = rep.overall
    assert ov["n_annotators"] == 65 and ov["n_items"] == 1814 and ov["n_items_multi"] == 961
    judge = _row(rep, "LLM judge")
    # GPT-4 against every strict human vote, once per item: the data README's 0.856 (n = 2,129).
    assert judge["n_peer_pairs"] == 2129 and judge["agree_peers"] == pytest.approx(0.856, abs=5e-4)
    assert 0.3 < ov["krippendorff_alpha"] < 0.7


def test_main_cli_dispatches_to_annotators(tmp_path, capsys):
    from puaudit.cli.commands import main as puaudit_main
    path = tmp_path / "votes.csv"
    hand_frame().to_csv(path, index=False)
    assert puaudit_main(["annotators", str(path), "--json"]) == 0
    payload = json.loads(capsys.readouterr().out)
    assert payload["overall"]["n_items_multi"] == 4 and len(payload["annotators"]) == 5


def test_showing_every_pair_in_the_other_order_changes_only_position_statistics():
    df = _population(np.random.default_rng(1), n_items=150)
    flip = {"A": "B", "B": "A"}
    swapped = df.assign(response_a=df["response_b"], response_b=df["response_a"],
                        judge_winner=df["judge_winner"].map(lambda v: flip.get(v, v)),
                        human_winner=df["human_winner"].map(lambda v: flip.get(v, v)))
    a = annotator_report(load_comparisons(df), min_votes_flag=1)
    b = annotator_report(load_comparisons(swapped), min_votes_flag=1)
    ta, tb = a.annotators.set_index("annotator"), b.annotators.set_index("annotator").loc[
        a.annotators["annotator"]]
    for col in ("n_votes", "agree_judge", "agree_peers", "n_peer_pairs", "tie_share",
                "longer_share"):
        np.testing.assert_allclose(ta[col].astype(float), tb[col].astype(float), equal_nan=True)
    np.testing.assert_allclose(ta["pick_a_share"], 1 - tb["pick_a_share"])
    assert a.overall["krippendorff_alpha"] == pytest.approx(b.overall["krippendorff_alpha"])
    ca = consensus_labels(load_comparisons(df))
    cb = consensus_labels(load_comparisons(swapped))
    assert [flip.get(v, v) for v in ca] == list(cb)
