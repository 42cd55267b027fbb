"""Benchmarks, each printing ``ratio=...`` against a reference measured in the same run.

Run one from the repository root as a module: ``python -m bench.NAME [--quick]`` (for example
``python -m bench.partial_ot --quick``); what they share is in :mod:`bench._support`.
"""
