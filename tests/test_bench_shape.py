"""The benchmarks are one package run as ``python -m bench.NAME``: none edits ``sys.path`` and
what they share lives once, in bench/_support.py."""

import ast
import subprocess
import sys

import pytest

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


@pytest.mark.slow
def test_the_slider_benchmark_runs_on_a_generated_table():
    """``bench.rerun --tables generated`` (the opt-in large table, here 300 rows): the same
    figures as for the real tables, the process's peak memory, and ``ratio=`` last."""
    out = subprocess.run([sys.executable, "-m", "bench.rerun", "--tables", "generated",
                          "--rows", "300"], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    lines = out.stdout.strip().splitlines()
    assert lines[0].startswith("generated: 300 rows")
    for figure in ("first audit", "m step (median of 3)", "p_ratio step, no precompute",
                   "p_ratio step, precomputed", "Certify", "peak resident memory"):
        assert any(figure in line for line in lines), figure
    assert lines[-1].startswith("ratio=") and float(lines[-1][6:]) > 0


def test_the_generated_table_has_precomputed_embeddings_of_every_row():
    from bench.rerun import GENERATED_DIM, generated_table

    table, emb, _ = generated_table(240)
    assert len(table) == len(emb) == 240 and emb.dim == GENERATED_DIM
    again, emb2, _ = generated_table(240)  # seeded: the same table and vectors every run
    assert list(again.prompt) == list(table.prompt)
    assert (emb2.vectors == emb.vectors).all()
