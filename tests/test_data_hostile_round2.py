"""Hostile inputs, second round (library and CLI; docs/hostile_inputs.md).

Every input is generated here, small where the effect scales; peak memory is measured in a
subprocess (``ru_maxrss``) so that one test's allocations do not hide another's.
"""

from __future__ import annotations

import gzip
import io
import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from puaudit.embed.pairs import PairEmbeddings
from puaudit.audit.estimator import PUAudit
from puaudit.audit.splits import prepare_split
from puaudit.cli.commands import main
from puaudit.data.writers import check_output_path, table_to_bytes, write_bytes_atomic, write_table
from puaudit.data.embeddings_npz import read_embeddings_npz
from puaudit.data.io import read_table
from puaudit.data.schema import load_comparisons
from puaudit.errors import PUAuditError
from tests.make_hostile_files import HEADER, comparison_rows

ROOT = Path(__file__).resolve().parents[1]


def _csv(rows, header=HEADER) -> bytes:
    buf = io.StringIO()
    pd.DataFrame(rows, columns=header).to_csv(buf, index=False)
    return buf.getvalue().encode()


def _peak_mb(code: str, *, timeout: int = 300) -> dict:
    """Run ``code`` in a fresh interpreter; it fills the dict ``OUT``, printed as JSON with
    ``peak_mb`` (peak RSS) and ``base_mb`` (RSS when ``reset()`` was last called) added.

    Peak RSS is the kernel's VmHWM, which ``reset()`` sets back to the current RSS (so that
    generating the input is not counted); ``ru_maxrss`` would also count the parent at fork.
    """
    script = textwrap.dedent("""
        import json, sys
        import numpy, pandas, pyarrow, pyarrow.parquet
        import puaudit.data.io
        def _status(key):
            with open("/proc/self/status") as fh:
                return next(int(l.split()[1]) / 1024 for l in fh if l.startswith(key))
        def peak():
            return _status("VmHWM:")
        def reset():
            global BASE
            with open("/proc/self/clear_refs", "w") as fh:
                fh.write("5")  # reset VmHWM to the current RSS
            BASE = _status("VmRSS:")
        reset()
    """) + textwrap.dedent(code) + textwrap.dedent("""
        OUT["peak_mb"], OUT["base_mb"] = peak(), BASE
        print(json.dumps(OUT))
    """)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=timeout, cwd=ROOT, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


# -- 2. decompression and parsing memory ------------------------------------------------------
def test_gzip_bomb_stops_at_the_limit_with_a_clear_message():
    bomb = gzip.compress(b"prompt,response_a,response_b,judge\n" + b"p,a,b,A\n" * 2_000_000)
    assert len(bomb) < 100_000  # ~16 MB of rows
    with pytest.raises(PUAuditError, match=r"expands to more than 1 MB when decompressed") as ei:
        read_table(bomb, name="bomb.csv.gz", max_bytes=2**20, limit_hint="Use the CLI.")
    assert "bomb.csv.gz" in str(ei.value) and str(ei.value).endswith("Use the CLI.")
    with pytest.raises(PUAuditError, match="over the 1 MB limit"):
        read_table(b"a,b\n" + b"x,y\n" * 300_000, name="plain.csv", max_bytes=2**20)


def test_row_and_column_limits_are_checked_while_parsing():
    data = _csv(comparison_rows(30_000))
    with pytest.raises(PUAuditError, match="more than 10,000 data rows"):
        read_table(data, name="t.csv", max_rows=10_000)
    assert len(read_table(data, name="t.csv", max_rows=30_000)) == 30_000
    jl = "".join(json.dumps(dict(zip(HEADER, r))) + "\n" for r in comparison_rows(20_000))
    with pytest.raises(PUAuditError, match="more than 10,000 data rows"):
        read_table(jl.encode(), name="t.jsonl", max_rows=10_000)
    wide = ",".join(f"c{i}" for i in range(50)) + "\n" + ",".join("x" * 50) + "\n"
    with pytest.raises(PUAuditError, match="has 50 columns, over the limit of 40"):
        read_table(wide.encode(), name="w.csv", max_columns=40)
    with pytest.raises(PUAuditError, match="has more than 40 columns, over the limit of 40"):
        read_table(json.dumps({f"c{i}": 1 for i in range(50)}).encode(), name="w.jsonl",
                   max_columns=40)


