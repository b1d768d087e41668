"""What each accelerator family is for: training and/or inference, precisions, software stack.

Data: ``catalogs/capabilities.toml`` (a source per row), read lazily with :mod:`.tomlio` and
validated. An accelerator not listed is a general-purpose device (both). Ranking asks
:func:`can_train` before it sizes a training, fine-tuning, LoRA or QLoRA workload on a device:
Inferentia and Qualcomm AI 100 are inference only.
"""

from __future__ import annotations

import functools
from pathlib import Path

from fleet_tui.core import paths
from fleet_tui.core.errors import UserError
from fleet_tui.core.records import FORBID_EXTRA, Record, record


@record(kw_only=True)
class Family(Record):
    """One accelerator family: what it is for, its precisions and software stack."""

    __pydantic_config__ = FORBID_EXTRA
    id: str
    accelerators: tuple[str, ...]
    training: bool
    inference: bool
    precisions: tuple[str, ...] = ()
    stack: str
    source: str


@functools.lru_cache(maxsize=4)
def load_capabilities(path: Path | None = None) -> dict[str, Family]:
    """Families by accelerator id (bundled file by default), read once (and kept validated in the
    user cache dir, as the interconnects); a broken file is a UserError."""
    from fleet_tui.core.catalog.compiled import cached_load

    file = path or paths.bundled_catalog_dir() / "capabilities.toml"
    return cached_load("capabilities", [file], lambda: _read_capabilities(file))


def _read_capabilities(path: Path) -> dict[str, Family]:
    from fleet_tui.core.tomlio import read_toml, validate_table

    doc, problems = read_toml(path)
    if doc is None:
        raise UserError("; ".join(problems))
    entries, problems = validate_table(doc, "family", Family)
    if problems:
        raise UserError("; ".join(problems))
    out: dict[str, Family] = {}
    for _, fam in entries:
        for acc in fam.accelerators:
            out[acc] = fam
    return out


def family_of(accelerator: str) -> Family | None:
    return load_capabilities().get(accelerator)


def can_train(accelerator: str) -> bool:
    fam = family_of(accelerator)
    return fam is None or fam.training


def can_serve(accelerator: str) -> bool:
    fam = family_of(accelerator)
    return fam is None or fam.inference
