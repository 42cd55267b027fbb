"""The evidence-only audit (texts=False): no encoder, no cache, the full audit's split and rules,
and its reversals on planted data where the judge's length habit carries its errors."""

import json

import numpy as np
import pandas as pd
import pytest

from puaudit.audit.config import AuditConfig
from puaudit.audit.estimator import PUAudit
from puaudit.audit.stages import audit_table
from puaudit.embed.pairs import embed_table
from puaudit.audit.splits import prepare_split
from puaudit.audit.evaluate import evaluate
from puaudit.audit.scorers.evidence import EVIDENCE_ONLY
from puaudit.audit.splits import identical_responses
from puaudit.cli.commands import main
from puaudit.data.schema import load_comparisons
from puaudit.errors import PUAuditError
from puaudit.embed.hashing import HashingEncoder


def _length_planted(n_items: int = 700, seed: int = 0, *, wrong_long: float = 0.85,
                    wrong_else: float = 0.08) -> pd.DataFrame:
    """One row per item, two question types, every row annotated. The judge picks the longer
    answer; where the length gap is large (a third of the rows) people prefer the other one in
    ``wrong_long`` of the rows, elsewhere in ``wrong_else``."""
    rng = np.random.default_rng(seed)
    rows = []
    for i in range(n_items):
        la, lb = rng.integers(5, 60, size=2)
        if rng.random() < 1 / 3:
            lb = la * 6 + 5  # a large gap, B the longer
        if rng.random() < 0.5:
            la, lb = lb, la
        judge = "A" if la > lb else "B"
        big = max(la, lb) > 5 * min(la, lb)
        wrong = rng.random() < (wrong_long if big else wrong_else)
        human = ("B" if judge == "A" else "A") if wrong else judge
        rows.append({"prompt": f"question {i}", "response_a": f"a{i} " + "word " * int(la),
                     "response_b": f"b{i} " + "text " * int(lb), "judge_winner": judge,
                     "human_winner": human, "category": "coding" if i % 2 else "writing"})
    return pd.DataFrame(rows)


@pytest.fixture(scope="module")
def planted():
    return load_comparisons(_length_planted())


def _no_encoder(monkeypatch):
    """Any construction of an encoder, or embedding of a table, fails the test."""
    import puaudit.embed.encoders as encoders
    import puaudit.embed.hf_encoder as hf

    def refuse(*a, **k):
        raise AssertionError("the evidence-only audit must not touch the encoder")

    monkeypatch.setattr(hf.HFEncoder, "__init__", refuse)
    monkeypatch.setattr(encoders, "get_encoder", refuse)
    monkeypatch.setattr(encoders, "embed_distinct", refuse)


def test_no_encoder_and_no_cache_written(planted, monkeypatch, tmp_path):
    _no_encoder(monkeypatch)
    cache = tmp_path / "cache"
    cache.mkdir()
    monkeypatch.setenv("PUAUDIT_CACHE_DIR", str(cache))
    est = PUAudit(texts=False).fit(planted)
    assert est.embeddings_ is None and est.result_.params["encoder"] is None
    assert est.result_.summary()["evidence_only"] is True
    assert list(cache.iterdir()) == []  # nothing read, nothing written


def test_cli_no_texts_loads_no_encoder_and_writes_every_row(planted, monkeypatch, tmp_path,
                                                           capsys):
    _no_encoder(monkeypatch)
    cache = tmp_path / "cache"
    cache.mkdir()
    src = tmp_path / "in.csv"
    planted.frame.to_csv(src, index=False)
    out = tmp_path / "out.csv"
    rc = main(["audit", str(src), "-o", str(out), "--no-texts", "--cache-dir", str(cache),
               "--spread-seeds", "1", "--target-agreement", "0.85", "--json"])
    captured = capsys.readouterr()
    assert rc == 0 and list(cache.iterdir()) == []
    # with --json the report (and its evidence-only label) goes to stderr, the JSON alone to stdout
    assert EVIDENCE_ONLY in captured.err
    [line] = captured.out.strip().splitlines()
    summary = json.loads(line)
    assert summary["evidence_only"] is True and summary["scorer_used"] == "evidence"
    assert summary["certification"] is not None
    exported = pd.read_csv(out)
    assert len(exported) == len(planted) and "puaudit_trusted" in exported
    assert list(exported.columns[:len(planted.frame.columns)]) == list(planted.frame.columns)
    rc = main(["evaluate", str(src), "--no-texts", "--seeds", "2", "--json"])
    captured = capsys.readouterr()
    lines = captured.out.strip().splitlines()
    assert rc == 0 and "evidence only (--no-texts)" in captured.err.splitlines()[0]
    assert len(lines) == 1 and json.loads(lines[0])["encoder"] is None


def test_same_split_as_the_full_audit(planted):
    emb = embed_table(planted, HashingEncoder())
    for seed in (0, 3):
        cfg = AuditConfig(random_state=seed)
        full = prepare_split(planted, emb, cfg)
        first = prepare_split(planted, None, cfg.replace(texts=False))
        np.testing.assert_array_equal(first.split, full.split)
        assert first.m_estimate == full.m_estimate


def test_identical_responses_are_excluded_as_in_the_full_audit():
    df = _length_planted(60)
    df.loc[[3, 7], "response_b"] = df.loc[[3, 7], "response_a"]
    t = load_comparisons(df)
    np.testing.assert_array_equal(np.flatnonzero(identical_responses(t)), [3, 7])
    prep = prepare_split(t, None, AuditConfig(texts=False))
    full = prepare_split(t, embed_table(t, HashingEncoder()), AuditConfig())
    np.testing.assert_array_equal(prep.reason, full.reason)
    assert prep.reason[3] == "identical responses"


