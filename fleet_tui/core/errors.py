"""Errors that carry a message meant for the user.

Anything raised as ``UserError`` is a mistake in the user's input (a flag, a file, a value): the CLI
prints its message and exits 2, the app shows it, and no traceback is printed.

The core does not know how a front end names its inputs. A mistake in one input is a
``FieldError``: it names the core's field (``batch``, ``model_config``, ``top``) and a sentence in
which any field appears as a ``{field}`` placeholder. The CLI renders the fields as its flags
(``--batch``), the app as its form labels ("Batch"); ``str()`` gives the plain field names.
"""

from __future__ import annotations

import string
from typing import Callable


class UserError(Exception):
    """Bad input from the user. The message names the flag/file/line and what is allowed."""


class CatalogError(UserError):
    """A catalog file is broken. ``problems`` lists every issue as ``file:line: field: message``."""

    def __init__(self, problems: list[str]):
        self.problems = list(problems)
        super().__init__("\n".join(self.problems) if self.problems else "catalog error")


class FieldError(UserError):
    """A bad value of the input field ``field``.

    ``template`` is the sentence, e.g. ``"{top} must be a whole number >= 1, got 0"`` or
    ``"{gen_len} needs {prompt_len}"``: every ``{name}`` is a field, rendered by the front end.
    """

    def __init__(self, field: str, template: str):
        self.field = field
        self.template = template
        self.fields = tuple(name for _, name, _, _ in string.Formatter().parse(template) if name)
        super().__init__(self.render(lambda name: name))

    def render(self, label: Callable[[str], str]) -> str:
        """The sentence with each field shown as ``label(field)``."""
        return render_fields(self.template, label)


def escape_braces(value: str) -> str:
    """``value`` made safe to put into a template (a user's text may hold ``{`` or ``}``)."""
    return value.replace("{", "{{").replace("}", "}}")


def render_fields(template: str, label: Callable[[str], str]) -> str:
    """``template`` with every ``{field}`` shown as ``label(field)`` (a flag, a form label...)."""
    names = {name for _, name, _, _ in string.Formatter().parse(template) if name}
    return template.format(**{name: label(name) for name in names})
