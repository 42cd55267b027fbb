"""One JSON helper: every number the tool prints or writes as JSON goes through here.

JSON has no NaN or infinity; the tool's convention is ``null`` for both (a value that is not
available), numpy scalars become Python numbers, tuples / sets / arrays become lists and dict
keys become strings.
"""

from __future__ import annotations

import json
import math

import numpy as np

__all__ = ["to_jsonable", "dumps"]


def to_jsonable(x):
    """``x`` with NaN / ±inf as None and numpy values as plain Python values (recursively)."""
    if isinstance(x, dict):
        return {str(k): to_jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple, set, frozenset)):
        return [to_jsonable(v) for v in x]
    if isinstance(x, np.ndarray):
        return [to_jsonable(v) for v in x.tolist()]
    if isinstance(x, (bool, np.bool_)):
        return bool(x)
    if isinstance(x, (np.integer,)):
        return int(x)
    if isinstance(x, (float, np.floating)):
        x = float(x)
        return x if math.isfinite(x) else None
    return x


def dumps(obj, *, indent: int | None = None) -> str:
    """JSON text of ``obj`` after :func:`to_jsonable` (one line unless ``indent``); anything
    else that JSON cannot hold is written as its ``str``."""
    return json.dumps(to_jsonable(obj), default=str, allow_nan=False, ensure_ascii=False,
                      indent=indent)
