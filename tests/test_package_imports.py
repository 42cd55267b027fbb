"""One import path per name (issue 44): only a package's ``__init__.py`` re-exports names it does
not define. Every other module's ``__all__`` lists its own names, and every ``from M import x``
in the code, the tests, the benchmarks and the docs' examples takes ``x`` from the module that
defines it (or from a package's ``__init__``, the public API). The dashboard and the library never
import the test suite."""

from __future__ import annotations

import ast
import re
from functools import cache
from pathlib import Path

import pytest

from tests.conftest import ROOT

#: the project's own top-level packages
PROJECT = ("puaudit", "components", "pages", "bench", "tests")
#: production code: never imports ``tests``
PRODUCTION = ("puaudit", "components", "pages")


def _sources(*roots: str) -> list[Path]:
    out = [p for r in roots for p in sorted((ROOT / r).rglob("*.py"))]
    assert out  # the walk found the files
    return out


def _module_file(module: str) -> Path | None:
    """The file of a project module (``None``: not a project module, or a package)."""
    path = ROOT.joinpath(*module.split("."))
    return path.with_suffix(".py") if path.with_suffix(".py").is_file() else None


def _is_module(module: str) -> bool:
    path = ROOT.joinpath(*module.split("."))
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def _bound(targets) -> set[str]:
    return {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}


def _defined(statements) -> set[str]:
    """Names a module's top level defines itself: functions, classes, assignments (also under a
    top-level ``if``/``try``), never names it imports."""
    out: set[str] = set()
    for node in statements:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            out.add(node.name)
        elif isinstance(node, ast.Assign):
            out |= _bound(node.targets)
        elif isinstance(node, (ast.AnnAssign, ast.AugAssign)):
            out |= _bound([node.target])
        elif isinstance(node, (ast.If, ast.Try)):
            inner = node.body + node.orelse + getattr(node, "finalbody", [])
            for handler in getattr(node, "handlers", []):
                inner += handler.body
            out |= _defined(inner)
    return out


@cache
def _defines(path: Path) -> frozenset[str]:
    return frozenset(_defined(ast.parse(path.read_text(encoding="utf-8")).body))


def _all(tree: ast.Module) -> list[str]:
    for node in tree.body:
        if isinstance(node, ast.Assign) and "__all__" in _bound(node.targets):
            return list(ast.literal_eval(node.value))
    return []


def _reexports_in_all(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    mine = _defines(path)
    return [f"{path.relative_to(ROOT)}: __all__ lists {name!r}, defined elsewhere"
            for name in _all(tree) if name not in mine]


def _imports_of_reexports(source: str, where: str) -> list[str]:
    """``from M import x`` where M is a project module (not a package) that does not define x."""
    bad = []
    for node in ast.walk(ast.parse(source)):
        if not (isinstance(node, ast.ImportFrom) and node.level == 0 and node.module
                and node.module.split(".")[0] in PROJECT):
            continue
        path = _module_file(node.module)
        if path is None:
            continue
        for alias in node.names:
            if alias.name not in _defines(path) and not _is_module(f"{node.module}.{alias.name}"):
                bad.append(f"{where}:{node.lineno}: from {node.module} import {alias.name} "
                           "(defined elsewhere: import it from there)")
    return bad


def test_the_scan_sees_definitions_and_reexports():
    tree = ast.parse("from a import b\nX = 1\nif True:\n    def f(): pass\nclass C: pass\n")
    assert _defined(tree.body) == {"X", "f", "C"}
    assert _imports_of_reexports("from puaudit.data.io import write_table\n", "here") == [
        "here:1: from puaudit.data.io import write_table (defined elsewhere: import it from there)"]
    assert _imports_of_reexports("from puaudit.data.writers import write_table\n"
                                 "from puaudit.data import io, write_table\n", "here") == []


@pytest.mark.parametrize("root", ["puaudit", "components", "pages", "bench"])
def test_no_module_but_an_init_lists_names_it_does_not_define(root):
    bad = [line for path in _sources(root) if path.name != "__init__.py"
           for line in _reexports_in_all(path)]
    assert bad == []


@pytest.mark.parametrize("root", [*PROJECT, "app.py"])
def test_every_import_takes_a_name_from_where_it_is_defined(root):
    paths = [ROOT / root] if root.endswith(".py") else _sources(root)
    bad = [line for path in paths
           for line in _imports_of_reexports(path.read_text(encoding="utf-8"),
                                             str(path.relative_to(ROOT)))]
    assert bad == []


def test_the_docs_examples_import_from_where_names_are_defined():
    bad = []
    for path in [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]:
        for i, block in enumerate(re.findall(r"```python\n(.*?)```", path.read_text("utf-8"),
                                             re.S)):
            try:
                bad += _imports_of_reexports(block, f"{path.relative_to(ROOT)} (example {i + 1})")
            except SyntaxError:  # a fragment, not a whole program
                continue
    assert bad == []


def test_production_code_never_imports_the_tests():
    bad = []
    for path in [*_sources(*PRODUCTION), ROOT / "app.py"]:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            bad += [f"{path.relative_to(ROOT)}:{node.lineno} imports {n}" for n in names
                    if n == "tests" or n.startswith("tests.")]
    assert bad == []
