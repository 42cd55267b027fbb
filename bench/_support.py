"""What the benchmarks share: where the repository and the real data sets are, the peak memory
of this process, and a measurement run in a fresh interpreter."""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
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


def add_data_arguments(ap: argparse.ArgumentParser, sets, default: list | None = None) -> None:
    """``--encoder`` (for :func:`bench_encoder`) and ``--sets`` (which of ``sets`` to run:
    ``default``, else all)."""
    ap.add_argument("--encoder", default=None,
                    help="default all-MiniLM-L6-v2; 'hashing' = test double")
    ap.add_argument("--sets", nargs="+", default=default or list(sets), choices=list(sets))


def bench_encoder(name: str | None):
    """The encoder a benchmark embeds with: ``"hashing"``, the tests' hashing double (no model,
    for a quick check of the plumbing); else :func:`puaudit.embed.encoders.get_encoder`
    (``None``: the default all-MiniLM-L6-v2)."""
    if name == "hashing":
        from puaudit.embed.hashing import HashingEncoder

        return HashingEncoder()
    from puaudit.embed.encoders import get_encoder

    return get_encoder(name)


def load_set(path: Path, rule: str | None = None, **options):
    """The comparison table of a real data set (``options`` for ``load_comparisons``: the
    judge's column, ...), its judge replaced by the rule ``rule`` (``"longer"``: the longer
    answer wins) when one is given."""
    from puaudit.data.io import read_table
    from puaudit.data.schema import apply_judge_rule, load_comparisons

    table = load_comparisons(read_table(path), name=path.name, **options)
    return apply_judge_rule(table, rule) if rule else table


def meets(realised: dict, target: float) -> bool:
    """Whether the trusted validation rows (items once; ``realised``: a certification's
    ``realised()``) agree with people at least ``target``; trusting nothing meets it."""
    return realised["n"] == 0 or realised["agreement"] >= target


def peak_mb() -> float:
    """This process's peak resident memory so far, in MB (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def cpu_seconds(who: int = resource.RUSAGE_SELF) -> float:
    """User + system CPU seconds of this process (``RUSAGE_CHILDREN``: of its waited-for
    children)."""
    u = resource.getrusage(who)
    return u.ru_utime + u.ru_stime


def child_env() -> dict:
    """The environment for a child interpreter: this checkout first on ``PYTHONPATH``, so that
    it imports the same ``puaudit`` and ``bench`` as the parent."""
    path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
    return {**os.environ, "PYTHONPATH": path}


class ChildFailed(SystemExit):
    """A child interpreter of a benchmark failed or timed out (the message says which)."""


def result(measured: dict) -> None:
    """Print a child's measurements as the ``RESULT {json}`` line :func:`run_child` reads."""
    print("RESULT " + json.dumps(measured), flush=True)


def vm_peak_mb() -> float:
    """This process's high-water mark of resident memory (VmHWM), in MB: unlike ``ru_maxrss``
    it does not carry over the parent's peak across exec."""
    with open("/proc/self/status") as fh:
        return next(int(line.split()[1]) for line in fh if line.startswith("VmHWM")) / 1024


def run_child(args: list[str], *, label: str, timeout: float | None = None) -> dict:
    """Run ``python *args`` in a fresh interpreter (so that its peak memory and first-call
    costs are its own) and return the :func:`result` it printed. Raises :class:`ChildFailed`,
    its message under ``label``, when it exits non-zero, prints no result or times out."""
    try:
        p = subprocess.run([sys.executable, *args], capture_output=True, text=True,
                           timeout=timeout, cwd=ROOT, env=child_env())
    except subprocess.TimeoutExpired:
        raise ChildFailed(f"{label}: timed out after {timeout:.0f} s") from None
    found = [line[7:] for line in p.stdout.splitlines() if line.startswith("RESULT ")]
    if p.returncode != 0 or not found:
        raise ChildFailed(f"{label} failed:\n{p.stderr[-3000:]}")
    return json.loads(found[-1])


def timed(fn) -> tuple:
    """``(fn(), seconds it took)``."""
    t0 = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t0


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
        args = ["-m", module, "--child", "--n-p", str(n_p), "--n-u", str(n_u),
                *(["--compare"] if compare else []), *extra]
        try:
            r = run_child(args, timeout=timeout, label=f"({n_p}, {n_u})")
        except ChildFailed as exc:
            print(exc)
            continue
        yield (n_p, n_u), r
