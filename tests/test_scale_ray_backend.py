"""The Ray backend (docs/ray.md): the MT-Bench audit through Ray equals the local one, a killed
worker loses no finished embeddings, ``--ray`` on the command line, and clear messages without
Ray. One local Ray instance (``ray.init(num_cpus=2)``) serves the module and is shut down after;
the tests that need it are skipped with a reason when Ray is not installed (CI installs the
``ray`` extra, so they run there)."""

from __future__ import annotations

import importlib.util
import os
import signal
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from puaudit import PUAudit
from puaudit.audit.relabel import GROUP_NEG
from puaudit.errors import PUAuditError
from puaudit.embed.hashing import HashingEncoder

ROOT = Path(__file__).resolve().parents[1]


def _have_ray() -> bool:
    try:
        return importlib.util.find_spec("ray") is not None
    except (ImportError, ValueError):  # hidden or broken install
        return False


HAVE_RAY = _have_ray()
needs_ray = pytest.mark.skipif(not HAVE_RAY, reason=(
    "Ray is an optional extra, not installed here: pip install -e .[ray] (.ci/run installs it)"))


@pytest.fixture(scope="module")
def ray_local():
    import ray

    if ray.is_initialized():
        ray.shutdown()
    # workers import the test encoders from this checkout (puaudit.embed.hashing, this module)
    path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
             runtime_env={"env_vars": {"PYTHONPATH": path}})
    yield ray
    ray.shutdown()


class DyingEncoder(HashingEncoder):
    """The hashing test encoder, logging every batch it embeds (one file per process) and
    killing its own process (SIGKILL, as an OOM killer or a lost node would) on its
    ``die_at``-th batch, once: the marker file says it already happened."""

    name = "dying-test"

    def __init__(self, folder: str, die_at: int = 3, dim: int = 64):
        super().__init__(dim)
        self.folder, self.die_at = folder, die_at

    def encode(self, texts, **kwargs):
        self._calls = getattr(self, "_calls", 0) + 1
        marker = Path(self.folder) / "killed"
        if self._calls == self.die_at and not marker.exists():
            marker.touch()
            os.kill(os.getpid(), signal.SIGKILL)
        with open(Path(self.folder) / f"encoded-{os.getpid()}.txt", "a") as f:
            f.write(f"{len(list(texts))}\n")
        return super().encode(texts, **kwargs)


class FailingEncoder(HashingEncoder):
    """The hashing test encoder, failing on every batch as a broken model would."""

    name = "failing-test"

    def encode(self, texts, **kwargs):
        raise ValueError("the model exploded")


def _encoded(folder: Path) -> int:
    return sum(int(x) for p in folder.glob("encoded-*.txt") for x in p.read_text().split())


def _texts(n: int) -> list[str]:
    return [f"Question: prompt {i % 37}\nAnswer: answer number {i} with words {i * 7 % 101}"
            for i in range(n)]


@needs_ray
def test_mtbench_audit_through_ray_equals_the_local_audit(ray_local, mtbench_path, tmp_path,
                                                          monkeypatch):
    from puaudit.data.io import read_table
    from puaudit.data.schema import apply_judge_rule, load_comparisons

    monkeypatch.setenv("PUAUDIT_CACHE_DIR", str(tmp_path))  # empty store: Ray Data embeds all
    table = apply_judge_rule(load_comparisons(read_table(mtbench_path)), "longer")
    enc = HashingEncoder()
    local = PUAudit(encoder=enc, random_state=0).fit(table)
    remote = PUAudit(encoder=enc, random_state=0, backend="ray").fit(table)
    e_l, e_r = local.embeddings_, remote.embeddings_
    assert e_r.vectors.shape == e_l.vectors.shape
    assert np.array_equal(e_r.idx_a, e_l.idx_a) and np.array_equal(e_r.idx_b, e_l.idx_b)
    cos = np.sum(e_l.vectors * e_r.vectors, 1) / np.maximum(
        np.linalg.norm(e_l.vectors, axis=1) * np.linalg.norm(e_r.vectors, axis=1), 1e-12)
    assert cos.min() >= 0.9999
    assert np.array_equal(remote.split_, local.split_)
    assert np.array_equal(remote.groups_, local.groups_)
    assert (local.groups_ == GROUP_NEG).sum() > 0  # a weak judge: there are reversals to match
    assert remote.result_.params["scorer_used"] == local.result_.params["scorer_used"]
    np.testing.assert_allclose(remote.scores_, local.scores_, rtol=0, atol=1e-9)
    assert remote.metrics_["cons_adj"] == local.metrics_["cons_adj"]
    assert any(p.suffix == ".npy" for p in tmp_path.rglob("*"))  # Ray's batches are in the cache


