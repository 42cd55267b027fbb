"""The code stays readable: no module in ``puaudit/``, ``components/`` or ``pages/`` over 600
lines, no function outside the tests over 80 (docstrings count), so that each module holds one
thing and each function one step."""

from __future__ import annotations

import ast

from tests.conftest import ROOT

MAX_FILE_LINES = 600
MAX_FUNCTION_LINES = 80


def package_files() -> list:
    files = sorted((ROOT / "puaudit").rglob("*.py"))
    assert len(files) > 50  # the walk found the package, not an empty folder
    dashboard = sorted((ROOT / "components").glob("*.py")) + sorted((ROOT / "pages").glob("*.py"))
    assert len(dashboard) > 15
    return files + dashboard


def test_no_module_over_600_lines():
    long = {str(p.relative_to(ROOT)): n for p in package_files()
            if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_FILE_LINES}
    assert long == {}, f"split these modules by what they hold: {long}"


def test_no_function_over_80_lines():
    # functions outside the tests: the benchmarks and the entry script too
    scripts = sorted((ROOT / "bench").glob("*.py")) + [ROOT / "app.py"]
    long = {}
    for p in package_files() + scripts:
        rel = p.relative_to(ROOT).as_posix()
        for node in ast.walk(ast.parse(p.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                n = node.end_lineno - node.lineno + 1
                if n > MAX_FUNCTION_LINES:
                    long[f"{rel}:{node.lineno} {node.name}"] = n
    assert long == {}, f"cut these functions into named steps: {long}"
