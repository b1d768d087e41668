"""What each accelerator family is for, and what its software stack can run: one table for every front end.

Data: ``catalogs/capabilities.toml`` (a source per row), read lazily with :mod:`.tomlio` and
validated. ``[[family]]``: training and/or inference, precisions, stack (an accelerator not listed
is a general-purpose device: both). ``[[rule]]``: a feature a workload needs (bitsandbytes for
QLoRA and 8-bit AdamW, fp8 matrix units for fp8 training or fp8 weights) and the stacks or
accelerators that have it. :func:`unsupported` answers "can this accelerator's stack run this
workload" with the reason when not; the plan (``size``, the builder), the fix search and the
ranking (``recommend``) all ask it, so none of them proposes what the stack cannot run (no QLoRA on
a TPU or Inferentia, no fp8 training on an A100, no fp8 on a TPU v5e). ``[[weight_only]]``: a
serving engine that runs weights stored in a precision the device has no matrix units for, by
de-quantizing them inside a 16-bit GEMM (vLLM's and SGLang's FP8 Marlin on Ampere):
:func:`weight_only_kernel` answers it for inference, and
:func:`fleet_tui.core.sizing.precision_support` allows the precision there, weight-only.
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


@record(kw_only=True)
class Rule(Record):
    """A feature some workloads need and who has it (``[[rule]]``)."""

    __pydantic_config__ = FORBID_EXTRA
    id: str
    what: str
    kinds: tuple[str, ...] = ()  # workload kinds that need it
    optimizers: tuple[str, ...] = ()  # optimizers that need it
    training_precisions: tuple[str, ...] = ()  # precisions that need it for training
    inference_precisions: tuple[str, ...] = ()  # ... and for inference
    stacks: tuple[str, ...] = ()  # software stacks that have it (empty: see accelerators)
    accelerators: tuple[str, ...] = ()  # accelerators that have it (empty: every one of ``stacks``)
    source: str

    def needed_by(self, kind: str, optimizer: str, precision: str) -> bool:
        training = kind != "inference"
        return (kind in self.kinds or (training and optimizer in self.optimizers)
                or (training and precision in self.training_precisions)
                or (not training and precision in self.inference_precisions))

    def has(self, accelerator: str, stack: str) -> bool:
        if self.accelerators:
            return accelerator in self.accelerators
        return stack in self.stacks


@record(kw_only=True)
class WeightOnly(Record):
    """A weight-only kernel (``[[weight_only]]``): ``engines`` serve ``precision`` weights on
    ``architectures`` without matrix units for it, computing in 16-bit."""

    __pydantic_config__ = FORBID_EXTRA
    id: str
    precision: str
    engines: tuple[str, ...]
    architectures: tuple[str, ...]  # prefixes of Accelerator.architecture, as specs.ARCHITECTURE_PRECISIONS
    kernel: str
    source: str

    def covers(self, architecture: str | None) -> bool:
        arch = (architecture or "").strip().lower()
        return bool(arch) and any(arch.startswith(a.lower()) for a in self.architectures)


@functools.lru_cache(maxsize=4)
def load_rules(path: Path | None = None) -> tuple[Rule, ...]:
    """The ``[[rule]]`` rows of the capabilities table, read once and kept validated in the user
    cache dir as the families are (a command then starts without TOML or pydantic); a broken file
    is a UserError."""
    from fleet_tui.core.catalog.compiled import cached_load

    file = path or paths.bundled_catalog_dir() / "capabilities.toml"
    return cached_load("capability-rules", [file], lambda: _read_rules(file))


def _read_rules(file: Path) -> tuple[Rule, ...]:
    return _read_table(file, "rule", Rule)


@functools.lru_cache(maxsize=4)
def load_weight_only(path: Path | None = None) -> tuple[WeightOnly, ...]:
    """The ``[[weight_only]]`` rows of the capabilities table, read once and cached as the rules are."""
    from fleet_tui.core.catalog.compiled import cached_load

    file = path or paths.bundled_catalog_dir() / "capabilities.toml"
    return cached_load("capability-weight-only", [file], lambda: _read_table(file, "weight_only", WeightOnly))


def _read_table(file: Path, table: str, cls: type) -> tuple:
    from fleet_tui.core.tomlio import read_toml, validate_table

    doc, problems = read_toml(file)
    if doc is None:
        raise UserError("; ".join(problems))
    rows, problems = validate_table(doc, table, cls)
    if problems:
        raise UserError("; ".join(problems))
    return tuple(r for _, r in rows)


def weight_only_kernel(precision: str, architecture: str | None, engine: str | None) -> WeightOnly | None:
    """The weight-only kernel ``engine`` serves ``precision`` weights with on ``architecture``, or
    None (the precision then needs the device's own matrix units)."""
    return next((k for k in load_weight_only() if k.precision == precision and engine in k.engines
                 and k.covers(architecture)), None)


def weight_only_engines(precision: str, architecture: str | None) -> tuple[str, ...]:
    """Every engine with a weight-only kernel for ``precision`` on ``architecture`` (for a refusal's
    advice: "serve it with vLLM")."""
    return tuple(dict.fromkeys(e for k in load_weight_only() if k.precision == precision and k.covers(architecture)
                               for e in k.engines))


def unsupported(accelerator: str, stack: str, kind: str, optimizer: str = "adamw",
                precision: str = "bf16") -> str | None:
    """Why ``accelerator`` (software ``stack``) cannot run a workload of ``kind`` with ``optimizer``
    in ``precision``, or None when it can (sentence for the user; the rule's source is in the table)."""
    if kind != "inference" and not can_train(accelerator):
        return f"{accelerator} is for inference only ({stack}): it does not train"
    for rule in load_rules():
        if rule.needed_by(kind, optimizer, precision) and not rule.has(accelerator, stack):
            who = (", ".join(rule.stacks) if rule.stacks and not rule.accelerators
                   else "the devices listed in capabilities.toml")
            return f"{rule.what} runs on {who}, not on {accelerator} ({stack})"
    return None


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
    unknown = set(doc.data) - {"family", "rule", "weight_only"}
    problems += [f"{doc.path}: {k}: unknown table (allowed: [[family]], [[rule]], [[weight_only]])"
                 for k in sorted(unknown)]
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
