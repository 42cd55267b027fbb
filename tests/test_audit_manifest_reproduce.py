"""The run manifest's reproduce command carries what made the input's table: the ``--human``
votes and ``--answers`` folder joined to a judgment file, the ``--split`` of a dataset folder
and the export ``--format``."""

from __future__ import annotations

import json
import shlex

import numpy as np

from puaudit.audit.manifest import reproduce_command
from puaudit.cli.commands import main
from puaudit.data.load import load_input


def _jsonl(path, records):
    path.write_text("\n".join(json.dumps(r) for r in records) + "\n", encoding="utf-8")
    return path


def _release(root, n_questions: int = 40):
    """An MT-Bench-style release: a benchmark folder, the judge's verdicts on three model pairs
    per question, and people's votes on most of them."""
    rng = np.random.default_rng(0)
    bench = root / "bench dir"  # a space: the command must quote it
    (bench / "model_answer").mkdir(parents=True)
    _jsonl(bench / "question.jsonl", [{"question_id": q, "category": f"c{q % 3}",
                                       "turns": [f"Question {q}?"]} for q in range(n_questions)])
    for m in ("m1", "m2", "m3"):
        _jsonl(bench / "model_answer" / f"{m}.jsonl", [
            {"question_id": q, "model_id": m, "choices": [{"turns": [f"{m} answers {q}"]}]}
            for q in range(n_questions)])
    judge, human = [], []
    for q in range(n_questions):
        for a, b in (("m1", "m2"), ("m2", "m3"), ("m1", "m3")):
            won = rng.choice(["model_a", "model_b"])
            judge.append({"question_id": q, "turn": 1, "model_a": a, "model_b": b,
                          "winner": won, "judge": "gpt4_pair"})
            if rng.random() < 0.8:
                vote = won if rng.random() < 0.7 else rng.choice(["model_a", "model_b"])
                human.append({"question_id": q, "turn": 1, "model_a": a, "model_b": b,
                              "winner": vote, "judge": f"expert_{q % 4}"})
    return (_jsonl(root / "judge.jsonl", judge), _jsonl(root / "human.jsonl", human), bench)


def test_cli_manifest_reproduces_the_joined_input(tmp_path, capsys):
    judge, human, bench = _release(tmp_path)
    n = len(load_input(judge, human=human, answers=bench))
    rng = np.random.default_rng(1)
    np.savez(tmp_path / "emb.npz", e_a=rng.normal(size=(n, 8)).astype(np.float32),
             e_b=rng.normal(size=(n, 8)).astype(np.float32))
    rc = main(["audit", str(judge), "--human", str(human), "--answers", str(bench),
               "-o", str(tmp_path / "out.csv"), "--embeddings", str(tmp_path / "emb.npz"),
               "--spread-seeds", "1", "--manifest", str(tmp_path / "manifest.json")])
    assert rc == 0, capsys.readouterr().err
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    words = shlex.split(manifest["reproduce"])
    assert words[words.index("--human") + 1] == str(human)
    assert words[words.index("--answers") + 1] == str(bench)
    assert "--split" not in words and "--format" not in words
    assert manifest["input"]["human"] == str(human)
    assert manifest["input"]["answers"] == str(bench)


def test_reproduce_command_carries_split_and_format_and_leaves_them_out_when_unset():
    params = {"scorer": "auto", "rule": "guarded"}
    plain = reproduce_command(params)
    assert not {"--human", "--answers", "--split", "--format"} & set(shlex.split(plain))
    words = shlex.split(reproduce_command(params, human="votes file.jsonl", answers="bench",
                                          split="test", export_format="alpaca-eval"))
    assert words[:5] == ["puaudit", "audit", "INPUT", "-o", "OUTPUT"]
    assert words[5:13] == ["--human", "votes file.jsonl", "--answers", "bench", "--split",
                           "test", "--format", "alpaca-eval"]
    assert words[13:] == shlex.split(plain)[5:]
