"""The console front end: a chat in the terminal, or driven line by line through a pipe."""

from ._app import run_console
from ._ui import ConsoleUI, printable

__all__ = ["ConsoleUI", "printable", "run_console"]
