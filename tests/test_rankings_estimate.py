"""puaudit.rankings.estimate: win rates and Bradley–Terry strengths four ways, against known answers."""

from __future__ import annotations

import subprocess
import sys
import warnings

import numpy as np
import pandas as pd
import pytest

from puaudit.data.schema import load_comparisons
from puaudit.errors import PUAuditError
from puaudit.rankings.result import SOURCES
from puaudit.rankings.bradley_terry import bradley_terry
from puaudit.rankings.winrates import length_covariate, verdict_scores, win_rates
from puaudit.rankings.estimate import model_rankings, table_rankings
from puaudit.rankings.simulate import simulate_comparisons
from tests.conftest import SHARED

LLMFAO = SHARED / "data" / "llmfao" / "llmfao_crowd_vs_gpt4.csv"


def hand_rows() -> pd.DataFrame:
    """Three models, 15 comparisons per pair, A listed first or second at random.

    alpha vs beta: 9 alpha wins, 4 beta wins, 2 ties (alpha scores 10 of 15);
    beta vs gamma: 10 beta wins, 5 gamma wins; alpha vs gamma: 12 alpha wins, 3 gamma wins.
    """
    rows = []
    for (m1, m2), outcomes in {("alpha", "beta"): ["1"] * 9 + ["2"] * 4 + ["tie"] * 2,
                               ("beta", "gamma"): ["1"] * 10 + ["2"] * 5,
                               ("alpha", "gamma"): ["1"] * 12 + ["2"] * 3}.items():
        for t, o in enumerate(outcomes):
            swap = t % 3 == 1
            verdict = {"1": "B" if swap else "A", "2": "A" if swap else "B", "tie": "tie"}[o]
            rows.append({"model_a": m2 if swap else m1, "model_b": m1 if swap else m2,
                         "verdict": verdict})
    return pd.DataFrame(rows)


def test_hand_computed_bradley_terry_three_models():
    """theta = (ln 2, 0, -ln 2) solves the likelihood equations exactly:
    sigma(ln 2) = 2/3 -> 10 of 15, sigma(2 ln 2) = 4/5 -> 12 of 15."""
    df = hand_rows()
    res = model_rankings(df.model_a, df.model_b, df.verdict, df.verdict, prior=0.0,
                         n_resamples=100)
    f = res.frame.set_index("model")
    ln2 = np.log(2.0)
    np.testing.assert_allclose(f.loc[["alpha", "beta", "gamma"], "bt_judge"], [ln2, 0.0, -ln2],
                               atol=1e-7)
    # Win rate = (wins + half the ties) / comparisons: alpha (9 + 1 + 12) / 30, ...
    np.testing.assert_allclose(f.loc[["alpha", "beta", "gamma"], "winrate_judge"],
                               [22 / 30, 15 / 30, 8 / 30])
    assert f["rank_judge"].to_dict() == {"alpha": 1, "beta": 2, "gamma": 3}
    assert res.frame["model"].tolist() == ["alpha", "beta", "gamma"]
    p = res.win_probability("judge")
    assert p.loc["alpha", "gamma"] == pytest.approx(0.8)
    assert p.loc["beta", "alpha"] == pytest.approx(1 / 3)
    assert np.isnan(p.loc["beta", "beta"])


def test_bradley_terry_likelihood_equations_and_prior():
    rng = np.random.default_rng(3)
    i, j = np.triu_indices(5, 1)
    n = rng.integers(3, 20, len(i)).astype(float)
    w = np.round(rng.random(len(i)) * n * 2) / 2  # half wins: ties
    theta, gamma = bradley_terry(i, j, w, n, n_models=5, prior=0.0)
    assert gamma is None and abs(theta.sum()) < 1e-10
    p = 1 / (1 + np.exp(-(theta[i] - theta[j])))
    observed = np.bincount(i, w, 5) + np.bincount(j, n - w, 5)
    expected = np.bincount(i, n * p, 5) + np.bincount(j, n * (1 - p), 5)
    np.testing.assert_allclose(observed, expected, atol=1e-6)
    # A model that wins everything stays finite with the prior and is shrunk by it.
    w_all = np.where(i == 0, n, w)
    strong = bradley_terry(i, j, w_all, n, n_models=5, prior=0.1)[0]
    stronger = bradley_terry(i, j, w_all, n, n_models=5, prior=0.01)[0]
    assert np.isfinite(strong).all() and stronger[0] > strong[0] > 2


def test_bradley_terry_recovers_a_covariate():
    rng = np.random.default_rng(0)
    k, m = 6, 20000
    beta = np.linspace(-1, 1, k)
    a = rng.integers(0, k, m)
    b = (a + rng.integers(1, k, m)) % k
    x = rng.uniform(-1, 1, m)
    wins = (rng.random(m) < 1 / (1 + np.exp(-(beta[a] - beta[b] + 0.8 * x)))).astype(float)
    theta, gamma = bradley_terry(a, b, wins, np.ones(m), n_models=k, covariate=x, prior=0.0)
    np.testing.assert_allclose(theta, beta - beta.mean(), atol=0.06)
    assert gamma == pytest.approx(0.8, abs=0.06)


