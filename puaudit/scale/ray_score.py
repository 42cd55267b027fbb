"""The per-type scoring and the cross-fitting folds as Ray tasks.

:func:`puaudit.audit.scorers.scoring.score_split` cuts its work into independent jobs: for the full
fit and for each cross-fitting fold, one job per question type (fit the scorer on that type's
verified positives, score that type's audited and held-out rows). Locally they run one after the
other; given ``map_fn=RayMap()`` they are handed over all at once and run as Ray tasks. The
prepared split (its embeddings and orientation signs: :func:`task_view`) is put in the object
store once per audit and shared by every task (numpy arrays are read without copies on the same
node).

Each job computes exactly what the local loop computes, with the same seeds, and the driver
assembles the results in the same order, so the scores, calibration and groups are the local
path's.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from puaudit.scale.ray_backend import connect

__all__ = ["RayMap", "task_view"]


def _run(fn, prep, job):
    return fn(prep, job)


def task_view(prep: Any) -> Any:
    """``prep`` as the tasks get it: without its per-row arrays of Python objects.

    The verdicts, question types, item ids, split and reasons of a 1M-row split are millions of
    Python strings that every task would unpickle again (about a second each); the scoring jobs
    read only the embeddings and the orientation signs (numeric arrays, shared without copies).
    A job that did read a dropped field would fail loudly on ``None``, never silently.
    """
    if not dataclasses.is_dataclass(prep):
        return prep
    drop = {f.name: None for f in dataclasses.fields(prep)
            if isinstance(getattr(prep, f.name), np.ndarray)
            and getattr(prep, f.name).dtype == object}
    return dataclasses.replace(prep, **drop) if drop else prep


class RayMap:
    """``map_fn(fn, prep, jobs) -> [fn(prep, job) for job in jobs]`` with one Ray task per job.

    Parameters
    ----------
    num_cpus : float
        CPUs each task reserves (BLAS threads follow Ray's setting of one thread per CPU).

    Notes
    -----
    ``prep`` is put in the object store (as :func:`task_view`) the first time it is seen and
    reused while it is the same object (the automatic scorer choice scores one split several
    times).
    """

    def __init__(self, *, num_cpus: float = 1.0):
        self.num_cpus = num_cpus

    def __call__(self, fn: Callable, prep: Any, jobs: Sequence) -> list:
        jobs = list(jobs)
        if not jobs:
            return []
        ray = connect()
        if getattr(self, "_prep", None) is not prep:
            self._prep, self._prep_ref = prep, ray.put(task_view(prep))
        if getattr(self, "_remote", None) is None:
            self._remote = ray.remote(num_cpus=self.num_cpus, max_retries=3)(_run)
        refs = [self._remote.remote(fn, self._prep_ref, job) for job in jobs]
        return ray.get(refs)

    def __getstate__(self):  # never ship the cached object reference or remote function
        return {"num_cpus": self.num_cpus}
