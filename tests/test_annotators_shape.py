"""The annotator and TrustJudge packages keep their names: no stand-in judge, no module name
that means two things, and the public names import from the packages (one import path per name:
tests/test_package_imports.py; module and function sizes: tests/test_package_shape.py)."""

from __future__ import annotations

import importlib

import pytest

from tests.conftest import ROOT


def test_the_stand_in_judge_is_not_installed():
    assert not (ROOT / "puaudit" / "trustjudge" / "stub.py").exists()
    assert not (ROOT / "puaudit" / "trustjudge" / "ranking.py").exists()  # rankings/ is that


def test_no_module_name_means_two_things():
    # "models" are leaderboards (rankings/); the annotators' vote models are latent_truth.py
    assert not (ROOT / "puaudit" / "annotators" / "models.py").exists()
    # embed/ holds the encoders; the dashboard's upload limits are data/limits.py
    assert not (ROOT / "puaudit" / "embed" / "settings.py").exists()
    names = [p.stem for p in (ROOT / "puaudit").rglob("*.py") if p.stem != "__init__"]
    assert "utils" not in names and "settings" not in names and "models" not in names


@pytest.mark.parametrize("module", ["puaudit.annotators", "puaudit.trustjudge"])
def test_public_names_import_from_the_package(module):
    mod = importlib.import_module(module)
    missing = [name for name in mod.__all__ if not hasattr(mod, name)]
    assert missing == []
    assert len(mod.__all__) >= 3