def test_win_rates_and_verdict_scores():
    np.testing.assert_array_equal(verdict_scores(["A", "B", "tie", None]), [1, 0, 0.5, np.nan])
    np.testing.assert_array_equal(verdict_scores(["A", "tie"], ties="exclude"), [1, np.nan])
    with pytest.raises(PUAuditError, match="ties"):
        verdict_scores(["A"], ties="ignore")
    wr = win_rates([0, 0], [1, 2], [1.5, 0.0], [2, 1], n_models=4)
    np.testing.assert_allclose(wr[:3], [1.5 / 3, 0.5 / 2, 1.0])
    assert np.isnan(wr[3])
    x = length_covariate([100, 300, 200], [200, 100, 200])
    assert x[0] < 0 < x[1] and x[2] == 0 and np.all(np.abs(x) < 1)


def test_ties_excluded_and_every_vote_counts():
    # One item, three votes: two for A, one tie; and a second item with one vote for B.
    res = model_rankings(["x", "x", "x", "y"], ["y", "y", "y", "x"], ["A", "A", "A", "A"],
                         ["A", "A", "tie", "A"], groups=["q1", "q1", "q1", "q2"],
                         n_resamples=60)
    f = res.frame.set_index("model")
    assert f.loc["x", "winrate_human"] == pytest.approx((2 + 0.5 + 0) / 4)
    assert f.loc["x", "n"] == 4 and f.loc["x", "n_human"] == 4
    assert res.diagnostics["n_units"] == 2
    res = model_rankings(["x", "x", "x", "y"], ["y", "y", "y", "x"], ["A", "A", "A", "A"],
                         ["A", "A", "tie", "A"], groups=["q1", "q1", "q1", "q2"],
                         ties="exclude", n_resamples=60)
    f = res.frame.set_index("model")
    assert f.loc["x", "winrate_human"] == pytest.approx(2 / 3)


def test_bad_rows_are_left_out_and_inputs_checked():
    res = model_rankings(["x", "x", None, "z", "y"], ["y", "x", "y", "", "z"],
                         ["A", "A", "B", "A", "B"], n_resamples=60)
    assert res.diagnostics["n_rows_used"] == 2 and res.diagnostics["n_rows_dropped"] == 3
    assert res.models == ["x", "y", "z"]
    assert res.frame["winrate_human"].isna().all()
    assert any("No human verdicts" in n for n in res.notes)
    with pytest.raises(PUAuditError, match="at least two distinct models"):
        model_rankings(["x", "x"], ["x", "x"], ["A", "B"])
    with pytest.raises(PUAuditError, match="entries"):
        model_rankings(["x"], ["y", "z"], ["A", "B"])
    with pytest.raises(PUAuditError, match="lengths"):
        model_rankings(["x"], ["y"], ["A"], length_control=True)


def test_table_without_model_columns_says_so():
    df = pd.DataFrame({"prompt": ["p", "q"], "response_a": ["a", "b"], "response_b": ["c", "d"],
                       "judge_winner": ["A", "B"]})
    with pytest.raises(PUAuditError, match="model_a / model_b.*Data page"):
        table_rankings(load_comparisons(df))


def test_same_seed_same_answer_and_global_rng_untouched():
    df, _ = simulate_comparisons(800, label_share=0.3, random_state=1)
    np.random.seed(123)
    before = np.random.random()
    np.random.seed(123)
    a = model_rankings(df.model_a, df.model_b, df.judge_winner, df.human_winner,
                       n_resamples=80, random_state=5)
    after = np.random.random()
    b = model_rankings(df.model_a, df.model_b, df.judge_winner, df.human_winner,
                       n_resamples=80, random_state=5)
    assert before == after
    pd.testing.assert_frame_equal(a.frame, b.frame)


def test_everything_labelled_ppi_is_human():
    df, _ = simulate_comparisons(600, label_share=1.0, random_state=2)
    res = model_rankings(df.model_a, df.model_b, df.judge_winner, df.human_winner,
                         n_resamples=60)
    for stat in ("winrate", "bt"):
        for suffix in ("", "_lo", "_hi"):
            np.testing.assert_array_equal(res.frame[f"{stat}_ppi{suffix}"],
                                          res.frame[f"{stat}_human{suffix}"])
    assert res.diagnostics["lambda_bt"] == 0.0
    assert any("nothing for the judge to add" in n for n in res.notes)


def test_audited_source_and_json_fields():
    df, _ = simulate_comparisons(1500, label_share=0.2, random_state=4)
    audited = np.where(df.human_winner.notna(), df.human_winner, df.judge_winner)
    res = model_rankings(df.model_a, df.model_b, df.judge_winner, df.human_winner, audited,
                         n_resamples=60)
    out = res.to_dict()
    rec = out["models"][0]
    for s in SOURCES:
        for key in (f"bt_{s}", f"bt_{s}_lo", f"bt_{s}_hi", f"winrate_{s}", f"winrate_{s}_lo",
                    f"winrate_{s}_hi", f"rank_{s}"):
            assert rec[key] is not None, key
        assert (res.frame[f"bt_{s}_lo"] <= res.frame[f"bt_{s}"] + 1e-9).all()
    assert {"model", "n", "n_human"} <= set(rec)
    assert 0 <= out["diagnostics"]["lambda_winrate"] <= 1


