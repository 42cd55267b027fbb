"""Test suite. A regular package, so that ``from tests.conftest import ...`` finds these files
even when a dependency installs a top-level ``tests`` package into site-packages (ppi-python
0.2.3 does)."""
