"""argparse type for flags that take a name (``--gpu``, ``--cloud``, ``--instance``): an empty
value is refused with the flag's name (exit 2), not read as "no filter" — ``--cloud "$CLOUD"`` with
``CLOUD`` unset would otherwise rank every cloud without a word."""

from __future__ import annotations

import argparse


def given_name(text: str) -> str:
    """``text`` stripped; an empty or all-blank value is an error."""
    value = text.strip()
    if not value:
        raise argparse.ArgumentTypeError("an empty value: give a name, or leave the flag out")
    return value