def test_parquet_limits_and_a_repeated_value_bomb():
    # one 100 KB string repeated 2,000 times: ~200 MB decoded from a dictionary-encoded file
    t = pa.table({"prompt": pa.array(["x" * 100_000] * 2_000), "judge": ["A"] * 2_000})
    buf = io.BytesIO()
    pq.write_table(t, buf)
    assert len(buf.getvalue()) < 1_000_000
    with pytest.raises(PUAuditError, match="more than 50 MB of data once decoded"):
        read_table(buf.getvalue(), name="bomb.parquet", max_bytes=50 * 2**20)
    with pytest.raises(PUAuditError, match="more than 1,000 data rows"):
        read_table(buf.getvalue(), name="bomb.parquet", max_rows=1_000)
    small = read_table(buf.getvalue(), name="ok.parquet", max_bytes=400 * 2**20)
    assert small.shape == (2_000, 2) and small["prompt"].str.len().eq(100_000).all()


@pytest.mark.slow
def test_peak_memory_of_the_worst_reads_is_a_small_multiple_of_the_data():
    """Short rows (the costliest per byte), a gzip bomb and a header-only wide line, each in a
    fresh interpreter. Before this round the short-row file peaked at ~40x its decompressed size."""
    short = _peak_mb("""
        import gzip, io
        from puaudit.data.io import read_table
        rows = "".join(f"p{i % 50},a{i % 7},b,A,{'B' if i % 7 == 0 else ''}\\n"
                       for i in range(1_000_000))
        raw = ("prompt,response_a,response_b,judge_winner,human_winner\\n" + rows).encode()
        gz = gzip.compress(raw, 6)
        del rows
        OUT = {"mb": len(raw) / 2**20}
        del raw
        reset()
        df = read_table(gz, name="short.csv.gz")
        OUT["rows"] = len(df)
    """)
    assert short["rows"] == 1_000_000
    assert short["peak_mb"] - short["base_mb"] < 10 * short["mb"] + 40, short
    bomb = _peak_mb("""
        import gzip
        from puaudit.errors import PUAuditError
        from puaudit.data.io import read_table
        import zlib
        c = zlib.compressobj(9, zlib.DEFLATED, 31)
        block = b"0,0\\n" * 1_000_000
        gz = c.compress(b"a,b\\n") + b"".join(c.compress(block) for _ in range(100)) + c.flush()
        OUT = {"gz_kb": len(gz) / 1024}  # 400 MB of rows
        reset()
        try:
            read_table(gz, name="bomb.csv.gz", max_bytes=50 * 2**20)
        except PUAuditError as exc:
            OUT["msg"] = str(exc)
    """)
    assert "expands to more than 50 MB" in bomb["msg"]
    assert bomb["peak_mb"] - bomb["base_mb"] < 200, bomb
    wide = _peak_mb("""
        import time
        from puaudit.errors import PUAuditError
        from puaudit.data.io import read_table
        header = ",".join(f"column_{i}" for i in range(2_000_000)).encode() + b"\\n"
        OUT = {"mb": len(header) / 2**20}
        reset()
        t = time.perf_counter()
        for limit in (30_000, 3_000_000):  # over the column limit; then header-only
            try:
                read_table(header, name="wide.csv", max_columns=limit)
            except PUAuditError as exc:
                OUT[str(limit)] = str(exc)
        OUT["s"] = time.perf_counter() - t
    """)
    assert "has 2,000,000 columns, over the limit of 30,000" in wide["30000"]
    assert "has a header but no data rows" in wide["3000000"]
    assert wide["s"] < 60 and wide["peak_mb"] - wide["base_mb"] < 10 * wide["mb"] + 40, wide
    print({k: {m: round(v, 1) for m, v in d.items() if isinstance(v, float)}
           for k, d in (("short", short), ("bomb", bomb), ("wide", wide))})


