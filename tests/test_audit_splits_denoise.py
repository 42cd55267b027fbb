import numpy as np
import pytest

from puaudit.audit.denoise import denoise_positives, normalize_rows
from puaudit.audit.splits import split_rows
from puaudit.data.io import read_table
from puaudit.data.schema import load_comparisons
from puaudit.errors import PUAuditError


def _arrays(n=400, seed=0, type_per_item=False):
    rng = np.random.default_rng(seed)
    judge = rng.choice(np.array(["A", "B", "tie", None], dtype=object), n, p=[.45, .45, .05, .05])
    human = rng.choice(np.array(["A", "B", "tie", None], dtype=object), n, p=[.3, .3, .05, .35])
    qt = rng.choice(np.array(["x", "y"], dtype=object), n)
    items = np.array([f"item{i // 3}" for i in range(n)], dtype=object)  # 3 votes per item
    if type_per_item:
        qt = np.array([("x", "y")[(i // 3) % 2] for i in range(n)], dtype=object)
    return judge, human, qt, items


def test_split_never_leaks_an_item_and_is_seeded():
    judge, human, qt, items = _arrays()
    s1, r1 = split_rows(judge, human, qt, items, p_ratio=0.3, random_state=1)
    s2, _ = split_rows(judge, human, qt, items, p_ratio=0.3, random_state=1)
    s3, _ = split_rows(judge, human, qt, items, p_ratio=0.3, random_state=2)
    assert (s1 == s2).all() and not (s1 == s3).all()
    p_items = set(items[s1 == "P"]) ; v_items = set(items[s1 == "validation"])
    assert p_items and v_items and not (p_items & v_items)


def test_split_roles_and_reasons():
    judge, human, qt, items = _arrays()
    split, reason = split_rows(judge, human, qt, items, p_ratio=0.5, random_state=0)
    for j, h, s, r in zip(judge, human, split, reason):
        if j is None:
            assert (s, r) == ("excluded", "no judge verdict")
        elif j == "tie":
            assert (s, r) == ("excluded", "judge tie")
        elif h == "tie":
            assert (s, r) == ("excluded", "human tie")
        elif h is None:
            assert s == "unlabelled" and r == ""
        else:
            assert s in ("P", "validation")


def test_p_ratio_share_per_type_by_items():
    judge, human, qt, items = _arrays(n=3000, type_per_item=True)
    split, _ = split_rows(judge, human, qt, items, p_ratio=0.3, random_state=0)
    for t in ("x", "y"):
        ann = (qt == t) & np.isin(split, ["P", "validation"])
        n_items = len(set(items[ann]))
        n_p_items = len(set(items[ann & (split == "P")]))
        assert n_p_items == round(0.3 * n_items)


def test_p_ratio_one_means_no_validation():
    judge, human, qt, items = _arrays()
    split, _ = split_rows(judge, human, qt, items, p_ratio=1.0, random_state=0)
    assert (split == "validation").sum() == 0 and (split == "P").sum() > 0
    with pytest.raises(PUAuditError, match=r"p_ratio must be in \(0, 1\], got 0.0"):
        split_rows(judge, human, qt, items, p_ratio=0.0, random_state=0)


def test_mtbench_item_grouping(mtbench_path):
    t = load_comparisons(read_table(mtbench_path))
    split, _ = split_rows(t.judge, t.human, t.question_type, t.item_id, p_ratio=0.3, random_state=0)
    assert not set(t.item_id[split == "P"]) & set(t.item_id[split == "validation"])
    assert (split == "P").sum() + (split == "validation").sum() == 2129


def test_denoise_keeps_core_and_aligned_rows():
    # 10 rows: rows 0-6 share a topic direction; rows 7-9 are off-topic outliers.
    d = 6
    topic = np.eye(d)[0]
    e_w = np.tile(topic, (10, 1)) + 0.01 * np.arange(10)[:, None] * np.eye(d)[1]
    e_l = e_w.copy()
    e_w[7:] = np.eye(d)[2] * 3
    e_l[7:] = np.eye(d)[3] * 3
    # improvement directions: rows 0-3 along e4, rows 4-6 opposite-ish
    z = np.zeros((10, d))
    z[:4, 4] = 1
    z[4:7, 5] = 1
    z[4:7, 4] = -0.2
    z[7:, 4] = 1
    z = normalize_rows(z)
    keep, info = denoise_positives(e_w, e_l, z, alpha1=0.7, alpha2=0.7, log=True)
    assert info["n_core"] == 7 and info["n_kept"] == 4
    assert keep.tolist() == [True] * 4 + [False] * 6


def test_denoise_small_group_kept_whole():
    z = normalize_rows(np.random.default_rng(0).normal(size=(4, 3)))
    assert denoise_positives(z, z, z, alpha1=0.7, alpha2=0.7).all()
