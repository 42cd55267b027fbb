"""The judge plan finds its columns as every other table reader does (match_columns)."""

import pandas as pd
import pytest

from puaudit.errors import PUAuditError
from puaudit.trustjudge.judge_plan import ANSWER_ALIASES, answer_columns, detect_input_kind


def test_answer_columns_are_found_with_spaces_hyphens_and_case():
    """``Model Name`` is the alias ``model_name`` (the plan lowered names but kept spaces, so it
    did not see it before it used match_columns)."""
    frame = pd.DataFrame(columns=["Question", "Model Name", "Response", "Question-Type"])
    found = answer_columns(frame, None)
    assert found == {"question_id": None, "question": "Question", "candidate": "Model Name",
                     "answer": "Response", "category": "Question-Type"}
    assert detect_input_kind(frame) == "answers"


def test_explicit_columns_win_and_a_column_serves_one_role():
    frame = pd.DataFrame(columns=["id", "prompt", "model", "text", "output"])
    found = answer_columns(frame, {"answer": "output", "question_id": "id"})
    assert found["answer"] == "output" and found["question_id"] == "id"
    assert found["question"] == "prompt" and found["candidate"] == "model"
    assert set(found) == set(ANSWER_ALIASES)


def test_an_explicit_column_not_in_the_table_is_named():
    frame = pd.DataFrame(columns=["question", "model", "answer"])
    with pytest.raises(PUAuditError, match=r"Column 'resp' given for answer is not in the "
                                           r"table \(columns: question, model, answer\)"):
        answer_columns(frame, {"answer": "resp"})
