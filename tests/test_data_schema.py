import json

import pandas as pd
import pytest

from puaudit.data.io import read_table
from puaudit.data.schema import (
    apply_judge_rule,
    detect_columns,
    load_comparisons,
    normalize_verdicts,
)
from puaudit.errors import PUAuditError


def test_mtbench_loads_with_no_mapping(mtbench_path):
    t = load_comparisons(read_table(mtbench_path))
    assert t.columns["judge"] == "judge_winner"
    assert t.columns["human"] == "human_winner"
    assert t.columns["question_type"] == "category"
    assert t.columns["annotator"] == "human_judge"
    s = t.summary()
    assert s["n_rows"] == 3355
    assert s["n_question_types"] == 8
    assert s["n_items"] == 1814  # question id + turn + unordered model pair
    assert s["n_strict_annotated"] == 2129
    assert s["judge_human_agreement"] == pytest.approx(0.856, abs=0.001)


@pytest.mark.parametrize("raw,expected", [
    ("A", "A"), ("b", "B"), ("model_a", "A"), ("MODEL_B", "B"), ("tie", "tie"),
    ("tie (inconsistent)", "tie"), ("Tie (bothbad)", "tie"), ("1", "A"), ("2", "B"), (1, "A"),
    (2.0, "B"), ("", None), (None, None), (float("nan"), None), ("  a ", "A"),
])
def test_label_vocabularies(raw, expected):
    assert normalize_verdicts([raw], column="v")[0] == expected


def test_model_name_labels():
    out = normalize_verdicts(["gpt-4", "claude"], column="winner", model_a=["gpt-4", "x"],
                             model_b=["y", "claude"])
    assert out.tolist() == ["A", "B"]


def test_unknown_label_names_column_row_and_value():
    with pytest.raises(PUAuditError) as ei:
        normalize_verdicts(["A", "B", "maybe"], column="judge_winner")
    msg = str(ei.value)
    assert "judge_winner" in msg and "row 3" in msg and "maybe" in msg and "tie" in msg
    assert ei.value.row == 3 and ei.value.column == "judge_winner"


def test_missing_required_column_lists_columns_and_fix():
    df = pd.DataFrame({"prompt": ["p"], "response_a": ["a"], "response_b": ["b"]})
    with pytest.raises(PUAuditError) as ei:
        detect_columns(df)
    msg = str(ei.value)
    assert "judge" in msg and "--judge-col" in msg and "Columns present" in msg


def test_explicit_mapping_overrides_and_validates():
    df = pd.DataFrame({"q": ["p"], "x": ["a"], "y": ["b"], "verdict": ["A"], "judge": ["B"]})
    t = load_comparisons(df, columns={"prompt": "q", "response_a": "x", "response_b": "y",
                                      "judge": "verdict"})
    assert t.judge.tolist() == ["A"]
    with pytest.raises(PUAuditError, match="'nope'"):
        load_comparisons(df, columns={"judge": "nope"})


def test_winner_alone_is_the_judge_and_human_found_separately():
    df = pd.DataFrame({"prompt": ["p"], "response_a": ["a"], "response_b": ["b"],
                       "winner": ["model_a"], "human_winner": ["model_b"]})
    t = load_comparisons(df)
    assert t.columns["judge"] == "winner" and t.judge[0] == "A" and t.human[0] == "B"


def test_chat_format_conversation_columns():
    conv_a = json.dumps([{"role": "user", "content": "What is 2+2?"},
                         {"role": "assistant", "content": "4"}])
    conv_b = [{"role": "user", "content": "What is 2+2?"}, {"role": "assistant", "content": "5"}]
    df = pd.DataFrame({"conversation_a": [conv_a], "conversation_b": [conv_b], "prompt": [""],
                       "winner": ["model_a"]})
    t = load_comparisons(df)
    assert t.response_a[0] == "4" and t.response_b[0] == "5"
    assert t.prompt[0] == "What is 2+2?"


def test_item_ids_ignore_presentation_order():
    df = pd.DataFrame({"question_id": [1, 1, 1], "turn": [1, 1, 2], "model_a": ["x", "y", "x"],
                       "model_b": ["y", "x", "y"], "prompt": ["p", "p", "p2"],
                       "response_a": ["a", "b", "c"], "response_b": ["b", "a", "d"],
                       "judge": ["A", "B", "A"]})
    t = load_comparisons(df)
    assert t.item_id[0] == t.item_id[1] != t.item_id[2]
    assert t.question_type.tolist() == ["all"] * 3


def test_judge_rules():
    df = pd.DataFrame({"prompt": ["p"] * 3, "response_a": ["long answer", "s", "same"],
                       "response_b": ["s", "long answer", "same"], "judge": ["B", "B", "B"]})
    t = load_comparisons(df)
    assert apply_judge_rule(t, "longer").judge.tolist() == ["A", "B", "tie"]
    assert apply_judge_rule(t, "shorter").judge.tolist() == ["B", "A", "tie"]
    assert apply_judge_rule(t, "position-a").judge.tolist() == ["A", "A", "A"]
    assert t.judge.tolist() == ["B", "B", "B"]  # original untouched
    with pytest.raises(PUAuditError, match=r"Unknown judge rule 'random': choose one of "
                                           r"\['longer', 'shorter', 'position-a'\]"):
        apply_judge_rule(t, "random")


def test_one_vocabulary_for_the_audit_and_trustjudge():
    """One vocabulary: the same word means the same verdict in every reader."""
    from puaudit.data.vocabulary import VERDICT_WORDS, parse_verdict
    from puaudit.trustjudge.io import normalise_verdict

    for canon, words in VERDICT_WORDS.items():
        for w in words:
            assert parse_verdict(w) == canon
            assert normalise_verdict(w) == canon
            assert normalize_verdicts([w.upper()])[0] == canon
    assert parse_verdict(" Tie (whatever) ") == "tie" and parse_verdict(2.0) == "B"
    assert parse_verdict("gpt-4", model_a="gpt-4", model_b="claude") == "A"


def test_one_column_matcher_for_the_audit_and_trustjudge():
    from puaudit.data.vocabulary import match_columns

    cols = ["Question ID", "Judge-Winner", "category"]
    m = match_columns(cols, {"question_id": ("question_id",), "judge": ("judge_winner",)})
    assert m == {"question_id": "Question ID", "judge": "Judge-Winner"}
    assert match_columns(cols, {"judge": ("judge_winner",)}, {"judge": None}) == {}
