"""Page files hold widgets and layout only: every page loads and caches its data through the
components layer (``components/state.py``, ``components/page_data.py``), keyed by content."""

from __future__ import annotations

import ast

from tests.conftest import ROOT

PAGES = sorted((ROOT / "pages").glob("*.py"))


def _cache_decorators(tree: ast.AST) -> list[str]:
    """``st.cache_data`` / ``st.cache_resource`` anywhere (decorator, call or attribute)."""
    return [f"line {node.lineno}" for node in ast.walk(tree)
            if isinstance(node, ast.Attribute) and node.attr in ("cache_data", "cache_resource")]


def _id_calls(tree: ast.AST) -> list[str]:
    """Calls of the builtin ``id()``: an object's address is reused once it is freed, so a key
    built from it can serve one table's results for another."""
    return [f"line {node.lineno}" for node in ast.walk(tree)
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
            and node.func.id == "id"]


def test_no_page_caches_its_own_data_or_keys_by_id():
    assert len(PAGES) >= 8  # the walk found the pages
    found = {}
    for page in PAGES:
        tree = ast.parse(page.read_text(encoding="utf-8"))
        bad = _cache_decorators(tree) + _id_calls(tree)
        if bad:
            found[page.name] = bad
    assert found == {}, f"move these data loads and caches into components/: {found}"


def test_the_check_sees_a_page_cache_and_an_id_key():
    tree = ast.parse("@st.cache_data\ndef f(): pass\nss['k'] = (id(frame), 1)\n")
    assert _cache_decorators(tree) == ["line 1"] and _id_calls(tree) == ["line 3"]
