"""Embeddings stored once per distinct text: same audit, far less memory per row."""

import numpy as np
import pandas as pd
import pytest

from puaudit.audit.splits import DiffRows, prepare_split
from puaudit.embed.pairs import PairEmbeddings
from puaudit.audit.estimator import PUAudit
from puaudit.cli.commands import main
from puaudit.data.embeddings_npz import read_embeddings_npz
from puaudit.data.schema import load_comparisons
from puaudit.errors import PUAuditError


def test_indexed_and_per_row_embeddings_give_the_same_audit(planted):
    df, e_a, e_b, _ = planted
    table = load_comparisons(df)
    # deduplicate: the distinct vectors plus two indices per row
    both = np.concatenate([e_a, e_b])
    vectors, inverse = np.unique(both, axis=0, return_inverse=True)
    inverse = inverse.ravel()
    n = len(e_a)
    idx = PairEmbeddings(vectors=vectors, idx_a=inverse[:n], idx_b=inverse[n:])
    np.testing.assert_array_equal(idx.e_a, e_a)
    r1 = PUAudit(scorer="prior-ot").fit(table, PairEmbeddings(e_a, e_b)).result_
    r2 = PUAudit(scorer="prior-ot").fit(table, idx).result_
    np.testing.assert_array_equal(r1.group, r2.group)
    np.testing.assert_allclose(r1.score, r2.score, atol=1e-12, equal_nan=True)


def test_diff_rows_are_lazy_normalised_and_oriented(planted):
    df, e_a, e_b, _ = planted
    emb = PairEmbeddings(e_a, e_b)
    prep = prepare_split(load_comparisons(df), emb)
    rows = np.arange(0, 50)
    z = prep.z_judge(rows)
    assert isinstance(z, DiffRows) and z.shape == (50, e_a.shape[1])
    ref = (e_a[rows].astype(float) - e_b[rows]) * prep.sign_judge[rows][:, None]
    ref /= np.linalg.norm(e_a[rows].astype(float) - e_b[rows], axis=1)[:, None]
    np.testing.assert_allclose(z[:], ref, atol=1e-12)
    np.testing.assert_allclose(z[np.array([3, 7])], ref[[3, 7]], atol=1e-12)


def test_cli_reads_the_indexed_npz_layout_and_checks_its_indices(planted, tmp_path):
    df, e_a, e_b, _ = planted
    csv = tmp_path / "in.csv"
    df.to_csv(csv, index=False)
    n = len(df)
    vectors = np.concatenate([e_a, e_b])
    np.savez(tmp_path / "emb.npz", vectors=vectors, idx_a=np.arange(n), idx_b=np.arange(n, 2 * n))
    np.savez(tmp_path / "rows.npz", e_a=e_a, e_b=e_b)
    assert main(["audit", str(csv), "-o", str(tmp_path / "a.csv"), "--embeddings",
                 str(tmp_path / "emb.npz"), "--scorer", "centroid"]) == 0
    assert main(["audit", str(csv), "-o", str(tmp_path / "b.csv"), "--embeddings",
                 str(tmp_path / "rows.npz"), "--scorer", "centroid"]) == 0
    a, b = pd.read_csv(tmp_path / "a.csv"), pd.read_csv(tmp_path / "b.csv")
    pd.testing.assert_frame_equal(a, b)
    np.savez(tmp_path / "bad.npz", vectors=vectors, idx_a=np.arange(n) + 2 * n,
             idx_b=np.arange(n))
    with pytest.raises(PUAuditError, match="idx_a' of table row 1"):
        read_embeddings_npz(tmp_path / "bad.npz", n_rows=n)
    np.savez(tmp_path / "short.npz", vectors=vectors, idx_a=np.arange(3), idx_b=np.arange(3))
    with pytest.raises(PUAuditError, match=f"must hold {n} integers"):
        read_embeddings_npz(tmp_path / "short.npz", n_rows=n)