# -- 3. wide header-only files ----------------------------------------------------------------
def test_wide_header_only_file_fails_fast_without_building_a_frame():
    header = ",".join(f"c{i}" for i in range(25_000)) + "\n"
    t = time.perf_counter()
    with pytest.raises(PUAuditError, match="has a header but no data rows"):
        read_table(header.encode(), name="wide.csv")
    assert time.perf_counter() - t < 5
    with pytest.raises(PUAuditError, match="over the limit of 30,000"):
        read_table((",".join(f"c{i}" for i in range(40_000)) + "\n").encode(), name="w.csv")


# -- 5. integers stay integers ----------------------------------------------------------------
BIG = 1234567890123456789


def test_jsonl_integer_columns_with_nulls_keep_every_value():
    data = (f'{{"id": 1, "big": {BIG}, "huge": {2**70}}}\n{{"id": null, "big": null}}\n'
            f'{{"id": 3, "big": 2, "huge": 5}}\n').encode()
    df = read_table(data, name="t.jsonl")
    assert str(df["id"].dtype) == "Int64" and str(df["big"].dtype) == "Int64"
    assert df["big"].tolist()[0] == BIG and df["huge"].tolist() == [2**70, None, 5]
    for fmt in ("jsonl", "csv", "parquet"):
        if fmt == "parquet":
            df = df.drop(columns="huge")  # beyond 64 bits: see the export test
        out = table_to_bytes(df, fmt)
        back = read_table(out, fmt=fmt)
        if fmt == "csv":
            assert back["big"].tolist() == [str(BIG), "", "2"]
        else:
            assert back["big"].tolist()[0] == BIG and pd.isna(back["big"].tolist()[1])
    line = table_to_bytes(read_table(data, name="t.jsonl"), "jsonl").decode().splitlines()[0]
    assert line == f'{{"id": 1, "big": {BIG}, "huge": {2**70}}}'


def test_parquet_integer_columns_with_nulls_keep_every_value():
    t = pa.table({"x": pa.array([1, None, BIG], pa.int64()),
                  "u": pa.array([2**64 - 1, None, 0], pa.uint64()), "s": ["a", "b", None]})
    buf = io.BytesIO()
    pq.write_table(t, buf)
    df = read_table(buf.getvalue(), name="t.parquet")
    assert df["x"].tolist()[0::2] == [1, BIG] and df["u"].tolist()[0] == 2**64 - 1
    assert b'"x": 1234567890123456789' in table_to_bytes(df, "jsonl")
    back = read_table(table_to_bytes(df, "parquet"), fmt="parquet")
    assert back["x"].tolist()[2] == BIG and back["u"].tolist()[0] == 2**64 - 1


# -- 7. exports of values the reader accepts --------------------------------------------------
def test_infinities_round_trip_through_jsonl():
    df = read_table(b'{"a": 1e400, "b": "Infinity"}\n{"a": -1e400, "b": "x"}\n{"a": 1.5}\n',
                    name="t.jsonl")
    out = table_to_bytes(df, "jsonl")
    assert out.splitlines()[0] == b'{"a": 1e400, "b": "Infinity"}'  # the string stays a string
    back = read_table(out, fmt="jsonl")
    assert back["a"].tolist()[:2] == [float("inf"), float("-inf")]
    t = pa.table({"f": [-float("inf"), 1.0]})
    buf = io.BytesIO()
    pq.write_table(t, buf)
    assert b'{"f": -1e400}' in table_to_bytes(read_table(buf.getvalue()), "jsonl")


def test_deeply_nested_json_is_exported():
    nested: dict = {"leaf": 1}
    for i in range(60):
        nested = {f"k{i}": nested}
    deep = '{"a": ' + "[" * 900 + "1" + "]" * 900 + ', "b": ' + json.dumps(nested) + "}\n"
    df = read_table(deep.encode(), name="deep.jsonl")
    back = read_table(table_to_bytes(df, "jsonl"), fmt="jsonl")
    assert back["a"].tolist() == df["a"].tolist() and back["b"].tolist() == df["b"].tolist()