def test_reverses_the_length_habits_errors(planted):
    res = audit_table(planted, None, AuditConfig(texts=False))
    auto = res.diagnostics["auto"]
    assert auto["chosen"] == "evidence" and auto["beats_base_rate"]
    assert auto["gain_z_needed"] == pytest.approx(1.645, abs=1e-3)  # one candidate, 5% one-sided
    m = res.metrics
    # big-gap rows are wrong 85% of the time: reversing them gains about a quarter of the rows
    assert m["delta"] > 0.15 and m["reversal_precision"] > 0.75
    assert "log_length_ratio" in res.diagnostics["evidence"]["signals"]
    # every P row is cross-fitted: P' is P (no denoising without embeddings)
    assert res.in_p_prime.sum() == (res.split == "P").sum()


def test_noise_evidence_reverses_nothing():
    # people disagree with the judge at random (20% of every row): no signal predicts it
    df = _length_planted(600, wrong_long=0.2, wrong_else=0.2)
    res = audit_table(load_comparisons(df), None, AuditConfig(texts=False))
    assert res.diagnostics["auto"]["beats_base_rate"] is False
    assert (res.group == "negative").sum() == 0


def test_evaluate_and_the_spread_need_no_embeddings(planted):
    res = evaluate(planted, None, seeds=2, config=AuditConfig(texts=False))
    entry = res["leaderboard"][0]
    assert entry["chosen"] == {"evidence": 2}
    assert entry["delta_mean"] > 0.1 and entry["auroc_judge_right"] > 0.75


def test_config_refuses_what_needs_texts():
    with pytest.raises(PUAuditError, match="probe scorer reads the texts"):
        AuditConfig(texts=False, scorer="probe")
    with pytest.raises(PUAuditError, match="evidence 'none' leaves it nothing"):
        AuditConfig(texts=False, evidence="none")
    assert AuditConfig(texts=False).to_cli()[-1] == "--no-texts"
    assert "--no-texts" not in AuditConfig().to_cli()
    with pytest.raises(PUAuditError, match="needs the table's embeddings"):
        prepare_split(load_comparisons(_length_planted(40)), None, AuditConfig())


def test_cli_no_texts_with_a_text_scorer_exits_2(tmp_path, capsys):
    src = tmp_path / "in.csv"
    _length_planted(40).to_csv(src, index=False)
    rc = main(["audit", str(src), "-o", str(tmp_path / "o.csv"), "--no-texts",
               "--scorer", "probe"])
    assert rc == 2 and "evidence-only audit" in capsys.readouterr().err


def test_ready_estimate_counts_distinct_and_cached_texts(planted, tmp_path):
    from puaudit.embed.encoders import get_encoder
    from puaudit.embed.ready_time import TEXTS_PER_SECOND, estimate_ready

    enc = get_encoder(None, cache_dir=tmp_path, mode="full")
    est = estimate_ready(planted, enc)
    assert est.n_texts == 2 * len(planted) and est.n_cached == 0  # every answer is distinct
    assert est.full_s == pytest.approx(est.first_s + 6.0 + est.n_texts / TEXTS_PER_SECOND["full"])
    assert "First numbers (judge evidence only) in about" in est.text()
    assert "1,400 of 1,400 distinct texts to embed" in est.text()
    # texts in the cache are not embedded again
    from puaudit.embed.cache import text_key
    from puaudit.embed.encoder_cache import encoder_cache
    from puaudit.embed.text import embedding_key, format_text

    first = format_text(planted.prompt[0], planted.response_a[0])
    cache = encoder_cache(enc)
    cache.put([text_key(str(first))], np.ones((1, enc.dim), dtype=np.float32))
    cache.flush()
    # a vector filed under the plain text's key is not the pair's (format 2 shares the window)
    assert estimate_ready(planted, enc).n_cached == 0
    cache.put([embedding_key(first)], np.ones((1, enc.dim), dtype=np.float32))
    cache.flush()
    assert estimate_ready(planted, enc).n_cached == 1
    # an encoder without a known rate: the texts are counted, no time is promised
    other = estimate_ready(planted, HashingEncoder())
    assert other.full_s is None and "when the texts are embedded" in other.text()


@pytest.mark.slow
def test_cli_no_texts_imports_neither_torch_nor_pot(tmp_path):
    import subprocess
    import sys

    src = tmp_path / "in.csv"
    _length_planted(60).to_csv(src, index=False)
    code = ("import sys; from puaudit.cli.commands import main; "
            f"rc = main(['audit', {str(src)!r}, '-o', {str(tmp_path / 'o.csv')!r}, '--no-texts', "
            "'--spread-seeds', '1']); "
            "print(rc, 'torch' in sys.modules, 'ot' in sys.modules, 'transformers' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.strip().splitlines()[-1]
    assert out == "0 False False False"


def test_report_no_texts_loads_no_encoder(planted, monkeypatch, tmp_path):
    _no_encoder(monkeypatch)
    src = tmp_path / "in.csv"
    planted.frame.to_csv(src, index=False)
    card = tmp_path / "card.json"
    assert main(["report", str(src), "-o", str(card), "--no-texts", "--spread-seeds", "1"]) == 0
    text = card.read_text()
    assert "evidence only" in text and "--no-texts" in text  # the encoder line and the command


def test_the_evidence_model_clones_unfitted_with_its_parameters():
    from sklearn.base import clone

    from puaudit.audit.scorers.evidence import EvidenceModel

    rng = np.random.default_rng(0)
    model = EvidenceModel(C=0.1, feature_names=["a", "b"]).fit(rng.random((40, 2)),
                                                               rng.random(40) < 0.5)
    copy = clone(model)
    assert copy.get_params() == model.get_params() and not hasattr(copy, "coef_")
