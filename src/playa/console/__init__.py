"""The console front end: a chat in the terminal, or driven line by line through a pipe."""

from ._app import ConsoleUI, printable, run_console

__all__ = ["ConsoleUI", "printable", "run_console"]
