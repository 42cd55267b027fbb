"""The command line: ``puaudit audit | evaluate | sweep | demo | trustjudge | annotators | models | judge``."""

from puaudit.cli.commands import build_parser, main

__all__ = ["main", "build_parser"]
