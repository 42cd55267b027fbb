"""The review store: decisions survive a restart, concurrent writers lose nothing, and a locked,
read-only or damaged database gives a clear message while the decisions already made stay."""

from __future__ import annotations

import multiprocessing as mp
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

import pytest

from puaudit.errors import PUAuditError
from puaudit.review.store import ReviewStore, default_url, get_store
from tests.conftest import ROOT


def _url(tmp_path, name="review.sqlite"):
    return f"sqlite:///{tmp_path / name}"


def test_decisions_survive_a_new_engine_with_settings(tmp_path):
    url = _url(tmp_path)
    s = ReviewStore(url)
    s.add("k1", "a", "alice", note="A is right", settings={"m": None, "p_ratio": 0.3},
          judge_verdict="B", p_judge_right=0.41, audit_group="uncertain")
    s.add("k1", "B", "bob")
    s.dispose()
    again = ReviewStore(url)  # a server restart: new engine, same file
    d = again.decisions()
    assert d["row_key"].tolist() == ["k1", "k1"]
    assert d["verdict"].tolist() == ["A", "B"]  # normalised
    assert d["reviewer"].tolist() == ["alice", "bob"]  # both reviewers kept
    assert d.loc[0, "note"] == "A is right"
    assert '"p_ratio": 0.3' in d.loc[0, "settings"] and '"m": null' in d.loc[0, "settings"]
    assert d.loc[0, "p_judge_right"] == pytest.approx(0.41)
    assert str(d["created_at"].dt.tz) == "UTC"
    assert again.decisions(["k2"]).empty


def test_environment_chooses_the_file(tmp_path, monkeypatch):
    monkeypatch.delenv("PUAUDIT_REVIEW_URL", raising=False)
    monkeypatch.setenv("PUAUDIT_REVIEW_DB", str(tmp_path / "sub" / "r.sqlite"))
    assert default_url() == f"sqlite:///{tmp_path / 'sub' / 'r.sqlite'}"
    s = get_store()
    s.add("k", "tie", "carol")
    assert (tmp_path / "sub" / "r.sqlite").is_file()
    monkeypatch.setenv("PUAUDIT_REVIEW_URL", "sqlite:///" + str(tmp_path / "other.sqlite"))
    assert default_url().endswith("other.sqlite")


@pytest.mark.parametrize("bad, column", [({"verdict": "maybe"}, "verdict"),
                                         ({"reviewer": "  "}, "reviewer"),
                                         ({"row_key": ""}, "row_key")])
def test_bad_decisions_are_refused_with_the_field(tmp_path, bad, column):
    s = ReviewStore(_url(tmp_path))
    rec = {"row_key": "k", "verdict": "A", "reviewer": "alice", **bad}
    with pytest.raises(PUAuditError) as info:
        s.add(**rec)
    assert info.value.column == column
    assert s.count() == 0


def test_import_twice_adds_nothing(tmp_path):
    s = ReviewStore(_url(tmp_path))
    recs = [{"uid": f"u{i}", "row_key": f"k{i}", "verdict": "A", "reviewer": "r"} for i in range(5)]
    assert s.add_many(recs) == 5
    assert s.add_many(recs) == 0
    assert s.count() == 5


def test_two_threads_writing_at_once_lose_nothing(tmp_path):
    url = _url(tmp_path)
    stores = [ReviewStore(url), ReviewStore(url)]  # two engines, like two server processes
    errors = []

    def write(who, store):
        try:
            for i in range(60):
                store.add(f"row{i}", "A" if i % 2 else "B", who)
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)

    th = [threading.Thread(target=write, args=(f"rev{j}", stores[j])) for j in range(2)]
    for t in th:
        t.start()
    for t in th:
        t.join()
    assert not errors
    d = ReviewStore(url).decisions()
    assert len(d) == 120
    assert d.groupby("reviewer").size().to_dict() == {"rev0": 60, "rev1": 60}


def _proc_write(url, who, n):
    s = ReviewStore(url)
    for i in range(n):
        s.add(f"row{i}", "tie", who)
    s.dispose()
    # every write is committed and the engine closed; leave without interpreter teardown, where
    # one full-suite run under load saw a child abort ("terminate called without an active
    # exception", exit -6) after its work was done (the decisions are counted below either way)
    os._exit(0)


