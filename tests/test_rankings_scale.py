"""Rankings at scale: the sparse Bradley–Terry fit against the dense one it replaced, the bootstrap
caps and their notes, the top-N views, and the peak memory of ``puaudit models`` on many models."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest
from scipy.optimize import minimize
from scipy.special import expit

import puaudit.rankings.bradley_terry as bradley_terry_module
from puaudit.cli.commands import main
from puaudit.errors import PUAuditError
from puaudit.rankings.bradley_terry import bradley_terry
from puaudit.rankings.estimate import model_rankings
from puaudit.rankings.simulate import simulate_comparisons
from puaudit.rankings.leaderboard_limits import MIN_DRAWS, TOP_MODELS
from tests.conftest import ROOT


def dense_bradley_terry(i, j, wins, n, *, n_models, covariate=None, prior=0.1):
    """The former fit: scipy's trust-exact on the dense (n_models + 1)² Hessian."""
    i, j = np.asarray(i), np.asarray(j)
    wins, n = np.asarray(wins, float), np.asarray(n, float)
    k, has_cov = n_models, covariate is not None
    d = k + int(has_cov)
    cov = np.asarray(covariate, float) if has_cov else np.zeros(len(i))
    penalty = np.full(d, float(prior))
    if has_cov:
        penalty[k] = 1e-8
    ones = np.r_[np.ones(k), np.zeros(d - k)]
    design = np.zeros((len(i), d))
    design[np.arange(len(i)), i] += 1.0
    design[np.arange(len(i)), j] -= 1.0
    if has_cov:
        design[:, k] = cov

    def fun(x):
        eta = design @ x
        s = ones @ x
        val = np.sum(wins * np.logaddexp(0, -eta) + (n - wins) * np.logaddexp(0, eta))
        grad = design.T @ (n * expit(eta) - wins) + penalty * x + s * ones
        return val + 0.5 * penalty @ (x * x) + 0.5 * s * s, grad

    def hess(x):
        p = expit(design @ x)
        return (design.T * (n * p * (1 - p))) @ design + np.diag(penalty) + np.outer(ones, ones)

    x = minimize(fun, np.zeros(d), jac=True, hess=hess, method="trust-exact",
                 options={"gtol": 1e-8, "maxiter": 200}).x
    return x[:k] - x[:k].mean(), (x[k] if has_cov else None)


def _cases():
    rng = np.random.default_rng(3)
    i, j = np.triu_indices(5, 1)
    n = rng.integers(3, 20, len(i)).astype(float)
    w = np.round(rng.random(len(i)) * n * 2) / 2
    yield "five, prior 0", (i, j, w, n), dict(n_models=5, prior=0.0)
    w_all = np.where(i == 0, n, w)
    for prior in (0.1, 0.01):
        yield f"one wins all, prior {prior}", (i, j, w_all, n), dict(n_models=5, prior=prior)
    rng = np.random.default_rng(0)
    k, m = 6, 4000
    a = rng.integers(0, k, m)
    b = (a + rng.integers(1, k, m)) % k
    x = rng.uniform(-1, 1, m)
    beta = np.linspace(-1, 1, k)
    wins = (rng.random(m) < expit(beta[a] - beta[b] + 0.8 * x)).astype(float)
    yield "covariate", (a, b, wins, np.ones(m)), dict(n_models=k, covariate=x, prior=0.0)
    # 40 models on a chain with ties: past the exact-step size only with direct_max=0
    link = rng.integers(0, 39, 600)
    sc = rng.choice([0.0, 0.5, 1.0], 600)
    yield "chain of 40", (link, link + 1, sc, np.ones(600)), dict(n_models=40)


@pytest.mark.parametrize("direct_max", [None, 0])
def test_sparse_fit_equals_the_dense_fit(direct_max):
    for name, args, kw in _cases():
        theta, gamma = bradley_terry(*args, direct_max=direct_max, **kw)
        ref, ref_gamma = dense_bradley_terry(*args, **kw)
        np.testing.assert_allclose(theta, ref, atol=1e-6, err_msg=name)
        if ref_gamma is not None:
            assert gamma == pytest.approx(ref_gamma, abs=1e-6), name


def test_hand_computed_strengths_by_conjugate_gradients():
    # theta = (ln 2, 0, -ln 2) solves 10 of 15, 10 of 15 and 12 of 15 exactly.
    theta, _ = bradley_terry([0, 1, 0], [1, 2, 2], [10.0, 10.0, 12.0], [15.0] * 3, n_models=3,
                             prior=0.0, direct_max=0)
    np.testing.assert_allclose(theta, [np.log(2), 0.0, -np.log(2)], atol=1e-8)


def test_leaderboard_equal_with_either_newton_solver(monkeypatch):
    df, _ = simulate_comparisons(800, n_models=6, label_share=0.3, random_state=2)

    def run():
        return model_rankings(df.model_a, df.model_b, df.judge_winner, df.human_winner,
                              groups=np.arange(len(df)) // 2, length_a=df.length_a,
                              length_b=df.length_b, length_control=True, n_resamples=60,
                              random_state=1).frame

    exact = run()
    monkeypatch.setattr(bradley_terry_module, "DIRECT_MAX", 0)
    cg = run()
    num = exact.select_dtypes("number").columns
    np.testing.assert_allclose(cg[num].to_numpy(float), exact[num].to_numpy(float), atol=1e-6)


