"""The code stays readable: a module in ``puaudit/``, ``components/`` or ``pages/`` over 600
lines, or a function outside the tests over 80 (docstrings count), is *warned* about, never
failed: a module holds one concept whatever its length, and a concept is never split to meet a
line count. A long function is cut by naming its steps, not by scattering them."""

from __future__ import annotations

import ast
import warnings

from tests.conftest import ROOT

MAX_FILE_LINES = 600
MAX_FUNCTION_LINES = 80


def package_files() -> list:
    files = sorted((ROOT / "puaudit").rglob("*.py"))
    assert len(files) > 50  # the walk found the package, not an empty folder
    dashboard = sorted((ROOT / "components").glob("*.py")) + sorted((ROOT / "pages").glob("*.py"))
    assert len(dashboard) > 15
    return files + dashboard


class LengthWarning(UserWarning):
    """A module or function past the hint: look at it, do not split a concept for it."""


def test_modules_over_600_lines_are_warned_about():
    long = {str(p.relative_to(ROOT)): n for p in package_files()
            if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_FILE_LINES}
    if long:
        warnings.warn(LengthWarning(f"modules over {MAX_FILE_LINES} lines (a hint, not a rule: "
                                    f"one concept a module): {long}"))


def test_functions_over_80_lines_are_warned_about():
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
    if long:
        warnings.warn(LengthWarning(f"functions over {MAX_FUNCTION_LINES} lines (name their "
                                    f"steps): {long}"))
