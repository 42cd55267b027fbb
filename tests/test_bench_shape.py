"""The benchmarks are one package run as ``python -m bench.NAME``: none edits ``sys.path`` and
what they share lives once, in bench/_support.py."""

import ast
import subprocess
import sys

from tests.conftest import ROOT

SCRIPTS = sorted(p for p in (ROOT / "bench").glob("*.py") if not p.stem.startswith("_"))


def test_no_benchmark_edits_sys_path():
    assert len(SCRIPTS) >= 16
    assert [p.name for p in SCRIPTS if "sys.path" in p.read_text(encoding="utf-8")] == []


def test_no_helper_is_defined_twice():
    """A function defined in bench/_support.py is imported from there, not written again."""
    shared = {n.name for n in ast.parse((ROOT / "bench" / "_support.py").read_text()).body
              if isinstance(n, ast.FunctionDef)}
    again = {f"{p.name}:{n.name}" for p in SCRIPTS for n in ast.walk(ast.parse(p.read_text()))
             if isinstance(n, ast.FunctionDef) and (n.name in shared or n.name == "_spawn")}
    assert again == set()


def test_a_benchmark_runs_as_a_module_from_the_repository_root():
    out = subprocess.run([sys.executable, "-m", "bench.partial_ot", "--help"], cwd=ROOT,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and "POT" in out.stdout
