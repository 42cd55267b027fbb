"""The review loop: people check the rows the audit doubts, decisions persist in a database and
flow back into the audit as human labels (docs/review.md; the module map: docs/development.md).
"""

VERDICTS = ("A", "B", "tie", "skip")

__all__ = ["VERDICTS"]
