"""The library stands alone: nothing under ``puaudit/`` imports the dashboard (``components``,
``pages``, ``app``) or Streamlit, edits ``sys.path``, or imports a layer above its own
(docs/development.md, "Layers"). Every ``import`` statement counts, inside functions too."""

from __future__ import annotations

import ast

import pytest

from tests.conftest import ROOT

#: the dashboard and what only the dashboard may use
DASHBOARD = ("components", "pages", "app", "streamlit")
#: each subpackage's layer: a module may import its own layer or a lower one
LAYERS = {"errors": 0, "stats": 0, "percents": 0, "progress": 0, "data": 0,
          "embed": 1, "rankings": 1, "annotators": 1, "trustjudge": 1, "scale": 1,
          "audit": 2,
          "review": 3, "report": 3,
          "cli": 4}
#: modules that are command lines outside puaudit/cli/ (the package's `python -m puaudit`): the top layer
CLI_MODULES = ("__main__",)


def _modules() -> dict[str, ast.Module]:
    out = {}
    for path in sorted((ROOT / "puaudit").rglob("*.py")):
        parts = path.relative_to(ROOT).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        out[name] = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    assert len(out) > 100  # the walk found the package
    return out


def imports(tree: ast.Module, name: str, *, package: bool = False) -> list[tuple[str, int]]:
    """(imported module, line) of every import statement in ``tree`` (module ``name``), relative
    imports resolved; ``from x import y`` counts as ``x`` and ``x.y``."""
    here = name.split(".") if package else name.split(".")[:-1]
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(a.name, node.lineno) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = here[:len(here) - node.level + 1]
                base = ".".join(up + ([node.module] if node.module else []))
            out += [(base, node.lineno)] + [(f"{base}.{a.name}", node.lineno) for a in node.names]
    return out


def layer(module: str) -> int | None:
    """The layer of a ``puaudit`` module (None: the package root, ``puaudit/__init__.py``)."""
    parts = module.split(".")
    if len(parts) == 1:
        return None
    if parts[-1] in CLI_MODULES:
        return LAYERS["cli"]
    return LAYERS[parts[1]]


def _upward(name: str, tree: ast.Module, known: set[str], *, package: bool) -> list[str]:
    mine = layer(name)
    if mine is None:  # the root's lazy names (PUAudit, read_table) are its public front
        return []
    bad = []
    for target, line in imports(tree, name, package=package):
        if target not in known or target == "puaudit":  # the root holds __version__ only
            continue
        theirs = layer(target)
        if theirs is not None and theirs > mine:
            bad.append(f"{name}:{line} imports {target} (layer {mine} -> {theirs})")
    return bad


def _is_package(name: str) -> bool:
    return (ROOT / name.replace(".", "/") / "__init__.py").is_file()


def test_every_subpackage_has_a_layer():
    subpackages = {p.name for p in (ROOT / "puaudit").iterdir()
                   if (p / "__init__.py").is_file()}
    assert subpackages == set(LAYERS) - {"errors", "percents", "progress"}
    assert (ROOT / "puaudit" / "errors.py").is_file()


def test_no_dashboard_import_in_puaudit():
    found = [f"{name}:{line} imports {target}"
             for name, tree in _modules().items()
             for target, line in imports(tree, name, package=_is_package(name))
             if target.split(".")[0] in DASHBOARD]
    assert found == []


def test_no_sys_path_edit_in_puaudit():
    found = []
    for name, tree in _modules().items():
        for node in ast.walk(tree):
            if (isinstance(node, ast.Attribute) and node.attr == "path"
                    and isinstance(node.value, ast.Name) and node.value.id == "sys"):
                found.append(f"{name}:{node.lineno}")
    assert found == []
    hits = [str(p.relative_to(ROOT)) for p in (ROOT / "puaudit").rglob("*.py")
            if "sys.path" in p.read_text(encoding="utf-8")]
    assert hits == []  # not even in a docstring: `grep -rn sys.path puaudit/` stays empty


def test_no_module_imports_a_layer_above_its_own():
    mods = _modules()
    known = set(mods)
    bad = [b for name, tree in mods.items()
           for b in _upward(name, tree, known, package=_is_package(name))]
    assert bad == []


@pytest.mark.parametrize("source, name, caught", [
    ("def f():\n    from components.radar import x\n", "puaudit.report.html", True),
    ("import sys\nsys.path.append('.')\n", "puaudit.cli.report", True),
    ("from ..audit import relabel\n", "puaudit.data.io", True),
    ("from puaudit.audit.config import AuditConfig\n", "puaudit.report.parts", False),
])
def test_the_scan_catches_what_it_forbids(source, name, caught):
    tree = ast.parse(source)
    known = set(_modules()) | {"puaudit.audit"}
    hit = (any(t.split(".")[0] in DASHBOARD for t, _ in imports(tree, name))
           or any(isinstance(n, ast.Attribute) and n.attr == "path" for n in ast.walk(tree))
           or bool(_upward(name, tree, known, package=False)))
    assert hit is caught
