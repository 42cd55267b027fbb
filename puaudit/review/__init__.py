"""The review loop: people check the rows the audit doubts, decisions persist in a database and
flow back into the audit as human labels (docs/review.md).

- :mod:`~puaudit.review.keys`: content keys of rows (re-uploads find earlier decisions)
- :mod:`~puaudit.review.store`: the SQLAlchemy store (SQLite file by default, any URL)
- :mod:`~puaudit.review.queue`: the order in which rows are worth a human check
- :mod:`~puaudit.review.feedback`: decisions -> human labels, review columns for exports
- :mod:`~puaudit.review.simulate`: the queue against random order with a simulated reviewer
- :mod:`puaudit.cli.review`: ``puaudit review export|import``

No Streamlit import anywhere in this package.
"""

VERDICTS = ("A", "B", "tie", "skip")

__all__ = ["VERDICTS"]