def test_parquet_map_columns_are_exported_again():
    t = pa.table({"m": pa.array([[("k", 1)], None, [("j", 2), ("k", 3)]],
                                pa.map_(pa.string(), pa.int64())), "n": [1, 2, 3]})
    buf = io.BytesIO()
    pq.write_table(t, buf)
    df = read_table(buf.getvalue())
    back = read_table(table_to_bytes(df, "parquet"))
    assert back["m"].tolist() == df["m"].tolist()
    assert json.loads(table_to_bytes(df, "jsonl").splitlines()[2]) == {"m": [["j", 2], ["k", 3]],
                                                                        "n": 3}


def test_integers_beyond_64_bits_get_a_parquet_message_naming_the_cell():
    df = read_table(f'{{"id": 1}}\n{{"id": {2**70}}}\n'.encode(), name="t.jsonl")
    with pytest.raises(PUAuditError, match=r"column 'id', row 2 .* beyond the 64-bit range") as ei:
        table_to_bytes(df, "parquet")
    assert "JSONL or CSV" in str(ei.value) and ei.value.row == 2
    assert read_table(table_to_bytes(df, "jsonl"), fmt="jsonl")["id"].tolist() == [1, 2**70]


# -- 9. separator sniffing --------------------------------------------------------------------
def test_comma_csv_whose_header_has_more_semicolons_is_read_with_commas():
    text = "prompt;text,response_a;x;y,response_b,judge_winner\n" + "".join(
        f"p{i},a{i},b{i},A\n" for i in range(5))
    df = read_table(text.encode(), name="t.csv")
    assert list(df.columns) == ["prompt;text", "response_a;x;y", "response_b", "judge_winner"]
    # a first cell longer than the sniffed sample, full of semicolons and newlines
    big = '"' + "x, y; z\n" * 200_000 + '"'
    df = read_table(f"prompt,response_a,response_b,judge\n{big},a,b,A\np,a,b,B\n".encode(),
                    name="big.csv")
    assert df.shape == (2, 4) and df["judge"].tolist() == ["A", "B"]
    semi = "prompt;response_a;response_b;judge\n" + "".join(f"p,{i};a;b;A\n" for i in range(5))
    assert list(read_table(semi.encode(), name="s.csv").columns) == [
        "prompt", "response_a", "response_b", "judge"]


# -- 4 and 8. outputs ------------------------------------------------------------------------
@pytest.fixture()
def data_dir(tmp_path):
    rows = comparison_rows(60, annotated=0.6)
    (tmp_path / "in.csv").write_bytes(_csv(rows))
    rng = np.random.default_rng(0)
    np.savez(tmp_path / "emb.npz", e_a=rng.normal(size=(60, 8)).astype("f4"),
             e_b=rng.normal(size=(60, 8)).astype("f4"))
    return tmp_path


def _run(argv, capsys):
    rc = main([str(a) for a in argv])
    return rc, capsys.readouterr().err


@pytest.mark.parametrize("how", ["same", "relative", "symlink", "hardlink"])
def test_audit_refuses_to_overwrite_its_input_before_any_work(data_dir, capsys, monkeypatch, how):
    src = data_dir / "in.csv"
    before = src.read_bytes()
    target = {"same": src, "relative": data_dir / "sub" / ".." / "in.csv",
              "symlink": data_dir / "link.csv", "hardlink": data_dir / "hard.csv"}[how]
    if how == "symlink":
        target.symlink_to(src)
    elif how == "hardlink":
        os.link(src, target)
    elif how == "relative":
        (data_dir / "sub").mkdir()
    import puaudit.cli.audit as cli

    monkeypatch.setattr(cli, "load_labelled", lambda args: pytest.fail("work started"))
    rc, err = _run(["audit", src, "-o", target], capsys)
    assert rc == 2 and "is the same file as the input" in err and "Traceback" not in err
    assert src.read_bytes() == before