@needs_ray
def test_ray_workers_share_a_long_pairs_window_as_the_local_encoder_does(ray_local, tmp_path):
    """A pair's text reaches the workers with its prompt's length, so a prompt longer than the
    window leaves room for the answers there too (puaudit.embed.text, "The window of a pair")."""
    from puaudit.embed.text import format_text
    from puaudit.scale.ray_embed import embed_texts_ray

    enc = HashingEncoder(max_length=32)
    prompt = " ".join(f"word{i}" for i in range(200))
    texts = [format_text(prompt, "paris is the capital"), format_text(prompt, "berlin it is"),
             format_text("short", "plain"), "a plain text " * 40]
    got = embed_texts_ray(texts, enc, cache_dir=tmp_path, batch_size=2)
    np.testing.assert_array_equal(got, enc.encode(texts))
    assert np.linalg.norm(got[0] - got[1]) > 1e-3
    # the rerun reads the store, under the same keys
    np.testing.assert_array_equal(embed_texts_ray(texts, enc, cache_dir=tmp_path), got)


@needs_ray
def test_a_killed_worker_keeps_its_finished_embeddings_and_the_rerun_reuses_them(ray_local,
                                                                                  tmp_path):
    from puaudit.scale.ray_embed import embed_texts_ray

    texts = _texts(400)
    logs, store = tmp_path / "logs", tmp_path / "store"
    logs.mkdir()
    enc = DyingEncoder(str(logs), die_at=3)
    with pytest.raises(PUAuditError, match="run it again to resume") as err:
        embed_texts_ray(texts, enc, cache_dir=store, num_workers=2, batch_size=25,
                        max_restarts=0)
    assert (logs / "killed").exists()
    first = _encoded(logs)
    assert first >= 2 * 25  # the dying worker finished two batches before its third
    assert "are finished and kept in" in str(err.value)
    for p in logs.glob("encoded-*.txt"):
        p.unlink()
    out = embed_texts_ray(texts, enc, cache_dir=store, num_workers=2, batch_size=25)
    again = _encoded(logs)
    # every text embedded exactly once over both runs: nothing finished was recomputed
    assert first + again == len(texts), (first, again)
    np.testing.assert_array_equal(out, HashingEncoder().encode(texts))


@needs_ray
def test_ray_restarts_a_killed_worker_and_the_run_completes(ray_local, tmp_path):
    from puaudit.scale.ray_embed import embed_texts_ray

    texts = _texts(200)
    logs = tmp_path / "logs"
    logs.mkdir()
    out = embed_texts_ray(texts, DyingEncoder(str(logs), die_at=2), cache_dir=None,
                          num_workers=2, batch_size=25)
    assert (logs / "killed").exists()
    np.testing.assert_array_equal(out, HashingEncoder().encode(texts))


@needs_ray
def test_cli_audit_with_ray_writes_the_same_export_as_without(ray_local, tmp_path, capsys):
    from puaudit.cli.commands import main
    from puaudit.data.demo import generate_demo
    from puaudit.data.schema import load_comparisons
    from puaudit.embed.pairs import embed_table

    src = tmp_path / "demo.csv"
    generate_demo(n_rows=300, random_state=1).to_csv(src, index=False)
    emb = embed_table(load_comparisons(pd.read_csv(src)), HashingEncoder())
    npz = tmp_path / "emb.npz"
    np.savez(npz, vectors=emb.vectors, idx_a=emb.idx_a, idx_b=emb.idx_b)
    outs = {}
    for name, extra in (("local", []), ("ray", ["--ray"])):
        out = tmp_path / f"{name}.csv"
        rc = main(["audit", str(src), "-o", str(out), "--embeddings", str(npz),
                   "--scorer", "prior-ot", "--json", *extra])
        assert rc == 0, capsys.readouterr().err
        outs[name] = pd.read_csv(out)
        assert capsys.readouterr().out.strip().splitlines()[-1].startswith("{")
    pd.testing.assert_frame_equal(outs["ray"], outs["local"])


