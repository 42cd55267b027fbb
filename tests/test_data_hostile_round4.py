"""Hostile inputs, fourth round (issue 41, the readers): expansion bombs and silent results.

Each file is generated, small, by bench/_hostile_files.py. The cases that once took gigabytes run in a child process
under an address-space limit (``RLIMIT_AS``), so a regression fails with a MemoryError instead of
taking the machine, and the child's peak (VmHWM) is checked as well.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from bench._hostile_files import (argilla_record, big_text_column, comparison_columns, hf_bomb,
                                   labelstudio_bomb, zip_folder)
from puaudit.cli.commands import main
from puaudit.data.load import load_input
from puaudit.data.io import read_table
from puaudit.data.limits import ReadLimits
from puaudit.data.writers import table_to_bytes
from puaudit.data.parquet import decoded_nbytes
from puaudit.errors import PUAuditError
from tests.child_support import run_measured
from tests.conftest import ROOT

# --- the command line in a child (tests/child_support.run_measured caps its memory) ---------


_CLI = ("import sys\nfrom puaudit.cli.commands import main\nRC = main({args!r})\n"
        "print('LOADED', [m for m in ('torch', 'puaudit.embed.encoders') if m in sys.modules], "
        "file=sys.stderr)\n")


# --- 1. dictionary and string_view bombs ------------------------------------------------------


def test_decoded_nbytes_counts_views_and_dictionaries_as_they_expand():
    for kind in ("dictionary", "string_view"):
        arr = big_text_column(kind, 1000, 5000)
        assert arr.nbytes < 60_000  # as stored
        assert decoded_nbytes(arr) == 1000 * 5000 + 8 * 1000  # as expanded
        part = arr.slice(100, 50)
        assert decoded_nbytes(part) == 50 * 5000 + 8 * 50
    # views with missing values and short (inline) values: their lengths, as cast to text
    arr = pa.array(["abc", None, "y" * 40, "", None, "z" * 13], pa.string_view())
    lengths = [0 if v is None else len(v) for v in arr.to_pylist()]
    assert decoded_nbytes(arr) == sum(lengths) + 8 * len(arr)
    assert decoded_nbytes(arr.slice(2, 3)) == 40 + 0 + 0 + 8 * 3
    # a missing index expands to nothing but its offset
    d = pa.DictionaryArray.from_arrays(pa.array([0, None, 1], pa.int32()), pa.array(["abc", "de"]))
    assert decoded_nbytes(d) == 3 + 2 + 8 * 3
    nested = pa.ListArray.from_arrays(pa.array([0, 600, 1000], pa.int32()),
                                      big_text_column("string_view", 1000, 5000))
    assert decoded_nbytes(nested) >= 1000 * 5000


@pytest.mark.parametrize("kind", ["dictionary", "string_view"])
def test_a_small_folder_of_such_columns_still_reads_with_its_values(tmp_path, kind):
    folder = hf_bomb(tmp_path / "ds", kind, rows=20, size=3000)
    df = read_table(folder, max_bytes=200 * 2**20)
    assert len(df) == 20 and df["prompt"].astype(str).tolist() == ["x" * 3000] * 20
    assert df["response_b"].tolist()[:2] == ["answer b0", "answer b1"]


@pytest.mark.parametrize("kind", ["dictionary", "string_view"])
def test_a_save_to_disk_bomb_is_refused_before_it_is_expanded(tmp_path, kind):
    folder = hf_bomb(tmp_path / "ds", kind, rows=15_000)  # 15 GB expanded
    assert sum(f.stat().st_size for f in folder.iterdir()) < 2 * 2**20
    archive = zip_folder(folder, tmp_path / "ds.zip")
    code = ("import sys\nfrom puaudit.errors import PUAuditError\n"
            "from puaudit.data.io import read_table\nfrom components.uploads import read_upload\n"
            "RC = 0\n"
            f"for read in (lambda: read_table({str(folder)!r}, max_bytes=200 * 2**20),\n"
            f"             lambda: read_upload(open({str(archive)!r}, 'rb').read(), 'ds.zip',"
            " max_upload_mb=200)):\n"
            "    try:\n        read()\n"
            "    except PUAuditError as exc:\n"
            "        print('REFUSED', exc, file=sys.stderr); RC += 1\n")
    rc, err, peak_mb, _ = run_measured(code, cwd=ROOT, limit_mb=3000)
    assert rc == 2, err[-3000:]  # the folder and the dashboard's upload of its zip
    for message in err.split("REFUSED")[1:]:
        assert "more than 200 MB of data once decoded" in message
        assert "column 'prompt' expands to 15,000 MB" in message
        assert "refused before expanding" in message
    assert peak_mb < 1024, peak_mb


def test_the_cli_refuses_the_dictionary_bomb_zip_with_exit_2(tmp_path):
    folder = hf_bomb(tmp_path / "ds", "dictionary", rows=15_000)
    archive = zip_folder(folder, tmp_path / "ds.zip")
    assert archive.stat().st_size < 2**20
    rc, err, peak_mb, _ = run_measured(
        _CLI.format(args=["audit", str(archive), "-o", str(tmp_path / "out.csv")]),
        cwd=tmp_path, limit_mb=3000)
    assert rc == 2, err[-3000:]
    assert "Traceback" not in err and "LOADED []" in err
    assert "more than 2,048 MB of data once decoded" in err and "column 'prompt'" in err
    assert "--max-decoded-mb" in err
    assert peak_mb < 1024, peak_mb


def test_a_parquet_string_view_column_is_measured_too(tmp_path):
    table = comparison_columns(big_text_column("string_view", 400, 2**20))
    path = tmp_path / "views.parquet"
    pq.write_table(table, path)
    assert path.stat().st_size < 2**20
    with pytest.raises(PUAuditError, match=r"column 'prompt' expands to 400 MB"):
        read_table(path, max_bytes=200 * 2**20)


# --- 2. Argilla: one record, many responses ---------------------------------------------------


def _cells_bytes(df: pd.DataFrame) -> int:
    return len(table_to_bytes(df, "csv"))


def test_argilla_vote_rows_carry_their_own_responses_only(tmp_path):
    sizes = {}
    for n in (200, 800):
        df = load_input(argilla_record(tmp_path / f"r{n}.json", responses=n))
        assert len(df) == n and df["annotator"].tolist()[:3] == ["u0", "u1", "u2"]
        assert df["preference.responses"].tolist()[:2] == ["response2", "response1"]
        assert df["preference.responses.users"].tolist()[:2] == ["u0", "u1"]
        # u3's comment is on u3's row; nobody else's row holds it
        assert df["comment.responses"].iloc[3] == "note 3"
        assert df["comment.responses"].iloc[10:].isna().all()
        sizes[n] = _cells_bytes(df)
    # 4x the votes, about 4x the export (it was 16x: every row held every response)
    assert 3.0 < sizes[800] / sizes[200] < 5.0, sizes


def test_argilla_5000_responses_read_under_1_5_gb(tmp_path):
    path = argilla_record(tmp_path / "records.json", responses=5000)
    code = ("from puaudit.data.load import load_input\n"
            f"df = load_input({str(path)!r})\nRC = 0 if len(df) == 5000 else 1\n")
    rc, err, peak_mb, _ = run_measured(code, cwd=ROOT, limit_mb=2500)
    assert rc == 0, err[-3000:]
    assert peak_mb < 1536, peak_mb


# --- 3. Label Studio expansion and the row limit ----------------------------------------------


@pytest.mark.slow
def test_label_studio_rows_are_counted_before_they_are_built(tmp_path):
    path = labelstudio_bomb(tmp_path / "ls.json", annotations=200_000, tasks=5)
    for args in (["audit", str(path), "-o", str(tmp_path / "out.csv"), "--max-rows", "1000"],
                 ["review", "import", str(path), "--db", str(tmp_path / "r.sqlite"),
                  "--max-rows", "1000"]):
        rc, err, peak_mb, _ = run_measured(_CLI.format(args=args), cwd=tmp_path, limit_mb=3000)
        assert rc == 2, err[-3000:]
        assert "expands to more than 1,000 rows (one per vote)" in err
        assert "refused at task 1, before any row is built" in err and "--max-rows" in err
        assert "LOADED []" in err and "Traceback" not in err
        assert peak_mb < 1024, peak_mb
    assert not (tmp_path / "out.csv").exists()


def test_the_row_limit_counts_expanded_rows_exactly(tmp_path):
    path = labelstudio_bomb(tmp_path / "ls.json", annotations=50, tasks=3)  # 52 rows
    assert len(load_input(path, limits=ReadLimits(max_rows=52))) == 52
    with pytest.raises(PUAuditError, match=r"more than 51 rows .* refused at task 3"):
        load_input(path, limits=ReadLimits(max_rows=51))
    assert len(load_input(path)) == 52  # no limit given: none applied
    # the limit is the read's, not the file's: an export does not carry it to the next read
    df = read_table(path, max_rows=60)
    assert df.attrs["row_limit"]["max_rows"] == 60
    again = read_table(table_to_bytes(df, "parquet"), name="t.parquet")
    assert "row_limit" not in again.attrs


def test_label_studio_skipped_annotations_are_kept_once_per_task(tmp_path):
    vote = {"result": [{"type": "pairwise", "value": {"selected": "left"}}]}
    anns = [{"id": k, "completed_by": k, **vote} for k in range(3)]
    anns += [{"id": 10 + k, "completed_by": 10 + k, "was_cancelled": True, "result": []}
             for k in range(2)]
    path = tmp_path / "ls.json"
    path.write_text(json.dumps([{"id": 1, "data": {"prompt": "q", "answer1": "a",
                                                   "answer2": "b"}, "annotations": anns}]))
    df = load_input(path)
    assert len(df) == 3
    assert [a["id"] for a in json.loads(df["ls_task_not_voted"].iloc[0])] == [10, 11]
    assert df["ls_task_not_voted"].iloc[1:].isna().all()


# --- 5-8. judgment files --------------------------------------------------------------------


def _lines(path: Path, records: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def _bench(root: Path, questions: list[dict], answers: dict[str, list[dict]]) -> Path:
    (root / "model_answer").mkdir(parents=True)
    _lines(root / "question.jsonl", questions)
    for model, recs in answers.items():
        _lines(root / "model_answer" / f"{model}.jsonl", recs)
    return root


def _question(qid, text="q"):
    return {"question_id": qid, "category": "writing", "turns": [text, text + " again"]}


def _answer(qid, model, text="a"):
    return {"question_id": qid, "model_id": model, "choices": [{"turns": [text, text]}]}


def _verdict(qid, turn=1):
    return {"question_id": qid, "turn": turn, "model_a": "m1", "model_b": "m2",
            "winner": "model_a", "judge": "gpt4_pair"}


def test_an_infinite_turn_is_refused_naming_the_line(tmp_path, capsys):
    path = tmp_path / "judgments.jsonl"
    path.write_text(json.dumps(_verdict(81)) + "\n"
                    + json.dumps(_verdict(82)).replace('"turn": 1', '"turn": 1e400') + "\n")
    assert main(["audit", str(path), "-o", str(tmp_path / "o.csv")]) == 2
    err = capsys.readouterr().err
    assert "line 2: 'turn' is inf; it must be 1 or 2" in err and "bug" not in err


def test_repeated_questions_and_answers_are_refused(tmp_path):
    judge = _lines(tmp_path / "j.jsonl", [_verdict(81)])
    both = {"m1": [_answer(81, "m1")], "m2": [_answer(81, "m2")]}
    bench = _bench(tmp_path / "b1", [_question(81, "first"), _question(82),
                                     _question(81, "second")], both)
    with pytest.raises(PUAuditError, match=r"question.jsonl: line 1 and line 3 both hold "
                                           r"question 81"):
        load_input(judge, answers=bench)
    bench = _bench(tmp_path / "b2", [_question(81)],
                   {"m1": [_answer(81, "m1", "one"), _answer(81, "m1", "two")],
                    "m2": [_answer(81, "m2")]})
    with pytest.raises(PUAuditError, match=r"m1.jsonl: line 1 and .*m1.jsonl: line 2 both hold "
                                           r"the answer of model 'm1' to question 81"):
        load_input(judge, answers=bench)
    # the same answer in two files (model_id says so) is refused too
    bench = _bench(tmp_path / "b3", [_question(81)],
                   {"m1": [_answer(81, "m1")], "m1_copy": [_answer(81, "m1", "other")],
                    "m2": [_answer(81, "m2")]})
    with pytest.raises(PUAuditError, match="both hold the answer of model 'm1'"):
        load_input(judge, answers=bench)


@pytest.mark.parametrize("value", [True, False])
def test_a_boolean_alpaca_eval_preference_is_refused(tmp_path, value):
    recs = [{"instruction": f"q{i}", "output_1": "a", "output_2": "b", "generator_1": "m1",
             "generator_2": "m2", "preference": 1.0} for i in range(3)]
    recs[1]["preference"] = value
    path = tmp_path / "annotations.json"
    path.write_text(json.dumps(recs))
    word = "true" if value else "false"  # a yes / no, not 1 (output_1 better) nor 0 (a draw)
    with pytest.raises(PUAuditError, match=rf"record 2: 'preference' is {word}; AlpacaEval"):
        load_input(path)


def test_an_arena_hard_file_without_answers_is_named_as_such(tmp_path, capsys):
    rec = {"question_id": "qa", "model": "cand", "judge": "gpt-4",
           "games": [{"score": "A>B"}, {"score": "B>A"}]}
    path = _lines(tmp_path / "cand.jsonl", [rec])
    assert main(["audit", str(path), "-o", str(tmp_path / "o.csv")]) == 2
    err = capsys.readouterr().err
    assert "holds arena-hard-auto judgments" in err and "data/<bench>" in err
    assert "MT-Bench" not in err and "mt_bench" not in err


# --- 10. a FIFO among Parquet shards ------------------------------------------------------------


def test_a_fifo_among_shards_or_given_alone_is_refused_at_once(tmp_path):
    shards = tmp_path / "s"
    shards.mkdir()
    pq.write_table(comparison_columns(pa.array(["p0", "p1"])), shards / "a.parquet")
    os.mkfifo(shards / "b.parquet")  # nobody ever writes to it
    for target in (shards, shards / "b.parquet"):
        rc, err, _, seconds = run_measured(
            _CLI.format(args=["audit", str(target), "-o", str(tmp_path / "o.csv")]),
            cwd=tmp_path, limit_mb=3000, timeout=120)
        assert rc == 2, err[-3000:]
        assert "b.parquet: is a named pipe (FIFO), not a regular file" in err
    with pytest.raises(PUAuditError, match="named pipe"):
        read_table(shards)
    # a save_to_disk folder whose data file is a FIFO
    folder = hf_bomb(tmp_path / "ds", "dictionary", rows=4, size=10)
    (folder / "data-00000-of-00001.arrow").unlink()
    os.mkfifo(folder / "data-00000-of-00001.arrow")
    with pytest.raises(PUAuditError, match=r"data-00000-of-00001.arrow: is a named pipe"):
        read_table(folder)


# --- 12. exports keep nested integers exactly -------------------------------------------------


def test_nested_int64_survives_parquet_export_and_read(tmp_path):
    big = 2**53 + 1
    src = _lines(tmp_path / "t.jsonl", [{"x": [big, None], "y": {"k": [big, None]}},
                                        {"x": [1], "y": {"k": [2]}}])
    df = read_table(src)
    for _ in range(2):  # JSONL -> Parquet -> Parquet
        df = read_table(table_to_bytes(df, "parquet"), name="t.parquet")
        assert df["x"].tolist() == [[big, None], [1]]
        assert df["y"].tolist() == [{"k": [big, None]}, {"k": [2]}]
    back = read_table(table_to_bytes(df, "jsonl"), name="t.jsonl")
    assert back["x"].tolist() == [[big, None], [1]]


# --- 13. one model; annotator ids ---------------------------------------------------------------


def test_models_with_one_model_says_found_1(tmp_path, capsys):
    path = tmp_path / "one.csv"
    pd.DataFrame({"prompt": ["p", "q"], "response_a": ["a", "c"], "response_b": ["b", "d"],
                  "model_a": ["m1", "m1"], "model_b": ["m1", "m1"],
                  "judge_winner": ["A", "B"]}).to_csv(path, index=False)
    assert main(["models", str(path)]) == 2
    err = capsys.readouterr().err
    assert "found 1 (m1) and no row compares two different ones" in err


def test_annotator_ids_are_text_1_and_quoted_1_are_one_annotator(tmp_path):
    from puaudit.annotators.votes import collect_votes
    from puaudit.data.schema import load_comparisons

    recs = [{"prompt": f"p{i // 3}", "response_a": "a", "response_b": "b", "judge_winner": "A",
             "human_winner": "AB"[i % 2], "annotator": [1, "1", "2", " 2 ", 3.0, None][i % 6]}
            for i in range(12)]
    table = load_comparisons(read_table(_lines(tmp_path / "v.jsonl", recs)))
    assert table.annotator.tolist()[:6] == ["1", "1", "2", "2", "3", ""]
    votes = collect_votes(table, judge=False)
    assert sorted(votes.workers.tolist()) == ["1", "2", "3"]