def test_manifest_and_annotators_outputs_never_overwrite_an_input(data_dir, capsys):
    src, emb = data_dir / "in.csv", data_dir / "emb.npz"
    before = src.read_bytes()
    for argv, phrase in (
            (["audit", src, "-o", data_dir / "out.csv", "--manifest", src], "same file as the input"),
            (["audit", src, "-o", data_dir / "out.csv", "--embeddings", emb, "--manifest", emb],
             "same file as the input"),
            (["audit", src, "-o", data_dir / "out.csv", "--manifest", data_dir / "out.csv"],
             "same file as the output"),
            (["annotators", src, "-o", src], "same file as the input"),
            (["trustjudge", src, "--violations-out", src], "same file as the input"),
            (["models", src, "-o", src], "same file as the input"),
            (["models", src, "--audit-export", emb, "-o", emb], "same file as the input")):
        rc, err = _run(argv, capsys)
        assert rc == 2 and phrase in err, (argv, err)
    assert src.read_bytes() == before and not (data_dir / "out.csv").exists()


def test_output_paths_are_checked_before_the_audit(data_dir, capsys, monkeypatch):
    import puaudit.cli.audit as cli

    monkeypatch.setattr(cli, "load_labelled", lambda args: pytest.fail("work started"))
    src = data_dir / "in.csv"
    (data_dir / "folder").mkdir()
    cases = (
        (["-o", data_dir / "folder"], "is a folder"),
        (["-o", data_dir / "out.csv", "--manifest", data_dir / "folder"], "is a folder"),
        (["-o", src / "x.csv"], "is a file, not a folder"),
        (["-o", data_dir / "out.xlsx"], "Cannot tell the output (-o) format"),
        (["-o", "/proc/puaudit-out.csv"], "is not writable"),
    )
    for extra, phrase in cases:
        rc, err = _run(["audit", src, *extra], capsys)
        assert rc == 2 and phrase in err and "unexpected" not in err, (extra, err)
    rc, err = _run(["demo", "-o", data_dir / "folder"], capsys)
    assert rc == 2 and "is a folder" in err


def test_outputs_are_written_atomically(data_dir, monkeypatch):
    dest = data_dir / "out.csv"
    dest.write_text("old content")
    os.chmod(dest, 0o640)
    df = pd.DataFrame({"a": ["1", "2"]})

    def crash(src, dst):
        raise OSError("disk died mid-rename")

    monkeypatch.setattr(os, "replace", crash)
    with pytest.raises(OSError):
        write_table(df, dest)
    assert dest.read_text() == "old content"
    assert [p.name for p in data_dir.iterdir() if p.name.startswith(".")] == []  # no temp left
    monkeypatch.undo()
    write_table(df, dest)
    assert dest.read_text() == "a\n1\n2\n" and (dest.stat().st_mode & 0o777) == 0o640
    link = data_dir / "link.csv"
    link.symlink_to(dest)
    write_bytes_atomic(link, b"through the link\n")
    assert link.is_symlink() and dest.read_bytes() == b"through the link\n"


def test_audit_writes_output_and_manifest(data_dir, capsys):
    (data_dir / "new").mkdir(exist_ok=True)
    rc, err = _run(["audit", data_dir / "in.csv", "-o", data_dir / "new" / "out.jsonl",
                    "--embeddings", data_dir / "emb.npz", "--manifest", data_dir / "m.json"],
                   capsys)
    assert rc == 0, err
    assert len(read_table(data_dir / "new" / "out.jsonl")) == 60
    assert json.loads((data_dir / "m.json").read_text())["input"]["n_rows"] == 60


def test_check_output_path_refuses_missing_folders(tmp_path):
    with pytest.raises(PUAuditError, match="does not exist. Create it first"):
        check_output_path(tmp_path / "a" / "b" / "out.parquet", inputs=[None])
    assert not (tmp_path / "a").exists()  # nothing is created by the check
    (tmp_path / "a").mkdir()
    assert check_output_path(tmp_path / "a" / "out.parquet") == tmp_path / "a" / "out.parquet"


