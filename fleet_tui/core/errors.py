"""Errors that carry a message meant for the user.

Anything raised as ``UserError`` is a mistake in the user's input (a flag, a file, a value): the CLI
prints its message and exits 2, the app shows it, and no traceback is printed.
"""

from __future__ import annotations


class UserError(Exception):
    """Bad input from the user. The message names the flag/file/line and what is allowed."""


class CatalogError(UserError):
    """A catalog file is broken. ``problems`` lists every issue as ``file:line: field: message``."""

    def __init__(self, problems: list[str]):
        self.problems = list(problems)
        super().__init__("\n".join(self.problems) if self.problems else "catalog error")