def _coverage(replicates, n, resamples):
    cov = {s: [] for s in ("judge", "human", "ppi")}
    width = {s: [] for s in cov}
    for seed in range(replicates):
        df, truth = simulate_comparisons(n, label_share=0.1, random_state=100 + seed)
        res = model_rankings(df.model_a, df.model_b, df.judge_winner, df.human_winner,
                             n_resamples=resamples, random_state=seed)
        f = res.frame.set_index("model").loc[truth["model"]]
        t = truth["winrate_true"].to_numpy()
        for s in cov:
            lo, hi = f[f"winrate_{s}_lo"].to_numpy(), f[f"winrate_{s}_hi"].to_numpy()
            cov[s].extend((lo <= t) & (t <= hi))
            width[s].extend(hi - lo)
    return {s: np.mean(v) for s, v in cov.items()}, {s: np.mean(v) for s, v in width.items()}


@pytest.mark.slow
def test_ppi_intervals_valid_with_a_biased_judge_small_simulation():
    """The coverage bench's simulation, small: 8 models, a length-biased judge, labels on 10% of 5,000
    comparisons; 6 replicates (48 intervals per source). bench/rankings_coverage.py runs 200."""
    cov, width = _coverage(6, 5000, 150)
    assert cov["ppi"] >= 0.85, cov
    assert width["ppi"] < width["human"], width
    assert cov["judge"] <= 0.6, cov


def test_length_control_removes_the_judges_length_bias():
    df, truth = simulate_comparisons(6000, label_share=0.2, random_state=7)
    res = model_rankings(df.model_a, df.model_b, df.judge_winner, df.human_winner,
                         length_a=df.length_a, length_b=df.length_b, length_control=True,
                         n_resamples=60)
    d = res.diagnostics
    # The marginal length coefficient (answer quality varies within a model, so it is smaller
    # than the planted 1.5 on the per-answer scale): clearly positive for the judge only.
    assert d["gamma_judge"] > 0.3 and abs(d["gamma_human"]) < 0.2
    f = res.frame.set_index("model").loc[truth["model"]]
    t = truth["winrate_true"].to_numpy()
    raw = np.abs(f["winrate_judge"].to_numpy() - t).mean()
    lc = np.abs(f["lc_winrate_judge"].to_numpy() - t).mean()
    assert lc < raw / 2
    assert (f["lc_winrate_judge_lo"] <= f["lc_winrate_judge"]).all()


def test_ppi_python_imports_offline_and_keeps_warning_filters():
    code = ("import socket\n"
            "def no_net(*a, **k): raise OSError('network used')\n"
            "socket.socket.connect = no_net\n"
            "socket.create_connection = no_net\n"
            "import warnings\n"
            "from puaudit.rankings.estimate import model_rankings\n"
            "r = model_rankings(['x', 'y', 'x', 'y'], ['y', 'x', 'y', 'x'], ['A', 'B', 'A', 'B'],"
            " ['A', None, None, 'B'], n_resamples=50)\n"
            "import sys; assert 'ppi_py' in sys.modules\n"
            "blanket = [f for f in warnings.filters if f[0] == 'ignore' and f[1] is None"
            " and f[2] is Warning]\n"
            "assert not blanket, 'ppi_py silenced every warning'\n"
            "print('ok', r.frame.shape)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "ok" in out.stdout


def test_mtbench_four_ways(mtbench_path):
    from puaudit.data.io import read_table

    table = load_comparisons(read_table(mtbench_path))
    audited = np.where(pd.isna(table.human.astype(object)), table.judge, table.human)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no stray warnings from the statistics
        res = table_rankings(table, audited=audited, n_resamples=100)
    f = res.frame
    assert len(f) == 6 and f["n"].sum() == 2 * len(table)
    assert f["model"].iloc[0] == "gpt-4" and f["model"].iloc[-1] == "llama-13b"
    # GPT-4 (the judge) rates GPT-4 higher than people do, beyond the intervals.
    g = f.set_index("model").loc["gpt-4"]
    assert g["winrate_judge_lo"] > g["winrate_human_hi"]
    assert res.diagnostics["n_units"] == 1814


@pytest.mark.slow
def test_llmfao_many_models():
    if not LLMFAO.exists():
        pytest.skip("../shared/data is not present")
    from puaudit.data.io import read_table

    table = load_comparisons(read_table(LLMFAO))
    res = table_rankings(table, n_resamples=60)
    assert len(res.frame) >= 50
    assert res.frame[[f"rank_{s}" for s in ("judge", "human", "ppi")]].notna().all().all()
    assert np.isfinite(res.frame["bt_human_lo"]).all()