def chain_and_pairs(n_models: int, n_rows: int, *, seed: int = 0) -> pd.DataFrame:
    """Half the models in disjoint pairs, half on a chain (m0 – m1 – m2 ...): the shapes where a
    dense fit spends n_models² on nothing. Judge verdicts A/B/tie on every row, a human vote on
    one row in ten."""
    rng = np.random.default_rng(seed)
    half = n_models // 2
    pair = rng.integers(0, half // 2, n_rows // 2)
    link = half + rng.integers(0, n_models - half - 1, n_rows - len(pair))
    a = np.r_[2 * pair, link]
    b = np.r_[2 * pair + 1, link + 1]
    swap = rng.random(n_rows) < 0.5
    a, b = np.where(swap, b, a), np.where(swap, a, b)
    strength = rng.normal(size=n_models)
    p = expit(strength[a] - strength[b])
    judge = np.where(rng.random(n_rows) < p, "A", "B").astype(object)
    judge[rng.random(n_rows) < 0.05] = "tie"
    human = np.where(rng.random(n_rows) < p, "A", "B").astype(object)
    human[rng.random(n_rows) >= 0.1] = None
    return pd.DataFrame({"prompt": [f"question {r}" for r in range(n_rows)],
                         "response_a": "short", "response_b": "answer",
                         "model_a": [f"model-{c:05d}" for c in a],
                         "model_b": [f"model-{c:05d}" for c in b],
                         "judge": judge, "human": human})


def test_bootstrap_capped_then_left_out_with_notes():
    df = chain_and_pairs(120, 1200)
    args = (df.model_a, df.model_b, df.judge, df.human)
    capped = model_rankings(*args, n_resamples=200, max_work=120 * 60)
    assert capped.diagnostics["n_draws_bt"] == 60
    assert capped.diagnostics["n_draws_winrate"] == 200
    assert any("use 60 bootstrap draws, not 200" in n for n in capped.notes)
    assert np.isfinite(capped.frame["bt_judge_lo"]).all()

    none = model_rankings(*args, n_resamples=200, max_work=120 * (MIN_DRAWS - 1))
    assert none.diagnostics["n_draws_bt"] == 0
    assert any("Bradley–Terry intervals are left out" in n for n in none.notes)
    f = none.frame
    assert f[[f"bt_{s}_{e}" for s in ("judge", "human", "ppi") for e in ("lo", "hi")]] \
        .isna().all().all()
    # Points, ranks and win-rate intervals are all there; strengths equal the capped run's.
    assert np.isfinite(f["winrate_judge_lo"]).all() and f["rank_ppi"].notna().all()
    np.testing.assert_allclose(f.sort_values("model")["bt_judge"],
                               capped.frame.sort_values("model")["bt_judge"])
    assert none.diagnostics["lambda_bt"] == none.diagnostics["lambda_winrate"]
    with pytest.raises(PUAuditError, match="max_work"):
        model_rankings(*args, max_work=0)


def test_win_probability_is_top_by_top():
    df = chain_and_pairs(80, 600)
    res = model_rankings(df.model_a, df.model_b, df.judge, df.human, n_resamples=50)
    p = res.win_probability("judge", top=7)
    assert p.shape == (7, 7) and p.index.tolist() == res.frame["model"].head(7).tolist()
    assert res.win_probability("judge").shape == (TOP_MODELS, TOP_MODELS)
    with pytest.raises(PUAuditError, match="top"):
        res.win_probability("judge", top=0)


def test_cli_top_n_and_note(tmp_path, capsys):
    path = tmp_path / "many.csv"
    chain_and_pairs(80, 600).to_csv(path, index=False)
    assert main(["models", str(path), "--resamples", "50", "--top", "5", "--json",
                 "-o", str(tmp_path / "all.csv")]) == 0
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert len(out["models"]) == 5 and out["n_models"] == 80
    assert [m["rank_ppi"] for m in out["models"]] == sorted(m["rank_ppi"] for m in out["models"])
    assert any("top 5 of 80 models" in n and "75 more" in n for n in out["notes"])
    assert len(pd.read_csv(tmp_path / "all.csv")) == 80
    assert main(["models", str(path), "--resamples", "50", "--top", "0", "--json"]) == 0
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert len(out["models"]) == 80 and not any("Showing the top" in n for n in out["notes"])
    assert main(["models", str(path), "--top", "-1"]) == 2
    assert "--top" in capsys.readouterr().err


def test_two_thousand_models_stay_small(tmp_path):
    """2,000 models over disjoint pairs and a chain (10,000 rows): the former fit built
    2,000² Hessians and pair tables in every bootstrap draw. Peak memory of the whole command."""
    path = tmp_path / "models.csv"
    chain_and_pairs(2000, 10_000).to_csv(path, index=False)
    code = ("import json, sys\n"
            "from puaudit.cli.commands import main\n"
            f"rc = main(['models', {str(path)!r}, '--resamples', '200', '--json'])\n"
            # VmHWM, not ru_maxrss: Linux carries ru_maxrss over from the parent across exec
            "hwm = next(l.split()[1] for l in open('/proc/self/status') if l.startswith('VmHWM'))\n"
            "print('PEAK', hwm, file=sys.stderr)\n"
            "sys.exit(rc)\n")
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    peak_mb = int(proc.stderr.split("PEAK")[-1].split()[0]) / 1024
    assert peak_mb < 500, f"peak {peak_mb:.0f} MB"  # 289 MB measured
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["n_models"] == 2000 and len(out["models"]) == TOP_MODELS
    assert out["diagnostics"]["n_draws_bt"] == 0  # 50 draws x 2,000 models > the cap
    assert out["diagnostics"]["n_draws_winrate"] == 200
    assert all(m["bt_judge"] is not None and m["bt_judge_lo"] is None for m in out["models"])
    assert any(m["winrate_judge_lo"] is not None for m in out["models"])
