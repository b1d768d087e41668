"""Errors that carry a message meant for the user.

Anything raised as ``UserError`` is a mistake in the user's input (a flag, a file, a value): the CLI
prints its message and exits 2, the app shows it, and no traceback is printed.

The core does not know how a front end names its inputs. A mistake in one input is a
``FieldError``: it names the core's field (``batch``, ``model_config``, ``top``) and a sentence in
which any field appears as a ``{field}`` placeholder. The CLI renders the fields as its flags
(``--batch``), the app as its form labels ("Batch"); ``str()`` gives the plain field names.
"""

from __future__ import annotations

import re
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
        self.fields = tuple(name for _, name in _pieces(template) if name)
        super().__init__(self.render(lambda name: name))

    def render(self, label: Callable[[str], str]) -> str:
        """The sentence with each field shown as ``label(field)``."""
        return render_fields(self.template, label)


def escape_braces(value: str) -> str:
    """``value`` made safe to put into a template (a user's text may hold ``{`` or ``}``)."""
    return value.replace("{", "{{").replace("}", "}}")


def _pieces(template: str) -> list[tuple[str, str | None]]:
    """(literal text, field name or None) of ``template``. A user's text that slipped in
    unescaped (``--policy '{0}'``, a lone ``}``) is kept as literal text, never a traceback."""
    try:
        parsed = list(string.Formatter().parse(template))
    except ValueError:  # unbalanced braces: the {name}s that are there, the rest as it is
        out: list[tuple[str, str | None]] = []
        pos = 0
        for m in re.finditer(r"\{([A-Za-z_]\w*)\}", template):
            out.append((template[pos:m.start()], m.group(1)))
            pos = m.end()
        return [*out, (template[pos:], None)]
    out = []
    for literal, name, spec, conversion in parsed:
        if name is not None and not name.isidentifier():
            literal += "{" + name + (f"!{conversion}" if conversion else "") + \
                (f":{spec}" if spec else "") + "}"
            name = None
        out.append((literal, name))
    return out


def render_fields(template: str, label: Callable[[str], str]) -> str:
    """``template`` with every ``{field}`` shown as ``label(field)`` (a flag, a form label...)."""
    return "".join(literal + (label(name) if name else "") for literal, name in _pieces(template))
