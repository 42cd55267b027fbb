"""UMAP projection with a checkpoint (puaudit/embed/projection.py): a raise at a checkpoint stops
the layout between epochs, and an uninterrupted run is the layout umap-learn computes without one."""

from __future__ import annotations

import numpy as np
import pytest

from puaudit.embed.projection import project_2d

pytestmark = pytest.mark.slow  # UMAP compiles its numba kernels once per process


class _Stop(Exception):
    pass


@pytest.fixture(scope="module")
def z():
    rng = np.random.default_rng(3)
    # two clusters, so the layout has structure to find
    return np.concatenate([rng.normal(0, 1, (150, 12)), rng.normal(4, 1, (150, 12))])


def test_an_uninterrupted_checkpointed_umap_equals_umap_learn_without_one(z):
    import umap

    calls = []
    xy = project_2d(z, method="umap", random_state=0, checkpoint=lambda: calls.append(1))
    # the call project_2d made before checkpoints existed, verbatim
    old = umap.UMAP(n_components=2, n_neighbors=15, min_dist=0.1, metric="cosine",
                    random_state=0, n_jobs=1).fit_transform(z)
    np.testing.assert_array_equal(xy, np.asarray(old, dtype=np.float64))
    np.testing.assert_array_equal(xy, project_2d(z, method="umap", random_state=0))
    # 300 rows: 500 epochs, each a checkpoint, plus before and after
    assert len(calls) >= 500


@pytest.mark.parametrize("stop_at", [20, 400], ids=["in the distances", "between epochs"])
def test_a_raise_at_a_checkpoint_stops_umap_early(z, stop_at):
    """300 rows: one checkpoint before, one per row of the pairwise distances (300), one per
    epoch (500), one after; stopped at call 20 or 400, nothing runs on."""
    full = []
    project_2d(z, method="umap", random_state=0, checkpoint=lambda: full.append(1))
    assert len(full) == 1 + len(z) + 500 + 1
    calls = []

    def cancel():
        calls.append(1)
        if len(calls) == stop_at:
            raise _Stop("a newer setting")

    with pytest.raises(_Stop, match="newer setting"):
        project_2d(z, method="umap", random_state=0, checkpoint=cancel)
    assert len(calls) == stop_at < len(full)  # stopped there, and nothing was called after it
    # stopped runs leave nothing behind: the next run is the full layout again
    again = project_2d(z, method="umap", random_state=0, checkpoint=lambda: None)
    np.testing.assert_array_equal(again, project_2d(z, method="umap", random_state=0))


def test_pca_calls_the_checkpoint_once_and_is_unchanged(z):
    calls = []
    xy = project_2d(z, method="pca", checkpoint=lambda: calls.append(1))
    np.testing.assert_array_equal(xy, project_2d(z, method="pca"))
    assert calls == [1]


def test_a_stopped_umap_leaves_other_threads_free_to_project(z):
    """The stop is raised between epochs, outside any lock: a first try raised inside tqdm's
    write, which keeps tqdm's global write lock, and the next UMAP in another thread (the
    dashboard's job worker) waited for it forever."""
    import threading

    def stop():
        raise _Stop

    with pytest.raises(_Stop):
        project_2d(z, method="umap", random_state=0, checkpoint=stop)
    calls = []

    def stop_at_3():
        calls.append(1)
        if len(calls) == 3:
            raise _Stop

    with pytest.raises(_Stop):
        project_2d(z, method="umap", random_state=0, checkpoint=stop_at_3)
    out = []
    th = threading.Thread(target=lambda: out.append(
        project_2d(z, method="umap", random_state=0, checkpoint=lambda: None)))
    th.start()
    th.join(120)
    assert not th.is_alive() and out[0].shape == (len(z), 2)


def test_a_umap_without_the_patched_names_still_projects(monkeypatch):
    """Another umap-learn, whose internals lack a name the checkpoints replace: the projection
    runs to its end without those checkpoints instead of failing."""
    from puaudit.embed import projection

    def missing():
        raise AttributeError("module 'umap.layouts' has no attribute 'tqdm'")

    monkeypatch.setattr(projection, "_install_epoch_checkpoints", missing)
    monkeypatch.setattr(projection, "_install_distance_checkpoints", missing)
    calls = []
    z = np.random.default_rng(0).normal(size=(60, 8))
    out = project_2d(z, method="umap", random_state=0, checkpoint=lambda: calls.append(1))
    assert out.shape == (60, 2) and np.isfinite(out).all()
    # before and after at least (an earlier test in this process may have installed the epoch
    # checkpoints already; here nothing new can be installed, and nothing fails)
    assert len(calls) >= 2
