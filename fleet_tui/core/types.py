"""Constrained field types of the records read from input, as ``Annotated`` aliases.

A checker reads ``PositiveInt`` as ``int``; pydantic, when :func:`fleet_tui.core.records.validate`
checks outside data, reads the :class:`Bounds` in the metadata and adds them to the field's schema
(the same constraints and error messages as pydantic's own ``PositiveInt``). Importing this module
imports neither pydantic nor ``annotated_types``: a command that reads only the compiled catalog
never needs them.
"""

from __future__ import annotations

from typing import Annotated, Any


class Bounds:
    """Limits on a number or a string's length, checked by pydantic at validation time (through
    its documented ``__get_pydantic_core_schema__`` hook on ``Annotated`` metadata)."""

    __slots__ = ("limits",)

    def __init__(self, *, gt: float | None = None, ge: float | None = None, le: float | None = None,
                 min_length: int | None = None) -> None:
        given = {"gt": gt, "ge": ge, "le": le, "min_length": min_length}
        self.limits: dict[str, float] = {k: v for k, v in given.items() if v is not None}

    def __get_pydantic_core_schema__(self, source: Any, handler: Any) -> Any:
        schema = handler(source)
        # int_schema/float_schema take gt/ge/le, str_schema min_length: the core schema's own keys
        return {**schema, **self.limits}

    def __repr__(self) -> str:
        return f"Bounds({', '.join(f'{k}={v!r}' for k, v in self.limits.items())})"


PositiveInt = Annotated[int, Bounds(gt=0)]
NonNegativeInt = Annotated[int, Bounds(ge=0)]
PositiveFloat = Annotated[float, Bounds(gt=0)]
NonNegativeFloat = Annotated[float, Bounds(ge=0)]
#: A share of a whole: above 0, at most 1 (``gpu_memory_utilization``, efficiencies).
UnitFraction = Annotated[float, Bounds(gt=0, le=1)]
NonEmptyStr = Annotated[str, Bounds(min_length=1)]
