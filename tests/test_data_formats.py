"""Readers of evaluation tools' files (puaudit.data.formats): fixtures written here from each
format's documented fields, and the real MT-Bench release end to end."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from puaudit.audit.evidence import swapped_column
from puaudit.cli.commands import main
from puaudit.data.formats import detect
from puaudit.data.load import load_input
from puaudit.data.io import read_table
from puaudit.data.schema import load_comparisons
from puaudit.errors import PUAuditError
from tests.conftest import SHARED


def _jsonl(path: Path, records: list[dict], *, blank_after: int | None = None) -> Path:
    lines = [json.dumps(r) for r in records]
    if blank_after is not None:
        lines.insert(blank_after, "")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


@pytest.fixture
def bench(tmp_path) -> Path:
    """A two-question benchmark folder in FastChat's layout: q1 has two turns, q2 one; three
    models (m1, m2, m3) answer every turn."""
    root = tmp_path / "bench"
    (root / "model_answer").mkdir(parents=True)
    _jsonl(root / "question.jsonl", [
        {"question_id": 1, "category": "maths", "turns": ["Add two and two.", "Now double it."]},
        {"question_id": 2, "category": "poetry", "turns": ["Write a line about rain."]},
    ])
    for m in ("m1", "m2", "m3"):
        _jsonl(root / "model_answer" / f"{m}.jsonl", [
            {"question_id": 1, "answer_id": f"{m}-1", "model_id": m,
             "choices": [{"index": 0, "turns": [f"{m} says four", f"{m} says eight"]}]},
            {"question_id": 2, "answer_id": f"{m}-2", "model_id": m,
             "choices": [{"index": 0, "turns": [f"{m} writes of rain"]}]},
        ])
    return root


def _release(qid, turn, a, b, winner, judge):
    return {"judge": judge, "model_a": a, "model_b": b, "question_id": qid, "turn": turn,
            "winner": winner}


@pytest.fixture
def release(tmp_path) -> tuple[Path, Path]:
    judge = _jsonl(tmp_path / "judge_pair.jsonl", [
        _release(1, 1, "m1", "m2", "model_a", "gpt4_pair"),
        _release(1, 2, "m1", "m2", "tie (inconsistent)", "gpt4_pair"),
        _release(2, 1, "m2", "m3", "model_b", "gpt4_pair"),
        _release(2, 1, "m1", "m3", "tie", "gpt4_pair"),   # nobody voted on this pair
    ])
    human = _jsonl(tmp_path / "votes.jsonl", [
        _release(1, 1, "m1", "m2", "model_a", "expert_1"),
        _release(1, 1, "m2", "m1", "model_a", "author_2"),  # same pair, other way round
        _release(1, 2, "m1", "m2", "model_b", "expert_1"),
        _release(2, 1, "m3", "m2", "tie", "expert_3"),
    ])
    return judge, human


def test_release_with_human_votes_is_one_row_per_vote_in_the_voter_orientation(release, bench):
    judge, human = release
    df = load_input(judge, human=human, answers=bench)
    assert list(df.columns[:15]) == [
        "question_id", "category", "turn", "model_a", "model_b", "prompt", "response_a",
        "response_b", "human_winner", "judge_winner", "human_judge", "judge_winner_raw",
        "prev_prompt", "prev_response_a", "prev_response_b"]
    assert df["human_judge"].tolist() == ["expert_1", "author_2", "expert_1", "expert_3"]
    assert df["human_winner"].tolist() == ["model_a", "model_a", "model_b", "tie"]
    # the judge said m1 (model_a) on q1; row 2 shows m2 as model_a, so the judge's m1 is model_b
    assert df["judge_winner"].tolist() == ["model_a", "model_b", "tie", "model_a"]
    assert df["judge_winner_raw"].tolist() == ["model_a", "model_b", "tie (inconsistent)",
                                               "model_a"]
    assert df["verdict_source"].tolist() == ["gpt4_pair"] * 4
    assert df.loc[1, "response_a"] == "m2 says four" and df.loc[1, "response_b"] == "m1 says four"
    turn2 = df.loc[2]
    assert (turn2["prompt"], turn2["prev_prompt"]) == ("Now double it.", "Add two and two.")
    assert (turn2["response_a"], turn2["prev_response_a"]) == ("m1 says eight", "m1 says four")
    assert df.loc[0, "prev_prompt"] == "" and df["category"].tolist()[-1] == "poetry"

    table = load_comparisons(df)
    assert table.columns["annotator"] == "human_judge" and table.columns["judge"] == "judge_winner"
    assert table.judge.tolist() == ["A", "B", "tie", "A"]
    assert table.human.tolist() == ["A", "A", "B", "tie"]
    # both votes on (q1, turn 1, m1 vs m2) are one item; turn 2 of the same pair is another
    assert table.item_id[0] == table.item_id[1] != table.item_id[2]


def test_release_alone_gives_one_row_per_judge_verdict(release, bench):
    judge, _ = release
    df = load_input(judge, answers=bench)
    assert len(df) == 4 and "human_winner" not in df.columns
    assert df["judge_winner"].tolist() == ["model_a", "tie", "model_b", "tie"]
    assert load_comparisons(df).n_annotated == 0


def _fastchat(qid, turn, m1, m2, g1, g2):
    return {"question_id": qid, "model_1": m1, "model_2": m2, "g1_winner": g1, "g2_winner": g2,
            "judge": ["judge-model", "pair-v2"], "g1_user_prompt": "[prompt shown]",
            "g1_judgment": "reasoning one", "g2_user_prompt": "[prompt swapped]",
            "g2_judgment": "reasoning two", "turn": turn, "tstamp": 1.5}


def test_fastchat_pairwise_both_orders_give_the_verdict_and_the_swapped_column(tmp_path, bench):
    judged = _jsonl(tmp_path / "judge_pair.jsonl", [
        _fastchat(1, 1, "m1", "m2", "model_1", "model_1"),   # consistent: m1
        _fastchat(1, 2, "m1", "m2", "model_1", "model_2"),   # changed with the order
        _fastchat(2, 1, "m2", "m3", "tie", "tie"),
        _fastchat(2, 1, "m1", "m3", "error", "model_2"),
    ])
    votes = _jsonl(tmp_path / "votes.jsonl", [
        _release(1, 1, "m2", "m1", "model_b", "expert_1"),   # judge's pair the other way round
        _release(1, 2, "m1", "m2", "model_a", "expert_2"),
        _release(2, 1, "m2", "m3", "tie", "expert_2"),
        _release(2, 1, "m1", "m3", "model_b", "expert_4"),
    ])
    df = load_input(judged, human=votes, answers=bench)
    assert df["judge_winner"].tolist() == ["model_b", "tie", "tie", ""]
    assert df["judge_winner_raw"].tolist() == ["model_b", "tie (inconsistent)", "tie", ""]
    # row 1 shows m2 first: its order 1 is the judge's game 2 (m2 first), which chose m1 = B
    assert df["verdict_1"].tolist() == ["B", "A", "tie", ""]
    assert df["verdict_2"].tolist() == ["A", "A", "tie", "A"]  # game 2 of m1 vs m3: m3 (first)
    # originals kept: FastChat's own names, games and replies
    assert df.loc[0, "model_1"] == "m1" and df.loc[0, "g2_winner"] == "model_1"
    assert df.loc[1, "g2_judgment"] == "reasoning two"
    assert json.loads(df.loc[0, "verdict_source"]) == ["judge-model", "pair-v2"]

    assert swapped_column(df, "judge_winner") == "verdict_2"
    table = load_comparisons(df)
    assert table.judge.tolist() == ["B", "tie", "tie", None]
    back = df["verdict_2"].map({"A": "B", "B": "A", "tie": "tie"})
    assert back[0] == table.judge[0]  # the evidence's order check holds where both games agree


@pytest.mark.parametrize("case, needle", [
    ("release_no_turn", "no 'turn' field"),
    ("fastchat_no_g2", "no 'g2_winner' field"),
    ("bad_winner", "'winner' is 'model_c'"),
    ("bad_game", "'g1_winner' is 'A'"),
])
def test_almost_the_format_names_the_field_and_the_line(tmp_path, bench, case, needle):
    good = _release(1, 1, "m1", "m2", "model_a", "gpt4_pair")
    if case == "release_no_turn":
        bad = {k: v for k, v in good.items() if k != "turn"}
        records = [good, good | {"turn": 2}, bad]
    elif case == "bad_winner":
        records = [good, good | {"turn": 2}, good | {"winner": "model_c"}]
    else:
        ok = _fastchat(1, 1, "m1", "m2", "model_1", "model_1")
        bad = ({k: v for k, v in ok.items() if k != "g2_winner"} if case == "fastchat_no_g2"
               else ok | {"g1_winner": "A"})
        records = [ok, ok | {"turn": 2}, bad]
    path = _jsonl(tmp_path / "judged.jsonl", records, blank_after=1)  # record 3 is on line 4
    with pytest.raises(PUAuditError) as err:
        load_input(path, answers=bench)
    assert needle in str(err.value) and "line 4" in str(err.value)


def test_judgments_without_texts_or_with_an_unknown_model_say_what_to_pass(release, bench):
    judge, human = release
    with pytest.raises(PUAuditError, match="Pass --answers DIR"):
        load_input(judge, human=human)
    for f in (bench / "model_answer").glob("m3.jsonl"):
        f.unlink()
    with pytest.raises(PUAuditError, match="No answer of model 'm3' to question 2"):
        load_input(judge, human=human, answers=bench)
    with pytest.raises(PUAuditError, match="no question.jsonl"):
        load_input(judge, answers=bench / "model_answer")


def test_human_file_must_be_the_release_layout(release, bench, tmp_path):
    judge, _ = release
    votes = _jsonl(tmp_path / "votes.jsonl", [{"question_id": 1, "turn": 1, "model_a": "m1",
                                               "model_b": "m2", "judge": "expert_1"}])
    with pytest.raises(PUAuditError, match=r"--human votes.jsonl: .* line 1 has no 'winner'"):
        load_input(judge, human=votes, answers=bench)


def test_a_comparison_table_is_returned_as_read_and_refuses_join_flags(tmp_path, bench):
    df = pd.DataFrame({"question_id": [1, 2], "model_a": ["m1", "m2"], "model_b": ["m2", "m3"],
                       "prompt": ["p", "q"], "response_a": ["x", "y"], "response_b": ["z", "w"],
                       "winner": ["model_a", "tie"], "judge": ["gpt4", "gpt4"], "turn": [1, 1]})
    path = tmp_path / "table.csv"
    df.to_csv(path, index=False)
    frame = read_table(path)
    assert detect(frame) is None
    pd.testing.assert_frame_equal(load_input(path), frame)
    with pytest.raises(PUAuditError, match="--human joins votes"):
        load_input(path, human=path)


def test_cli_reads_judgment_files_and_refuses_a_missing_answers_folder(release, bench, tmp_path,
                                                                       capsys):
    judge, human = release
    rc = main(["audit", str(judge), "--human", str(human), "-o", str(tmp_path / "out.csv")])
    assert rc == 2 and "Pass --answers DIR" in capsys.readouterr().err
    rc = main(["audit", str(judge), "--human", str(human), "--answers", str(bench),
               "-o", str(human)])
    assert rc == 2 and str(human) in capsys.readouterr().err  # an input is never overwritten



def _annotation(i, pref, **extra):
    return {"instruction": f"Task number {i}", "output_1": f"first answer {i}",
            "output_2": f"second answer {i}", "generator_1": "ref-model",
            "generator_2": "new-model", "annotator": "judge-config", "dataset": "setA",
            "preference": pref, **extra}


def test_alpaca_eval_preferences_become_verdicts_and_judge_probabilities(tmp_path):
    path = tmp_path / "annotations.json"
    path.write_text(json.dumps([_annotation(0, 1), _annotation(1, 2), _annotation(2, 1.5),
                                _annotation(3, 1.8), _annotation(4, None), _annotation(5, 0),
                                _annotation(6, 1.25, dataset="setB")]), encoding="utf-8")
    df = load_input(path)
    assert df["judge_winner"].tolist() == ["A", "B", "tie", "B", "", "tie", "A"]
    assert df["p_B"].tolist() == pytest.approx([0, 1, 0.5, 0.8, np.nan, 0.5, 0.25],
                                               nan_ok=True)
    assert (df["p_A"] + df["p_B"]).dropna().tolist() == pytest.approx([1.0] * 6)
    assert df["model_a"].tolist()[0] == "ref-model" and df["model_b"].tolist()[0] == "new-model"
    assert df["verdict_source"].tolist()[0] == "judge-config" and "annotator" not in df.columns
    assert df["preference"].tolist()[3] == 1.8  # the original field rides along
    table = load_comparisons(df)
    assert table.columns["prompt"] == "instruction" and table.columns["response_b"] == "output_2"
    assert table.judge.tolist() == ["A", "B", "tie", "B", None, "tie", "A"]
    assert sorted(set(table.question_type)) == ["setA", "setB"]
    assert "annotator" not in table.columns  # the judge's configuration is not a person


def test_alpaca_eval_hard_preferences_give_no_probability_columns(tmp_path):
    path = tmp_path / "annotations.json"
    path.write_text(json.dumps([_annotation(0, 1), _annotation(1, 2.0)]), encoding="utf-8")
    df = load_input(path)
    assert "p_A" not in df.columns and df["judge_winner"].tolist() == ["A", "B"]


@pytest.mark.parametrize("records, needle", [
    ([_annotation(0, 1), _annotation(1, 3)], "record 2: 'preference' is '3'"),
    ([_annotation(0, 1), {k: v for k, v in _annotation(1, 2).items() if k != "output_2"}],
     "record 2 has no 'output_2' field"),
])
def test_alpaca_eval_malformed_names_the_field_and_record(tmp_path, records, needle):
    path = tmp_path / "annotations.json"
    path.write_text(json.dumps(records), encoding="utf-8")
    with pytest.raises(PUAuditError) as err:
        load_input(path)
    assert needle in str(err.value) and "AlpacaEval" in str(err.value)


@pytest.fixture
def arena_bench(tmp_path) -> Path:
    """arena-hard-auto's layout: turns as {"content": ...}; the baseline is gpt-4-0314."""
    root = tmp_path / "arena"
    (root / "model_answer").mkdir(parents=True)
    _jsonl(root / "question.jsonl", [
        {"question_id": "qa", "category": "hard", "cluster": "c1",
         "turns": [{"content": "Explain sorting."}]},
        {"question_id": "qb", "category": "hard", "cluster": "c2",
         "turns": [{"content": "Name a prime."}]},
    ])
    for m in ("gpt-4-0314", "cand"):
        _jsonl(root / "model_answer" / f"{m}.jsonl", [
            {"question_id": q, "answer_id": f"{m}{q}", "model_id": m,
             "choices": [{"index": 0, "turns": [{"content": f"{m} on {q}", "token_len": 3}]}]}
            for q in ("qa", "qb")])
    return root


