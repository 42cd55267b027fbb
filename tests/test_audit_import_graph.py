"""The package has no import cycle: every ``import`` statement under ``puaudit/`` (module level
and inside functions) is an edge, and no two modules reach each other."""

import ast

import networkx as nx

from tests.conftest import ROOT


def _graph() -> nx.DiGraph:
    pkg = ROOT / "puaudit"
    mods = {}
    for p in pkg.rglob("*.py"):
        parts = p.relative_to(ROOT).with_suffix("").parts
        mods[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = p
    g = nx.DiGraph()
    for name, path in mods.items():
        g.add_node(name)
        here = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    up = here.split(".")[:len(here.split(".")) - node.level + 1]
                    base = ".".join(up + ([node.module] if node.module else []))
                targets = [base] + [f"{base}.{a.name}" for a in node.names]
            else:
                continue
            g.add_edges_from((name, t) for t in targets if t in mods and t != name)
    return g


def test_the_walker_sees_imports_inside_functions():
    g = _graph()
    # PUAudit(backend="ray") imports the Ray path inside fit(): an edge of the graph
    assert g.has_edge("puaudit.audit.estimator", "puaudit.scale.ray_embed")
    assert g.number_of_edges() > 100


def test_no_import_cycle_in_puaudit():
    cycles = [sorted(c) for c in nx.strongly_connected_components(_graph()) if len(c) > 1]
    assert cycles == []
