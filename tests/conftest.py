"""Shared fixtures: paths to the real data and a planted-geometry comparison set."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared"
MTBENCH = SHARED / "data" / "mtbench" / "mtbench_human_vs_gpt4.csv"
PRD = SHARED / "data" / "prd_vicuna80" / "prd_vicuna80_pairwise.csv"



def planted_set(n: int = 1200, d: int = 24, *, signal: float = 2.5, judge_acc: float = 0.7,
                annotated: float = 0.4, n_types: int = 3, seed: int = 0):
    """A table + embeddings where the better response is shifted along a hidden direction.

    Returns (df, e_a, e_b, judge_right) with ``judge_right`` the hidden truth per row.
    """
    rng = np.random.default_rng(seed)
    v = rng.normal(size=d)
    v /= np.linalg.norm(v)
    types = np.array([f"type{t}" for t in rng.integers(0, n_types, n)])
    base = rng.normal(size=(n, d))
    truth = rng.choice(["A", "B"], n)
    e_a = base + 0.5 * rng.normal(size=(n, d))
    e_b = base + 0.5 * rng.normal(size=(n, d))
    e_a[truth == "A"] += signal * v
    e_b[truth == "B"] += signal * v
    right = rng.random(n) < judge_acc
    judge = np.where(right, truth, np.where(truth == "A", "B", "A"))
    human = np.where(rng.random(n) < annotated, truth, "")
    df = pd.DataFrame({
        "question_id": np.arange(n), "category": types,
        "prompt": [f"prompt {i}" for i in range(n)],
        "response_a": [f"answer a {i}" for i in range(n)],
        "response_b": [f"answer b {i}" for i in range(n)],
        "judge_winner": judge, "human_winner": human, "true_winner": truth,
    })
    return df, e_a.astype(np.float32), e_b.astype(np.float32), right


@pytest.fixture(scope="session")
def planted():
    return planted_set()


@pytest.fixture(scope="session")
def mtbench_path():
    if not MTBENCH.exists():
        pytest.skip("../shared/data is not present")
    return MTBENCH


@pytest.fixture(scope="session", autouse=True)
def _test_cache_dir():
    """Tests never write to the user's real embedding cache."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("PUAUDIT_CACHE_DIR",
                  os.environ.get("PUAUDIT_CACHE_DIR", str(ROOT / ".cache" / "test-embeddings")))
        yield


@pytest.fixture
def app_env(monkeypatch):
    """Dashboard tests: the instant hashing test encoder, no UMAP warm-up thread."""
    monkeypatch.setenv("PUAUDIT_TEST_ENCODER", "hashing")
    monkeypatch.setenv("PUAUDIT_UMAP_WARMUP", "0")
