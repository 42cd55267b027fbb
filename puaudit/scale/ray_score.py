"""The per-type scoring and the cross-fitting folds as Ray tasks.

:func:`puaudit.audit.estimator.score_split` cuts its work into independent jobs: for the full
fit and for each cross-fitting fold, one job per question type (fit the scorer on that type's
verified positives, score that type's audited and held-out rows). Locally they run one after the
other; given ``map_fn=RayMap()`` they are handed over all at once and run as Ray tasks. The
prepared split (embeddings, verdicts, split) is put in the object store once per audit and
shared by every task (numpy arrays are read without copies on the same node).

Each job computes exactly what the local loop computes, with the same seeds, and the driver
assembles the results in the same order, so the scores, calibration and groups are the local
path's.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from puaudit.scale.ray_backend import connect

__all__ = ["RayMap"]


def _run(fn, prep, job):
    return fn(prep, job)


class RayMap:
    """``map_fn(fn, prep, jobs) -> [fn(prep, job) for job in jobs]`` with one Ray task per job.

    Parameters
    ----------
    num_cpus : float
        CPUs each task reserves (BLAS threads follow Ray's setting of one thread per CPU).

    Notes
    -----
    ``prep`` is put in the object store the first time it is seen and reused while it is the
    same object (the automatic scorer choice scores one split several times).
    """

    def __init__(self, *, num_cpus: float = 1.0):
        self.num_cpus = num_cpus

    def __call__(self, fn: Callable, prep: Any, jobs: Sequence) -> list:
        jobs = list(jobs)
        if not jobs:
            return []
        ray = connect()
        if getattr(self, "_prep", None) is not prep:
            self._prep, self._prep_ref = prep, ray.put(prep)
        if getattr(self, "_remote", None) is None:
            self._remote = ray.remote(num_cpus=self.num_cpus, max_retries=3)(_run)
        refs = [self._remote.remote(fn, self._prep_ref, job) for job in jobs]
        return ray.get(refs)

    def __getstate__(self):  # never ship the cached object reference or remote function
        return {"num_cpus": self.num_cpus}
