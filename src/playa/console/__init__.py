"""The console front end: a chat in the terminal, or driven line by line through a pipe."""

from ._app import ConsoleUI, run_console

__all__ = ["ConsoleUI", "run_console"]
