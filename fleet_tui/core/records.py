"""Records read from user input: frozen, slotted dataclasses, validated by pydantic only when needed.

``ModelArch``, ``Accelerator``, ``Workload`` and the interconnect/capability rows are
:func:`record` classes deriving from :class:`Record`. Their annotations are the one definition of
each field; the constrained ones (``PositiveInt``, ``UnitFraction``…) are the ``Annotated`` aliases
of :mod:`fleet_tui.core.types`, imported by each record module. Nothing evaluates the annotations
until a value from a file or a user must be checked: then :func:`validate` builds a pydantic
``TypeAdapter`` for the class and validates (coercion, constraints, ``extra="forbid"`` via
``__pydantic_config__``, then the record's ``__post_init__`` cross-field rules).

Why pydantic only then: importing it and building its schemas would be most of a ``fleet-tui
size`` run (bench/bench_catalog.py); a record built by our own code or read from the compiled
catalog needs neither. Constructing a record directly runs only ``__post_init__`` (types are the
caller's job, as with pydantic's ``model_construct``).

:class:`Record` keeps the small pydantic-style API callers already use (``model_copy``,
``model_dump``, ``model_dump_json``, ``model_validate``, ``model_fields``), implemented on
:mod:`dataclasses`.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar, overload

if TYPE_CHECKING:  # typing has it from 3.11; the checker reads it, at run time it is a no-op
    from typing_extensions import dataclass_transform
else:
    def dataclass_transform(**_: Any) -> Callable[[Any], Any]:
        return lambda f: f

R = TypeVar("R", bound="Record")
T = TypeVar("T", bound=type)


@overload
def record(cls: T, /) -> T: ...
@overload
def record(*, kw_only: bool = False) -> Callable[[type], Any]: ...


@dataclass_transform(frozen_default=True, field_specifiers=(dataclasses.field, dataclasses.Field))
def record(cls: type | None = None, /, *, kw_only: bool = False) -> Any:
    """``@dataclass(frozen=True, slots=True)`` (and ``kw_only``): the one spelling of a record class."""

    def wrap(c: type) -> Any:
        return dataclasses.dataclass(c, frozen=True, slots=True, kw_only=kw_only)

    return wrap if cls is None else wrap(cls)


#: ``extra="forbid"`` for every record (an unknown key in a file is a located problem).
FORBID_EXTRA = {"extra": "forbid"}


class _FieldsOf:
    """``Record.model_fields``: field name -> :class:`dataclasses.Field`, in declaration order."""

    def __get__(self, obj: Any, cls: type) -> dict[str, dataclasses.Field]:
        return {f.name: f for f in dataclasses.fields(cls)}


def _dump(value: Any, json_mode: bool) -> Any:
    if isinstance(value, Record):
        return value.model_dump(mode="json" if json_mode else "python")
    if isinstance(value, (tuple, list)):
        items = [_dump(v, json_mode) for v in value]
        return items if json_mode or isinstance(value, list) else tuple(items)
    if isinstance(value, dict):
        return {k: _dump(v, json_mode) for k, v in value.items()}
    return value


class Record:
    """Base of the validated records (see the module docstring). Subclasses are frozen dataclasses."""

    __slots__ = ()
    model_fields = _FieldsOf()
    if TYPE_CHECKING:  # every subclass is a dataclass: what ``dataclasses.replace``/``fields`` ask for
        __dataclass_fields__: ClassVar[dict[str, dataclasses.Field[Any]]]

    def model_copy(self: R, update: dict[str, Any] | None = None) -> R:
        """A copy with ``update`` applied (not type-checked, as pydantic's ``model_copy``; the
        record's cross-field rules run again)."""
        return dataclasses.replace(self, **(update or {}))

    def model_dump(self, mode: str = "python") -> dict[str, Any]:
        """Fields as a dict in declaration order; ``mode="json"``: tuples as lists, nested records
        as dicts (what ``json.dumps`` needs)."""
        return {f.name: _dump(getattr(self, f.name), mode == "json") for f in dataclasses.fields(self)}

    def model_dump_json(self) -> str:
        import json  # rarely used: a command that prints no JSON need not import it

        return json.dumps(self.model_dump(mode="json"), separators=(",", ":"), ensure_ascii=False)

    @classmethod
    def model_validate(cls: type[R], data: Any) -> R:
        """``data`` (a mapping) checked and coerced; raises ``pydantic.ValidationError``."""
        return validate(cls, data)


_ADAPTERS: dict[type, Any] = {}
_ADAPTERS_LOCK = threading.Lock()


def _new_adapter(cls: type) -> Any:
    from pydantic import TypeAdapter  # only when outside data is checked (see the module docstring)

    return TypeAdapter(cls)


def validate(cls: type[R], data: Any) -> R:
    """An instance of the record class ``cls`` from ``data`` (a mapping), checked by pydantic.

    Raises ``pydantic.ValidationError`` (callers turn it into located problems or a UserError).
    """
    adapter = _ADAPTERS.get(cls)
    if adapter is None:
        with _ADAPTERS_LOCK:
            adapter = _ADAPTERS.get(cls)
            if adapter is None:
                adapter = _ADAPTERS[cls] = _new_adapter(cls)
    return adapter.validate_python(data)
