"""The one error type the library raises for bad input.

Every message names what is wrong (file, column, row) and what the user can do about it. Where
the remedy depends on where the user stands (a flag on the command line, a control on the
dashboard, an argument in Python), the error carries one per interface (``fix``): ``str(exc)``
reads with the command line's, :meth:`PUAuditError.advice` with another's. The CLI prints the
message and exits with status 2; the dashboard shows ``advice(DASHBOARD)`` in an error box.
"""

from __future__ import annotations

from collections.abc import Mapping

__all__ = ["PUAuditError", "CLI", "DASHBOARD", "COLUMN_MAPPING"]

#: the interfaces a fix is written for
CLI, DASHBOARD = "cli", "dashboard"
#: where a dashboard visitor chooses the columns
COLUMN_MAPPING = "the Column mapping on the Data page"


class PUAuditError(ValueError):
    """Bad input or configuration, with a message meant for the user.

    Parameters
    ----------
    message : str
        What is wrong, where (column / row), and the fix that holds everywhere.
    column : str, optional
        The column concerned, when there is one.
    row : int, optional
        The 1-based data row concerned (header excluded), when there is one.
    fix : mapping, optional
        The remedy per interface (:data:`CLI`, :data:`DASHBOARD`), appended to ``message``:
        the command line's in ``str(exc)``, any other's in :meth:`advice`.
    """

    def __init__(self, message: str, *, column: str | None = None, row: int | None = None,
                 fix: Mapping[str, str] | None = None):
        self.message = message
        self.fix = dict(fix or {})
        super().__init__(self.advice(CLI))
        self.column = column
        self.row = row

    def advice(self, interface: str = CLI) -> str:
        """The message with ``interface``'s fix (the command line's where it has none)."""
        fix = self.fix.get(interface, self.fix.get(CLI))
        return f"{self.message} {fix}" if fix else self.message
