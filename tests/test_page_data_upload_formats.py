"""One input path (issue 52): a file an annotation tool wrote, uploaded on the Data page, is read
as ``puaudit audit`` reads it (:func:`puaudit.data.load.load_input`), so the upload gives the
same rows and the Audit page the same Cons_orig, Cons_adj and reversals as ``puaudit audit
--json`` on the same file; an MT-Bench judgment file, which needs its benchmark folder
(``--answers``), is refused by both with the same message."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from components.data_summary import mapping_defaults
from components.uploads import read_upload
from puaudit.cli.commands import main
from puaudit.data.load import load_input
from puaudit.data.schema import ROLES, load_comparisons
from puaudit.embed.hashing import HashingEncoder
from puaudit.embed.pairs import embed_table
from puaudit.errors import PUAuditError
from tests.page_support import open_page

pytestmark = pytest.mark.usefixtures("app_env")

N_VOTED = 360  # tasks two people voted on
N_TASKS = N_VOTED + 40  # and 40 nobody voted on


def _texts(i: int, rng) -> tuple[str, str, str, bool, bool]:
    """A prompt, two answers (one longer), whether the judge picks the first (the longer one,
    nearly always) and whether people do: the longer one on topics 0-3, the shorter on topics
    4-6 (the judge is wrong there, which the answers' words show)."""
    topic = i % 7
    long_first = bool(rng.random() < 0.5)
    kind = "plain" if topic < 4 else "verbose padded"
    short, long_ = f"answer {i} on {kind} topic {topic}", \
        f"a longer {kind} answer {i} on topic {topic} " * (2 + i % 3)
    a, b = (long_, short) if long_first else (short, long_)
    judge_first = long_first if rng.random() < 0.95 else not long_first
    people_first = long_first if topic < 4 else not long_first
    return f"question {i} about {kind} topic {topic}", a, b, judge_first, people_first


def labelstudio_export(path, *, seed: int = 0):
    """Label Studio's JSON export of a pairwise project (``<Pairwise>``, left = answer1): the
    judge's verdict a task field, two people's votes on the first :data:`N_VOTED` tasks (each agreeing with
    :func:`_texts`'s people 90% of the time), a skipped one on task 0."""
    rng = np.random.default_rng(seed)
    tasks = []
    for i in range(N_TASKS):
        prompt, a, b, judge_first, people_first = _texts(i, rng)
        anns = []
        if i < N_VOTED:
            for user in (7, 9):
                left = people_first if rng.random() < 0.9 else not people_first
                anns.append({"id": 10 * i + user, "completed_by": user, "was_cancelled": False,
                             "lead_time": 3.5, "result": [{
                                 "type": "pairwise", "from_name": "pw",
                                 "to_name": "answer1,answer2",
                                 "value": {"selected": "left" if left else "right"}}]})
        if i == 0:
            anns.append({"id": 1, "completed_by": 11, "result": [], "was_cancelled": True})
        judge = "A" if judge_first else "B"
        tasks.append({"id": 1000 + i, "data": {"prompt": prompt, "answer1": a, "answer2": b,
                                               "judge_winner": judge},
                      "annotations": anns, "predictions": []})
    path.write_text(json.dumps(tasks), encoding="utf-8")
    return path


def argilla_records(path, *, seed: int = 1):
    """Argilla's ``records.to_json``: nested records whose ``preference`` question people
    answered (response1 / response2 / tie) and whose suggestion is the judge's verdict."""
    rng = np.random.default_rng(seed)
    recs = []
    for i in range(N_TASKS):
        prompt, a, b, judge_first, people_first = _texts(i, rng)
        first, second = ("response1", "response2") if people_first else ("response2", "response1")
        responses = {}
        if i < N_VOTED:
            responses["preference"] = [
                {"value": first if rng.random() < 0.9 else second, "user_id": f"u-{u}",
                 "status": "submitted"} for u in ("ana", "bo")]
        recs.append({"id": f"rec-{i}", "fields": {"prompt": prompt, "response1": a,
                                                 "response2": b},
                     "metadata": {"batch": i % 3}, "vectors": {}, "responses": responses,
                     "suggestions": {"preference": {
                         "value": "response1" if judge_first else "response2",
                         "score": 0.8, "agent": "judge-x"}}})
    path.write_text(json.dumps(recs), encoding="utf-8")
    return path


def _cli_summary(path, tmp_path, capsys) -> dict:
    """``puaudit audit PATH --json`` with the dashboard's test encoder's embeddings (the same
    vectors the Audit page computes) and one split, as the Audit page audits."""
    table = load_comparisons(load_input(path))
    emb = embed_table(table, HashingEncoder())
    npz = tmp_path / "emb.npz"
    np.savez(npz, vectors=emb.vectors, idx_a=emb.idx_a, idx_b=emb.idx_b)
    capsys.readouterr()
    assert main(["audit", str(path), "-o", str(tmp_path / "out.csv"), "--embeddings", str(npz),
                 "--spread-seeds", "1", "--json"]) == 0, capsys.readouterr().err
    return json.loads(capsys.readouterr().out.strip().splitlines()[-1])


def _metric(at, label: str) -> str:
    return next(m.value for m in at.metric if m.label == label)


def _pages_show_the_cli(uploaded: pd.DataFrame, js: dict, n_rows: int) -> None:
    """The Data page shows the upload's rows, the Audit page the CLI's headline numbers."""
    data = open_page("pages/data.py", uploaded)
    assert _metric(data, "Rows") == f"{n_rows:,}"
    audit = open_page("pages/audit.py", uploaded)
    assert _metric(audit, "Cons_orig") == f"{js['cons_orig']:.1%}"
    assert _metric(audit, "Cons_adj") == f"{js['cons_adj']:.1%}"
    n_reversed = round(js["reversed_share"] * js["n_validation"])
    assert _metric(audit, "Reversed") == f"{n_reversed} of {js['n_validation']}"


@pytest.mark.parametrize("build, name, n_rows", [
    (labelstudio_export, "project-export.json", N_VOTED * 2 + 40),
    (argilla_records, "records.json", N_VOTED * 2 + 40),
])
def test_a_tool_export_uploaded_gives_the_clis_rows_and_numbers(tmp_path, capsys, build, name,
                                                                 n_rows):
    path = build(tmp_path / name)
    # the Data page's reader (components.uploads.read_upload) and the command line's
    uploaded = read_upload(path.read_bytes(), name)
    read = load_input(path)
    pd.testing.assert_frame_equal(uploaded, read)
    assert len(uploaded) == n_rows
    assert uploaded["annotator"].replace("", np.nan).dropna().nunique() == 2
    assert set(uploaded["human_winner"]) == {"A", "B", ""}

    js = _cli_summary(path, tmp_path, capsys)
    assert js["n_rows"] == n_rows and js["n_unlabelled"] == 40
    # the judge is wrong on topics 4-6, which the texts show: the audit reverses it there
    assert js["cons_adj"] > js["cons_orig"] + 0.2 and js["reversed_share"] > 0.3

    # the table the Data page builds from the upload (its detected mapping) is the CLI's
    mapping = {r: c for r, c in mapping_defaults(uploaded).items() if c}
    table = load_comparisons(uploaded, columns={r: mapping.get(r) for r in ROLES})
    assert table.content_hash() == load_comparisons(read).content_hash()

    _pages_show_the_cli(uploaded, js, n_rows)


def test_an_mtbench_judgment_file_uploaded_is_refused_as_the_cli_refuses_it(tmp_path, capsys):
    """The MT-Bench release's judge file names questions and models, not texts: the command
    line needs ``--answers DIR``, which an upload cannot carry; both say so in the same words."""
    path = tmp_path / "gpt4_pair.jsonl"
    path.write_text("".join(json.dumps({"question_id": q, "turn": 1, "model_a": "m1",
                                        "model_b": "m2", "winner": "model_a",
                                        "judge": "gpt4_pair"}) + "\n" for q in range(1, 6)))
    with pytest.raises(PUAuditError) as upload:
        read_upload(path.read_bytes(), path.name)
    assert main(["audit", str(path), "-o", str(tmp_path / "out.csv")]) == 2
    cli = capsys.readouterr().err.strip()
    assert cli == f"error: {upload.value}" and "--answers DIR" in cli


def test_a_zipped_mtbench_release_uploaded_gives_the_clis_rows_and_numbers(tmp_path, capsys):
    """The MT-Bench release (the judge's file, the people's votes, question.jsonl and
    model_answer/) zipped as one upload is read as ``puaudit audit`` reads the zip, and as it
    reads the judge's file with ``--human`` and ``--answers``."""
    from tests.test_data_formats_release import make_release, zipped

    root = make_release(tmp_path / "mt_bench", questions=range(81, 121))
    archive = zipped(root, tmp_path / "mt_bench.zip")
    uploaded = read_upload(archive.read_bytes(), archive.name)
    pd.testing.assert_frame_equal(uploaded, load_input(root / "gpt4_pair.jsonl",
                                                       human=root / "human.jsonl", answers=root))
    js = _cli_summary(archive, tmp_path, capsys)
    assert js["n_rows"] == len(uploaded) and js["n_validation"] > 100

    _pages_show_the_cli(uploaded, js, len(uploaded))