def _arena(qid, s1, s2, model="cand"):
    return {"question_id": qid, "model": model, "judge": "judge-x",
            "games": [{"user_prompt": "shown", "judgment": "think", "score": s1},
                      {"user_prompt": "swapped", "judgment": "think", "score": s2}]}


def test_arena_hard_games_give_both_orders_and_strength(tmp_path, arena_bench):
    path = _jsonl(tmp_path / "cand.jsonl", [
        _arena("qa", "B>>A", "A>B"),   # both games: cand better
        _arena("qb", "A>B", "A>B"),    # each game prefers the first shown: inconsistent
    ])
    df = load_input(path, answers=arena_bench)
    assert df["model_a"].tolist() == ["gpt-4-0314"] * 2 and df["model_b"].tolist() == ["cand"] * 2
    assert df["judge_winner"].tolist() == ["model_b", "tie"]
    assert df["judge_winner_raw"].tolist() == ["model_b", "tie (inconsistent)"]
    assert df["verdict_1"].tolist() == ["B", "A"] and df["verdict_2"].tolist() == ["A", "A"]
    assert df["strength_1"].tolist() == [2, 1] and df["score_2"].tolist() == ["A>B", "A>B"]
    assert df.loc[0, "response_b"] == "cand on qa" and df.loc[0, "prompt"] == "Explain sorting."
    assert df["verdict_source"].tolist() == ["judge-x"] * 2
    assert json.loads(df.loc[0, "games"])[0]["score"] == "B>>A"
    assert swapped_column(df, "judge_winner") == "verdict_2"
    assert load_comparisons(df).judge.tolist() == ["B", "tie"]


