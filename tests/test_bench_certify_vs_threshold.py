"""The certification benchmark's baseline is Trust or Escalate's valid variant: thresholds from
1.00 down by 0.01 on P's items, exact one-sided bounds, sets too small to pass skipped, stop at
the first failure; the run prints one line per cell and ``ratio=`` last."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from bench.certify_vs_threshold import threshold_baseline
from puaudit.audit.certify.sequence import lower_bound
from tests.conftest import ROOT, SHARED


def test_the_baseline_walks_down_from_the_most_confident_items_and_stops_at_a_failure():
    # 60 P items, confidence 0.99 .. 0.40; wrong at ranks 25 and 31-40 (most confident first)
    n = 60
    conf_p = np.round(np.linspace(0.99, 0.40, n), 2)
    right = np.ones(n, bool)
    right[[24, *range(30, 40)]] = False
    audited = np.array([0.995, 0.80, 0.62, 0.45, np.nan])
    conf = np.r_[conf_p, audited]
    split = np.array(["P"] * n + ["validation", "unlabelled", "validation", "unlabelled",
                                   "unlabelled"])
    correct = np.r_[right, np.ones(5, bool)].astype(float)
    items = np.arange(n + 5).astype(str)
    out = threshold_baseline(conf, split, correct, items, target=0.85, risk=0.1)
    # by hand: the largest set whose bound passes before the first that fails
    want = np.inf
    for lam in np.round(np.arange(1.0, -0.001, -0.01), 2):
        sel = conf_p >= lam - 1e-12
        if sel.sum() < 15:           # ceil(ln 0.1 / ln 0.85): fewer could never pass
            continue
        if lower_bound(float(right[sel].sum()), int(sel.sum()), risk=0.1) < 0.85:
            break
        want = lam
    assert out["threshold"] == want and 0.4 < want < 0.99
    assert out["trusted"].tolist() == [False] * n + [
        0.995 >= want, 0.80 >= want, 0.62 >= want, 0.45 >= want, False]
    assert out["coverage"] == pytest.approx(np.mean(out["trusted"][n:]))


@pytest.mark.slow
def test_the_benchmark_prints_each_cell_and_the_ratio_last():
    if not SHARED.exists():
        pytest.skip("../shared/data is not present")
    out = subprocess.run([sys.executable, "-m", "bench.certify_vs_threshold", "--seeds", "2",
                          "--targets", "0.85", "--encoder", "hashing", "--sets",
                          "MT-Bench, a judge at 0.78 (generated, AUROC 0.75)"], cwd=ROOT,
                         capture_output=True, text=True, timeout=900)
    assert out.returncode == 0, out.stderr[-2000:]
    lines = out.stdout.strip().splitlines()
    assert "AUROC of the judge's confidence on annotated rows 0.750" in out.stdout
    cell = [x for x in lines if x.startswith("MT-Bench, a judge at 0.78") and "| 0.85 |" in x]
    assert len(cell) == 1 and "valid 2/2" in cell[0] and "baseline" in cell[0]
    assert lines[-1].startswith("ratio=") and float(lines[-1][6:]) > 0
