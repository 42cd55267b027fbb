"""The one error type the library raises for bad input.

Every message names what is wrong (file, column, row) and what the user can do about it. The CLI
prints the message and exits with status 2; the dashboard shows it in an error box.
"""

from __future__ import annotations

__all__ = ["PUAuditError"]


class PUAuditError(ValueError):
    """Bad input or configuration, with a message meant for the user.

    Parameters
    ----------
    message : str
        What is wrong, where (column / row), and the fix.
    column : str, optional
        The column concerned, when there is one.
    row : int, optional
        The 1-based data row concerned (header excluded), when there is one.
    """

    def __init__(self, message: str, *, column: str | None = None, row: int | None = None):
        super().__init__(message)
        self.column = column
        self.row = row
