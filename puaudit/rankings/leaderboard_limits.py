"""How much of a leaderboard is computed and shown: the bootstrap caps and the top-N view.

Kept apart from :mod:`puaudit.rankings.estimate` (numpy, pandas, scipy) so that the command
line can name the defaults in its help without importing them.
"""

from __future__ import annotations

__all__ = ["TOP_MODELS", "BOOTSTRAP_WORK", "WINRATE_WORK", "MIN_DRAWS"]

# Views that grow with the number of models (tables, figures, models × models matrices) show the
# first TOP_MODELS of the leaderboard by default.
TOP_MODELS = 50

# Bootstrap limits, as draws × models per interval. A Bradley–Terry draw is a refit over all
# models; a win-rate draw is a resample of the items and two bincounts. Measured on a shared
# 2-core machine (bench/rankings_scale.py): 500 models keep 100 strength draws and 1,000 win-rate
# draws; 10,000 models keep 200 win-rate draws and no strength draws.
BOOTSTRAP_WORK = 50_000
WINRATE_WORK = 2_000_000
# Fewer draws than this make no percentile interval worth showing.
MIN_DRAWS = 50
