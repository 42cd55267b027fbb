"""Past one machine: the audit on a Ray cluster (optional extra ``pip install -e .[ray]``).

* :mod:`puaudit.scale.ray_backend` — connecting to (or starting) Ray, with a clear message when
  Ray is not installed.
* :mod:`puaudit.scale.ray_embed` — distinct texts embedded by Ray Data (``map_batches`` over an
  actor pool, one encoder per actor, GPU actors when the cluster has GPUs), each finished batch
  written to the content-keyed embedding cache, so a rerun after a lost worker resumes.
* :mod:`puaudit.scale.ray_score` — the per-type scoring and cross-fitting folds as Ray tasks.

``PUAudit(..., backend="ray")`` and ``puaudit audit ... --ray [ADDRESS]`` use all three; the
result equals the local path's for the same seed. Nothing here imports Ray until it is used.
"""

from __future__ import annotations

from puaudit.scale.ray_backend import connect, require_ray

__all__ = ["connect", "require_ray"]