def test_two_processes_writing_at_once_lose_nothing(tmp_path):
    url = _url(tmp_path)
    ReviewStore(url).dispose()
    ctx = mp.get_context("spawn")
    procs = [ctx.Process(target=_proc_write, args=(url, f"p{j}", 40)) for j in range(2)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
    assert [p.exitcode for p in procs] == [0, 0]
    d = ReviewStore(url).decisions()
    assert d.groupby("reviewer").size().to_dict() == {"p0": 40, "p1": 40}


def test_locked_database_gives_a_clear_message_and_keeps_decisions(tmp_path, monkeypatch):
    import puaudit.review.store as store_mod

    monkeypatch.setattr(store_mod, "BUSY_TIMEOUT_S", 0.2)
    url = _url(tmp_path)
    s = ReviewStore(url)
    s.add("k1", "A", "alice")
    other = sqlite3.connect(tmp_path / "review.sqlite", timeout=0.1, isolation_level=None)
    other.execute("BEGIN EXCLUSIVE")  # another program holds the write lock
    try:
        with pytest.raises(PUAuditError, match="is locked") as info:
            s.add("k2", "B", "alice")
        assert info.value.kind == "locked"
        assert "review.sqlite" in str(info.value)
    finally:
        other.execute("ROLLBACK")
        other.close()
    s.add("k2", "B", "alice")  # the lock is gone: saving works again
    assert ReviewStore(url).decisions()["row_key"].tolist() == ["k1", "k2"]


def test_read_only_database_reads_but_refuses_writes_clearly(tmp_path):
    url = _url(tmp_path)
    s = ReviewStore(url)
    s.add("k1", "A", "alice")
    s.dispose()
    ro = ReviewStore(f"sqlite:///file:{tmp_path / 'review.sqlite'}?mode=ro&uri=true")
    assert ro.decisions()["row_key"].tolist() == ["k1"]
    with pytest.raises(PUAuditError, match="read-only") as info:
        ro.add("k2", "A", "alice")
    assert info.value.kind == "read-only"
    assert ReviewStore(url).decisions()["row_key"].tolist() == ["k1"]


_READ_ONLY_CHECK = """
import sys
from puaudit.errors import PUAuditError
from puaudit.review.store import ReviewStore
s = ReviewStore(sys.argv[1])
assert s.decisions()["row_key"].tolist() == ["k1"]
try:
    s.add("k2", "A", "alice")
except PUAuditError as exc:
    print("REFUSED", exc.kind, exc)
"""


def test_read_only_file_permissions():
    # root writes to read-only files anyway: as root the check runs without the capability that
    # allows it (CAP_DAC_OVERRIDE, dropped by util-linux's setpriv)
    prefix = []
    if os.geteuid() == 0:
        if shutil.which("setpriv") is None:
            pytest.skip("running as root without setpriv to drop CAP_DAC_OVERRIDE")
        prefix = ["setpriv", "--bounding-set", "-dac_override", "--inh-caps", "-dac_override"]
    folder = Path(tempfile.mkdtemp(prefix="puaudit-ro-"))
    try:
        os.chmod(folder, 0o755)
        url = _url(folder)
        ReviewStore(url).add("k1", "A", "alice")
        os.chmod(folder / "review.sqlite", 0o444)
        os.chmod(folder, 0o555)
        proc = subprocess.run([*prefix, sys.executable, "-c", _READ_ONLY_CHECK, url],
                              capture_output=True, text=True, cwd=ROOT, timeout=120,
                              env={**os.environ, "PYTHONPATH": str(ROOT), "HOME": str(folder)})
        assert proc.returncode == 0, proc.stderr
        assert "REFUSED" in proc.stdout and ("read-only" in proc.stdout
                                             or "cannot be opened" in proc.stdout), proc.stdout
        assert ReviewStore(url).decisions()["row_key"].tolist() == ["k1"]
    finally:
        os.chmod(folder, 0o755)
        shutil.rmtree(folder, ignore_errors=True)


def test_corrupt_file_is_named_and_left_untouched(tmp_path):
    path = tmp_path / "review.sqlite"
    junk = b"these are not the decisions you are looking for\n" * 200
    path.write_bytes(junk)
    with pytest.raises(PUAuditError, match="not a valid SQLite database") as info:
        ReviewStore(f"sqlite:///{path}")
    assert info.value.kind == "corrupt" and str(path) in str(info.value)
    assert path.read_bytes() == junk  # nothing overwritten


def test_damaged_after_decisions_were_made(tmp_path):
    """A file damaged in place: the store says so; the decisions that were exported first are
    the ones an operator imports into a new file."""
    url = _url(tmp_path)
    s = ReviewStore(url)
    s.add("k1", "A", "alice")
    saved = s.decisions()
    s.dispose()
    path = tmp_path / "review.sqlite"
    data = bytearray(path.read_bytes())
    data[:16] = b"NOT-SQLITE-FILE!"  # the header is gone
    path.write_bytes(bytes(data))
    with pytest.raises(PUAuditError, match="not a valid SQLite database"):
        ReviewStore(url).decisions()
    fresh = ReviewStore(_url(tmp_path, "new.sqlite"))
    assert fresh.add_many(saved.to_dict(orient="records")) == 1


def test_bad_url_is_a_clear_error():
    with pytest.raises(PUAuditError, match="not a valid SQLAlchemy URL"):
        ReviewStore("not a url at all")


def test_many_keys_are_read_in_one_scan(tmp_path):
    s = ReviewStore(_url(tmp_path))
    s.add_many([{"row_key": f"k{i}", "verdict": "A", "reviewer": "r"} for i in range(10)])
    keys = [f"x{i}" for i in range(2500)] + ["k3", "k7"]
    assert sorted(s.decisions(keys)["row_key"]) == ["k3", "k7"]
    assert sorted(s.decisions(keys[-2:])["row_key"]) == ["k3", "k7"]
