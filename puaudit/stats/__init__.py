"""Statistics every part of the tool shares: proportion intervals (statsmodels underneath) and
the item-clustered bootstrap."""
