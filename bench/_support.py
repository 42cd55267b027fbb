"""What the benchmarks share: where the repository and the real data sets are, the peak memory
of this process, and a measurement run in a fresh interpreter."""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
from pathlib import Path
from typing import Iterator

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data"
MTBENCH = DATA / "mtbench" / "mtbench_human_vs_gpt4.csv"
LLMFAO = DATA / "llmfao" / "llmfao_crowd_vs_gpt4.csv"


def parser(doc: str) -> argparse.ArgumentParser:
    """A benchmark's argument parser, its module notes (``doc``) as the help text."""
    return argparse.ArgumentParser(description=doc,
                                   formatter_class=argparse.RawDescriptionHelpFormatter)


def add_data_arguments(ap: argparse.ArgumentParser, sets: dict) -> None:
    """``--encoder`` (for :func:`bench_encoder`) and ``--sets`` (which of ``sets`` to run)."""
    ap.add_argument("--encoder", default=None,
                    help="default all-MiniLM-L6-v2; 'hashing' = test double")
    ap.add_argument("--sets", nargs="+", default=list(sets), choices=list(sets))


def bench_encoder(name: str | None):
    """The encoder a benchmark embeds with: ``"hashing"``, the tests' hashing double (no model,
    for a quick check of the plumbing); else :func:`puaudit.embed.encoders.get_encoder`
    (``None``: the default all-MiniLM-L6-v2)."""
    if name == "hashing":
        from puaudit.embed.hashing import HashingEncoder

        return HashingEncoder()
    from puaudit.embed.encoders import get_encoder

    return get_encoder(name)


def load_set(path: Path, rule: str | None):
    """The comparison table of a real data set, its judge replaced by the rule ``rule``
    (``"longer"``: the longer answer wins) when one is given."""
    from puaudit.data.io import read_table
    from puaudit.data.schema import apply_judge_rule, load_comparisons

    table = load_comparisons(read_table(path), name=path.name)
    return apply_judge_rule(table, rule) if rule else table


def peak_mb() -> float:
    """This process's peak resident memory so far, in MB (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def child_env() -> dict:
    """The environment for a child interpreter: this checkout first on ``PYTHONPATH``, so that
    it imports the same ``puaudit`` and ``bench`` as the parent."""
    path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
    return {**os.environ, "PYTHONPATH": path}


def run_child(module: str, args: list[str], *, timeout: float, label: str) -> dict | None:
    """Run ``python -m module --child *args`` in a fresh interpreter (so that its peak memory
    and first-call costs are its own) and return the ``RESULT {json}`` line it prints; None,
    with the reason printed under ``label``, when it fails or times out."""
    cmd = [sys.executable, "-m", module, "--child", *args]
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=ROOT,
                           env=child_env())
    except subprocess.TimeoutExpired:
        print(f"{label}: timed out after {timeout:.0f} s")
        return None
    for line in p.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[7:])
    print(f"{label} failed:\n{p.stderr[-2000:]}")
    return None


def add_size_arguments(ap: argparse.ArgumentParser) -> None:
    """The hidden options by which a size benchmark runs one size as its own child."""
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--compare", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--n-p", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--n-u", type=int, help=argparse.SUPPRESS)


def run_sizes(module: str, sizes, *, compare: bool, timeout: float,
              extra: list[str] | tuple = ()) -> Iterator[tuple[tuple[int, int], dict]]:
    """``((n_p, n_u), result)`` of each size run as a child of ``module`` (:func:`run_child`;
    a size whose child failed is left out, the reason printed)."""
    for n_p, n_u in sizes:
        args = ["--n-p", str(n_p), "--n-u", str(n_u), *(["--compare"] if compare else []), *extra]
        r = run_child(module, args, timeout=timeout, label=f"({n_p}, {n_u})")
        if r is not None:
            yield (n_p, n_u), r
