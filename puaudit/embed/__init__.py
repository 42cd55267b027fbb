"""Frozen text encoders, the content-keyed embedding cache, 2-D projections, encoder settings."""
