"""The command line's row limit (puaudit/cli/table_input.py): a file of tiny rows cannot take a run
past a few GB, and the limit is raised on request."""

import argparse
import gzip
import json
import subprocess
import sys

import numpy as np
import pytest

from puaudit.cli.commands import main
from puaudit.cli.table_input import DEFAULT_MAX_ROWS, max_rows_from
from puaudit.errors import PUAuditError
from tests.conftest import ROOT, planted_set


def _args(value=None):
    return argparse.Namespace(max_rows=value)


def test_limit_from_flag_environment_and_default(monkeypatch):
    monkeypatch.delenv("PUAUDIT_MAX_ROWS", raising=False)
    assert max_rows_from(_args()) == DEFAULT_MAX_ROWS
    assert max_rows_from(_args("2_500_000")) == 2_500_000
    assert max_rows_from(_args("0")) is None  # 0 = no limit
    monkeypatch.setenv("PUAUDIT_MAX_ROWS", "1,500")
    assert max_rows_from(_args()) == 1500
    assert max_rows_from(_args("20")) == 20  # the flag wins over the environment


@pytest.mark.parametrize("bad, message", [
    ("-1", r"--max-rows must be 0 \(no limit\) or a positive number of rows; got -1"),
    ("many", r"--max-rows must be a whole number of rows \(0 = no limit\); got 'many'"),
    ("1.5", r"--max-rows must be a whole number of rows \(0 = no limit\); got '1.5'"),
])
def test_a_bad_row_limit_is_refused(bad, message):
    with pytest.raises(PUAuditError, match=message):
        max_rows_from(_args(bad))


@pytest.fixture(scope="module")
def planted_files(tmp_path_factory):
    d = tmp_path_factory.mktemp("limits")
    df, e_a, e_b, _ = planted_set(n=300)
    df.to_csv(d / "in.csv", index=False)
    np.savez(d / "emb.npz", e_a=e_a, e_b=e_b)
    return d


@pytest.mark.parametrize("command", ["audit", "evaluate", "annotators", "models"])
def test_every_reading_command_refuses_rows_over_the_limit(planted_files, command, capsys):
    d = planted_files
    extra = {"audit": ["-o", str(d / "out.csv"), "--embeddings", str(d / "emb.npz")],
             "evaluate": ["--embeddings", str(d / "emb.npz"), "--seeds", "1"]}.get(command, [])
    rc = main([command, str(d / "in.csv"), "--max-rows", "299", *extra])
    err = capsys.readouterr().err
    assert rc == 2 and "Traceback" not in err
    assert "in.csv" in err and "more than 299 data rows" in err and "--max-rows" in err
    assert not (d / "out.csv").exists()


def test_a_file_at_the_limit_is_audited(planted_files, capsys):
    d = planted_files
    rc = main(["audit", str(d / "in.csv"), "-o", str(d / "ok.csv"), "--embeddings",
               str(d / "emb.npz"), "--max-rows", "300", "--json"])
    assert rc == 0
    assert json.loads(capsys.readouterr().out.strip().splitlines()[-1])["n_rows"] == 300


@pytest.mark.slow
def test_a_gzip_of_tiny_rows_stays_within_3_gb_and_10x_its_size(tmp_path):
    # 200 MB of 8-byte rows (25 million) in a 0.6 MB gzip: the dashboard's upload limit, and the
    # costliest bytes per row there are. The CLI reads up to its default limit and stops.
    raw = b"prompt,response_a,response_b,judge\n" + b"x,y,z,A\n" * 25_000_000
    path = tmp_path / "tiny.csv.gz"
    path.write_bytes(gzip.compress(raw, compresslevel=1))
    size = len(raw)
    del raw
    code = ("import sys\n"
            "from puaudit.cli.commands import main\n"
            f"rc = main(['audit', {str(path)!r}, '-o', {str(tmp_path / 'o.csv')!r}])\n"
            # VmHWM, not ru_maxrss: Linux carries ru_maxrss over from the parent across exec
            "hwm = next(l.split()[1] for l in open('/proc/self/status') if l.startswith('VmHWM'))\n"
            "print('PEAK', hwm, file=sys.stderr)\n"
            "sys.exit(rc)\n")
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), "HOME": str(tmp_path)}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=tmp_path, env=env, timeout=600)
    assert proc.returncode == 2, proc.stderr
    assert f"more than {DEFAULT_MAX_ROWS:,} data rows" in proc.stderr
    assert "--max-rows" in proc.stderr and "Traceback" not in proc.stderr
    peak_mb = int(proc.stderr.split("PEAK")[1].split()[0]) / 1024
    print(f"peak {peak_mb:.0f} MB for {size / 2**20:.0f} MB of rows")
    assert peak_mb < 3 * 1024 and peak_mb * 2**20 < 10 * size, peak_mb
