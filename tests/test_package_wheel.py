"""The wheel stands alone: built from ``pyproject.toml`` (no network, no build isolation),
installed with ``--no-deps --target`` into a temporary folder, and run from another working
directory with only that folder on ``PYTHONPATH`` (the dependencies come from site-packages).
``puaudit audit`` and ``puaudit report`` work there, and the report's numbers are ``audit
--json``'s. Embeddings come from the hashing test encoder, written to an .npz (no model runs)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import zipfile

import numpy as np
import pandas as pd
import pytest

from puaudit.data.demo import generate_demo
from puaudit.embed.hashing import HashingEncoder
from tests.conftest import ROOT

pytestmark = pytest.mark.slow

LINK_OUT = re.compile(r"""(src|href)\s*=\s*["']?https?:""", re.IGNORECASE)
# a light scorer and two seeded splits: the audit takes seconds
AUDIT = ["--scorer", "centroid", "--spread-seeds", "2", "--seed", "3"]
N_ROWS = 300


def _last_json(out: str) -> dict:
    return json.loads(out.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """(target folder, wheel path): the wheel built from a copy of what pyproject packages."""
    d = tmp_path_factory.mktemp("wheel")
    src = d / "src"
    src.mkdir()
    for name in ("pyproject.toml", "requirements.txt", "README.md"):
        shutil.copy(ROOT / name, src / name)
    shutil.copytree(ROOT / "puaudit", src / "puaudit",
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    build = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index",
         "-q", "-w", str(d / "dist"), str(src)], capture_output=True, text=True, timeout=600)
    assert build.returncode == 0, build.stderr
    (wheel,) = (d / "dist").glob("puaudit-*.whl")
    target = d / "site"
    install = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-deps", "--no-index", "-q", "--target",
         str(target), str(wheel)], capture_output=True, text=True, timeout=600)
    assert install.returncode == 0, install.stderr
    return target, wheel


@pytest.fixture(scope="module")
def elsewhere(tmp_path_factory):
    """A working directory outside the checkout holding a generated table and its embeddings."""
    d = tmp_path_factory.mktemp("elsewhere")
    df = generate_demo(n_rows=N_ROWS, random_state=0)
    df.to_csv(d / "demo.csv", index=False)
    enc = HashingEncoder()
    np.savez(d / "emb.npz", e_a=enc.encode(df["prompt"] + " " + df["response_a"]),
             e_b=enc.encode(df["prompt"] + " " + df["response_b"]))
    return d


def _run(target, cwd, *args):
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PYTHONPATH"] = str(target)
    return subprocess.run(list(args), cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=600)


def test_the_wheel_holds_the_package_and_nothing_of_the_dashboard(installed):
    _, wheel = installed
    names = set(zipfile.ZipFile(wheel).namelist())
    wanted = {p.relative_to(ROOT).as_posix() for p in (ROOT / "puaudit").rglob("*.py")}
    assert wanted <= names
    assert "puaudit/report/html.py" in names and "puaudit/report/figures/m_curve.py" in names
    assert not [n for n in names if n.startswith(("components/", "pages/", "tests/", "app.py"))]


def test_installed_alone_it_imports_from_the_target(installed, elsewhere):
    target, _ = installed
    code = ("import importlib.util, sys, puaudit, puaudit.report.html, puaudit.cli.commands; "
            "print(puaudit.__file__); print(importlib.util.find_spec('components')); "
            "print('streamlit' in sys.modules)")
    out = _run(target, elsewhere, sys.executable, "-c", code)
    assert out.returncode == 0, out.stderr
    where, components, streamlit = out.stdout.split()
    assert where.startswith(str(target))  # not the checkout, nor an editable install of it
    assert components == "None" and streamlit == "False"


def test_audit_and_report_run_outside_the_checkout(installed, elsewhere):
    target, _ = installed
    d = elsewhere
    audit = _run(target, d, sys.executable, "-m", "puaudit", "audit", "demo.csv", "-o",
                 "out.csv", "--embeddings", "emb.npz", "--json", *AUDIT)
    assert audit.returncode == 0, audit.stderr
    numbers = _last_json(audit.stdout)
    exported = pd.read_csv(d / "out.csv")
    assert len(exported) == N_ROWS and "puaudit_adjusted" in exported.columns
    # the installed console script, as a user types it
    report = _run(target, d, str(target / "bin" / "puaudit"), "report", "demo.csv", "-o",
                  "audit.html", "--embeddings", "emb.npz", "--json", *AUDIT)
    assert report.returncode == 0, report.stderr
    card = _last_json(report.stdout)
    assert card["audit"] == numbers  # every number of `audit --json`
    page = (d / "audit.html").read_text(encoding="utf-8")
    assert len(page.encode("utf-8")) > 1_000_000  # plotly.js inlined from the installed plotly
    assert LINK_OUT.search(page) is None and "<script src" not in page
    assert page.count("Plotly.newPlot(") >= 6
    assert f"{numbers['cons_orig']:.1%}" in page and f"{numbers['cons_adj']:.1%}" in page
    assert "How many verdicts are reversed as m varies" in page