def test_arena_hard_scores_read_either_way_round():
    from puaudit.data.formats.arena_hard import parse_score

    assert [parse_score(s) for s in ("A>>B", "A>B", "A=B", "B>A", "B>>A", "A<<B", "B<A")] == [
        ("A", 2), ("A", 1), ("tie", 0), ("B", 1), ("B", 2), ("B", 2), ("A", 1)]
    assert parse_score(None) is None
    with pytest.raises(KeyError):
        parse_score("A>A")


@pytest.mark.parametrize("record, needle", [
    (_arena("qb", "A>B", "A?B"), "game 2 has score 'A?B'"),
    ({"question_id": "qb", "judge": "judge-x", "games": []}, "no 'model' field"),
    (_arena("qb", "A>B", "A>B") | {"games": [{"score": "A>B"}]}, "'games' must hold two games"),
])
def test_arena_hard_malformed_names_the_problem_and_line(tmp_path, arena_bench, record, needle):
    path = _jsonl(tmp_path / "cand.jsonl", [_arena("qa", "A>B", "B>A"), record])
    with pytest.raises(PUAuditError) as err:
        load_input(path, answers=arena_bench)
    assert needle in str(err.value) and "line 2" in str(err.value)


MT = SHARED / "data" / "mtbench"


@pytest.mark.slow
def test_real_mtbench_release_gives_the_shipped_table_and_its_cons_orig(tmp_path, capsys):
    src = MT / "source"
    if not (MT / "mtbench_human_vs_gpt4.csv").exists() or not src.is_dir():
        pytest.skip("../shared/data is not present")
    votes = src / "human_judgments"
    judge, human = votes / "gpt4_pair.jsonl", votes / "human.jsonl"
    ours = load_input(judge, human=human, answers=src / "fastchat")
    shipped = read_table(MT / "mtbench_human_vs_gpt4.csv")
    assert ours.shape[0] == shipped.shape[0] == 3355
    for col in shipped.columns:  # CSV cells are text; ours keep JSON's numbers
        assert ours[col].astype(str).tolist() == shipped[col].tolist(), col
    a, b = load_comparisons(ours), load_comparisons(shipped)
    assert a.content_hash() == b.content_hash() and a.summary() == b.summary()
    assert a.summary()["n_items"] == 1814

    # the CLI on both inputs, same seed and embeddings (the split does not read them)
    rng = np.random.default_rng(0)
    emb = tmp_path / "emb.npz"
    np.savez(emb, e_a=rng.normal(size=(3355, 8)), e_b=rng.normal(size=(3355, 8)))
    out = {}
    for key, args in (("csv", [str(MT / "mtbench_human_vs_gpt4.csv")]),
                      ("release", [str(judge), "--human", str(human), "--answers",
                                   str(src / "fastchat")])):
        rc = main(["audit", *args, "-o", str(tmp_path / f"{key}.csv"), "--embeddings", str(emb),
                   "--scorer", "centroid", "--spread-seeds", "1", "--json"])
        assert rc == 0
        out[key] = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    for k in ("cons_orig", "cons_adj", "n_validation", "n_p", "groups"):
        assert out["release"][k] == out["csv"][k], k
    assert out["csv"]["cons_orig"] == pytest.approx(0.86, abs=0.01)