# -- 8. embeddings files ----------------------------------------------------------------------
def test_npz_checks_before_loading(tmp_path, capsys, data_dir):
    n = 60
    np.save(tmp_path / "one.npy", np.zeros((n, 8)))
    os.rename(tmp_path / "one.npy", tmp_path / "one.npz")
    with pytest.raises(PUAuditError, match="single .npy array, not an .npz archive"):
        read_embeddings_npz(tmp_path / "one.npz", n_rows=n)
    # a small archive whose arrays would take 2 x 60 x 60,000 x 8 bytes = 58 MB
    np.savez_compressed(tmp_path / "bomb.npz", e_a=np.zeros((n, 60_000)), e_b=np.zeros((n, 60_000)))
    assert (tmp_path / "bomb.npz").stat().st_size < 200_000
    with pytest.raises(PUAuditError, match=r"would take \d+ MB once loaded .* over the 10 MB"):
        read_embeddings_npz(tmp_path / "bomb.npz", n_rows=n, max_bytes=10 * 2**20)
    np.savez(tmp_path / "shape.npz", e_a=np.zeros((n + 1, 8)), e_b=np.zeros((n + 1, 8)))
    with pytest.raises(PUAuditError, match=r"has shape \(61, 8\) but the table has 60 rows"):
        read_embeddings_npz(tmp_path / "shape.npz", n_rows=n)
    np.savez(tmp_path / "obj.npz", e_a=np.array([["x"] * 8] * n), e_b=np.zeros((n, 8)))
    with pytest.raises(PUAuditError, match="not numbers"):
        read_embeddings_npz(tmp_path / "obj.npz", n_rows=n)
    np.savez(tmp_path / "missing.npz", e_a=np.zeros((n, 8)))
    with pytest.raises(PUAuditError, match="has no array 'e_b'"):
        read_embeddings_npz(tmp_path / "missing.npz", n_rows=n)
    rc, err = _run(["audit", data_dir / "in.csv", "-o", tmp_path / "o.csv", "--embeddings",
                    tmp_path / "one.npz"], capsys)
    assert rc == 2 and "single .npy array" in err and "unexpected" not in err


# -- 9. misleading messages ------------------------------------------------------------------
def test_zero_identical_and_nan_embeddings_say_so(tmp_path, capsys, data_dir):
    n = 60
    table = load_comparisons(read_table(data_dir / "in.csv"))
    zero = PairEmbeddings(np.zeros((n, 8), np.float32), np.zeros((n, 8), np.float32))
    with pytest.raises(PUAuditError, match="embeddings are all zero") as ei:
        prepare_split(table, zero)
    assert "annotated rows" not in str(ei.value)
    same = np.random.default_rng(0).normal(size=(n, 8)).astype(np.float32)
    with pytest.raises(PUAuditError, match="identical on every row"):
        PUAudit().fit(table, PairEmbeddings(same, same.copy()))
    nan = same.copy()
    nan[4, 1] = np.nan
    with pytest.raises(PUAuditError, match=r"embeddings of row 5 hold NaN") as ei:
        prepare_split(table, PairEmbeddings(nan, same[::-1].copy()))
    assert ei.value.row == 5 and "zu" not in str(ei.value)
    np.savez(tmp_path / "zero.npz", e_a=np.zeros((n, 8)), e_b=np.zeros((n, 8)))
    np.savez(tmp_path / "nan.npz", e_a=nan, e_b=same)
    for name, phrase in (("zero.npz", "every embedding is zero"),
                         ("nan.npz", "'e_a' row 5 (table row 5) holds NaN")):
        rc, err = _run(["audit", data_dir / "in.csv", "-o", tmp_path / "o.csv", "--embeddings",
                        tmp_path / name], capsys)
        assert rc == 2 and phrase in err, err


def test_out_of_memory_advice_names_real_options(data_dir, capsys, monkeypatch):
    import puaudit.cli.audit as audit
    import puaudit.cli.commands as cli

    def oom(args):
        raise MemoryError

    monkeypatch.setattr(audit, "load_labelled", oom)
    rc, err = _run(["audit", data_dir / "in.csv", "-o", data_dir / "o.csv"], capsys)
    assert rc == 2 and "out of memory" in err and "--pooled off" not in err
    audit = cli.build_parser()._subparsers._group_actions[0].choices["audit"]
    options = {a for act in audit._actions for a in act.option_strings}
    for flag in ("--scorer", "--device", "--embeddings"):
        assert flag in err and flag in options
