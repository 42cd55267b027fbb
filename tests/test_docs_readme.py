"""The README a new user reads first: what input is needed, then the two commands, a six-line
glossary and a five-step workflow, results after; at most 200 lines; every link resolves."""

import re

from tests.conftest import ROOT

README = (ROOT / "README.md").read_text(encoding="utf-8")


def _section(title: str) -> str:
    start = README.index(f"## {title}")
    end = README.find("\n## ", start + 3)
    return README[start:end if end > 0 else None]


def test_first_hour_order_and_length():
    assert len(README.splitlines()) <= 200
    heads = [h for h in re.findall(r"^## (.+)$", README, flags=re.M)]
    order = ["What you need", "Two commands", "Words on the screen", '"I have 10k judged rows',
             "Honest results"]
    at = [next(i for i, h in enumerate(heads) if h.startswith(t)) for t in order]
    assert at == sorted(at) and at[0] == 0, heads


def test_glossary_and_workflow():
    glossary = re.findall(r"^\* \*\*(.+?)\*\*", _section("Words on the screen"), flags=re.M)
    assert len(glossary) == 6
    words = " ".join(_section("Words on the screen").split())
    for term in ("Cons_orig", "Cons_adj", "Reversal precision", "**m**", "p_ratio", "P**"):
        assert term in words, term
    steps = re.findall(r"^(\d)\. ", _section('"I have 10k judged rows'), flags=re.M)
    assert steps == ["1", "2", "3", "4", "5"]
    need = _section("What you need")
    assert "A, B or tie" in need and "few hundred human labels" in need


def test_every_relative_link_resolves():
    for target in re.findall(r"\]\(((?!https?:)[^)#]+)", README):
        assert (ROOT / target).exists(), target