def test_without_ray_the_backend_says_how_to_install_it(monkeypatch, planted, tmp_path, capsys):
    from puaudit.embed.pairs import PairEmbeddings
    from puaudit.cli.commands import main

    df, e_a, e_b, _ = planted
    monkeypatch.setitem(sys.modules, "ray", None)  # import ray -> ImportError
    with pytest.raises(PUAuditError, match=r"pip install -e \.\[ray\]"):
        PUAudit(backend="ray").fit(df, PairEmbeddings(e_a, e_b))
    src = tmp_path / "t.csv"
    df.to_csv(src, index=False)
    assert main(["audit", str(src), "-o", str(tmp_path / "o.csv"), "--ray"]) == 2
    assert "pip install -e .[ray]" in capsys.readouterr().err
    assert not (tmp_path / "o.csv").exists()


def test_an_unknown_backend_is_refused(planted):
    from puaudit.embed.pairs import PairEmbeddings

    df, e_a, e_b, _ = planted
    with pytest.raises(PUAuditError, match="Unknown backend 'spark'"):
        PUAudit(backend="spark").fit(df, PairEmbeddings(e_a, e_b))


@needs_ray
def test_an_unreachable_cluster_is_reported_at_once(monkeypatch, tmp_path, capsys, planted):
    import ray

    from puaudit.cli.commands import main

    monkeypatch.setattr(ray, "is_initialized", lambda: False)  # as in a fresh process
    src = tmp_path / "t.csv"
    planted[0].to_csv(src, index=False)
    for address in ("127.0.0.1:1", "ray://127.0.0.1:1"):
        assert main(["audit", str(src), "-o", str(tmp_path / "o.csv"), "--ray", address]) == 2
        err = capsys.readouterr().err
        assert f"No Ray cluster answers at '{address}'" in err and "ray start --head" in err
    assert not (tmp_path / "o.csv").exists()


@needs_ray
def test_an_encoder_error_on_a_worker_is_reported_plainly(ray_local, tmp_path):
    from puaudit.scale.ray_embed import embed_texts_ray

    with pytest.raises(PUAuditError, match=r"\(ValueError: the model exploded\); no text was "
                                           r"finished"):
        embed_texts_ray(_texts(20), FailingEncoder(), cache_dir=tmp_path, num_workers=1,
                        batch_size=10)


def test_gpu_clusters_get_one_gpu_per_encoder_actor(monkeypatch):
    """The actor pool's shape (no cluster needed): one actor per GPU with num_gpus=1 for a model
    encoder on a GPU cluster; CPU actors otherwise; the copy sent to workers is unloaded, has no
    cache of its own and the precision mode fixed on the driver."""
    import pickle
    import threading

    from puaudit.embed.encoders import get_encoder
    from puaudit.scale import ray_embed

    enc = get_encoder(None, mode="full")
    monkeypatch.setattr(ray_embed, "cluster_cpus", lambda: 16.0)
    monkeypatch.setattr(ray_embed, "cluster_gpus", lambda: 4.0)
    assert ray_embed._pool(enc, None, 1.0) == (4, 1.0, 1.0)
    assert ray_embed._pool(HashingEncoder(), None, 2.0) == (8, 2.0, 0.0)  # not a model: CPUs
    assert ray_embed._pool(get_encoder(None, device="cpu"), None, 4.0) == (4, 4.0, 0.0)
    monkeypatch.setattr(ray_embed, "cluster_gpus", lambda: 0.0)
    assert ray_embed._pool(enc, 3, 1.0) == (3, 1.0, 0.0)
    w = ray_embed.worker_encoder(enc, gpu=True, threads=4)
    assert (w.device, w.cache_dir, w.mode, getattr(w, "model_", None)) == ("cuda", None, "full",
                                                                          None)
    assert ray_embed.worker_encoder(enc, gpu=False, threads=4).num_threads == 4
    pickle.dumps(w)

    class Unpicklable(HashingEncoder):
        def __init__(self):
            super().__init__()
            self.lock = threading.Lock()

    with pytest.raises(PUAuditError, match="cannot be sent to Ray workers"):
        ray_embed.worker_encoder(Unpicklable(), gpu=False, threads=1)
