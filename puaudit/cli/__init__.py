"""The command line: ``puaudit audit | evaluate | sweep | demo | trustjudge | annotators | models |
judge | review | report | cascade``, one module a command (:data:`puaudit.cli.commands.COMMANDS`)."""

from puaudit.cli.commands import build_parser, main

__all__ = ["main", "build_parser"]
